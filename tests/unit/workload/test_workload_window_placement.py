"""Where the profiled window goes: clear of an epoch's first step, where the time between two epochs
(the data iterator torn down and rebuilt) runs in no op and would read as time no op accounts for."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

WORKLOAD_DIR = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"
sys.path.insert(0, str(WORKLOAD_DIR))  # the workload's modules import each other from beside themselves
import timing  # noqa: E402
from window import StepHooks, epoch_position, window_placement  # noqa: E402


@pytest.mark.parametrize(("next_in_epoch", "per_epoch", "window", "left", "expected", "clear"), [
    (1, 4, 2, 50, (0, 2), True),      # room in this epoch: now
    (2, 4, 2, 50, (0, 2), True),
    (3, 4, 2, 50, (2, 2), True),      # the window would reach the next epoch's first step: wait past it
    (4, 4, 2, 50, (1, 2), True),      # the next step begins an epoch: leave it out
    (8, 8, 2, 50, (1, 2), True),
    (7, 8, 2, 50, (2, 2), True),
    (4, 4, 2, 2, (0, 2), False),      # the fit call ends too soon to wait: now, as it is
    (1, 2, 2, 50, (0, 1), True),      # two steps an epoch: one step, the second
    (2, 2, 2, 50, (1, 1), True),
    (1, 1, 2, 50, (0, 2), False),     # every step begins an epoch: nothing to avoid
    (None, 4, 2, 50, (0, 2), False),  # a loop that does not say where it is
    (4, 4, 2, None, (0, 2), False),
])
def test_the_window_is_placed_clear_of_an_epochs_first_step(next_in_epoch: int | None, per_epoch: int,
                                                             window: int, left: int | None,
                                                             expected: tuple[int, int], clear: bool) -> None:
    delay, steps = window_placement(next_in_epoch, per_epoch, window, left)
    assert (delay, steps) == expected
    if clear:
        # No step in the window begins an epoch, and the fit call lasts to its end.
        assert next_in_epoch is not None and left is not None
        first = next_in_epoch + delay
        assert all((first + k) % per_epoch != 0 for k in range(steps)) and delay + steps <= left


def test_the_epoch_position_comes_from_what_keras_hands_its_callbacks() -> None:
    # Keras 3 and tf.keras: params carry steps and epochs.
    assert epoch_position(1, 2, {"epochs": 5, "steps": 4, "verbose": 0}) == (3, 4, 13)
    # Keras 2 fit on arrays: samples and batch size.
    assert epoch_position(0, 0, {"epochs": 2, "samples": 100, "batch_size": 32}) == (1, 4, 7)
    assert epoch_position(None, 3, {"steps": 4}) == (4, 4, None)
    assert epoch_position(0, 1, {"steps": None}) is None
    assert epoch_position(0, None, {"steps": 4}) is None
    assert epoch_position(0, 1, None) is None


class _Profiler:
    """Records when the window starts and stops, in steps."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self.model = None
        self.epoch_start = False
        self.events: list[tuple[str, int]] = []
        self.kinds: list[str] = []  # the window each event was for
        self.step = 0

    def after_step(self) -> None:
        self.step += 1

    def start(self, kind: str, clock: Any) -> None:
        self.kind = kind
        self.events.append(("start", self.step))
        self.kinds.append(kind)

    def stop(self, steps: int, clock: Any) -> None:
        self.events.append(("stop", self.step))
        self.kinds.append(str(self.kind))
        self.kind = None


def _train(per_epoch: int, epochs: int, window: int = 2,
           step_s: float = 0.1) -> tuple[Any, _Profiler, list[int], int]:
    """A fit loop of `epochs` x `per_epoch` steps; an epoch's first step takes 1 s more (the iterator's rebuild)."""
    clock = [0.0]
    timer = timing.StepTimer(warmup_steps=1, min_steps=4, max_steps=100, max_measure_s=1e9, tolerance=0.05,
                         window_steps=window, clock=lambda: clock[0])
    profiler = _Profiler()
    hooks = StepHooks(timer, profiler)
    hooks.train_begin(None)
    profiled: list[int] = []
    steps = 0
    params = {"epochs": epochs, "steps": per_epoch}
    for epoch in range(epochs):
        hooks.epoch_begin(epoch)
        for batch in range(per_epoch):
            clock[0] += step_s + (1.0 if batch == 0 and epoch else 0.0)
            steps += 1
            if profiler.kind == "after_timing":
                profiled.append(batch)
            if hooks.step_end(None, {"loss": 0.5}, batch, params):
                return timer, profiler, profiled, steps
    hooks.train_end()
    return timer, profiler, profiled, steps


@pytest.mark.parametrize("per_epoch", [3, 4, 5, 8])
def test_the_window_holds_no_epochs_first_step_and_the_step_left_out_is_in_no_timing(
                                                                                     per_epoch: int) -> None:
    timer, profiler, profiled, steps = _train(per_epoch, epochs=10)
    assert timer.done and len(timer.window_ms) == 2 and len(profiled) == 2
    assert 0 not in profiled  # no epoch's first step in the window
    assert all(abs(ms - 100.0) < 1e-6 for ms in timer.window_ms)
    assert not profiler.epoch_start
    # The steps waited through (at most two here) are in neither the timed steps nor the window.
    timed = len(timer.warmup_ms) + len(timer.step_ms)
    assert [kind for kind, _ in profiler.events] == ["start", "stop"]
    started = profiler.events[0][1]
    assert timed <= started <= timed + 2 and steps == started + 2


