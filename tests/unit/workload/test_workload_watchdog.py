"""The step watchdog (workload/step_watchdog.py) and the hooks that arm it (window.StepHooks): a step past the slow-step
bound is ended inside, at the bound, only where the op source survives that; it is recorded as censored."""

from __future__ import annotations

import importlib
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

WORKLOAD = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"


def load(name: str) -> Any:
    if str(WORKLOAD) not in sys.path:  # the workload's modules import each other from beside themselves
        sys.path.insert(0, str(WORKLOAD))
    return importlib.import_module(name)


class Exited(Exception):
    pass


def timer(bound_ms: float | None = 50.0, warmup_steps: int = 2) -> Any:
    return load("timing").StepTimer(warmup_steps, 3, 10, 60.0, 0.05, bound_ms=bound_ms)


def test_the_bound_judges_the_steady_steps_before_any_measured_one() -> None:
    """The steps end_step holds against the bound, and no other: not the first (tracing), not a measured one."""
    t = timer(warmup_steps=2)
    t.begin()
    assert not t.judges_next_step()  # the first step
    t.end_step({"loss": 1.0})
    assert t.judges_next_step()  # the second warm-up step
    t.end_step({"loss": 1.0})
    assert not t.judges_next_step()  # measured steps are timed, never cut
    one = timer(warmup_steps=1)
    one.begin()
    one.end_step({"loss": 1.0})
    assert one.judges_next_step()  # no warm-up after the first: the first steady step is judged
    free = timer(bound_ms=None)
    free.begin()
    free.end_step({"loss": 1.0})
    assert not free.judges_next_step()


def test_the_first_step_bound_is_judged_after_the_first_step_never_inside_it() -> None:
    """The watchdog is never armed for the first step, whatever its bound: one-time work in it has no place in a cut
    step's ops. A first step past its bound ends the run after it, and nothing is armed for a step that will not run."""
    t = load("timing").StepTimer(2, 3, 10, 60.0, 0.05, bound_ms=50.0, first_bound_ms=400.0)
    clock = [0.0]
    t.clock = lambda: clock[0]
    t.begin()
    assert not t.judges_next_step()
    clock[0] += 0.5
    assert t.end_step({"loss": 1.0}) is True
    assert t.bound_on == "first_step" and not t.cut and not t.judges_next_step()
    under = load("timing").StepTimer(2, 3, 10, 60.0, 0.05, bound_ms=50.0, first_bound_ms=400.0)
    under.clock = lambda: clock[0]
    under.begin()
    clock[0] += 0.3
    assert under.end_step({"loss": 1.0}) is False
    assert under.judges_next_step()  # the second step, as without a first-step bound
    under.cut_in_step(52.5)
    assert under.bound_on == "steady_step" and under.bound_limit_ms == 50.0


def test_a_step_cut_inside_is_the_one_censored_measurement(capsys: pytest.CaptureFixture[str]) -> None:
    t = timer()
    t.begin()
    t.end_step({"loss": 1.0})
    t.cut_in_step(52.5)
    assert (t.step_ms, t.bound, t.cut, t.done, t.stop_reason) == ([52.5], True, True, True, "slow_step_bound")
    assert t.warmup_ms[-1] == 52.5 and t.bound_limit_ms == 50.0
    assert '"cut_in_step": true' in capsys.readouterr().out


def test_the_watchdog_fires_at_the_bound_and_exits_after_the_report() -> None:
    reported: list[float] = []
    exits: list[int] = []
    dog = load("step_watchdog").StepWatchdog(time.perf_counter, reported.append, exits.append)
    dog.arm(time.perf_counter(), 30.0)
    deadline = time.perf_counter() + 5
    while not exits and time.perf_counter() < deadline:
        time.sleep(0.005)
    assert exits == [0] and len(reported) == 1 and reported[0] >= 30.0


def test_a_step_that_ends_in_time_disarms_it() -> None:
    fired = threading.Event()
    dog = load("step_watchdog").StepWatchdog(time.perf_counter, lambda ms: fired.set(), lambda code: None)
    dog.arm(time.perf_counter(), 80.0)
    dog.disarm()
    assert not fired.wait(0.3)
    dog.arm(time.perf_counter(), 40.0)  # armed again for the next step, it fires for that one
    assert fired.wait(5)


class FakeProfiler:
    """The window profiler as the hooks see it; `names` says whether oneDNN would name the running kernel."""

    def __init__(self, names: bool) -> None:
        self.names = names
        self.kind: str | None = None
        self.t0 = 0.0
        self.cuts = 0
        self.model = None
        self.epoch_start = False

    def start(self, kind: str, clock: Any) -> None:
        self.kind = kind

    def stop(self, steps: int, clock: Any) -> None:
        self.kind = None

    def after_step(self) -> None:
        pass

    def cut(self, clock: Any) -> None:
        self.cuts += 1
        self.kind = None

    def names_running_kernel(self) -> bool:
        return self.names

    def result(self, kind: str) -> dict[str, Any]:
        return {"window": {"kind": kind}}


def hooks_after_first_step(names: bool) -> tuple[Any, Any, list[str]]:
    window = load("window")
    t = timer(bound_ms=200.0)
    profiler = FakeProfiler(names)
    hooks = window.StepHooks(t, profiler)
    said: list[str] = []
    hooks.cut_inside_steps(lambda: said.append("snapshot"), lambda: said.append("result"))
    hooks.watchdog.exit_process = lambda code: said.append(f"exit {code}")
    hooks.train_begin(SimpleNamespace())
    assert profiler.kind == "first_step"
    hooks.step_end(SimpleNamespace(), {"loss": 1.0})
    return hooks, profiler, said


def test_the_hooks_cut_a_profiled_step_inside_where_onednn_names_the_kernel() -> None:
    hooks, profiler, said = hooks_after_first_step(names=True)
    assert profiler.kind == "bound_step" and said == ["snapshot"]
    deadline = time.perf_counter() + 5
    while "exit 0" not in said and time.perf_counter() < deadline:
        time.sleep(0.005)
    assert said == ["snapshot", "result", "exit 0"] and profiler.cuts == 1
    fields = hooks.result_fields()
    assert fields["cut_in_step"] is True and fields["bound"] is True
    assert hooks.timer.step_ms[0] >= 200.0 and fields["profile"]["window"]["kind"] == "bound_step"


def test_elsewhere_the_step_runs_to_its_end_as_before() -> None:
    """No oneDNN name for the running kernel (TensorFlow's own kernels, TF1, torch, JAX): no watchdog armed, the
    step that passes the bound ends the run after it."""
    hooks, profiler, said = hooks_after_first_step(names=False)
    time.sleep(0.3)  # beyond the 200 ms bound
    assert said == [] and profiler.cuts == 0
    assert hooks.step_end(SimpleNamespace(), {"loss": 1.0}) is True
    assert hooks.timer.bound and not hooks.timer.cut and "cut_in_step" not in hooks.result_fields()


def test_a_report_that_fails_is_an_error_event_and_a_failed_exit(capsys: pytest.CaptureFixture[str]) -> None:
    def broken(ms: float) -> None:
        raise KeyError("model")

    exits: list[int] = []
    dog = load("step_watchdog").StepWatchdog(time.perf_counter, broken, exits.append)
    dog.arm(time.perf_counter(), 10.0)
    deadline = time.perf_counter() + 5
    while not exits and time.perf_counter() < deadline:
        time.sleep(0.005)
    assert exits == [1]
    out = capsys.readouterr().out
    assert '"event": "error"' in out and "reporting a step cut at the bound: KeyError" in out
