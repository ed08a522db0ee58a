"""The step timer's stop rule, the slow-step bound and the profiled window's place; the workload's private
Keras home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_a_first_step_past_the_first_step_bound_ends_the_run_as_its_one_measured_step(
        capsys: pytest.CaptureFixture[str]) -> None:
    # The Xeon case: float32's first step 1.4 s, its median 150 ms (steady bound 5 s, first-step bound 7 s); float16's
    # first step 27.6 s is already the measurement: no second step of 24.5 s is needed to know the run is pathological.
    timer = timing.StepTimer(warmup_steps=2, min_steps=5, max_steps=60, max_measure_s=8.0, tolerance=0.05,
                             bound_ms=5000.0, first_bound_ms=7000.0, window_steps=2)
    assert _drive(timer, [27.6] * 10) == 0 and timer.done
    assert timer.stop_reason == "slow_step_bound" and timer.bound and not timer.cut
    assert timer.bound_limit_ms == 7000.0 and timer.bound_on == "first_step"
    assert timer.step_ms == [27600.0] and timer.first_step_ms == 27600.0 and timer.warmup_ms == [27600.0]
    assert timer.window_ms == [] and not timer.judges_next_step()
    assert timer.end_step({"loss": 0.5}) is True and timer.step_ms == [27600.0]  # a loop that runs on changes nothing
    events = [json.loads(line.split(" ", 1)[1]) for line in capsys.readouterr().out.splitlines() if '"step"' in line]
    assert len(events) == 1
    assert events[0]["bound"] is True and events[0]["bound_on"] == "first_step" and events[0]["limit_ms"] == 7000.0
    assert events[0]["index"] == 0 and events[0]["phase"] == "measure"


def test_a_first_step_under_the_first_step_bound_leaves_the_steady_bound_as_it_was() -> None:
    # Over the steady bound (5 s) but under the first-step bound (7 s): tracing, not pathology; the second step
    # decides, as before.
    timer = timing.StepTimer(warmup_steps=2, min_steps=5, max_steps=60, max_measure_s=8.0, tolerance=0.05,
                             bound_ms=5000.0, first_bound_ms=7000.0)
    assert _drive(timer, [6.5, 6.0, 6.0]) == 1
    assert timer.step_ms == [6000.0] and timer.warmup_ms == [6500.0, 6000.0]
    assert timer.bound_limit_ms == 5000.0 and timer.bound_on == "steady_step"
    fast = timing.StepTimer(warmup_steps=2, min_steps=6, max_steps=100, max_measure_s=1e9, tolerance=0.05,
                            bound_ms=5000.0, first_bound_ms=7000.0)
    assert _drive(fast, [6.5, 0.3] + [0.1] * 20) == 7  # under both bounds after the first: measured in full
    assert not fast.bound and fast.bound_on is None and fast.stop_reason == "stable"
    one = timing.StepTimer(warmup_steps=1, min_steps=5, max_steps=60, max_measure_s=8.0, tolerance=0.05,
                           bound_ms=5000.0, first_bound_ms=7000.0)
    assert _drive(one, [6.5, 6.0]) == 1  # one warm-up step: the first measured step is still judged
    assert one.step_ms == [6000.0] and one.warmup_ms == [6500.0] and one.bound_on == "steady_step"


def test_without_a_first_step_bound_the_first_step_never_ends_a_run() -> None:
    timer = timing.StepTimer(warmup_steps=2, min_steps=5, max_steps=60, max_measure_s=8.0, tolerance=0.05,
                             bound_ms=5000.0)
    assert _drive(timer, [27.6, 24.5]) == 1
    assert timer.step_ms == [24500.0] and timer.bound_on == "steady_step" and timer.bound_limit_ms == 5000.0
    # A first-step bound without the steady one (no float32 step to set it) is no bound at all.
    free = timing.StepTimer(warmup_steps=2, min_steps=6, max_steps=100, max_measure_s=1e9, tolerance=0.05,
                            first_bound_ms=1000.0)
    assert _drive(free, [27.6, 0.3] + [0.1] * 20) == 7 and not free.bound


def test_the_built_in_workload_reads_both_bounds_from_the_engines_command_line() -> None:
    import run_workload

    from fp16doctor.engines.spec import QUICK, RunSpec

    spec = RunSpec("host", "float16", "original", QUICK, reference_ms=150.0, reference_first_step_ms=1400.0)
    args = run_workload.parse_args(spec.workload_args())
    assert args.bound_ms == pytest.approx(spec.bound_ms) and args.first_bound_ms == pytest.approx(spec.first_bound_ms)
    unbound = run_workload.parse_args(RunSpec("host", "float32", "original", QUICK).workload_args())
    assert unbound.bound_ms is None and unbound.first_bound_ms is None
