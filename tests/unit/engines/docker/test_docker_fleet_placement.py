"""Where the matrix's container runs go: spread over engines, one per GPU at a time, fair comparisons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleet_fakes import Fleet, RecordingProgress, gpu, options, plan, run_stack_specs, side_by_side, writer

from fp16doctor.engines.docker import sdk
from fp16doctor.engines.spec import QUICK, RUN_TIMEOUT_S, RunSpec

A, B = "tcp://node-a:2376", "tcp://node-b:2376"


def test_runs_spread_over_two_cpu_engines_one_at_a_time_on_each(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A)
    fleet.add(B)
    w = writer(tmp_path)
    fleet.on_start = side_by_side
    findings = run_stack_specs(plan("cpu"), {"gpus": []}, options(tmp_path, A, B), w, progress, 0, 4)

    assert findings == []
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [r["status"] for r in saved["runs"]] == ["ok"] * 4
    assert {r["engine"]["docker_host"] for r in saved["runs"]} == {A, B}
    assert all(r["engine"]["engine_id"] == f"ID-{r['engine']['docker_host']}" for r in saved["runs"])
    assert {e["docker_host"] for e in saved["engines"]} == {A, B}
    # A CPU-only engine runs one at a time; the two engines ran side by side.
    assert fleet.max_active == {(A, "cpu"): 1, (B, "cpu"): 1}
    assert fleet.max_in_flight == 2
    assert sorted(i for label, _, i in progress.started if "interleaved rounds" not in label) == [0, 1, 2, 3]
    # Both engines run on one machine ("node"): the records say their runs shared it.
    assert any(r["engine"]["concurrent_runs"] == 1 for r in saved["runs"])


def test_runs_on_separate_machines_do_not_count_as_concurrent(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A, name="node-a")
    fleet.add(B, name="node-b")
    # Two stacks: each comparison group keeps to one machine, so the two machines run side by side.
    specs = plan("cpu", "tf2.10-cpu")
    fleet.on_start = side_by_side
    run_stack_specs(specs, {"gpus": []}, options(tmp_path, A, B), writer(tmp_path), progress, 0, len(specs))

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert fleet.max_in_flight == 2
    assert [r["engine"]["concurrent_runs"] for r in runs] == [0] * len(specs)
    # Each record names its machine, where it ran in words, and how to run there again, as its engine wrote it.
    for r in runs:
        url = A if r["machine"] == "node-a" else B
        assert r["machine"] in ("node-a", "node-b") and r["engine"]["label"] == f"docker {url}"
        assert r["engine"]["rerun"] == ["--stack", r["stack"], "--no-host", "--docker-host", url]


def test_the_synthetic_input_control_runs_on_the_machine_its_original_ran_on(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    """float32 on synthetic input measures what the original's input costs: on another machine its step would be
    another CPU's, not the original's without the images."""
    fleet.add(A, name="node-a")
    fleet.add(B, name="node-b")
    run_stack_specs(plan("cpu"), {"gpus": []}, options(tmp_path, A, B), writer(tmp_path), progress, 0, 4)

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    machines = {r["variant"]: set() for r in runs}
    for r in runs:
        machines[r["variant"]].add(r["machine"])
    assert set(machines) == {"original", "synthetic_input"} and all(r["status"] == "ok" for r in runs)
    assert len(machines["original"]) == 1 and machines["synthetic_input"] == machines["original"]


def test_gpu_runs_are_pinned_one_per_gpu_and_the_cpu_slot_stays_idle(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A, gpus=[gpu(0, "NVIDIA A100-SXM4-80GB", "8.0"), gpu(1, "NVIDIA A100-SXM4-80GB", "8.0")])
    fleet.on_start = side_by_side
    run_stack_specs(plan("tf2.20-keras3"), {"gpus": []}, options(tmp_path, A), writer(tmp_path), progress, 0, 4)

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert [r["status"] for r in runs] == ["ok"] * 4
    assert {r["engine"]["gpu_uuid"] for r in runs} == {"GPU-NVIDIAA100-SXM4-80GB-0", "GPU-NVIDIAA100-SXM4-80GB-1"}
    assert all(r["device"] == f"gpu:{r['engine']['gpu_index']}" for r in runs)
    # A remote engine's GPU is not the client's: each run says which GPU it had.
    assert {(r["engine"]["gpu_name"], r["engine"]["gpu_compute_capability"]) for r in runs} == {
        ("NVIDIA A100-SXM4-80GB", "8.0")}
    assert all(uuid is not None for _, uuid in fleet.engines[A].runs)  # never on the CPU slot
    assert max(fleet.max_active.values()) == 1 and len(fleet.max_active) == 2


def test_precisions_of_one_stack_stay_on_one_gpu_model(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A, name="titan-box", gpus=[gpu(0, "NVIDIA TITAN V", "7.0")])
    fleet.add(B, name="a100-node", gpus=[gpu(0, "NVIDIA A100-SXM4-80GB", "8.0")])
    run_stack_specs(plan("tf2.20-keras3"), {"gpus": []}, options(tmp_path, A, B), writer(tmp_path), progress, 0, 4)

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    originals = [r for r in runs if r["variant"] == "original"]
    assert len(originals) == 3 and all(r["status"] == "ok" for r in originals)
    # float16 is only ever compared with a float32 measured on the same GPU model.
    assert len({r["engine"]["gpu_name"] for r in originals}) == 1


def test_a_local_engine_uses_the_probed_gpus_and_a_gpu_selection(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    local = "unix:///var/run/docker.sock"
    fleet.add(local)  # the engine itself is not asked: this machine's probe already knows its GPUs
    host_gpus = [gpu(0, "NVIDIA H200", "9.0"), gpu(1, "NVIDIA H200", "9.0")]
    run_stack_specs(plan("tf2.20-keras3"), {"gpus": host_gpus}, options(tmp_path, local + "#gpus=1"),
                    writer(tmp_path, host_gpus), progress, 0, 4)

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert {r["engine"]["gpu_uuid"] for r in runs} == {"GPU-NVIDIAH200-1"}
    assert {r["engine"]["docker_host"] for r in runs} == {local}


def test_precision_a_stack_cannot_run_is_skipped_with_the_reason(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A, gpus=[gpu(0, "NVIDIA TITAN V", "7.0", driver="410.48")])
    run_stack_specs(plan("tf1.7-cuda9.0"), {"gpus": []}, options(tmp_path, A), writer(tmp_path), progress, 0, 4)

    runs = {r["precision"] + "/" + r["variant"]: r for r in json.loads((tmp_path / "results.json").read_text())["runs"]}
    mixed = runs["mixed_float16/original"]
    assert mixed["status"] == "skipped"
    assert "Keras 2.1.5" in mixed["error"] and "mixed-precision" in mixed["error"]
    assert runs["float16/original"]["status"] == "ok"
    assert "tf1.7-cuda9.0 / mixed_float16 / original" not in [label for label, _ in fleet.engines[A].runs]


def test_preflight_skips_a_stack_no_engine_can_run_unless_forced(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A, gpus=[gpu(0, "NVIDIA H200", "9.0")])
    findings = run_stack_specs(plan("tf1.7-cuda9.0"), {"gpus": []}, options(tmp_path, A), writer(tmp_path),
                               progress, 0, 4)

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert {r["status"] for r in runs} == {"skipped"}
    float32 = next(r for r in runs if r["precision"] == "float32")
    assert "CUDA 9.0 has no kernels for compute capability 9.0 (NVIDIA H200)" in float32["error"]
    assert [f["id"] for f in findings] == ["stack_incompatible_gpu"]
    assert fleet.engines[A].runs == [] and fleet.engines[A].builds == 0  # no minutes spent on a build

    forced_dir = tmp_path / "forced"
    forced_dir.mkdir()
    run_stack_specs(plan("tf1.7-cuda9.0"), {"gpus": []}, options(forced_dir, A, force=True), writer(forced_dir),
                    progress, 0, 4)
    forced = json.loads((forced_dir / "results.json").read_text())["runs"]
    assert {r["status"] for r in forced if r["precision"] != "mixed_float16"} == {"ok"}
    assert all(r.get("forced") for r in forced if r["status"] == "ok")


def test_a_stack_runs_only_on_the_engines_whose_gpus_it_supports(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A, name="h200-node", gpus=[gpu(0, "NVIDIA H200", "9.0")])
    fleet.add(B, name="titan-box", gpus=[gpu(0, "NVIDIA TITAN V", "7.0", driver="410.48")])
    findings = run_stack_specs(plan("tf1.7-cuda9.0"), {"gpus": []}, options(tmp_path, A, B), writer(tmp_path),
                               progress, 0, 4)

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    ran = [r for r in runs if r["status"] == "ok"]
    assert len(ran) == 3 and {r["engine"]["docker_host"] for r in ran} == {B}
    assert fleet.engines[A].runs == []
    assert findings and findings[0]["evidence"][0].startswith(f"on {A}: CUDA 9.0 has no kernels")


def test_cpu_stack_on_a_gpu_engine_runs_one_at_a_time_without_a_gpu(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A, gpus=[gpu(0, "NVIDIA A100-SXM4-80GB", "8.0"), gpu(1, "NVIDIA A100-SXM4-80GB", "8.0")])
    run_stack_specs(plan("cpu"), {"gpus": []}, options(tmp_path, A), writer(tmp_path), progress, 0, 4)

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert [r["device"] for r in runs] == ["cpu"] * 4
    # Two CPU runs at once would share the cores and distort both timings.
    # The four cells and the stack's interleaved rounds.
    assert fleet.max_in_flight == 1 and [uuid for _, uuid in fleet.engines[A].runs] == [None] * 5


def test_gpu_stacks_wait_for_a_gpu_rather_than_run_on_a_cpu_engine(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A, gpus=[gpu(0, "NVIDIA A100-SXM4-80GB", "8.0")])
    fleet.add(B)  # CPU only: TF 2.20 would run there, but on the CPU
    run_stack_specs(plan("tf2.20-keras3"), {"gpus": []}, options(tmp_path, A, B), writer(tmp_path), progress, 0, 4)

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert {r["engine"]["docker_host"] for r in runs} == {A}
    assert fleet.engines[B].runs == []


def test_resumed_cells_go_to_the_gpu_model_the_measured_ones_ran_on(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A, name="titan-box", gpus=[gpu(0, "NVIDIA TITAN V", "7.0")])
    fleet.add(B, name="a100-node", gpus=[gpu(0, "NVIDIA A100-SXM4-80GB", "8.0")])
    w = writer(tmp_path)
    w.add_run({"stack": "tf2.20-keras3", "precision": "float32", "variant": "original", "device": "gpu:0",
               "status": "ok", "step_time_ms": {"median": 100.0},
               "engine": {"kind": "docker", "docker_host": A, "gpu_name": "NVIDIA TITAN V"}})
    missing = [s for s in plan("tf2.20-keras3") if s.variant == "original" and s.precision != "float32"]
    run_stack_specs(missing, {"gpus": []}, options(tmp_path, A, B), w, progress, 1, 3)

    # The missing cells, then the group's rounds: on the GPU model the measured float32 ran on.
    assert sorted(label for label, _ in fleet.engines[A].runs) == sorted(
        [s.label for s in missing] + ["tf2.20-keras3 / interleaved rounds of float32, float16, mixed_float16"])
    assert fleet.engines[B].runs == []


def test_an_empty_engine_is_asked_for_its_gpus_once_the_image_is_built(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A, gpus=[gpu(0, "NVIDIA A100-SXM4-80GB", "8.0")], empty=True)
    run_stack_specs(plan("tf2.20-keras3"), {"gpus": []}, options(tmp_path, A), writer(tmp_path), progress, 0, 4)

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert {r["engine"].get("gpu_name") for r in runs} == {"NVIDIA A100-SXM4-80GB"}
    assert fleet.engines[A].builds == 1  # the image built to ask with is the one the runs use


def test_an_empty_engine_is_asked_for_its_gpus_with_the_gpu_stack_even_when_cpu_comes_first(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    # `--stack cpu --stack tf2.20-keras3`: the GPU stack still gets the engine's GPU.
    fleet.add(A, gpus=[gpu(0, "NVIDIA A100-SXM4-80GB", "8.0")], empty=True)
    run_stack_specs(plan("cpu", "tf2.20-keras3"), {"gpus": []}, options(tmp_path, A), writer(tmp_path), progress,
                    0, 8)

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    gpu_stack = [r for r in runs if r["stack"] == "tf2.20-keras3"]
    assert gpu_stack and {r["engine"].get("gpu_name") for r in gpu_stack} == {"NVIDIA A100-SXM4-80GB"}
    assert not any("could not list the GPUs" in n for n in progress.notes)


def test_an_engine_whose_gpus_cannot_be_listed_says_so_and_uses_its_cpu(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A, gpus=[gpu(0, "NVIDIA A100-SXM4-80GB", "8.0")], smi_fails=True)
    run_stack_specs(plan("cpu"), {"gpus": []}, options(tmp_path, A), writer(tmp_path), progress, 0, 4)

    assert f"could not list the GPUs of {A} (nvidia-smi did not run there); using its CPU only" in progress.notes
    assert [r["status"] for r in json.loads((tmp_path / "results.json").read_text())["runs"]] == ["ok"] * 4


def test_docker_host_from_the_environment_is_asked_for_its_own_gpus(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", A)
    fleet.add(A, gpus=[gpu(0, "NVIDIA A100-SXM4-80GB", "8.0")])
    host_gpus = [gpu(0, "NVIDIA TITAN V", "7.0")]  # this laptop's GPU, not the engine's
    run_stack_specs(plan("tf2.20-keras3"), {"gpus": host_gpus}, options(tmp_path), writer(tmp_path, host_gpus),
                    progress, 0, 4)

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert {r["engine"]["gpu_name"] for r in runs} == {"NVIDIA A100-SXM4-80GB"}
    assert {r["engine"]["docker_host"] for r in runs} == {A}


def test_every_container_run_has_the_run_time_limit(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A container whose workload hangs is killed at the limit, as a host run is, instead of holding diagnose.
    fleet.add(A)
    limits: list[object] = []

    def recording_run(*args: object, **kwargs: object) -> dict:
        limits.append(kwargs.get("timeout_s"))
        return fleet.run_in_stack(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sdk, "run_in_stack", recording_run)
    run_stack_specs(plan("cpu"), {"gpus": []}, options(tmp_path, A), writer(tmp_path), progress, 0, 4)
    assert limits == [RUN_TIMEOUT_S] * 5  # the four cells and the stack's interleaved rounds


def test_a_stacks_precisions_are_timed_again_together_on_the_hardware_they_ran_on(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    """After the matrix, one more container per stack times its precisions in interleaved rounds, on the engine
    its runs ran on; the rounds go into those runs (and timing_rounds), not in as a run of their own."""
    fleet.add(A, name="node-a")
    fleet.add(B, name="node-b")
    specs = plan("cpu", "tf2.10-cpu")
    run_stack_specs(specs, {"gpus": []}, options(tmp_path, A, B), writer(tmp_path), progress, 0, len(specs))

    doc = json.loads((tmp_path / "results.json").read_text())
    assert len(doc["runs"]) == len(specs)
    rounds = {r["stack"]: r for r in doc["timing_rounds"]}
    assert set(rounds) == {"cpu", "tf2.10-cpu"}
    for run in doc["runs"]:  # float32's in-memory control too, beside float32
        assert run["step_time_ms"]["design"] == "interleaved" and len(run["step_time_ms"]["rounds"]) == 3
        assert rounds[run["stack"]]["engine"]["docker_host"] == run["engine"]["docker_host"]
    # Not a cell of the matrix: no "[5/8]" of its own, a live row of its own ([1/1]).
    assert sorted(i for label, _, i in progress.started if "interleaved rounds" not in label) == list(
        range(len(specs)))
    assert sorted((label, total) for label, total, _ in progress.started if "interleaved rounds" in label) == [
        (f"{stack} / interleaved rounds of float32, float16, mixed_float16, float32+synthetic_input", 1)
        for stack in ("cpu", "tf2.10-cpu")]


def test_16_bit_runs_wait_for_their_float32_even_with_a_second_gpu_free(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    """Two GPUs of one model: the second could start float16 at once, but float16's slow-step bound comes
    from float32's step, so every 16-bit run starts after its float32 finished, and is bounded by it."""
    fleet.add(A, gpus=[gpu(0, "NVIDIA A100-SXM4-80GB", "8.0"), gpu(1, "NVIDIA A100-SXM4-80GB", "8.0")])
    fleet.on_start = side_by_side
    run_stack_specs(plan("tf2.20-keras3"), {"gpus": []}, options(tmp_path, A), writer(tmp_path), progress, 0, 4)

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    originals = [r for r in runs if r["variant"] == "original"]
    assert originals[0]["precision"] == "float32"
    reduced = [r for r in originals if r["precision"] != "float32"]
    assert reduced and all(r["slow_step_bound"]["float32_step_ms"] == originals[0]["step_time_ms"]["median"]
                           for r in reduced)
    assert fleet.max_in_flight == 2  # the GPUs still ran side by side (float32 beside synthetic_input, 16-bit runs)


