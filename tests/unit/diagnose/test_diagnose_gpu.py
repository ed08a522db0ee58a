"""diagnose's GPU path with a recorded H200 host and canned runs: no GPU or framework needed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import fp16doctor.probe as probe
from fp16doctor.cli import app
from fp16doctor.diagnose import DiagnoseOptions, run_diagnose
from fp16doctor.engines import host as host_engine
from fp16doctor.engines.spec import RunSpec, stack_backend
from fp16doctor.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL, DoctorError
from fp16doctor.results import VARIANT_CHANGES
from fp16doctor.workload.protocol import VARIANT_LABEL_SEP

H200_HOST = {
    "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480C", "cores": 16, "flags": ["avx512_fp16", "amx_bf16"]},
    "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-0f0e", "compute_capability": "9.0",
              "driver_version": "580.95", "cuda_driver_version": "13.0", "memory_total_mib": 143771}],
    "nvml": {"available": True, "error": None},
    "os": "Linux",
    "python": {"version": "3.12.3", "executable": "/usr/bin/python3"},
    "frameworks": {"keras": {"version": "3.15.1", "backend": "jax"}, "jax": {"version": "0.7.0"},
                   "tensorflow": None, "torch": None},
}

# Step times per (precision, variant) in ms: what a GPU run might report, for the plumbing only.
CANNED = {("float32", "original"): 60.0, ("float16", "original"): 45.0, ("mixed_float16", "original"): 40.0,
          ("mixed_bfloat16", "original"): 41.0,
          ("float32", "synthetic_input"): 30.0, ("float16", "synthetic_input"): 14.0,
          ("mixed_float16", "synthetic_input"): 15.0, ("mixed_bfloat16", "synthetic_input"): 15.5}


# A host stack's step against the configured backend's (the default: the same).
BACKEND_SPEED = {"host-torch": 0.4}
# Host stacks whose rounds process fails (a backend the workload cannot run on).
FAILING_STACKS: set[str] = set()


class Recorder:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.started: list[RunSpec] = []

    def note(self, message: str) -> None:
        self.notes.append(message)

    def start_run(self, spec: RunSpec, total: int, index: int) -> None:
        self.started.append(spec)

    def event(self, event: dict[str, Any]) -> None:
        pass

    def finish_run(self, record: dict[str, Any]) -> None:
        pass


@pytest.fixture
def gpu_host(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(H200_HOST)))

    def fake_run(self, spec: RunSpec, on_event, gpu_index=None):  # type: ignore[no-untyped-def]
        calls.append({"spec": spec, "gpu_index": gpu_index, "backend": self.backend,
                      "sampler": self.sampler})
        if spec.rounds_of and spec.stack in FAILING_STACKS:
            return {"stack": spec.stack, "precision": "float32", "variant": "original", "device": "gpu:0",
                    "status": "failed", "error": "RuntimeError: CUDA error: no kernel image is available"}
        if spec.rounds_of:  # interleaved rounds: each configuration's canned time, a little apart round to round
            # A change to a model ("float16+channels_padded") takes its cell's canned time, else its original's.
            def canned(label: str) -> float:
                precision, _, variant = label.partition(VARIANT_LABEL_SEP)
                return CANNED.get((precision, variant)) or CANNED[(precision, "original")]

            # mixed_float16's warm-up fails in the rounds: it leaves them, and runs (and fails) on its own after.
            speed = BACKEND_SPEED.get(spec.stack, 1.0)
            rounds = {label: [canned(label) * speed * f for f in (1.0, 1.01, 0.99)] for label in spec.rounds_of
                      if label != "mixed_float16"}
            rounds["float32_aa"] = [CANNED[("float32", "original")] * speed * f for f in (1.005, 0.995, 1.0)]
            return {"stack": spec.stack, "precision": "float32", "variant": "original", "device": "gpu:0",
                    "status": "ok", "rounds": rounds, "order": [list(spec.rounds_of)] * 3,
                    "software": {"keras": "3.15.1", "keras_backend": stack_backend(spec.stack) or "jax"}}
        if spec.precision == "mixed_float16" and spec.variant == "original":
            return {"stack": spec.stack, "precision": spec.precision, "variant": spec.variant,
                    "device": "gpu:0", "status": "failed", "error": "ResourceExhaustedError: OOM"}
        # Experiment variants (planned by the analysis) take their original cell's canned time; another Keras
        # backend's (host-torch) its own multiple of it.
        ms = (CANNED.get((spec.precision, spec.variant)) or CANNED[(spec.precision, "original")]) * BACKEND_SPEED.get(
            spec.stack, 1.0)
        return {"stack": spec.stack, "precision": spec.precision, "variant": spec.variant, "device": "gpu:0",
                "status": "ok", "engine": {"kind": "host"},
                "step_time_ms": {"median": ms, "p10": ms * 0.98, "p90": ms * 1.03, "n": 20},
                "workload": {"name": "seed_cnn", "image_height": spec.size.image_height,
                             "image_width": spec.size.image_width, "channels": 3,
                             "batch_size": spec.size.batch_size},
                "software": {"keras": "3.15.1", "keras_backend": stack_backend(spec.stack) or "jax", "jax": "0.7.0"}}

    monkeypatch.setattr(host_engine.HostEngine, "run", fake_run)
    return calls


def test_with_a_gpu_diagnose_runs_the_full_size_on_it(tmp_path: Path, gpu_host) -> None:
    progress = Recorder()
    outcome = run_diagnose(DiagnoseOptions(out_dir=tmp_path, argv=["fp16doctor", "diagnose"]), progress)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["invocation"]["size"] == "full"
    assert {c["spec"].size.image_height for c in gpu_host} == {224}
    # Every run is pinned to GPU 0 with NVML sampling, on the backend Keras is configured for.
    assert {c["gpu_index"] for c in gpu_host} == {0}
    assert all(c["sampler"] is not None for c in gpu_host) and {c["backend"] for c in gpu_host} == {"jax"}
    assert any("NVIDIA H200" in n for n in progress.notes)
    # An H200 (compute capability 9.0) computes in bfloat16: mixed_bfloat16 joins the default matrix.
    assert doc["invocation"]["precisions"] == ["float32", "float16", "mixed_float16", "mixed_bfloat16"]
    ok = [r for r in doc["runs"] if r["status"] == "ok"]
    assert all(r["engine"]["gpu_uuid"] == "GPU-0f0e" for r in ok if r.get("timed_by") != "interleaved_rounds")
    # The full size on a GPU keeps its 120 s budget: float32 alone has a process of its own before the rounds; the
    # other precisions and every precision's in-memory control are timed and profiled in one rounds process.
    assert [(c["spec"].precision, c["spec"].variant) for c in gpu_host if not c["spec"].rounds_of][0] == (
        "float32", "original")
    # Where the budget has room, the same rounds again in a fresh process: the interval then holds the variation
    rounds, *again = [c for c in gpu_host if c["spec"].rounds_of and c["spec"].stack == "host"]
    # between processes (of what the first timed: mixed_float16 left them).
    assert again and all(set(c["spec"].rounds_of) == set(rounds["spec"].rounds_of) - {"mixed_float16"} for c in again)
    assert rounds["spec"].rounds_of == (
        "float32", "float16", "mixed_float16", "mixed_bfloat16", "float32+synthetic_input", "float16+synthetic_input",
        "mixed_float16+synthetic_input", "mixed_bfloat16+synthetic_input")
    assert rounds["spec"].rounds_profiled == rounds["spec"].rounds_of[1:]
    assert rounds["spec"].rounds.end_s is not None and rounds["gpu_index"] == 0
    controls = [r for r in ok if r["variant"] == "synthetic_input"]
    assert len(controls) == 4 and all(r["timed_by"] == "interleaved_rounds" for r in controls)
    # mixed_float16 left the rounds (its warm-up failed there): it ran in a process of its own after them.
    assert [c["spec"].precision for c in gpu_host if not c["spec"].rounds_of][1] == "mixed_float16"
    # The experiments its steps ask for after the rounds (Tensor Cores want channel counts in multiples of 8; float32
    # without TF32) run where the budget has room.
    padded = [r for r in ok if r["variant"] == "channels_padded"]
    assert [r["precision"] for r in padded] == ["float16", "mixed_bfloat16"]
    assert [c["spec"].experiment["tests"] for c in gpu_host if c["spec"].variant == "channels_padded"] == [
        "tensor_cores_not_eligible"] * 2
    timed = {r["precision"]: r["step_time_ms"] for r in ok if r["variant"] == "original"}
    assert all(t["design"] == "interleaved" and len(t["rounds"]) == 3 * (1 + len(again)) for t in timed.values())
    assert len(timed["float32"]["aa_rounds"]) == 3 * (1 + len(again)) and "single_process" in timed["float32"]
    # One run failed: the others are kept, the exit status says partial, and it is named.
    assert outcome.exit_code == EXIT_PARTIAL
    assert [r["precision"] for r in outcome.failed] == ["mixed_float16"]
    ids = {f["id"] for f in doc["findings"]}
    assert "fp16_faster" in ids and "no_fast_fp16_hardware" not in ids
    assert (tmp_path / "report.html").exists()


def test_resume_runs_only_what_is_missing(tmp_path: Path, gpu_host) -> None:
    run_diagnose(DiagnoseOptions(out_dir=tmp_path), Recorder())
    first = len(gpu_host)
    progress = Recorder()
    outcome = run_diagnose(DiagnoseOptions(out_dir=tmp_path, resume=True), progress)
    retried = [(c["spec"].precision, c["spec"].variant) for c in gpu_host[first:] if not c["spec"].rounds_of]
    assert retried == [("mixed_float16", "original")]
    # float32 is kept, so mixed_float16 is tried in a process of its own; the rounds then time again, beside their
    # precisions, the experiments that ran in processes of their own after the first rounds.
    resumed, *_ = [c["spec"] for c in gpu_host[first:] if c["spec"].rounds_of]
    assert resumed.rounds_profiled == () and "float16+channels_padded" in resumed.rounds_of
    assert outcome.exit_code == EXIT_PARTIAL  # it fails again, and says so
    assert any("resuming" in n for n in progress.notes)
    doc = json.loads((tmp_path / "results.json").read_text())
    main_matrix = [r for r in doc["runs"] if r["variant"] not in VARIANT_CHANGES]
    assert len(main_matrix) == 8
    # The experiments of the first diagnose are kept, not run again.
    assert all(not c["spec"].experiment for c in gpu_host[first:])


def test_precisions_can_be_narrowed(tmp_path: Path, gpu_host) -> None:
    outcome = run_diagnose(DiagnoseOptions(out_dir=tmp_path, precisions=["float32", "float16"]), Recorder())
    assert outcome.exit_code == EXIT_OK
    assert {c["spec"].precision for c in gpu_host} == {"float32", "float16"}


def test_failed_runs_are_named_on_stderr_with_a_hint_and_a_non_zero_exit(tmp_path: Path, gpu_host) -> None:
    # --json keeps stdout for the document; a script still learns from stderr and the exit status why.
    result = CliRunner().invoke(app, ["diagnose", "--out", str(tmp_path), "--json"])
    assert result.exit_code == EXIT_PARTIAL
    assert json.loads(result.stdout)["schema_version"] == 1
    stderr = " ".join(result.stderr.split())
    assert "error: 1 run(s) failed (host / mixed_float16 / original)" in stderr
    assert "hint:" in stderr and "--resume" in stderr


def test_resume_at_another_size_runs_everything_again(tmp_path: Path, gpu_host) -> None:
    # A float32 step at the quick size is no baseline for a float16 step at the full size.
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="quick"), Recorder())
    path = tmp_path / "results.json"
    doc = json.loads(path.read_text())
    for run in doc["runs"]:
        run["size"] = "quick"  # as the engines record it
    path.write_text(json.dumps(doc))
    first = len(gpu_host)
    progress = Recorder()
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, resume=True), progress)  # a GPU host: full size
    rerun = gpu_host[first:]
    assert {c["spec"].size.name for c in rerun} == {"full"}
    assert ("float32", "original") in [(c["spec"].precision, c["spec"].variant) for c in rerun]
    assert any("another size" in n for n in progress.notes)
    assert "quick" not in {r.get("size") for r in json.loads(path.read_text())["runs"]}


def test_ctrl_c_while_probing_does_not_point_at_results_that_do_not_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(python: str | None = None) -> dict[str, Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr(probe, "probe_host", interrupted)
    result = CliRunner().invoke(app, ["diagnose", "--out", str(tmp_path / "out")])
    assert isinstance(result.exception, DoctorError)
    assert result.exception.exit_code == EXIT_INTERRUPTED
    assert result.exception.message == "interrupted before any run"
    assert not (tmp_path / "out" / "results.json").exists()


def test_resume_with_another_python_or_backend_runs_the_host_runs_again(
    tmp_path: Path, gpu_host, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_diagnose(DiagnoseOptions(out_dir=tmp_path), Recorder())
    path = tmp_path / "results.json"
    doc = json.loads(path.read_text())
    for run in doc["runs"]:
        run["engine"]["python"] = "/opt/other-venv/bin/python"  # measured by another interpreter
    path.write_text(json.dumps(doc))
    first = len(gpu_host)
    progress = Recorder()
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, resume=True), progress)
    assert ("float32", "original") in [(c["spec"].precision, c["spec"].variant) for c in gpu_host[first:]]
    assert any("another Python or Keras backend" in n for n in progress.notes)

    # Same Python, but the runs were made on TensorFlow while Keras is now set to JAX: again.
    doc = json.loads(path.read_text())
    for run in doc["runs"]:
        run["engine"]["python"] = sys.executable
        run.setdefault("software", {})["keras_backend"] = "tensorflow"
    path.write_text(json.dumps(doc))
    second = len(gpu_host)
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, resume=True), Recorder())
    assert ("float32", "original") in [(c["spec"].precision, c["spec"].variant) for c in gpu_host[second:]]


def test_on_a_gpu_the_other_keras_backends_that_see_it_are_tried_and_a_much_faster_one_prescribed(
    tmp_path: Path, gpu_host, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = json.loads(json.dumps(H200_HOST))
    host["frameworks"].update(torch={"version": "2.11.0", "cuda_available": True},
                              tensorflow={"version": "2.21.0", "gpus_visible": 0})
    host["keras_backends"] = [
        {"name": "tensorflow", "version": "2.21.0", "works": True, "gpu": False, "configured": False},
        {"name": "jax", "version": "0.7.0", "works": True, "gpu": True, "configured": True},
        {"name": "torch", "version": "2.11.0", "works": True, "gpu": True, "configured": False}]
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(host)))
    progress = Recorder()
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, argv=["fp16doctor", "diagnose"]), progress)
    doc = json.loads((tmp_path / "results.json").read_text())
    # torch sees the GPU and TensorFlow does not: torch alone is tried, after everything else, in one rounds process
    # of its own: float32 and the precision prescribed so far, with batches in memory, their records made from it.
    assert doc["invocation"]["backend_trials"] == ["host-torch"]
    tried, = [c["spec"] for c in gpu_host if c["spec"].stack != "host"]
    host_prescription = next(p for p in doc["prescriptions"] if p["stack"] == "host")
    prescribed = host_prescription["recommended"]["precision"]
    assert tried.rounds_of == tuple(f"{p}+synthetic_input" for p in dict.fromkeys(["float32", prescribed]))
    made = [r for r in doc["runs"] if r["stack"] == "host-torch"]
    assert {(r["precision"], r["variant"], r["status"]) for r in made} == {
        (p, "synthetic_input", "ok") for p in dict.fromkeys(["float32", prescribed])}
    assert "backends" in doc["invocation"]["phases_s"]
    assert any(n.startswith("host-torch: another Keras backend that sees the GPU") for n in progress.notes)
    # torch measured 2.5x faster than the configured backend: a user change, with its command.
    change = next(c for c in host_prescription["user_changes"] if c["kind"] == "backend")
    assert change["backend"] == "torch" and change["speedup"] == pytest.approx(2.5, rel=0.02)
    assert "KERAS_BACKEND=torch" in change["how"]


def test_with_backend_asked_for_none_is_tried_beside_them(tmp_path: Path, gpu_host) -> None:
    from fp16doctor.engines.host_options import HostOptions

    run_diagnose(DiagnoseOptions(out_dir=tmp_path, engines=(HostOptions(backends=("jax",)),), precisions=["float32"]),
                 Recorder())
    doc = json.loads((tmp_path / "results.json").read_text())
    assert "backend_trials" not in doc["invocation"] and doc["invocation"]["stacks"] == ["host"]


def test_a_backend_that_failed_to_run_is_reported_with_its_error_and_never_prescribed(
    tmp_path: Path, gpu_host, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = json.loads(json.dumps(H200_HOST))
    host["frameworks"].update(torch={"version": "2.11.0", "cuda_available": True})
    host["keras_backends"] = [
        {"name": "jax", "version": "0.7.0", "works": True, "gpu": True, "configured": True},
        {"name": "torch", "version": "2.11.0", "works": True, "gpu": True, "configured": False}]
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(host)))
    monkeypatch.setattr(sys.modules[__name__], "FAILING_STACKS", {"host-torch"})
    outcome = run_diagnose(DiagnoseOptions(out_dir=tmp_path, argv=["fp16doctor", "diagnose"]), Recorder())
    doc = json.loads((tmp_path / "results.json").read_text())
    failed = [r for r in doc["runs"] if r["stack"] == "host-torch"]
    assert failed and all(r["status"] == "failed" and "no kernel image" in r["error"] for r in failed)
    assert any(r["stack"] == "host-torch" for r in outcome.failed)
    host_prescription = next(p for p in doc["prescriptions"] if p["stack"] == "host")
    assert all(c["kind"] != "backend" for c in host_prescription["user_changes"])
