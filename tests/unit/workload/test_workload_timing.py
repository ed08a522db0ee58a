"""The step timer's stop rule, the slow-step bound and the profiled window's place; the workload's private
Keras home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

WORKLOAD_DIR = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"
sys.path.insert(0, str(WORKLOAD_DIR))  # the workload's modules import each other from beside themselves
import timing  # noqa: E402


def _drive(timer, step_s: list[float]) -> int | None:
    """Feed the timer one step per entry (seconds), as Keras' on_batch_end would; return the stop step."""
    clock = [0.0]
    timer.clock = lambda: clock[0]
    timer.begin()
    for i, seconds in enumerate(step_s):
        clock[0] += seconds
        if timer.end_step({"loss": 0.69}):
            return i
    return None


def test_step_timer_excludes_warmup_and_stops_once_the_median_is_stable() -> None:
    timer = timing.StepTimer(warmup_steps=2, min_steps=6, max_steps=100, max_measure_s=1e9, tolerance=0.05)
    stopped = _drive(timer, [4.2, 0.3] + [0.1] * 20)
    assert timer.first_step_ms == 4200.0
    assert [round(v, 6) for v in timer.warmup_ms] == [4200.0, 300.0]
    assert timer.stop_reason == "stable" and stopped == 7
    assert len(timer.step_ms) == 6 and all(abs(v - 100.0) < 1e-6 for v in timer.step_ms)


def test_step_timer_keeps_measuring_while_the_median_drifts() -> None:
    timer = timing.StepTimer(warmup_steps=1, min_steps=4, max_steps=12, max_measure_s=1e9, tolerance=0.05)
    # Steps slow down steadily (thermal throttling, say): never stable, so it runs to max_steps.
    _drive(timer, [2.0] + [0.1 * (1.2 ** i) for i in range(30)])
    assert timer.stop_reason == "max_steps" and len(timer.step_ms) == 12


def test_step_timer_time_budget_needs_three_steps() -> None:
    timer = timing.StepTimer(warmup_steps=1, min_steps=10, max_steps=100, max_measure_s=5.0, tolerance=0.0)
    _drive(timer, [3.0, 9.0, 1.0, 1.0, 1.0])
    assert timer.stop_reason == "time_budget" and len(timer.step_ms) == 3


def test_the_private_keras_home_is_removed_when_the_workload_exits(tmp_path: Path) -> None:
    # Every run makes one; a diagnose must not leave a directory per run in the temporary folder.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import frameworks\n"
        "keras_dir, config = frameworks.prepare_keras_home('float16', 'tensorflow')\n"
        "print(keras_dir); assert config['floatx'] == 'float16'\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code, str(WORKLOAD_DIR)], capture_output=True, text=True,
                          env=env, check=True)
    keras_dir = Path(done.stdout.strip())
    assert keras_dir.parent.parent == tmp_path  # it was made where we looked
    assert list(tmp_path.iterdir()) == []


def test_a_first_step_beyond_the_bound_never_ends_the_run_the_next_steady_one_does() -> None:
    # The Xeon case: float32 130 ms/step (first step 2 s), float16 22 s per step. The first step pays tracing, so
    # a slowdown is judged on the second, a steady step like float32's median.
    timer = timing.StepTimer(warmup_steps=2, min_steps=5, max_steps=60, max_measure_s=8.0, tolerance=0.05,
                         bound_ms=5000.0, window_steps=2)
    stopped = _drive(timer, [22.0] * 10)
    assert stopped == 1 and timer.done
    assert timer.stop_reason == "slow_step_bound" and timer.bound and timer.bound_limit_ms == 5000.0
    assert timer.step_ms == [22000.0] and timer.first_step_ms == 22000.0 and timer.warmup_ms == [22000.0, 22000.0]
    assert timer.window_ms == []  # that step is the profiled window: no further steps
    assert timing.summary(timer.step_ms) == {"median": 22000.0, "p10": 22000.0, "p90": 22000.0, "n": 1}


def test_with_one_warmup_step_the_first_measured_step_is_the_one_judged() -> None:
    timer = timing.StepTimer(warmup_steps=1, min_steps=5, max_steps=60, max_measure_s=8.0, tolerance=0.05,
                         bound_ms=5000.0)
    assert _drive(timer, [22.0] * 10) == 1
    assert timer.bound and timer.step_ms == [22000.0] and timer.warmup_ms == [22000.0]


def test_a_later_warmup_step_beyond_the_bound_ends_warmup_and_the_run() -> None:
    # The first step (one-off costs) never ends a run; the second, the steady 16-bit step, does.
    timer = timing.StepTimer(warmup_steps=3, min_steps=5, max_steps=60, max_measure_s=8.0, tolerance=0.05,
                         bound_ms=5000.0)
    assert _drive(timer, [8.0, 6.0, 6.0, 6.0]) == 1
    assert timer.step_ms == [6000.0] and timer.warmup_ms == [8000.0, 6000.0]
    assert timer.stop_reason == "slow_step_bound"


def test_steps_under_the_bound_keep_the_statistical_rules() -> None:
    timer = timing.StepTimer(warmup_steps=2, min_steps=6, max_steps=100, max_measure_s=1e9, tolerance=0.05,
                         bound_ms=5000.0)
    stopped = _drive(timer, [4.2, 0.3] + [0.1] * 20)
    assert not timer.bound and timer.stop_reason == "stable" and stopped == 7 and len(timer.step_ms) == 6


def test_the_profiled_window_follows_the_timed_steps_and_stays_out_of_them() -> None:
    timer = timing.StepTimer(warmup_steps=1, min_steps=4, max_steps=100, max_measure_s=1e9, tolerance=0.05,
                         window_steps=2)
    stopped = _drive(timer, [2.0] + [0.1] * 4 + [0.5, 0.5] + [0.1] * 5)
    assert timer.stop_reason == "stable" and len(timer.step_ms) == 4
    assert stopped == 6 and [round(v) for v in timer.window_ms] == [500, 500]
    assert all(abs(v - 100.0) < 1e-6 for v in timer.step_ms)
    # Keras 2.0-era loops run on to the end of the epoch: later steps change nothing.
    assert timer.end_step({"loss": 0.5}) is True and len(timer.window_ms) == 2