def test_an_experiment_runs_on_the_gpu_model_of_the_runs_it_tests(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    # The A100 engine comes first: left free to choose, the experiment would go there.
    fleet.add(B, name="a100-node", gpus=[gpu(0, "NVIDIA A100-SXM4-80GB", "8.0")])
    fleet.add(A, name="titan-box", gpus=[gpu(0, "NVIDIA TITAN V", "7.0")])
    w = writer(tmp_path)
    for precision, ms in (("float32", 100.0), ("mixed_float16", 90.0)):
        w.add_run({"stack": "tf2.20-keras3", "precision": precision, "variant": "original", "device": "gpu:0",
                   "status": "ok", "step_time_ms": {"median": ms},
                   "engine": {"kind": "docker", "docker_host": A, "gpu_name": "NVIDIA TITAN V"}})
    padded = RunSpec("tf2.20-keras3", "mixed_float16", "channels_padded", QUICK,
                     experiment={"changes": {"input_channels": 8}, "tests": "tensor_cores_not_eligible"})
    run_stack_specs([padded], {"gpus": []}, options(tmp_path, B, A), w, progress, 2, 1)

    assert [label for label, _ in fleet.engines[A].runs] == [padded.label]
    assert fleet.engines[B].runs == []


@pytest.mark.parametrize("local_bf16", [False, True], ids=["local-no-bf16", "local-bf16"])
@pytest.mark.parametrize("name,cc,runs", [("NVIDIA A100-SXM4-80GB", "8.0", True), ("NVIDIA TITAN V", "7.0", False)])
def test_bfloat16_planned_for_a_remote_engine_runs_only_where_its_gpu_computes_in_it(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress, name: str, cc: str, runs: bool, local_bf16: bool
) -> None:
    """A remote engine's GPUs are known only once connected: mixed_bfloat16 is planned for its stack, run on an
    8.0+ GPU, else skipped with why, whether or not this machine's own device (its default matrix) has bfloat16."""
    from fp16doctor.diagnose import BASE_PRECISIONS, plan_runs

    fleet.add(A, gpus=[gpu(0, name, cc)])
    local = [*BASE_PRECISIONS, *(["mixed_bfloat16"] if local_bf16 else [])]
    specs = plan_runs(["host", "tf2.20-keras3"], local, QUICK, None, None, ["mixed_bfloat16"])
    assert bool([s for s in specs if s.stack == "host" and s.precision == "mixed_bfloat16"]) is local_bf16
    planned = [s for s in specs if s.stack == "tf2.20-keras3"]
    assert [s.native_only for s in planned if s.precision == "mixed_bfloat16"] == [True]
    run_stack_specs(planned, {"gpus": []}, options(tmp_path, A), writer(tmp_path), progress, 0, len(planned))

    bf16 = [r for r in json.loads((tmp_path / "results.json").read_text())["runs"]
            if r["precision"] == "mixed_bfloat16"]
    if runs:
        assert [r["status"] for r in bf16] == ["ok"]
    else:
        assert [r["status"] for r in bf16] == ["skipped"]
        assert "compute capability 8.0" in bf16[0]["error"] and "TITAN V (7.0)" in bf16[0]["error"]
