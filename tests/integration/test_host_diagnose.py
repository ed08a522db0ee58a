"""`fp16doctor diagnose` on this machine's own Python, with real TensorFlow on the CPU."""

from __future__ import annotations

import io
import json
import platform
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from interrupt import ctrl_c_reaches_it
from rich.console import Console
from slow_path import assert_cut_and_said, assert_cut_window, forced_cut_env, is_cut
from window_size import assert_window_sized

from fp16doctor.engines.host import HostEngine
from fp16doctor.engines.spec import QUICK, SLOW_STEP_MULTIPLE_ENV, SMOKE, RunSpec
from fp16doctor.progress import LiveProgress

FP16DOCTOR = [sys.executable, "-m", "fp16doctor"]


def _run(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FP16DOCTOR, *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("diagnose-quick")
    proc = _run("diagnose", "--quick", "--out", str(out))
    return proc, out


@pytest.fixture(scope="module")
def smoke_cut(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The diagnose as it goes on a CPU where every 16-bit run passes the slow-step bound (slow_path.py), at the smoke
    size: the branch it takes does not depend on the steps' size."""
    out = tmp_path_factory.mktemp("diagnose-smoke-cut")
    proc = _run("diagnose", "--size", "smoke", "--out", str(out), env=forced_cut_env())
    return proc, out


# The forced-bound runs below are at the smoke size: which branch a bound takes does not depend on the steps' size,
# and a pathological CPU's quick float16 steps (25 s each on a Xeon) would make each test minutes long.


def _ok(doc: dict, precision: str, variant: str = "original") -> dict:
    runs = [r for r in doc["runs"] if r["precision"] == precision and r["variant"] == variant]
    assert len(runs) == 1, f"{precision}/{variant}: {runs}"
    assert runs[0]["status"] == "ok", runs[0].get("error")
    return runs[0]


@pytest.mark.slow
def test_quick_diagnose_summary_is_the_answer_short_and_each_fact_once(quick) -> None:
    """After the progress lines, the summary opens with the answer and reads in a minute on any CPU: at most 5,000
    characters, no line over 200, no doubled full stop, no sentence of 40 characters said more than twice."""
    proc, _ = quick
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout[proc.stdout.index("What bounds the step"):]
    assert text.index("What to do") < text.index("Each configuration against float32")
    assert len(text) <= 5000, len(text)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 200, max(lines, key=len)
    assert not re.search(r"(?<!\.)\.\.(?!\.)", text), "a doubled full stop"
    sentences = [s.strip() for line in lines for s in re.split(r"(?<=[.;])\s+", line) if len(s.strip()) >= 40]
    assert not {s for s in set(sentences) if sentences.count(s) > 2}


@pytest.mark.slow
def test_quick_diagnose_measures_all_three_precisions_and_explains_them(quick) -> None:
    """What must hold on any CPU, whether float16 is 2x or 150x slower there (or faster)."""
    proc, out = quick
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    assert doc["schema_version"] == 1 and doc["host"]["gpus"] == []
    assert doc["invocation"]["size"] == "quick"
    f32, f16, mixed = _ok(doc, "float32"), _ok(doc, "float16"), _ok(doc, "mixed_float16")
    # The in-memory input control runs where producing a batch took a share of the step it could show.
    controls = [_ok(doc, r["precision"], "synthetic_input") for r in doc["runs"] if r["variant"] == "synthetic_input"]
    for run in (f32, f16, mixed, *controls):
        assert run["device"] == "cpu" and run["machine"] == "host"
        # A run finishes within its bound: cut short after one step, or measured over several.
        assert run["step_time_ms"]["n"] >= 3 or (run.get("bound") and run["step_time_ms"]["n"] == 1)
        assert run["first_step_ms"] > 0
        assert run["workload"]["image_height"] == 112 and run["workload"]["batch_size"] == 32
        assert run["model"]["layers"][0]["in_channels"] == 3
        assert sum(layer["params"] for layer in run["model"]["layers"]) == run["model"]["params"]
        if run.get("timed_by") == "interleaved_rounds" and run["variant"] == "synthetic_input":
            # An input control planned from float32's own run was timed in the rounds beside float32: its step is
            # what it is for (no profiled window of its own), paired with float32's there.
            assert run["step_time_ms"]["group"] == f32["step_time_ms"]["group"]
            continue
        # What ran was measured: ops per layer and pass, covering most of the profiled window.
        ops = run.get("ops")
        assert ops is not None, run.get("ops_error")
        assert {"conv2d", "conv2d_1"} <= {item["layer"] for item in ops["items"]}
        assert ops["coverage"] > 0 and (ops["coverage"] >= 0.7 or "coverage_note" in ops)
        if is_cut(run):
            # A run cut by the bound is profiled on the step that passed it, and says why it has no rounds.
            assert_cut_window(run, ops)
            assert_cut_and_said(run)
        else:
            # ... in a window clear of an epoch's first step (four steps an epoch leave room for two).
            assert_window_sized(ops["window"]["steps"], run["window_step_ms"])
            assert not ops["window"].get("epoch_start")
    for run in (r for r in doc["runs"] if r.get("timed_by") == "interleaved_rounds" and r["variant"] == "original"):
        # A precision the device computes natively (mixed_bfloat16 with AVX512-BF16 or AMX) is timed and profiled in
        # the rounds alone: its window's ops, its model and its input as a run of its own would have had them.
        assert {"conv2d", "conv2d_1"} <= {item["layer"] for item in run["ops"]["items"]}, run.get("ops_error")
        assert_window_sized(run["ops"]["window"]["steps"], run["window_step_ms"])
        assert run["ops"]["coverage"] > 0
        assert run["model"]["layers"][0]["in_channels"] == 3 and run["input_time_ms"]["median"] > 0
        assert run["step_time_ms"]["design"] == "interleaved" and "single_process" not in run["step_time_ms"]
    # floatx=float16 really reached Keras: float16 batches and float16 weights, as the user had.
    assert f16["batch_dtype"] == "float16" and f16["model"]["layers"][0]["variable_dtype"] == "float16"
    assert mixed["model"]["layers"][0]["variable_dtype"] == "float32"
    assert mixed["model"]["optimizer"] == "LossScaleOptimizer"
    assert f32["input_time_ms"]["median"] > 0 and not any("input_time_ms" in control for control in controls)
    # The control ran where a run's batch took a share of its step it could show, and only there; one the quick
    # budget had no room for is said with the command that runs it.
    shares = {r["precision"]: r["input_time_ms"]["median"] / r["step_time_ms"]["median"] for r in doc["runs"]
              if r["variant"] == "original" and r["status"] == "ok" and not r.get("bound")}
    ran = {c["precision"] for c in controls}
    assert ran <= {p for p, share in shares.items() if share >= 0.2}
    for precision in (p for p, share in shares.items() if share >= 0.25 and p not in ran):
        assert (f"experiment {precision} synthetic_input skipped: it would take about" in proc.stderr
                and f"--precision {precision} --variant original --variant synthetic_input" in proc.stderr)
    assert not f32["loss"]["nan_or_inf"]
    # One verdict per 16-bit run; its cause can cause speed, and explains at least half or says what is not.
    verdicts = {(v["precision"], v["variant"]): v for v in doc["verdicts"]}
    assert {("float16", "original"), ("mixed_float16", "original")} <= set(verdicts)
    registry_causes = {f["id"] for f in doc["findings"] if f.get("explains_ms") is not None}
    for verdict in verdicts.values():
        assert verdict["cause"] is None or verdict["cause"] in registry_causes
        assert verdict["cause"] not in ("pure_float16_floatx", "numerics_unstable", "measurement_warmup",
                                        "fp16_faster")
        if verdict["outcome"] != "no_significant_difference" and verdict["explained_share"] < 0.5:
            assert "unexplained" in verdict["headline"] or verdict["cause"] is None
    # Every ratio carries an interval: from interleaved rounds where the rounds could hold the run (at least
    # three, beside float32's A/A control), else from the runs' own spread, said as such.
    for verdict in verdicts.values():
        low, high = verdict["ratio_interval"]
        assert low <= verdict["ratio"] <= high
        assert verdict["repeats"] >= 3 or verdict["interval_method"] in ("spread", "default_band", "lower_bound")
    if re.search(r"interleaved rounds: \d+ rounds in", proc.stderr):
        assert f32["step_time_ms"]["design"] == "interleaved" and len(f32["step_time_ms"]["rounds"]) >= 3
        assert len(f32["step_time_ms"]["aa_rounds"]) >= 3 and "single_process" in f32["step_time_ms"]
        assert any(v["repeats"] >= 3 for v in verdicts.values())
        # The quick size's rounds stop once every ratio is known to within 5 %, or fill the budget; either way the
        # rounds process had the target and says how wide the widest ratio was when it stopped.
        kept = doc["timing_rounds"][f32["step_time_ms"]["group"]]
        widest, rounds = kept["stop_precision"]["widest"], len(kept["order"])
        assert kept["stop_precision"]["target"] == 0.05 and widest > 0
        assert kept["stop_reason"] in ("precision", "time_budget", "max_rounds")
        if kept["stop_reason"] == "precision":
            assert widest <= 0.05 and rounds >= 5 and "every ratio known to within 5 % either way" in proc.stderr
        elif kept["stop_reason"] == "time_budget":
            assert rounds < 5 or widest > 0.05  # it did not go on past a precise enough round
    # The prescription names a measured configuration, first in the terminal.
    prescription, = doc["prescriptions"]
    chosen = prescription["recommended"]
    assert any(m["precision"] == chosen["precision"] and m["variant"] == chosen["variant"]
               for m in prescription["measured"])
    # The answer, in its order: what bounds the step, what to do, each configuration against float32.
    assert (proc.stdout.index("What bounds the step") < proc.stdout.index("What to do")
            < proc.stdout.index("Each configuration against float32"))
    for finding in doc["findings"]:
        assert finding["evidence"] and any(ch.isdigit() for ch in " ".join(finding["evidence"]))


@pytest.mark.slow
def test_a_diagnose_whose_16_bit_runs_are_all_cut_still_measures_explains_and_prescribes(smoke_cut) -> None:
    """The Xeon's branch on any CPU: float16 and mixed_float16 cut by the slow-step bound after their first step (the
    first-step bound) or after one steady step, left out of the interleaved rounds and saying so, their ops measured
    on that step, a verdict each, and a prescription of a configuration that was measured in full."""
    proc, out = smoke_cut
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    f32 = _ok(doc, "float32")
    assert not is_cut(f32) and f32["step_time_ms"]["n"] >= 3  # float32 is never bound: it sets the bound
    for precision in ("float16", "mixed_float16"):
        run = _ok(doc, precision)
        assert_cut_and_said(run)
        assert f"{precision} left out of the interleaved rounds: cut short by the slow-step bound" in proc.stderr
        assert run["first_step_ms"] > 0
        ops = run.get("ops")
        assert ops is not None, run.get("ops_error")
        assert_cut_window(run, ops)
        assert {"conv2d", "conv2d_1"} <= {i["layer"] for i in ops["items"]}
    verdicts = {v["precision"]: v for v in doc["verdicts"] if v["variant"] == "original"}
    assert {"float16", "mixed_float16"} <= set(verdicts)
    for precision in ("float16", "mixed_float16"):
        verdict = verdicts[precision]
        assert verdict["repeats"] == 0 and verdict["interval_method"] != "paired_rounds"  # no rounds behind it
        low, high = verdict["ratio_interval"]
        assert low <= verdict["ratio"] <= high
    prescription, = doc["prescriptions"]
    chosen = prescription["recommended"]
    assert chosen["precision"] not in ("float16", "mixed_float16")  # a bound is no measurement to act on
    assert (out / "report.html").exists() and "What to do" in proc.stdout


def _ledger_checks(doc: dict, stdout: str) -> None:
    """Each timed configuration's ledger adds up to its step (within 1 %), no part negative; each bound line's
    figures add up to the step it names; a run cut by the slow-step bound is said as the bound, never "a step"."""
    assert doc["ledgers"], "no ledger"
    for ledger in doc["ledgers"]:
        parts = [p["ms"] for p in ledger["parts"]]
        assert min([*parts, ledger["unplaced_ms"]]) >= 0, ledger
        assert abs(sum(parts) + ledger["unplaced_ms"] - ledger["step_ms"]) <= 0.01 * ledger["step_ms"], ledger
    bound = re.sub(r"\n {4}", " ", stdout[stdout.index("What bounds the step"):stdout.index("What to do")])
    cut = {(r["precision"], r.get("variant", "original")) for r in doc["runs"] if r.get("bound")}
    for line in re.findall(r"^  (\w+) \((.*?) = (.*?)\)", bound, flags=re.M):
        precision, step_words, parts = line
        assert ("a step" in step_words) != ((precision, "original") in cut), line
        step = float(re.findall(r"(\d+(?:\.\d+)?) (?:ms|s)\b", step_words)[0])
        figures = [float(x) * (1000 if unit == "s" else 1)
                   for x, unit in re.findall(r"(\d+(?:\.\d+)?) (ms|s)\b", parts)]
        unit = 1000 if re.search(r"\d s\b", step_words) else 1
        assert abs(sum(figures) - step * unit) <= max(0.02 * step * unit, 2.0), line


@pytest.mark.slow
def test_every_step_adds_up_in_a_fresh_quick_diagnose(quick) -> None:
    proc, out = quick
    assert proc.returncode == 0, proc.stderr[-2000:]
    _ledger_checks(json.loads((out / "results.json").read_text()), proc.stdout)


@pytest.mark.slow
def test_a_cut_run_is_said_as_its_bound_and_its_parts_still_add_up(smoke_cut) -> None:
    proc, out = smoke_cut
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    assert any(ledger["cut"] for ledger in doc["ledgers"])
    assert "cut at fp16doctor's bound after" in proc.stdout
    _ledger_checks(doc, proc.stdout)


@pytest.mark.slow
def test_quick_diagnose_writes_a_report_naming_precisions_and_numbers(quick) -> None:
    proc, out = quick
    html = (out / "report.html").read_text()
    doc = json.loads((out / "results.json").read_text())
    for name in ("float32", "float16", "mixed_float16"):
        assert name in html
    from fp16doctor.analysis.intervals import rounds_step_ms
    from fp16doctor.analysis.values import fmt_ms

    step = _ok(doc, "float32")["step_time_ms"]
    # float32's step as every output quotes it: its rounds' geometric mean where rounds timed it, else its median.
    f32 = rounds_step_ms(step.get("rounds") or []) or step["median"]
    assert fmt_ms(f32) in html
    # The terminal summary names the files it wrote.
    assert "results.json" in proc.stdout and "report.html" in proc.stdout


@pytest.mark.slow
def test_a_float16_run_beyond_its_slow_step_bound_stops_after_its_first_steady_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The slow path forced on any CPU: a float32 reference so small that every float16 step is far
    beyond 50x of it, as float16 is on a CPU that runs oneDNN's reference kernels (22 s against 130 ms). No float32
    first step is known (0), so there is no first-step bound and the first step (tracing) does not end the run: the
    second, a steady step like float32's median, is the measurement. Without oneDNN's lines the step runs to its
    end on every CPU (where oneDNN runs float16, on a Xeon with AVX512-FP16, they would let it be cut inside)."""
    monkeypatch.setenv("FP16DOCTOR_ONEDNN_VERBOSE", "0")
    spec = RunSpec("host", "float16", "original", SMOKE, reference_ms=0.01, reference_first_step_ms=0.0)
    events: list[dict] = []
    record = HostEngine(cache_dir=tmp_path, backend="tensorflow").run(spec, events.append)
    assert record["status"] == "ok", record.get("error")
    assert record["bound"] is True and record["stop_reason"] == "slow_step_bound"
    assert record["bound_on"] == "steady_step" and "first_step_limit_ms" not in record["slow_step_bound"]
    step = record["step_time_ms"]
    first, second = record["warmup_step_ms"]
    assert first == record["first_step_ms"] and "window_step_ms" not in record
    assert step["n"] == 1 and step["median"] == step["p10"] == step["p90"] == second
    assert record["slow_step_bound"]["limit_ms"] == pytest.approx(0.5)
    # That steady step is the profiled window, and no other training step ran.
    assert record["profile"]["window"]["kind"] == "bound_step" and record["profile"]["window"]["steps"] == 1
    assert "xplane" in record["profile"]["artifacts"]
    steps = [e for e in events if e["event"] == "step"]
    assert len(steps) == 2 and steps[-1]["bound"] is True


@pytest.mark.slow
def test_a_float16_first_step_beyond_its_first_step_bound_ends_the_run_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first-step bound forced on any CPU: float32's first step of 1 ms and step of 0.01 ms, with the multiple
    forced to 4, put it at 4 ms (4x the first step, over 1 ms + the 0.04 ms steady bound), too tight to cut the
    step inside (that needs 5x: spec.first_step_cuttable). The first step, tracing included, is the run's one
    measured step and its profiled window, and no second step runs."""
    monkeypatch.setenv(SLOW_STEP_MULTIPLE_ENV, "4")
    spec = RunSpec("host", "float16", "original", SMOKE, reference_ms=0.01, reference_first_step_ms=1.0)
    assert spec.first_bound_ms == pytest.approx(4.0) and not spec.first_step_cuttable
    events: list[dict] = []
    record = HostEngine(cache_dir=tmp_path, backend="tensorflow").run(spec, events.append)
    assert record["status"] == "ok", record.get("error")
    assert record["bound"] is True and record["stop_reason"] == "slow_step_bound" and "cut_in_step" not in record
    assert record["bound_on"] == "first_step" and record["bound_limit_ms"] == pytest.approx(4.0)
    assert record["slow_step_bound"]["first_step_limit_ms"] == pytest.approx(4.0)
    step = record["step_time_ms"]
    assert step["n"] == 1 and step["median"] == record["first_step_ms"] and record["warmup_step_ms"] == [step["median"]]
    assert "window_step_ms" not in record
    window = record["profile"]["window"]
    assert window["kind"] == "first_step" and window["steps"] == 1
    ops = record.get("ops")
    assert ops is not None, record.get("ops_error")
    assert ops["window"]["kind"] == "first_step" and {"conv2d", "conv2d_1"} <= {item["layer"] for item in ops["items"]}
    steps = [e for e in events if e["event"] == "step"]
    assert len(steps) == 1 and steps[0]["bound"] is True and steps[0]["bound_on"] == "first_step"


def test_a_run_cut_short_by_its_second_warmup_step_is_profiled_on_that_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first step (tracing) under its own bound (float32's first step here 10^7 ms) does not end the run; the
    second, beyond the steady bound, is the measurement and the profiled window, not the first with its tracing.
    Without oneDNN's lines that step runs to its end on every CPU (a 0.5 ms bound would otherwise cut it inside
    before any kernel ran, where oneDNN runs float16)."""
    monkeypatch.setenv("FP16DOCTOR_ONEDNN_VERBOSE", "0")
    spec = RunSpec("host", "float16", "original", SMOKE, reference_ms=0.01, reference_first_step_ms=1e7)
    record = HostEngine(cache_dir=tmp_path, backend="tensorflow").run(spec, lambda e: None)
    assert record["status"] == "ok", record.get("error")
    assert record["bound"] is True and len(record["warmup_step_ms"]) == 2 and record["bound_on"] == "steady_step"
    assert record["step_time_ms"]["n"] == 1 and record["step_time_ms"]["median"] == record["warmup_step_ms"][1]
    window = record["profile"]["window"]
    assert window["kind"] == "bound_step" and window["steps"] == 1
    ops = record.get("ops")
    assert ops is not None, record.get("ops_error")
    assert {"conv2d", "conv2d_1"} <= {item["layer"] for item in ops["items"]}
    assert ops["coverage"] > 0 and (ops["coverage"] >= 0.7 or "coverage_note" in ops)


@pytest.mark.slow
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="TensorFlow's oneDNN ops: x86 only")
def test_a_step_past_the_bound_is_ended_inside_where_onednn_names_the_running_kernel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The step watchdog on any x86 CPU: float16 runs oneDNN only with AVX-512, so the path is taken with float32 and
    TensorFlow's oneDNN ops switched on, its bound at half its own steady step. The step is ended inside at the bound
    (censored: at least the bound), its window is oneDNN's lines up to the cut, and the ops come from them."""
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    engine = HostEngine(cache_dir=tmp_path, backend="tensorflow")
    reference = engine.run(RunSpec("host", "float32", "original", QUICK), lambda e: None)
    assert reference["status"] == "ok", reference.get("error")
    # The bound is 50x the reference (engines/base.py): half of float32's own step lands inside its convolutions.
    spec = RunSpec("host", "float32", "original", QUICK, reference_ms=reference["step_time_ms"]["median"] / 100,
                   reference_first_step_ms=reference["first_step_ms"])
    events: list[dict] = []
    record = engine.run(spec, events.append)
    assert record["status"] == "ok", record.get("error")
    assert record["bound"] is True and record["cut_in_step"] is True and record["stop_reason"] == "slow_step_bound"
    assert record["bound_on"] == "steady_step"  # its first step stayed under 5x the reference's first step
    limit = record["slow_step_bound"]["limit_ms"]
    step = record["step_time_ms"]
    assert step["n"] == 1 and step["censored"] is True and limit <= step["median"] < reference["step_time_ms"]["p90"]
    assert record["warmup_step_ms"][-1] == step["median"]  # the second step, the first one judged, was cut
    window = record["profile"]["window"]
    assert window["kind"] == "bound_step" and window["cut_in_step"] is True and window["cut_at_ms"] > 0
    assert record["profile"]["artifacts"] == ["onednn_lines"]  # the trace is written only when the profiler stops
    ops = record.get("ops")
    assert ops is not None, record.get("ops_error")
    assert ops["source"] == "onednn_verbose" and "conv2d" in {item["layer"] for item in ops["items"]}
    for item in ops["items"]:
        if item.get("in_flight"):  # still running at the cut: at most the window's time
            assert item["layer"] is not None and 0 < item["ms_per_step"] <= window["wall_ms"]
    assert [e for e in events if e["event"] == "step"][-1]["cut_in_step"] is True


@pytest.mark.slow
def test_a_settings_experiments_are_timed_together_in_rounds_of_that_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """oneDNN off, as the planner asks for it on a CPU where oneDNN ran float16's reference kernels (told to here,
    on any CPU; the budget, tested apart, is lifted): float32 and float16 with TF_ENABLE_ONEDNN_OPTS=0 set before
    TensorFlow loads, in one rounds process with float32's A/A control, each with a record of its own made from
    the rounds, paired with each other and with nothing else."""
    import fp16doctor.diagnose.run as diagnose_run
    from fp16doctor.diagnose import DiagnoseOptions, run_diagnose

    off = {"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}, "tests": "slow_fp16_kernels"}
    monkeypatch.setattr(diagnose_run, "plan_experiments", lambda doc, progress: [
        {"stack": "host", "precision": p, "variant": "onednn_off", "experiment": off, "reason": "told to"}
        for p in ("float32", "float16")])
    _lift_the_budget(monkeypatch)
    shown = io.StringIO()  # what the terminal shows, through the display a user sees
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="smoke", precisions=["float32", "float16"]),
                 LiveProgress(Console(file=shown, width=240, color_system=None)))
    doc = json.loads((tmp_path / "results.json").read_text())
    made = [r for r in doc["runs"] if r["variant"] == "onednn_off"]
    assert [(r["precision"], r["status"], r.get("timed_by")) for r in made] == [
        ("float32", "ok", "interleaved_rounds"), ("float16", "ok", "interleaved_rounds")], shown.getvalue()
    assert all(r["variant_applied"] == {"env TF_ENABLE_ONEDNN_OPTS": "0"} for r in made)
    assert all(r["experiment"] == {**off, "reason": "told to"} for r in made)
    assert all(r["first_step_ms"] > 0 and len(r["step_time_ms"]["rounds"]) >= 3 for r in made)
    group = made[0]["step_time_ms"]["group"]
    assert made[1]["step_time_ms"]["group"] == group and doc["timing_rounds"][group]["variant"] == "onednn_off"
    assert len(made[0]["step_time_ms"]["aa_rounds"]) >= 3
    # The original's rounds, where there were any (on a CPU whose float16 is cut short, float32 had none): another
    # process.
    assert _ok(doc, "float32")["step_time_ms"].get("group") != group
    assert doc["invocation"]["phases_s"]["experiments"] > 0
    # The terminal shows each as timed in the rounds.
    assert re.search(r"host / float16 / onednn_off .*n=\d+ interleaved rounds\)", shown.getvalue()), shown.getvalue()


@pytest.mark.slow
def test_changes_to_a_model_or_its_input_are_timed_in_the_original_rounds_beside_what_they_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-memory input control for float32, float32 batches and padded channels for float16, as the planner
    asks for them (told to here, on any CPU; the budget, tested apart, is lifted): each its own model in the
    original's rounds process, beside float32, float16 and the A/A control, with a record of its own made from
    the rounds, paired with float32 there; no process of their own. A slow-step multiple far above any CPU's, and
    TensorFlow's own float16 kernels (oneDNN off: a Xeon with AVX512-FP16 runs oneDNN's reference ones, over a
    second a step even at the smoke size, past its time bound), keep float16 whole on every CPU (a cut float16
    leaves the rounds, and its changes run on their own)."""
    import fp16doctor.diagnose.run as diagnose_run
    from fp16doctor.diagnose import DiagnoseOptions, run_diagnose

    monkeypatch.setenv(SLOW_STEP_MULTIPLE_ENV, "10000")
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")

    asked = [{"stack": "host", "precision": "float32", "variant": "synthetic_input", "control": True,
              "reason": "told to"}]
    asked += [{"stack": "host", "precision": "float16", "variant": variant, "reason": "told to"}
              for variant in ("float32_batches", "channels_padded")]
    monkeypatch.setattr(diagnose_run, "plan_experiments", lambda doc, progress: asked)
    _lift_the_budget(monkeypatch)
    shown = io.StringIO()
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="smoke", precisions=["float32", "float16"]),
                 LiveProgress(Console(file=shown, width=240, color_system=None)))
    doc = json.loads((tmp_path / "results.json").read_text())
    made = {r["variant"]: r for r in doc["runs"] if r["variant"] != "original"}
    assert {(r["precision"], v, r["status"], r.get("timed_by")) for v, r in made.items()} == {
        ("float32", "synthetic_input", "ok", "interleaved_rounds"),
        ("float16", "float32_batches", "ok", "interleaved_rounds"),
        ("float16", "channels_padded", "ok", "interleaved_rounds")}, shown.getvalue()
    group = _ok(doc, "float32")["step_time_ms"]["group"]
    assert all(r["step_time_ms"]["group"] == group and len(r["step_time_ms"]["rounds"]) >= 3 for r in made.values())
    assert set(doc["timing_rounds"][group]["precisions"]) >= {
        "float32+synthetic_input", "float16+float32_batches", "float16+channels_padded"}
    # What each changed, as its run of its own would have said it.
    assert made["float32_batches"]["batch_dtype"] == "float32" and made["channels_padded"]["batch_dtype"] == "float16"
    # Each image built and rescaled in float32 too, not only the batch: the host's float16 arithmetic is what it tests.
    assert made["float32_batches"]["variant_applied"] == {"batch_dtype": "float32", "host_arrays": "float32"}
    assert made["channels_padded"]["variant_applied"] == {"input_channels_in_model": 8}
    assert "experiment" not in made["synthetic_input"]  # a control tests nothing
    # Each described as its model was built, its layers named as a process's first model names them.
    assert all({"conv2d", "conv2d_1"} <= {layer["name"] for layer in r["model"]["layers"]} for r in made.values())
    assert made["float32_batches"]["experiment"]["changes"] == {"batch_dtype": "float32"}
    assert len(doc["runs"]) == 5  # float32's and float16's own runs, the three made in the rounds
    assert re.search(r"host / float16 / channels_padded .*n=\d+ interleaved rounds\)", shown.getvalue()), \
        shown.getvalue()


def test_a_precision_profiled_in_the_rounds_whose_warm_up_passes_the_bound_gets_a_run_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rounds' safety net, on any CPU, with real TensorFlow: float16 planned with no process of its own (told to
    here), and float32's bound made tiny for the rounds alone, so float16's first warm-up step passes it. It leaves
    the rounds (said, with the step and the bound), float32 and its A/A control are timed on, and float16 then runs
    in a process of its own, bounded by float32's real step."""
    import fp16doctor.diagnose.run as diagnose_run
    from fp16doctor.diagnose import DiagnoseOptions, run_diagnose

    monkeypatch.setattr(diagnose_run, "profiled_in_rounds",
                        lambda specs, *rest: [s for s in specs if s.precision == "float16"])
    import fp16doctor.engines.host as host_engine

    bounded = host_engine.with_slow_step_bound
    monkeypatch.setattr(host_engine, "with_slow_step_bound", lambda spec, runs: replace(
        spec, reference_ms=0.001, reference_first_step_ms=0.001) if spec.rounds_profiled else bounded(spec, runs))
    shown = io.StringIO()
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="smoke", precisions=["float32", "float16"],
                                 experiments=False),
                 LiveProgress(Console(file=shown, width=240, color_system=None)))
    said = shown.getvalue()
    assert re.search(r"float16 left out of the interleaved rounds: its first step took \d+ ms, past the first-step "
                     r"bound of 0 ms", said), said
    assert "float16: not timed in the interleaved rounds, so each runs in a process of its own" in said
    doc = json.loads((tmp_path / "results.json").read_text())
    f16 = _ok(doc, "float16")
    assert "timed_by" not in f16 and f16["step_time_ms"]["n"] >= 1 and f16["ops"]["window"]["kind"] != "rounds_float16"
    f32 = _ok(doc, "float32")
    assert f32["step_time_ms"]["design"] == "interleaved" and len(f32["step_time_ms"]["aa_rounds"]) >= 3


