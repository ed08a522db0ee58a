"""diagnose --script on real small Keras scripts (CPU, real TensorFlow): the step times it reports agree
with a plain hand-timer in the same script, each kind of script runs or fails with its reason."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from script_env import script_env
from slow_path import FORCED_CUT, assert_cut_and_said, assert_cut_window, is_cut
from window_size import assert_window_sized

from fp16doctor.engines.spec import QUICK

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"
STEPS = 20
# The hand timer's comparison: both timers time the same steps, so ten give their medians as surely as more would,
# where float16's steps take about a second each on a CPU running oneDNN's reference kernels for it.
HAND_STEPS = 10
TOLERANCE = 0.15
FIT_SCRIPTS = ["keras3_sequential_fit.py", "functional_tfdata.py", "tf_keras_fit_generator.py"]


def diagnose(tmp_path: Path, script: str, *options: str, steps: int = STEPS,
             **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fp16doctor", "diagnose", "--script", str(SCRIPTS / script), "--steps", str(steps),
         "--out", str(tmp_path / "out"), "--json", *options],
        capture_output=True, text=True, env=script_env(**env), cwd=tmp_path, timeout=900)


@pytest.mark.parametrize("script", FIT_SCRIPTS)
def test_step_medians_agree_with_a_hand_timer(tmp_path: Path, script: str) -> None:
    """fp16doctor's step times of a script against the script's own batch timer, in the same process over the
    same steps: no comparison of two timings taken at different moments on a shared machine."""
    for precision in ("float32", "float16"):
        out = tmp_path / precision
        out.mkdir()
        hand_file = out / "hand.json"
        # The timer saves once, a step after the ones compared (its file write then falls in no compared step).
        done = diagnose(out, script, "--precision", precision, "--no-experiments", steps=HAND_STEPS,
                        HAND_TIMER_OUT=str(hand_file), HAND_TIMER_STEPS=str(QUICK.warmup_steps + HAND_STEPS + 1))
        assert done.returncode == 0, done.stderr[-3000:]
        run: dict[str, Any] = json.loads(done.stdout)["runs"][0]
        assert run["status"] == "ok" and run["workload"]["name"] == "script", run
        assert run["step_time_ms"]["n"] == HAND_STEPS and run["workload"]["per_step"] is True
        assert run["keras_config"]["floatx"] == precision
        assert Path(run["script_log"]).exists()
        # The steps fp16doctor timed are the ones after its warm-up: the hand timer saw the same ones.
        hand = json.loads(hand_file.read_text())["step_ms"][QUICK.warmup_steps:QUICK.warmup_steps + HAND_STEPS]
        assert len(hand) == HAND_STEPS
        ours, theirs = run["step_time_ms"]["median"], statistics.median(hand)
        assert abs(ours - theirs) <= TOLERANCE * theirs, (script, precision, ours, theirs)


def test_mixed_policy_is_injected_and_layers_report_their_dtypes(tmp_path: Path) -> None:
    # How the run applied the policy is checked, not its steps: a few, and no experiments (mixed_float16's steps take
    # about a second each on a CPU running oneDNN's reference kernels for float16).
    done = diagnose(tmp_path, "keras3_sequential_fit.py", "--precision", "mixed_float16", "--no-experiments", steps=5)
    assert done.returncode == 0, done.stderr[-3000:]
    workload = json.loads(done.stdout)["runs"][0]["workload"]
    assert "injected" in workload["precision_applied"]["how"]
    assert workload["layer_dtypes"] == {
        "float16 compute, float32 variables": ["conv2d", "max_pooling2d", "conv2d_1", "flatten", "dense"]}


def test_the_questions_script_stops_on_keras_3_naming_lr_decay_and_the_stacks(tmp_path: Path) -> None:
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    done = diagnose(tmp_path, "seed_question.py", "--script-arg", "train", "--script-arg", "test",
                    "--precision", "float32")
    assert done.returncode == 1
    stderr = " ".join(done.stderr.split())
    assert "RMSprop(lr=..., decay=...)" in stderr and "rejects" in stderr
    assert "tf1.7-cuda9.0" in stderr and "tf1.13-cuda10.0" in stderr and "tf2.20-keras3" not in stderr


def test_a_keras_2_script_on_keras_3_names_what_it_uses(tmp_path: Path) -> None:
    done = diagnose(tmp_path, "keras2_style.py", "--precision", "float32")
    assert done.returncode == 1 and "SGD(lr=...)" in " ".join(done.stderr.split())


def test_a_gradient_tape_loop_is_timed_step_by_step_between_its_train_step_calls(tmp_path: Path) -> None:
    """A tf.function train_step whose trace applies the optimizer: its calls are the steps, timed end to end, the
    first (tracing) the first step, its scalar result the loss; the script is stopped after the measured steps."""
    done = diagnose(tmp_path, "gradient_tape_loop.py", "--precision", "float32", steps=5)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout)["runs"][0]
    workload = run["workload"]
    assert run["status"] == "ok" and workload["per_step"] is True and workload["timing"] == "loop_calls"
    assert workload["loop_step"] == "train_step" and run["step_time_ms"]["n"] == 5
    assert run["first_step_ms"] > run["step_time_ms"]["median"]  # tracing
    assert run["loss"]["last"] is not None and workload["ended"] == "stopped"


def test_a_loop_that_updates_weights_by_hand_gets_whole_run_timing(tmp_path: Path) -> None:
    done = diagnose(tmp_path, "manual_update_loop.py", "--precision", "float32")
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout)["runs"][0]
    assert run["status"] == "ok" and run["workload"]["per_step"] is False
    assert run["workload"]["timing"] == "whole_run" and run["step_time_ms"]["median"] > 0
    assert any("could not be measured" in note for note in run["workload"]["notes"])



def test_a_custom_loops_answer_says_it_timed_the_whole_script_and_runs_no_rounds(tmp_path: Path) -> None:
    """Two precisions of a loop whose steps nothing marks (it updates its weights by hand): every output says each
    figure is the whole script's, timed once (the progress line, the answer's configuration line and its note, the
    runs table), and no interleaved rounds run the script again only to find no fit() in it."""
    done = subprocess.run(
        [sys.executable, "-m", "fp16doctor", "diagnose", "--script", str(SCRIPTS / "manual_update_loop.py"),
         "--precision", "float32", "--precision", "mixed_float16", "--no-experiments", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env=script_env(), cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert not doc.get("timing_rounds")
    err = " ".join((done.stderr + done.stdout).split())
    assert "mixed_float16 / original (script) the whole script" in err and "timed once" in err
    assert "no interleaved rounds: a custom training loop" in err
    explained = subprocess.run([sys.executable, "-m", "fp16doctor", "explain", str(tmp_path / "out" / "results.json")],
                               capture_output=True, text=True, env=script_env(), timeout=300)
    said = " ".join(explained.stdout.split())
    assert "the whole script" in said and "Timed as the whole script, once each" in said, said[-2000:]


def test_a_step_compiled_with_jit_compile_is_said_as_one_cluster_the_profiler_cannot_see_into(
        tmp_path: Path) -> None:
    """XLA runs the whole training step as one cluster; the profile lists a few input ops around it. The run records
    the model's resolved jit_compile, and the bound line says the step is one cluster, not that its few listed ops
    bound it."""
    done = diagnose(tmp_path, "jit_compiled_fit.py", "--precision", "float32", "--no-experiments", steps=5)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout)["runs"][0]
    assert run["status"] == "ok" and run["workload"]["jit_compile"] is True
    explained = subprocess.run([sys.executable, "-m", "fp16doctor", "explain", str(tmp_path / "out" / "results.json")],
                               capture_output=True, text=True, env=script_env(), timeout=300)
    bound = " ".join(explained.stdout.split("What to do")[0].split())
    assert "one cluster the profiler does not see into" in bound and "largest ops" not in bound, bound


def test_a_script_with_3_s_steps_keeps_the_quick_budget_and_says_what_it_left_out(tmp_path: Path) -> None:
    """Each step waits 3 s: the runs of their own fill most of the 90 s budget, and the interleaved rounds would
    take minutes more. The diagnose ends within 150 s; each 16-bit run the rounds did not time says why, with the
    --budget that would time it, in results.json and in the answer."""
    done = subprocess.run(
        [sys.executable, "-m", "fp16doctor", "diagnose", "--quick", "--script", str(SCRIPTS / "long_steps.py"),
         "--precision", "float32", "--precision", "mixed_float16", "--out", str(tmp_path / "out"), "--json"],
        capture_output=True, text=True, env=script_env(), cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert doc["invocation"]["elapsed_s"] <= 150.0, doc["invocation"]["phases_s"]
    runs = {run["precision"]: run for run in doc["runs"]}
    mixed = runs["mixed_float16"]
    assert mixed["status"] == "ok" and mixed["step_time_ms"]["median"] > 2500.0
    if mixed.get("timed_by") != "interleaved_rounds":
        assert "--budget" in mixed["rounds_left_out"], mixed.get("rounds_left_out")
        explained = subprocess.run([sys.executable, "-m", "fp16doctor", "explain",
                                    str(tmp_path / "out" / "results.json")],
                                   capture_output=True, text=True, env=script_env(), timeout=300)
        said = " ".join(explained.stdout.split())
        assert "mixed_float16 was not timed in the interleaved rounds" in said and "--budget" in said, said


@pytest.mark.parametrize("cut", [False, True], ids=["as-measured", "float16-cut"])
def test_script_runs_record_what_ran_and_leave_the_log_to_the_script(tmp_path: Path, cut: bool) -> None:
    """Each run of a script gets a profiled window after its timed steps: ops per layer, as the built-in
    workload's; oneDNN's lines and the window markers go to the ops, not into the script's log. A run cut by the
    slow-step bound (forced with `cut`, as float16 is on a CPU running oneDNN's reference kernels) is profiled on
    the step that passed the bound instead, and still records what ran."""
    done = diagnose(tmp_path, "keras3_sequential_fit.py", "--precision", "float32", "--precision", "float16",
                    "--no-experiments", **(FORCED_CUT if cut else {}))
    assert done.returncode == 0, done.stderr[-3000:]
    runs = {run["precision"]: run for run in json.loads(done.stdout)["runs"]}
    assert not is_cut(runs["float32"]) and (is_cut(runs["float16"]) or not cut)
    for run in runs.values():
        assert run["status"] == "ok", run
        ops = run.get("ops")
        assert ops is not None, run.get("ops_error")
        assert {"conv2d", "conv2d_1", "dense"} <= {item["layer"] for item in ops["items"]}
        assert ops["coverage"] > 0 and (ops["coverage"] >= 0.7 or "coverage_note" in ops)
        if is_cut(run):
            assert_cut_window(run, ops)
            assert run["step_time_ms"]["n"] == 1 and "window_step_ms" not in run
        else:
            assert_window_sized(ops["window"]["steps"], run["window_step_ms"])
            assert not ops["window"].get("epoch_start")  # 14 steps an epoch: the window is placed clear of the first
        log = Path(run["script_log"]).read_text()
        assert "Epoch 1/4" in log and "onednn_verbose" not in log and "fp16doctor-window" not in log


def test_the_xla_experiment_runs_the_script_with_jit_compile(tmp_path: Path) -> None:
    done = diagnose(tmp_path, "keras3_sequential_fit.py", "--precision", "float32", "--variant", "xla",
                    "--no-experiments")
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout)["runs"][0]
    assert run["status"] == "ok" and run["variant"] == "xla", run
    assert run["variant_applied"] == {"compile(jit_compile=True)": True}
    assert run["experiment"]["changes"] == {"jit_compile": True}


@pytest.mark.parametrize("cut", [False, True], ids=["as-measured", "float16-cut"])
def test_a_scripts_precisions_are_timed_in_interleaved_rounds_in_one_process(tmp_path: Path, cut: bool) -> None:
    """Each precision's own run first (its process: warm-up, profile, loss), then one process runs the script once
    per precision and times their fit() calls in rounds, each round in a new order: the verdict's interval comes
    from at least 3 paired rounds, and an A/A control (float32 against float32) shows the noise floor. A float16
    run cut by the slow-step bound (forced with `cut`) leaves nothing to pair: no rounds, and the run says why."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "fp16doctor", "diagnose", "--quick", "--script", str(SCRIPTS / "small_mlp.py"),
         "--precision", "float32", "--precision", "float16", "--no-experiments", "--out", str(out), "--json"],
        capture_output=True, text=True, env=script_env(**(FORCED_CUT if cut else {})), cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    runs = {run["precision"]: run for run in doc["runs"]}
    verdict = next(v for v in doc["verdicts"] if v["precision"] == "float16")
    low, high = verdict["ratio_interval"]
    assert low <= verdict["ratio"] <= high
    if cut:
        assert_cut_and_said(runs["float16"])
    left_out = runs["float16"].get("rounds_left_out")
    if left_out:
        assert "timing_rounds" not in doc and verdict["repeats"] == 0
        assert not (out / "script-logs" / "host-interleaved-rounds.log").exists()
        return
    assert "timing_rounds" in doc, done.stderr[-3000:]
    # One rounds process, and a repeat of it in a fresh process where the budget had room: a run's rounds are
    # those of every process of its group, in order.
    orders = [order for process in doc["timing_rounds"] for order in process["order"]]
    assert len(doc["timing_rounds"][0]["order"]) >= 3
    assert all(sorted(r) == ["float16", "float32", "float32_aa"] for r in orders)
    for run in doc["runs"]:
        step = run["step_time_ms"]
        assert step["design"] == "interleaved" and len(step["rounds"]) == len(orders), run["precision"]
        assert step["single_process"]["median"] > 0  # what the precision's own process measured stays
    assert verdict["interval_method"] == "paired_rounds" and verdict["repeats"] >= 3
    assert verdict["noise_floor_interval"] is not None
    assert (out / "script-logs" / "host-interleaved-rounds.log").exists()