def test_where_an_epoch_is_one_step_the_window_says_it_holds_an_epochs_first_step() -> None:
    timer, profiler, _, _ = _train(per_epoch=1, epochs=20)
    assert timer.done and len(timer.window_ms) == 1  # every step is an epoch's first, 1.1 s: one is a window
    assert profiler.epoch_start


def _unplaced(step_s: float) -> tuple[Any, _Profiler, int]:
    """A loop that gives no epoch position: one warm-up step, then steps of `step_s` until the timer is done."""
    clock = [0.0]
    timer = timing.StepTimer(warmup_steps=1, min_steps=4, max_steps=100, max_measure_s=1e9, tolerance=0.05,
                             window_steps=2, clock=lambda: clock[0])
    profiler = _Profiler()
    hooks = StepHooks(timer, profiler)
    hooks.train_begin(None)
    steps = 0
    while not timer.done and steps < 20:
        clock[0] += step_s
        steps += 1
        hooks.step_end(None, {"loss": 0.5})
    return timer, profiler, steps


def test_a_loop_that_gives_no_position_profiles_the_next_steps_as_before() -> None:
    _, profiler, steps = _unplaced(0.1)
    # One warm-up and four timed steps, then the next two, profiled.
    assert steps == 7 and profiler.events == [("start", 5), ("stop", 7)]


@pytest.mark.parametrize(("step_s", "window"), [(0.1, 2), (0.6, 2), (1.0, 1), (2.5, 1)])
def test_a_run_whose_steps_take_a_second_or_more_profiles_one(step_s: float, window: int) -> None:
    """protocol.window_steps: the window is aimed at a second of steps, the size's profile_steps at most."""
    timer, profiler, _ = _unplaced(step_s)
    assert len(timer.window_ms) == window and profiler.events == [("start", 5), ("stop", 5 + window)]


def _warmup(steps_ms: list[float], warmup_steps: int = 2,
            first_bound_ms: float | None = None) -> tuple[Any, Any, _Profiler]:
    clock = [0.0]
    timer = timing.StepTimer(warmup_steps=warmup_steps, min_steps=4, max_steps=100, max_measure_s=1e9, tolerance=0.05,
                         bound_ms=1000.0, window_steps=2, clock=lambda: clock[0], first_bound_ms=first_bound_ms)
    profiler = _Profiler()
    hooks = StepHooks(timer, profiler)
    hooks.train_begin(None)
    for ms in steps_ms:
        clock[0] += ms / 1000.0
        if hooks.step_end(None, {"loss": 0.5}):
            break
    return timer, hooks, profiler


def test_a_run_cut_short_by_a_later_warmup_step_is_profiled_on_that_step() -> None:
    """The first step (tracing, autotuning) stays under its own allowance; the second meets the bound: that step
    is the measurement, so it is the profiled window, not the first with its tracing."""
    timer, hooks, profiler = _warmup([2500.0, 1500.0])
    assert timer.bound and timer.step_ms == [1500.0] and timer.first_step_ms == 2500.0
    assert [e for e, _ in profiler.events] == ["start", "stop", "start", "stop"]
    assert profiler.kinds == ["first_step", "first_step", "bound_step", "bound_step"]
    assert hooks.window_kind() == "bound_step"


def test_a_run_cut_short_by_its_first_steady_step_keeps_that_step_as_its_window() -> None:
    # The first step (tracing) never ends a run, however slow: the second, steady one does, and is the window.
    timer, hooks, profiler = _warmup([3500.0, 3500.0])
    assert timer.bound and hooks.window_kind() == "bound_step"
    assert profiler.kinds == ["first_step", "first_step", "bound_step", "bound_step"]


def test_warmup_windows_of_a_run_that_is_not_cut_short_give_way_to_the_window_after_timing() -> None:
    timer, hooks, profiler = _warmup([2500.0, 500.0] + [400.0] * 30)
    assert not timer.bound and timer.done and hooks.window_kind() == "after_timing"
    assert profiler.kinds[:4] == ["first_step", "first_step", "bound_step", "bound_step"]
    assert profiler.kinds[-2:] == ["after_timing", "after_timing"]


def test_a_run_cut_short_by_its_first_step_is_profiled_on_that_step_and_says_so() -> None:
    """Past the first-step bound the first step is the run's one step: its window (profiled, as every first step of a
    run that may be bound) stands for the run, no other step runs, and the result says which bound was met."""
    timer, hooks, profiler = _warmup([9000.0, 9000.0, 9000.0], first_bound_ms=5000.0)
    assert timer.bound and timer.step_ms == [9000.0] and timer.warmup_ms == [9000.0]
    assert profiler.kinds == ["first_step", "first_step"] and profiler.step == 1
    assert hooks.window_kind() == "first_step"
    hooks.profiler = None  # the fields the record takes from the timer, without the profile's
    assert hooks.result_fields() == {"bound": True, "bound_limit_ms": 5000.0, "bound_on": "first_step"}
    later, later_hooks, _ = _warmup([2500.0, 1500.0], first_bound_ms=5000.0)  # under it: the second step decides
    later_hooks.profiler = None
    assert later_hooks.result_fields() == {"bound": True, "bound_limit_ms": 1000.0, "bound_on": "steady_step"}
