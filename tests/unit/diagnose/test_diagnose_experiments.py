"""diagnose's order of work on a CPU host, with canned runs: float32 first, its step bounding the 16-bit
runs, then the experiments the analysis plans; no framework needed."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from progress_recorder import Recorder
from rich.console import Console

import fp16doctor.probe as probe
from fp16doctor.diagnose import DiagnoseOptions, run_diagnose
from fp16doctor.engines import host as host_engine
from fp16doctor.engines.base import base_run_record
from fp16doctor.engines.spec import QUICK, RunSpec
from fp16doctor.progress import LiveProgress, waiting_text
from fp16doctor.workload.protocol import AA_CONTROL, VARIANT_LABEL_SEP

SPR_HOST = {
    "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480+", "cores": 2,
            "flags": ["avx2", "f16c", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16"]},
    "gpus": [], "nvml": {"available": False, "error": "no NVIDIA driver"}, "os": "Linux",
    "python": {"version": "3.11.7", "executable": "/usr/bin/python3"},
    "frameworks": {"keras": {"version": "3.15.1", "backend": "tensorflow"}, "tensorflow": {"version": "2.21.0"}},
}
# What that Xeon measured (issue 12): float32 ~130 ms, float16 ~22 s, mixed_bfloat16 ~59 ms per step.
STEP_MS = {"float32": 130.0, "float16": 22000.0, "mixed_float16": 22000.0, "mixed_bfloat16": 59.0}
# The host's time to produce one batch (input_time_ms), 10 % of float32's step unless a test says otherwise.
INPUT_MS = {"batch": 13.0}


def _step_ms(precision: str, variant: str) -> float:
    return STEP_MS[precision] / (6.0 if variant == "onednn_off" and precision != "float32" else 1.0)


def _config_ms(label: str, variant: str) -> float:
    """A rounds configuration's step: its precision's, less the batch's time where its batches are in memory."""
    precision, _, change = label.partition(VARIANT_LABEL_SEP)
    ms = _step_ms("float32" if label == AA_CONTROL else precision, variant)
    return ms - INPUT_MS["batch"] / 2 if change == "synthetic_input" else ms


def _rounds_record(spec: RunSpec) -> dict[str, Any]:
    """What a rounds process reports: three rounds of each configuration and of float32's A/A control."""
    labels = [*spec.rounds_of, AA_CONTROL]
    steps = {label: _config_ms(label, spec.variant) for label in labels}
    return {"stack": spec.stack, "precision": "float32", "variant": spec.variant, "device": "cpu", "status": "ok",
            "engine": {"kind": "host"}, "software": {"tensorflow": "2.21.0"}, "wall_s": 4.0,
            "rounds": {label: [ms, ms * 1.01, ms * 0.99] for label, ms in steps.items()},
            "warmup": {label: {"first_step_ms": ms + 1500.0, "step_ms": ms} for label, ms in steps.items()},
            "losses": {label: [0.7, 0.69, 0.68] for label in labels}, "order": [labels] * 3,
            # A precision with no run of its own: its profiled window's ops (as the engine attributes them), its
            # model and its input, as workload/rounds.py reports them.
            "own_run": {p: {"ops": {"source": "tf_profiler"}, "window_step_ms": [steps[p]] * 2,
                            "input_time_ms": {"median": INPUT_MS["batch"]}, "batch_dtype": "float32"}
                        for p in spec.rounds_profiled}}


def first_processes(specs: list[RunSpec]) -> list[RunSpec]:
    """The rounds processes run, less those that time a setting's configurations again in a fresh process (the
    second of a stack and setting)."""
    seen: set[tuple[str, str]] = set()
    first = []
    for spec in (s for s in specs if s.rounds_of):
        if (spec.stack, spec.variant) not in seen:
            seen.add((spec.stack, spec.variant))
            first.append(spec)
    return first


