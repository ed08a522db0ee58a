"""The script runner (fp16doctor/workload/script_runner.py) on small scripts against a stand-in Keras:
the precision applied from outside, the steps timed by a callback the script never sees, the stop after
N steps, and each way a script can end, without TensorFlow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

RUNNER = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload" / "script_runner.py"
FAKE_KERAS = Path(__file__).resolve().parent / "fake_keras"


def run_script(tmp_path: Path, body: str, *options: str, args: tuple[str, ...] = (),
               precision: str = "float32", **env_extra: str) -> tuple[dict[str, Any], str, Path]:
    """Run `body` as train.py under the runner; (final event, the script's log, its working dir)."""
    script_dir = tmp_path / "project"
    script_dir.mkdir(exist_ok=True)
    script = script_dir / "train.py"
    script.write_text(textwrap.dedent(body))
    log = tmp_path / "train.log"
    workdir = tmp_path / "scratch"
    env = {**os.environ, "PYTHONPATH": str(FAKE_KERAS), "KERAS_BACKEND": "fake", **env_extra}
    proc = subprocess.run(
        [sys.executable, "-u", str(RUNNER), "--precision", precision, "--log", str(log),
         "--workdir", str(workdir), "--warmup-steps", "2", "--script-label", "~/project/train.py", *options,
         "--", str(script), *args],
        capture_output=True, text=True, env=env, timeout=60)
    events = [json.loads(line.split(" ", 1)[1]) for line in proc.stdout.splitlines()
              if line.startswith("@@fp16doctor ")]
    final = [e for e in events if e["event"] in ("result", "error")]
    assert final, proc.stdout + proc.stderr
    return final[-1], log.read_text() if log.exists() else "", workdir


FIT = """
    import os, sys
    import keras
    print("argv", sys.argv[1:], "cwd", os.getcwd())
    print("policy at build", keras.Model().dtype_policy_name, "floatx", keras.backend.floatx())
    keras.Model().fit(epochs=3, steps_per_epoch=4, callbacks=[])
    print("after fit")
"""


def test_fit_is_timed_and_stopped_after_n_measured_steps(tmp_path: Path) -> None:
    final, log, workdir = run_script(tmp_path, FIT, "--steps", "5", args=("--epochs", "3"))
    assert final["event"] == "result", final
    run = final["run"]
    workload = run["workload"]
    assert run["status"] == "ok" and run["step_time_ms"]["n"] == 5
    assert workload["name"] == "script" and workload["steps_measured"] == 5 and workload["warmup_steps"] == 2
    assert workload["stop_reason"] == "max_steps" and workload["ended"] == "stopped"
    assert workload["api"] == ["fit"] and workload["fit_calls"] == 1
    # The validation pause at the end of the first epoch is timed apart, not in a step.
    assert len(workload["epoch_end_ms"]) == 1 and workload["epoch_end_ms"][0] >= 5.0
    assert max(run["step_ms_all"]) < workload["epoch_end_ms"][0]
    # The script got its own arguments and a scratch working directory; the code after fit did not run.
    assert "argv ['--epochs', '3']" in log and f"cwd {workdir}" in log
    assert "after fit" not in log
    assert len(workload["script_sha256"]) == 64 and workload["script"] == "~/project/train.py"


def test_float16_comes_from_keras_json_and_mixed_policy_is_set_before_the_model(tmp_path: Path) -> None:
    final, log, _ = run_script(tmp_path, FIT, "--steps", "3", precision="float16")
    assert "floatx float16" in log and final["run"]["workload"]["precision_applied"]["how"] == "keras.json floatx"
    final, log, _ = run_script(tmp_path, FIT, "--steps", "3", precision="mixed_float16")
    assert "policy at build mixed_float16" in log
    applied = final["run"]["workload"]["precision_applied"]
    assert "injected" in applied["how"] and applied["policy"] == "mixed_float16"
    assert final["run"]["workload"]["policy_at_first_call"] == "mixed_float16"


def test_bfloat16_floatx_is_set_after_import_on_keras_3(tmp_path: Path) -> None:
    final, log, _ = run_script(tmp_path, FIT, "--steps", "3", precision="bfloat16")
    assert "floatx bfloat16" in log and final["run"]["keras_config"]["floatx"] == "bfloat16"


def test_several_fit_calls_rewarm_and_are_counted(tmp_path: Path) -> None:
    body = """
        import keras
        model = keras.Model()
        model.fit(epochs=1, steps_per_epoch=4)
        model.fit(epochs=1, steps_per_epoch=10)
    """
    final, _, _ = run_script(tmp_path, body, "--steps", "6")
    workload = final["run"]["workload"]
    # 4 steps of the first call (2 warm-up, 2 measured), then 1 warm-up step for the second call.
    assert workload["fit_calls"] == 2 and workload["warmup_steps"] == 3 and workload["steps_measured"] == 6
    assert any("called fit 2 times" in note for note in workload["notes"])


def test_a_non_finite_loss_is_flagged_and_kept_out_of_the_json(tmp_path: Path) -> None:
    body = """
        import keras
        model = keras.Model()
        for _ in range(10):
            model.train_on_batch(None, None)
    """
    final, _, _ = run_script(tmp_path, body, "--steps", "3", FAKE_LOSS="inf")
    assert final["run"]["loss"] == {"first": None, "last": None, "nan_or_inf": True}


def test_train_on_batch_loop_is_timed_per_call(tmp_path: Path) -> None:
    body = """
        import keras
        model = keras.Model()
        for _ in range(100):
            model.train_on_batch(None, None)
    """
    final, _, _ = run_script(tmp_path, body, "--steps", "5")
    run = final["run"]
    assert run["workload"]["api"] == ["train_on_batch"] and run["step_time_ms"]["n"] == 5
    assert run["loss"]["last"] == 0.5


def test_custom_loop_gets_whole_run_timing_and_says_what_is_missing(tmp_path: Path) -> None:
    body = """
        import time
        import keras
        time.sleep(0.2)
    """
    final, _, _ = run_script(tmp_path, body, "--steps", "5", precision="mixed_float16")
    run = final["run"]
    workload = run["workload"]
    assert workload["per_step"] is False and workload["timing"] == "whole_run"
    assert run["step_time_ms"]["median"] >= 200.0 and run["step_time_ms"]["n"] == 1
    assert any("per-step time" in note for note in workload["notes"])
    assert workload["numerics_comparable"] is False


def test_a_custom_loops_steps_are_timed_between_its_optimizer_updates_and_stopped_after_n(tmp_path: Path) -> None:
    """An eager loop (no fit()): each optimizer update ends a step; the first is the first step, the size's
    warm-up follows, and the script is stopped after the measured steps, as a fit() is."""
    body = """
        import time
        import keras
        opt = keras.optimizers.Optimizer()
        for step in range(1000):
            time.sleep(0.01)
            opt.apply_gradients([(1.0, None)])
        print("loop ended")
    """
    final, log, _ = run_script(tmp_path, body, "--steps", "5")
    run = final["run"]
    workload = run["workload"]
    assert workload["api"] == ["custom_loop"] and workload["timing"] == "loop_calls"
    assert workload["loop_step"] == "Optimizer.apply_gradients" and workload["per_step"] is True
    assert run["step_time_ms"]["n"] == 5 and workload["warmup_steps"] == 2 and workload["ended"] == "stopped"
    assert 9.0 <= run["step_time_ms"]["median"] < 100.0
    assert "loop ended" not in log
    assert any("between two calls of the loop's step function" in note for note in workload["notes"])


def test_a_loop_that_updates_too_few_times_is_timed_as_the_whole_script(tmp_path: Path) -> None:
    body = """
        import keras
        opt = keras.optimizers.Optimizer()
        for step in range(3):
            opt.apply_gradients([(1.0, None)])
    """
    final, _, _ = run_script(tmp_path, body, "--steps", "5")
    assert final["run"]["workload"]["timing"] == "whole_run"


def test_script_that_ends_before_enough_steps_fails_clearly(tmp_path: Path) -> None:
    body = """
        import keras
        keras.Model().fit(epochs=1, steps_per_epoch=3)
    """
    final, _, _ = run_script(tmp_path, body, "--steps", "5")
    assert final["event"] == "error" and final["script_failure"]["kind"] == "too_few_steps"
    assert "ended after 3 training step(s) (2 warm-up, 1 measured)" in final["error"]


def test_keras2_optimizer_arguments_are_named(tmp_path: Path) -> None:
    body = """
        import keras
        print("building")
        my_rmsprop = keras.optimizers.RMSprop(lr=0.0001, rho=0.9, epsilon=1e-04, decay=0.0)
    """
    final, log, _ = run_script(tmp_path, body, "--steps", "5")
    failure = final["script_failure"]
    assert final["event"] == "error" and failure["kind"] == "keras2_arguments"
    assert failure["arguments"] == ["lr", "decay"] and failure["callable"] == "RMSprop"
    assert failure["keras"] == "3.0.0-fake" and "building" in failure["output_tail"]


def test_script_exception_is_reported_with_its_output(tmp_path: Path) -> None:
    body = """
        import sys
        print('loading data')
        print('onednn_verbose,v1,info,oneDNN v3.12.0')
        print('dnnl_verbose,exec,cpu,convolution')
        print('=== fp16doctor-window-start 1764.2 kind first_step')
        print('=== fp16doctor-window-end 1765.2 ms_per_step 1000.0 steps 1 kind first_step')
        sys.stdout.flush()
        raise FileNotFoundError('C:\\\\my_dir\\\\train')
    """
    final, log, _ = run_script(tmp_path, body)
    assert final["event"] == "error" and final["error"].startswith("FileNotFoundError")
    assert final["script_failure"]["kind"] == "exception"
    # The tail a user is shown is the script's: its output and its traceback, as Python prints it, in the log
    # too; oneDNN's lines on the same stream are not the script's.
    tail = final["script_failure"]["output_tail"].splitlines()
    assert "loading data" in tail and not [line for line in tail if "verbose," in line or "=== " in line]
    assert tail[-1].startswith("FileNotFoundError") and "Traceback (most recent call last):" in log


def test_the_scripts_own_modules_are_not_shadowed_by_the_runners(tmp_path: Path) -> None:
    """The runner's modules (dataset, model, events, timing ...) sit in one folder: neither the script's own
    modules of those names nor a package's on the path may be shadowed by them."""
    (tmp_path / "project").mkdir()
    for name in ("dataset", "model", "events"):
        (tmp_path / "project" / f"{name}.py").write_text("WHO = 'the user'\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "timing.py").write_text("WHO = 'a package'\n")
    body = ("import dataset, model, events, timing\n"
            "print('modules are', dataset.WHO, model.WHO, events.WHO, timing.WHO)\n")
    final, log, _ = run_script(tmp_path, body, PYTHONPATH=os.pathsep.join([str(FAKE_KERAS), str(tmp_path / "lib")]))
    assert "modules are the user the user the user a package" in log, final


@pytest.mark.parametrize("code", ["raise SystemExit(3)", "import sys; sys.exit('bad arguments')"])
def test_nonzero_exit_is_a_failure(tmp_path: Path, code: str) -> None:
    final, _, _ = run_script(tmp_path, code + "\n")
    assert final["event"] == "error" and final["script_failure"]["kind"] == "exited"


def test_the_first_train_on_batch_call_is_timed_from_its_start(tmp_path: Path) -> None:
    body = """
        import keras
        model = keras.Model()
        for _ in range(20):
            model.train_on_batch(None, None)
    """
    final, _, _ = run_script(tmp_path, body, "--steps", "3", FAKE_STEP_S="0.02")
    assert final["run"]["first_step_ms"] >= 15.0


@pytest.mark.parametrize("loop", ["fit", "train_on_batch"])
def test_a_step_beyond_the_slow_step_bound_ends_the_run_as_its_measurement(tmp_path: Path, loop: str) -> None:
    body = {"fit": "keras.Model().fit(epochs=5, steps_per_epoch=10)",
            "train_on_batch": "m = keras.Model()\nfor _ in range(50):\n    m.train_on_batch(None, None)"}[loop]
    final, log, _ = run_script(tmp_path, "import keras\n" + body + "\nprint('after training')\n",
                               "--steps", "5", "--bound-ms", "10",
                               FAKE_STEP_S="0.03")
    run = final["run"]
    assert run["status"] == "ok" and run["bound"] is True and run["bound_limit_ms"] == 10.0
    assert run["step_time_ms"]["n"] == 1 and run["step_time_ms"]["median"] >= 25.0
    assert run["workload"]["stop_reason"] == "slow_step_bound" and run["workload"]["ended"] == "stopped"
    assert "after training" not in log


@pytest.mark.parametrize("loop", ["fit", "train_on_batch"])
def test_a_first_step_beyond_the_first_step_bound_ends_the_run_after_it(tmp_path: Path, loop: str) -> None:
    body = {"fit": "keras.Model().fit(epochs=5, steps_per_epoch=10)",
            "train_on_batch": "m = keras.Model()\nfor _ in range(50):\n    m.train_on_batch(None, None)"}[loop]
    final, log, _ = run_script(tmp_path, "import keras\n" + body + "\nprint('after training')\n",
                               "--steps", "5", "--bound-ms", "10", "--first-bound-ms", "20", FAKE_STEP_S="0.03")
    run = final["run"]
    assert run["status"] == "ok" and run["bound"] is True and run["bound_on"] == "first_step"
    assert run["bound_limit_ms"] == 20.0 and run["stop_reason"] == "slow_step_bound"
    assert run["step_time_ms"]["n"] == 1 and run["step_time_ms"]["median"] == run["first_step_ms"] >= 25.0
    assert run["warmup_step_ms"] == [run["first_step_ms"]]
    assert run["workload"]["ended"] == "stopped" and "after training" not in log
    # Under it, the first step is warm-up as before and the second step meets the steady bound.
    final, _, _ = run_script(tmp_path, "import keras\n" + body + "\n", "--steps", "5", "--bound-ms", "10",
                             "--first-bound-ms", "5000", FAKE_STEP_S="0.03")
    run = final["run"]
    assert run["bound"] is True and run["bound_on"] == "steady_step" and run["bound_limit_ms"] == 10.0
    assert len(run["warmup_step_ms"]) == 2


def test_a_profiled_window_follows_the_measured_steps_and_leaves_the_log_to_the_script(tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    final, log, _ = run_script(tmp_path, FIT, "--steps", "4", "--profile-dir", str(profile),
                               "--profile-steps", "2", args=("--epochs", "3"))
    run = final["run"]
    # Measured steps first, then the window's two, kept apart from them.
    assert run["step_time_ms"]["n"] == 4 and len(run["window_step_ms"]) == 2
    assert run["profile"]["window"] == {**run["profile"]["window"], "kind": "after_timing", "steps": 2}
    assert run["profile"]["backend"] == "fake" and run["profile"]["onednn"] is False


def test_a_window_cut_short_by_the_end_of_the_script_is_closed_with_what_it_has(tmp_path: Path) -> None:
    body = """
        import keras
        model = keras.Model()
        for _ in range(6):
            model.train_on_batch(None, None)
    """
    final, _, _ = run_script(tmp_path, body, "--steps", "3", "--profile-dir", str(tmp_path / "profile"),
                             "--profile-steps", "3")
    run = final["run"]
    assert run["status"] == "ok" and run["step_time_ms"]["n"] == 3
    assert len(run["window_step_ms"]) == 1


@pytest.mark.parametrize("variant", ["xla", "onednn_off", "tf32_off"])
def test_an_experiment_that_does_not_apply_to_the_scripts_backend_is_skipped_with_why(
        tmp_path: Path, variant: str) -> None:
    final, _, _ = run_script(tmp_path, FIT, "--steps", "3", "--variant", variant)
    assert final["event"] == "error" and final["status"] == "skipped"
    assert final["error"].startswith(variant + ":")


def test_an_experiment_that_rewrites_the_model_is_no_script_variant(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(RUNNER), "--precision", "float32", "--log", str(tmp_path / "l"),
                           "--workdir", str(tmp_path), "--variant", "channels_padded", "--", "train.py"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "invalid choice: 'channels_padded'" in proc.stderr


FAKE_TF1 = Path(__file__).resolve().parent / "fake_tf1"


def test_tf_keras_of_tensorflow_1_is_hooked_like_any_keras(tmp_path: Path) -> None:
    """Before TensorFlow 2.6, tf.keras is TensorFlow's own copy (tensorflow.python.keras): a script that
    trains with tf.keras gets its precision and its timing callback as with the keras package."""
    body = """
        import tensorflow as tf
        print("floatx", tf.keras.backend.floatx())
        tf.keras.Model().fit(epochs=3, steps_per_epoch=4)
    """
    final, log, _ = run_script(tmp_path, body, "--steps", "5", precision="float16",
                               PYTHONPATH=os.pathsep.join([str(FAKE_TF1), str(FAKE_KERAS)]))
    run = final["run"]
    assert run["status"] == "ok" and run["step_time_ms"]["n"] == 5 and "floatx float16" in log
    assert run["workload"]["keras_module"] == "tensorflow.keras" and run["workload"]["api"] == ["fit"]
    # Called back once TensorFlow had loaded, not half-way through its import (when it has no __version__ yet).
    assert run["software"]["tensorflow"] == "1.13.1" and run["software"]["keras"] == "2.2.4-tf"


def test_a_keras_that_imports_tensorflow_1_stays_the_scripts_keras(tmp_path: Path) -> None:
    """Keras 2.2.4 imports TensorFlow 1.13, which imports its own tf.keras before its import ends: the script's
    Keras is the one it imported, and tf.keras gets the precision too, once TensorFlow has loaded."""
    body = """
        import keras
        print("floatx", keras.backend.floatx())
        keras.Model().fit(epochs=3, steps_per_epoch=4)
    """
    final, log, _ = run_script(tmp_path, body, "--steps", "3", precision="float16", FAKE_KERAS_IMPORTS_TENSORFLOW="1",
                               PYTHONPATH=os.pathsep.join([str(FAKE_TF1), str(FAKE_KERAS)]))
    assert final["event"] == "result", final
    run = final["run"]
    assert run["workload"]["keras_module"] == "keras" and run["keras_config"]["floatx"] == "float16"
    assert run["step_time_ms"]["n"] == 3 and "floatx float16" in log


def test_tensorflows_own_keras_copy_is_left_alone_from_2_6(tmp_path: Path) -> None:
    body = """
        import tensorflow as tf
        import keras
        keras.Model().fit(epochs=3, steps_per_epoch=4)
    """
    # TensorFlow 2.15's copy would not have floatx float16: judged as the script's Keras, the run would fail.
    final, _, _ = run_script(tmp_path, body, "--steps", "3", precision="float16", FAKE_TF_VERSION="2.15.0",
                             FAKE_TF_KERAS_FLOATX="float32",
                             PYTHONPATH=os.pathsep.join([str(FAKE_TF1), str(FAKE_KERAS)]))
    assert final["event"] == "result", final
    assert final["run"]["workload"]["keras_module"] == "keras" and final["run"]["keras_config"]["floatx"] == "float16"


# ---------------------------------------------------------------- a failure at the user's line, steps kept, copies

def test_a_failure_names_the_users_own_deepest_line_not_the_runners(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "blocks.py").write_text(
        "def sample(z_mean, epsilon):\n"
        "    return z_mean *   epsilon.missing  # the line of the user\n")
    body = """
        import blocks
        blocks.sample(1.0, 2.0)
    """
    final, _, _ = run_script(tmp_path, body)
    failure = final["script_failure"]
    assert final["event"] == "error" and failure["kind"] == "exception"
    assert failure["location"] == {"file": "blocks.py", "line": 2,
                                   "code": "return z_mean * epsilon.missing"}


def test_a_traced_functions_error_is_placed_at_the_line_its_message_lists(tmp_path: Path) -> None:
    body = """
        def g(x, y):
            return x + y
        raise TypeError('in user code:\\n\\n    File "%s", line 3, in g  *\\n        return x + y\\n\\n'
                        '    TypeError: Tensors in list passed to \\'values\\' of \\'ConcatV2\\' Op have types '
                        '[bfloat16, float32] that don\\'t all match.' % __file__)
    """
    final, _, _ = run_script(tmp_path, body, precision="mixed_bfloat16")
    assert final["script_failure"]["location"] == {"file": "train.py", "line": 3, "code": "return x + y"}


def test_steps_measured_before_a_later_crash_are_kept_and_the_run_says_how_it_ended(tmp_path: Path) -> None:
    body = """
        import keras

        class BreaksLate(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if batch == 8:
                    raise RuntimeError("monitoring hook lost its connection")

        keras.Model().fit(epochs=1, steps_per_epoch=12, callbacks=[BreaksLate()])
    """
    final, log, _ = run_script(tmp_path, body, "--steps", "20", "--profile-dir", str(tmp_path / "profile"))
    assert final["event"] == "result", final
    run = final["run"]
    workload = run["workload"]
    assert run["status"] == "ok" and run["step_time_ms"]["n"] >= 5
    assert workload["ended"] == "raised" and workload["stop_reason"] == "script_raised"
    assert workload["ended_by"]["exception"] == "RuntimeError"
    assert workload["ended_by"]["message"] == "monitoring hook lost its connection"
    assert workload["ended_by"]["location"]["file"] == "train.py" and workload["ended_by"]["location"]["line"] == 7
    assert any("raised RuntimeError at train.py:7" in note and "kept" in note for note in workload["notes"])
    assert "Traceback (most recent call last):" in log  # the script's log has what Python would have printed


def test_a_crash_before_three_measured_steps_is_still_a_failure(tmp_path: Path) -> None:
    body = """
        import keras

        class BreaksEarly(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if batch == 2:
                    raise RuntimeError("broke early")

        keras.Model().fit(epochs=1, steps_per_epoch=12, callbacks=[BreaksEarly()])
    """
    final, _, _ = run_script(tmp_path, body, "--steps", "20")
    assert final["event"] == "error" and final["error"] == "RuntimeError: broke early"
    assert final["script_failure"]["location"]["line"] == 7


def test_a_copied_in_file_is_read_as_the_users_and_written_as_a_copy(tmp_path: Path) -> None:
    users = tmp_path / "mine" / "ckpt.txt"
    users.parent.mkdir()
    users.write_text("the user's checkpoint\n")
    body = """
        import sys
        print("read", open(sys.argv[1]).read().strip())
        with open(sys.argv[1], "w") as fh:
            fh.write("overwritten by the script")
    """
    final, log, workdir = run_script(tmp_path, body, "--copy-in", f"models/ckpt.txt={users}",
                                     args=("models/ckpt.txt",))
    assert "read the user's checkpoint" in log
    assert users.read_text() == "the user's checkpoint\n"
    assert (workdir / "models" / "ckpt.txt").read_text() == "overwritten by the script"
