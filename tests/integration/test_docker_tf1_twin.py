"""The question's 2018 frameworks for real: TensorFlow 1.7.0 with Keras 2.1.5 and TensorFlow 1.13.1 with Keras 2.2.4
(the tf1.7-cpu and tf1.13-cpu stacks, their CPU builds on Python 2.7.18) run the seed workload in float32 and in
float16 set as the user set it (keras.json floatx), in one diagnose on a real Docker engine, which then says what
changed for float16 from one stack to the next. Two stacks, two precisions, the smoke size: what holds on any x86-64
CPU, not how fast it is. And a user's own Keras 2 script runs, measured, on TensorFlow 1.13.1 and Keras 2.2.4 on Python
2.7 (the tf1.13-cpu stack)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from docker_env import ca_bundle, require_engine

from fp16doctor.engines.docker import sdk
from fp16doctor.stacks import get_stack
from fp16doctor.workload.protocol import SEED_WORKLOAD

pytestmark = [pytest.mark.docker, pytest.mark.slow]
# The twins, oldest first, with what each one's workload must report about itself.
TWINS = {"tf1.7-cpu": ("1.7.0", "2.1.5"), "tf1.13-cpu": ("1.13.1", "2.2.4")}
ROOT = Path(__file__).resolve().parents[2]


def _diagnose(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "fp16doctor", "diagnose", "--no-host", *args, "--out", str(out)]
    ca = ca_bundle()
    if ca is not None:  # pip inside the builds goes through this machine's TLS proxy
        command += ["--ca-bundle", str(ca)]
    return subprocess.run(command, capture_output=True, text=True, timeout=3600)


@pytest.fixture(scope="module")
def both_twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    """One diagnose over both twins: (its results document, its terminal output)."""
    require_engine()
    out = tmp_path_factory.mktemp("tf1-twins")
    stacks = [arg for name in TWINS for arg in ("--stack", name)]
    # The workload as written only (no input-free control run): the question is float16 against float32. The smoke size:
    # what the tests check (each twin's software, ops and batches, the comparison between them) does not depend on the
    # steps' size, and float16's first step, which a TF1 run cannot cut inside (its ops come only when a step ends),
    # took over a minute a twin at the quick size on a 2-core CPU.
    proc = _diagnose(out, "--size", "smoke", *stacks, "--precision", "float32", "--precision", "float16", "--variant",
                     "original", "--no-experiments")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sdk.leftover_containers(None) == []
    return json.loads((out / "results.json").read_text()), proc.stdout


@pytest.mark.parametrize("twin", list(TWINS))
def test_the_2018_frameworks_train_in_float32_and_float16_on_python_2_7(
        both_twins: tuple[dict[str, Any], str], twin: str) -> None:
    doc, _ = both_twins
    runs = {r["precision"]: r for r in doc["runs"] if r["variant"] == "original" and r["stack"] == twin}
    assert sorted(runs) == ["float16", "float32"]
    float32 = runs["float32"]
    assert float32["status"] == "ok", float32.get("error")
    for precision, run in runs.items():
        if run["status"] != "ok":
            # float16 may not train here; then the run says why, in its own words, never silently.
            assert run["status"] in ("skipped", "failed") and run.get("error"), (precision, run)
            continue
        # The twin's own software, as the workload saw it inside the image.
        software = run["software"]
        assert (software["tensorflow"], software["keras"]) == TWINS[twin], software
        assert software["python"].startswith("2.7."), software
        assert run["workload"]["name"] == SEED_WORKLOAD and run["workload"]["api"] == "fit_generator"
        assert run["keras_config"]["floatx"] == precision
        assert run["step_time_ms"]["median"] > 0
        # TensorFlow 1.x from PyPI is no oneDNN build: its ops come from RunMetadata step stats, layers named the
        # Keras 2 way (the first Conv2D is conv2d_1).
        ops = run["ops"]
        assert ops["source"] == "tf1_run_metadata", ops
        layers = {item["layer"] for item in ops["items"]}
        assert "conv2d_1" in layers, sorted(layers)
        assert any(i["pass"] == "backward_weights" and i["op_type"] == "Conv2DBackpropFilter" for i in ops["items"])
        # The host half, measured: Keras 2.1.5 builds batches in floatx, Keras 2.2.4's keras_preprocessing float32.
        assert run["input_time_ms"]["median"] > 0
        if precision == "float16":
            assert run["batch_dtype"] == ("float16" if twin == "tf1.7-cpu" else "float32"), run["batch_dtype"]
        engine = run["engine"]
        assert engine["kind"] == "docker" and engine["image"].startswith(f"fp16doctor/{twin}:")
        assert engine["stack_description"] == get_stack(twin).description


def test_one_diagnose_over_both_twins_says_what_changed_for_float16_between_them(
        both_twins: tuple[dict[str, Any], str]) -> None:
    doc, terminal = both_twins
    float16_ok = {r["stack"] for r in doc["runs"]
                  if r["precision"] == "float16" and r["variant"] == "original" and r["status"] == "ok"}
    if float16_ok != set(TWINS):
        pytest.skip(f"float16 did not train on every twin here ({sorted(float16_ok)}): nothing to compare")
    [comparison] = [c for c in doc["stack_comparisons"] if c["precision"] == "float16"]
    assert (comparison["from"], comparison["to"]) == ("tf1.7-cpu", "tf1.13-cpu")  # older software first
    assert "Keras 2.1.5" in comparison["software_from"] and "Keras 2.2.4" in comparison["software_to"], comparison
    assert comparison["headline"].startswith("float16 against float32 went from ")
    assert 0 <= comparison["explained_share"] <= 1
    # Ops are matched by layer type and position: both Keras 2 stacks call their first Conv2D conv2d_1.
    if comparison["significant"]:
        assert comparison["changes"], comparison
    # The terminal says it too, under its own heading (the sentence wrapped to the terminal's width).
    words = " ".join(terminal.split())
    assert "Between stacks" in words and " ".join(comparison["headline"].split()[:8]) in words, terminal[-3000:]


def test_a_keras_2_script_runs_measured_on_tensorflow_1_13_and_keras_2_2_4_on_python_2_7(tmp_path: Path) -> None:
    """The script runner on Python 2.7: its import hook (PEP 302 there) applies floatx and times the script's own
    model.fit; the profiled window's ops come from TensorFlow 1's step stats. A tiny script, so the test stays short
    once the image is built."""
    require_engine()
    stack = "tf1.13-cpu"
    script = ROOT / "tests" / "data" / "scripts" / "keras2_fit_py27.py"
    out = tmp_path / "out"
    proc = _diagnose(out, "--quick", "--script", str(script), "--stack", stack, "--precision", "float32", "--precision",
                     "float16", "--no-experiments")
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = {r["precision"]: r for r in json.loads((out / "results.json").read_text())["runs"]}
    assert sorted(runs) == ["float16", "float32"]
    assert runs["float32"]["status"] == "ok", runs["float32"].get("error")
    profiled = 0
    for precision, run in runs.items():
        if run["status"] != "ok":
            assert run["status"] in ("skipped", "failed") and run.get("error"), (precision, run)
            continue
        software = run["software"]
        assert (software["tensorflow"], software["keras"]) == ("1.13.1", "2.2.4"), software
        assert software["python"].startswith("2.7."), software
        workload = run["workload"]
        # The script's Keras is the one it imported (TensorFlow 1.13 loads its own tf.keras on the way).
        assert workload["name"] == "script" and workload["keras_module"] == "keras" and workload["api"] == ["fit"]
        assert run["keras_config"]["floatx"] == precision
        assert workload["precision_applied"] == {"how": "keras.json floatx", "floatx": precision}
        assert workload["per_step"] is True and workload["fit_calls"] == 1
        timing = run["step_time_ms"]
        assert timing["median"] > 0
        # Where float16 was not cut short by the slow-step bound, both were timed again in interleaved rounds in one
        # process (script_rounds.py on Python 2.7): the run's own steps are then kept as single_process.
        if timing.get("design") == "interleaved":
            assert len(timing["rounds"]) == timing["n"] >= 1 and all(ms > 0 for ms in timing["rounds"])
        single = timing.get("single_process", timing)
        assert single["n"] == len(run["step_ms_all"]) == workload["steps_measured"] >= 1
        if precision == "float32":
            assert workload["steps_measured"] >= 3
        profiled += 1 if "ops" in run else 0
        ops = run.get("ops")
        if ops is None:  # a tiny script's run may end before its profiled window on a loaded machine: it says why
            assert run.get("ops_error"), (precision, sorted(run))
        else:
            assert ops["source"] == "tf1_run_metadata", ops
            assert {"conv2d_1", "conv2d_2", "dense_1"} <= {item["layer"] for item in ops["items"]}
            assert any(i["pass"] == "backward_weights" and i["op_type"] == "Conv2DBackpropFilter"
                       for i in ops["items"])
        assert run["engine"]["kind"] == "docker" and run["engine"]["image"].startswith(f"fp16doctor/{stack}:")
        log = (out / run["script_log"]).read_text()
        assert f"python 2.7.18 keras 2.2.4 floatx {precision}" in log and "trained" not in log
    assert profiled >= 1, "no run's ops were profiled from TensorFlow 1's step stats"
    assert sdk.leftover_containers(None) == []