@pytest.fixture
def xeon(monkeypatch: pytest.MonkeyPatch) -> list[RunSpec]:
    specs: list[RunSpec] = []
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(SPR_HOST)))

    def fake_run(self, spec: RunSpec, on_event, gpu_index=None):  # type: ignore[no-untyped-def]
        specs.append(spec)
        if spec.rounds_of:
            return _rounds_record(spec)
        ms = _step_ms(spec.precision, spec.variant)
        bound = spec.bound_ms is not None and ms > spec.bound_ms
        record = {"stack": spec.stack, "precision": spec.precision, "variant": spec.variant, "device": "cpu",
                  "status": "ok", "engine": {"kind": "host"}, "first_step_ms": ms + 1500.0,
                  "step_time_ms": {"median": ms, "p10": ms, "p90": ms, "n": 1 if bound else 5},
                  "input_time_ms": {"median": INPUT_MS["batch"]},
                  "workload": {"name": "seed_cnn", "image_height": 112, "image_width": 168, "channels": 3,
                               "batch_size": 32}}
        if bound:
            record.update(bound=True, stop_reason="slow_step_bound")
        if spec.experiment is not None:
            record["experiment"] = spec.experiment
        return record

    monkeypatch.setattr(host_engine.HostEngine, "run", fake_run)
    return specs


def _planner(monkeypatch: pytest.MonkeyPatch, calls: list[int]) -> None:
    """A stand-in for the analysis' planner, so the order of work is tested apart from what it plans."""

    def plan_experiments(doc: dict[str, Any], progress: Any) -> list[dict[str, Any]]:
        calls.append(len(doc["runs"]))
        slow = [r for r in doc["runs"] if r.get("bound") and r["variant"] == "original"]
        return [{"stack": r["stack"], "precision": p, "variant": "onednn_off",
                 "experiment": {"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}, "tests": "slow_fp16_kernels"},
                 "reason": "a 16-bit op ran oneDNN's reference kernel"}
                for r in slow[:1] for p in ("float32", r["precision"])]

    monkeypatch.setattr("fp16doctor.diagnose.run.plan_experiments", plan_experiments)


def test_float32_runs_first_and_bounds_every_16_bit_run(tmp_path: Path, xeon: list[RunSpec]) -> None:
    progress = Recorder()
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="quick", experiments=False), progress)
    # The precisions that finished unbound are timed again together; the bound ones are left out, and said.
    rounds, = first_processes(xeon)
    assert rounds.rounds_of == ("float32", "mixed_bfloat16")
    # The budget had room for a second process: the same configurations again, with no profiled window, so each
    # interval carries the variation between the two processes.
    again, = [s for s in xeon if s.rounds_of and s is not rounds]
    assert again.rounds_of == rounds.rounds_of and again.rounds_profiled == () and rounds.rounds_profiled
    doc = json.loads((tmp_path / "results.json").read_text())
    assert [e.get("repeat_of") for e in doc["timing_rounds"]] == [None, 0]
    bf16 = next(v for v in doc["verdicts"] if v["precision"] == "mixed_bfloat16")
    assert bf16["interval_scope"] == "between_processes" and bf16["interval_processes"] == 2
    assert any("float16 left out of the interleaved rounds: cut short" in n for n in progress.notes)
    # mixed_bfloat16, which this Xeon computes natively, has no process of its own: the rounds profile it.
    assert rounds.rounds_profiled == ("mixed_bfloat16",)
    xeon[:] = [s for s in xeon if not s.rounds_of]
    assert [(s.precision, s.variant) for s in xeon] == [
        ("float32", "original"), ("float16", "original"), ("mixed_float16", "original")]
    assert xeon[0].bound_ms is None
    assert {s.bound_ms for s in xeon[1:3]} == {5000.0}  # the quick size's 5 s (under 50x float32's 130 ms)
    doc = json.loads((tmp_path / "results.json").read_text())
    f16 = next(r for r in doc["runs"] if r["precision"] == "float16")
    assert f16["bound"] is True and f16["step_time_ms"]["n"] == 1
    bf16 = next(r for r in doc["runs"] if r["precision"] == "mixed_bfloat16")
    assert bf16["timed_by"] == "interleaved_rounds" and bf16["step_time_ms"]["design"] == "interleaved"
    assert bf16["ops"] == {"source": "tf_profiler"} and bf16["input_time_ms"] == {"median": 13.0}
    assert "single_process" not in bf16["step_time_ms"]  # it had none