def _lift_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The smoke budget lifted for a test of what runs where (the budget is tested apart): every experiment asked
    for fits it, and no precision leaves the rounds for time (on a busy machine float16's minimum rounds can be
    priced past the budget, and its experiments would then run on their own)."""
    import fp16doctor.diagnose.rounds as diagnose_rounds
    import fp16doctor.diagnose.run as diagnose_run

    monkeypatch.setattr(diagnose_run, "within_budget", lambda units, *rest: units)
    monkeypatch.setattr(diagnose_rounds, "rounds_left_out_for_time", lambda *args, **kwargs: {})


def _workloads_of(pid: int) -> list[int]:
    """The workload processes the diagnose `pid` started and that are alive right now."""
    found = subprocess.run(["pgrep", "-P", str(pid), "-f", "run_workload.py"], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


@pytest.mark.slow
@pytest.mark.parametrize("cut", [False, True], ids=["as-measured", "16-bit-runs-cut"])
def test_ctrl_c_keeps_finished_runs_and_exits_130(tmp_path: Path, cut: bool) -> None:
    """Ctrl-C while a run is known to be under way (one run is in results.json and the next run's workload process
    is alive): the finished run is kept, the running one stopped, exit 130, on any CPU and with the 16-bit runs
    cut by the slow-step bound. The smoke size: the next run's process, once seen, still has its framework to load
    (seconds on any CPU at any size), so the interrupt lands inside it."""
    proc = subprocess.Popen([*FP16DOCTOR, "diagnose", "--size", "smoke", "--out", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=forced_cut_env() if cut else None, preexec_fn=ctrl_c_reaches_it)
    results = tmp_path / "results.json"
    deadline = time.monotonic() + 300
    running: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        if results.exists() and json.loads(results.read_text())["runs"] and (running := _workloads_of(proc.pid)):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail(f"no run finished with another under way (status {proc.poll()})")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert "error: interrupted" in stderr and "--resume" in stderr
    runs = json.loads(results.read_text())["runs"]
    assert runs and runs[0]["status"] == "ok"
    assert (tmp_path / "report.html").exists()
    assert not [pid for pid in running if Path(f"/proc/{pid}").exists()]  # the run under way was stopped


def _one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode not in (0, None)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and any(line.startswith("hint:") for line in lines), proc.stderr
    for needle in needles:
        assert needle in proc.stderr


def test_unwritable_out_is_a_one_line_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    _one_line_error(_run("diagnose", "--quick", "--out", str(blocker / "sub")), "--out")


def test_data_without_class_folders_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "only_one" ).mkdir()
    (tmp_path / "only_one" / "a.jpg").write_bytes(b"\xff\xd8")
    _one_line_error(_run("diagnose", "--quick", "--data", str(tmp_path), "--out", str(tmp_path / "o")),
                    "class folder")


def test_unknown_precision_is_a_one_line_error(tmp_path: Path) -> None:
    _one_line_error(_run("diagnose", "--precision", "bfloat8", "--out", str(tmp_path)), "bfloat8")


@pytest.mark.slow
def test_a_python_without_keras_is_told_how_to_install_it(tmp_path: Path) -> None:
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    proc = _run("diagnose", "--quick", "--python", str(venv / "bin" / "python"), "--out", str(tmp_path / "o"))
    _one_line_error(proc, "no Keras", "fp16doctor[tensorflow]")