def test_a_precision_the_rounds_did_not_make_runs_in_a_process_of_its_own(
        tmp_path: Path, xeon: list[RunSpec], monkeypatch: pytest.MonkeyPatch) -> None:
    original = host_engine.HostEngine.run

    def rounds_fail(self, spec: RunSpec, on_event, gpu_index=None):  # type: ignore[no-untyped-def]
        record = original(self, spec, on_event, gpu_index)
        return {**record, "status": "failed", "error": "boom", "rounds": None} if spec.rounds_of else record

    monkeypatch.setattr(host_engine.HostEngine, "run", rounds_fail)
    progress = Recorder()
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="quick", experiments=False), progress)
    assert [(s.precision, bool(s.rounds_of)) for s in xeon][-2:] == [("float32", True), ("mixed_bfloat16", False)]
    assert any("mixed_bfloat16: not timed in the interleaved rounds, so each runs in a process of its own" in n
               for n in progress.notes)
    doc = json.loads((tmp_path / "results.json").read_text())
    bf16 = next(r for r in doc["runs"] if r["precision"] == "mixed_bfloat16")
    assert "timed_by" not in bf16 and bf16["status"] == "ok"


def test_at_the_full_size_every_precision_has_a_process_of_its_own(tmp_path: Path, xeon: list[RunSpec]) -> None:
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="full", experiments=False), Recorder())
    alone = [s.precision for s in xeon if not s.rounds_of and s.variant == "original"]
    assert alone == ["float32", "float16", "mixed_float16", "mixed_bfloat16"]
    assert all(not s.rounds_profiled for s in xeon)


def test_planned_experiments_run_after_the_matrix_and_are_recorded_as_experiments(
        tmp_path: Path, xeon: list[RunSpec], monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    _planner(monkeypatch, calls)
    progress = Recorder()
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="quick"), progress)
    # Asked before the rounds, which leave the experiments room (mixed_bfloat16, profiled in the rounds, not run
    # yet), and after them, with the whole matrix measured.
    assert calls == [3, 4]
    # oneDNN off is a setting of the whole process: float32 and float16 are timed together in its own rounds.
    original_rounds, setting_rounds = first_processes(xeon)
    assert (setting_rounds.variant, setting_rounds.rounds_of) == ("onednn_off", ("float32", "float16"))
    assert original_rounds.variant == "original"
    assert [(s.precision, s.variant) for s in xeon if not s.rounds_of][3:] == []  # no process of their own
    doc = json.loads((tmp_path / "results.json").read_text())
    experiment = next(r for r in doc["runs"] if r["variant"] == "onednn_off" and r["precision"] == "float16")
    assert experiment["experiment"]["tests"] == "slow_fp16_kernels"
    assert experiment["timed_by"] == "interleaved_rounds"
    assert experiment["step_time_ms"]["median"] == pytest.approx(22000.0 / 6)
    assert experiment["first_step_ms"] == pytest.approx(22000.0 / 6 + 1500.0)
    assert experiment["workload"]["name"] == "seed_cnn"  # the stack's original run says what the workload is
    fp32 = next(r for r in doc["runs"] if r["variant"] == "onednn_off" and r["precision"] == "float32")
    # Paired with float32 in the same setting, and only there: the rounds process is a group of its own.
    groups = {r["step_time_ms"].get("group") for r in doc["runs"] if r["variant"] == "onednn_off"}
    # (the original's rounds ran in two processes, groups 0 and 1, where the budget had room beside the experiment)
    assert groups == {2} and doc["timing_rounds"][2]["variant"] == "onednn_off"
    assert doc["timing_rounds"][1]["repeat_of"] == 0
    assert len(fp32["step_time_ms"]["aa_rounds"]) == 3
    assert any("experiment(s)" in note and "float16 onednn_off" in note for note in progress.notes)
    assert any("onednn_off: float32, float16 timed together in interleaved rounds, in one process with "
               "TF_ENABLE_ONEDNN_OPTS=0" in note for note in progress.notes)
    assert doc["invocation"]["experiments"] is True
    # Where the wall time went: every phase, together no more than the whole.
    phases = doc["invocation"]["phases_s"]
    assert set(phases) == {"prepare", "matrix", "rounds", "experiments", "analysis"}
    assert sum(phases.values()) <= doc["invocation"]["elapsed_s"] + 0.5  # each phase rounded to a tenth

    # --resume: what was measured, experiments included, is not run again.
    before = len(xeon)
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="quick", resume=True), Recorder())
    assert [s for s in xeon[before:] if not s.rounds_of] == []  # (rounds that failed to report are retried)


def test_a_settings_experiments_run_on_their_own_where_its_rounds_fail(
        tmp_path: Path, xeon: list[RunSpec], monkeypatch: pytest.MonkeyPatch) -> None:
    _planner(monkeypatch, [])
    original = host_engine.HostEngine.run

    def rounds_fail(self, spec: RunSpec, on_event, gpu_index=None):  # type: ignore[no-untyped-def]
        record = original(self, spec, on_event, gpu_index)
        if spec.rounds_of and spec.variant == "onednn_off":
            return {**record, "status": "failed", "error": "the script cannot be replayed", "rounds": None}
        return record

    monkeypatch.setattr(host_engine.HostEngine, "run", rounds_fail)
    progress = Recorder()
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="quick"), progress)
    alone = [(s.precision, s.variant) for s in xeon if not s.rounds_of][3:]
    assert alone == [("float32", "onednn_off"), ("float16", "onednn_off")]
    assert [s for s in xeon if not s.rounds_of][4].bound_ms == 5000.0  # the experiment's own float32 bounds it
    assert any("each experiment runs in a process of its own instead" in note for note in progress.notes)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert [r.get("timed_by") for r in doc["runs"] if r["variant"] == "onednn_off"] == [None, None]


def test_the_rounds_read_the_users_own_images_as_its_runs_did(tmp_path: Path, xeon: list[RunSpec]) -> None:
    """With --data the host's runs train on the user's images: the rounds that time them again do too (they
    trained on the generated set before)."""
    for name in ("cats", "dogs"):
        (tmp_path / "train" / name).mkdir(parents=True)
        (tmp_path / "train" / name / "1.png").write_bytes(b"")
    run_diagnose(DiagnoseOptions(out_dir=tmp_path / "out", size="quick", data_dir=tmp_path / "train",
                                 experiments=False), Recorder())
    rounds, = first_processes(xeon)
    assert all(s.data_dir == rounds.data_dir for s in xeon if s.rounds_of)
    assert rounds.data_dir == str((tmp_path / "train").resolve()) and "--data" in rounds.workload_args()
    assert {s.data_dir for s in xeon if not s.rounds_of} == {rounds.data_dir}


def test_no_experiments_runs_the_matrix_only(tmp_path: Path, xeon: list[RunSpec],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    _planner(monkeypatch, calls)
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="quick", experiments=False), Recorder())
    assert calls == [] and {s.variant for s in xeon} == {"original"}


@pytest.mark.parametrize("input_ms", [13.0, 60.0])
def test_the_input_control_runs_where_producing_a_batch_took_a_share_of_the_step_it_could_show(
        tmp_path: Path, xeon: list[RunSpec], monkeypatch: pytest.MonkeyPatch, input_ms: float) -> None:
    """The in-memory control shows an input cost only above 1 - 1/1.3 of the step: at 13 ms of float32's 130 ms step
    (and of mixed_bfloat16's 59 ms) it could not, and does not run; at 60 ms it runs for both, a control with no
    experiment of its own: float32's, planned from its own run, in the interleaved rounds beside float32 (a record
    made from them); mixed_bfloat16's, planned only once the rounds profiled it, in a process of its own after."""
    monkeypatch.setitem(INPUT_MS, "batch", input_ms)
    progress = Recorder()
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="quick", precisions=["float32", "mixed_bfloat16"]),
                 progress)
    rounds, = first_processes(xeon)
    controls = [s for s in xeon if s.variant == "synthetic_input"]
    doc = json.loads((tmp_path / "results.json").read_text())
    made = {r["precision"]: r for r in doc["runs"] if r["variant"] == "synthetic_input"}
    if input_ms < 0.23 * STEP_MS["mixed_bfloat16"]:
        assert controls == [] and made == {} and rounds.rounds_of == ("float32", "mixed_bfloat16")
        return
    assert rounds.rounds_of == ("float32", "mixed_bfloat16", "float32+synthetic_input")
    assert [(s.precision, s.experiment) for s in controls] == [("mixed_bfloat16", None)]
    assert all(r["status"] == "ok" and "experiment" not in r for r in made.values())
    assert made["float32"]["timed_by"] == "interleaved_rounds" and "timed_by" not in made["mixed_bfloat16"]
    # Paired with float32 in the rounds that timed both.
    fp32 = next(r for r in doc["runs"] if r["precision"] == "float32" and r["variant"] == "original")
    assert made["float32"]["step_time_ms"]["group"] == fp32["step_time_ms"]["group"]
    assert made["float32"]["step_time_ms"]["median"] == pytest.approx(130.0 - input_ms / 2)
    assert any("mixed_bfloat16 synthetic_input" in note for note in progress.notes)


def test_variants_by_hand_replace_the_default(tmp_path: Path, xeon: list[RunSpec]) -> None:
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="quick", precisions=["float16", "float32"],
                                 variants=["original", "float32_batches"], experiments=False), Recorder())
    assert [(s.precision, s.variant) for s in xeon if not s.rounds_of] == [
        ("float32", "original"), ("float16", "original"), ("float32", "float32_batches"),
        ("float16", "float32_batches")]
    assert xeon[3].experiment == {"changes": {"batch_dtype": "float32"}, "tests": None}


def test_the_live_line_says_what_a_slow_step_is_waiting_for() -> None:
    now = [100.0]
    progress = LiveProgress(Console(file=io.StringIO()), enabled=False, clock=lambda: now[0])
    spec = RunSpec("host", "float16", "original", QUICK, reference_ms=130.0, reference_first_step_ms=2000.0)
    progress.start_run(spec, 4, 1)
    progress.event({"event": "phase", "phase": "train"})
    row = progress.rows[spec.label]
    now[0] += 2.0
    assert waiting_text(row, now[0]) is None and progress.status_of(row) == "training (warm-up)"
    now[0] += 10.0
    assert progress.status_of(row) == "float16: step 1 running for 12 s (float32 took 130 ms/step)"
    progress.event({"event": "step", "phase": "warmup", "index": 0, "ms": 12000.0})
    assert progress.status_of(row) == "warm-up step 1: 12000 ms"
    now[0] += 7.0
    assert progress.status_of(row) == "float16: step 2 running for 7 s (float32 took 130 ms/step)"
    progress.event({"event": "step", "phase": "measure", "index": 1, "ms": 19000.0, "bound": True,
                    "limit_ms": 6500.0})
    assert "beyond the slow-step bound of 6500 ms" in progress.status_of(row)
    progress.event({"event": "phase", "phase": "attribution"})
    now[0] += 60.0
    assert progress.status_of(row) == "reading the profile"


def test_a_bound_run_is_reported_as_one_step_over_the_bound() -> None:
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, width=200, color_system=None), enabled=True)
    spec = RunSpec("host", "float16", "original", QUICK, reference_ms=130.0)
    progress.start_run(spec, 4, 1)
    progress.finish_run({"stack": "host", "precision": "float16", "variant": "original", "status": "ok",
                         "bound": True, "step_time_ms": {"median": 22000.0, "n": 1},
                         "slow_step_bound": {"multiple": 50.0, "float32_step_ms": 130.0, "limit_ms": 5000.0}})
    # The bound it met is the quick size's 5 s, 38x float32's step: not the 50x cap it never reached.
    assert "22.0 s for its one step (stopped there: over its bound of 5000 ms, 38x float32's 130 ms)" in out.getvalue()
    progress.start_run(spec, 4, 2)
    progress.finish_run({"stack": "host", "precision": "float16", "variant": "original", "status": "ok",
                         "bound": True, "cut_in_step": True,
                         "step_time_ms": {"median": 5001.0, "n": 1, "censored": True},
                         "slow_step_bound": {"multiple": 50.0, "float32_step_ms": 130.0, "limit_ms": 5000.0}})
    assert "5001 ms at least, cut inside it (stopped there: over its bound of 5000 ms" in out.getvalue()


def test_a_run_cut_after_its_first_step_names_the_first_step_bound() -> None:
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, width=240, color_system=None), enabled=True)
    spec = RunSpec("host", "float16", "original", QUICK, reference_ms=150.0, reference_first_step_ms=1400.0)
    record = base_run_record(spec, "cpu")
    # Every bounded run records both limits: the steady step's and the first step's (engines/spec.py).
    assert record["slow_step_bound"] == {"multiple": 50.0, "float32_step_ms": 150.0, "float32_first_step_ms": 1400.0,
                                         "limit_ms": 5000.0, "first_step_limit_ms": 7000.0}
    progress.start_run(spec, 4, 1)
    progress.event({"event": "phase", "phase": "train"})
    progress.event({"event": "step", "phase": "measure", "index": 0, "ms": 27600.0, "bound": True,
                    "limit_ms": 7000.0, "bound_on": "first_step"})
    assert "step 1: 27600 ms, beyond the first-step bound of 7000 ms" in progress.status_of(progress.rows[spec.label])
    progress.finish_run({**record, "status": "ok", "bound": True, "bound_on": "first_step", "bound_limit_ms": 7000.0,
                         "step_time_ms": {"median": 27600.0, "n": 1}})
    text = " ".join(out.getvalue().split())
    assert ("27.6 s for its one step, the first, one-time work included (stopped there: its first step over its "
            "bound of 7000 ms, 5x float32's first step of 1400 ms)") in text
    # A run the steady bound cut keeps its words.
    progress.start_run(spec, 4, 2)
    progress.finish_run({**record, "status": "ok", "bound": True, "bound_on": "steady_step", "bound_limit_ms": 5000.0,
                         "step_time_ms": {"median": 24500.0, "n": 1}})
    assert "24.5 s for its one step (stopped there: over its bound of 5000 ms, 33x float32's 150 ms)" in out.getvalue()


def test_where_the_rounds_minimum_cannot_fit_what_is_left_of_the_budget_it_is_said_before_they_run(
        tmp_path: Path, xeon: list[RunSpec]) -> None:
    """The budget's clock starts when the command did (DiagnoseOptions.started): a diagnose whose command began
    80 s ago has 10 s left, less than the rounds' minimum costs at this machine's steps; that is said before the
    rounds, which run all the same."""
    on_time = Recorder()
    run_diagnose(DiagnoseOptions(out_dir=tmp_path / "on-time", size="quick", experiments=False), on_time)
    assert not any("past the 90 s quick budget" in n for n in on_time.notes)
    late = Recorder()
    run_diagnose(DiagnoseOptions(out_dir=tmp_path / "late", size="quick", experiments=False,
                                 started=time.monotonic() - 80.0), late)
    said = [n for n in late.notes if "past the 90 s quick budget" in n]
    assert len(said) == 1 and "float32 steps in 130 ms here" in said[0]
    rounds_at = next(i for i, n in enumerate(late.notes) if n.startswith("interleaved rounds of"))
    assert late.notes.index(said[0]) < rounds_at
    # The rounds ran both times: on time in two processes, late in one (no room for a second).
    assert len([s for s in xeon if s.rounds_of]) == 3 and len([s for s in xeon if s.rounds_profiled]) == 2
    doc = json.loads((tmp_path / "late" / "results.json").read_text())
    assert doc["invocation"]["elapsed_s"] >= 80.0
