# -*- coding: utf-8 -*-
"""The step timer: each training step end to end, the stop rule, and the slow-step bound.

Runs in the target Python (down to 3.5): stdlib only.
"""
from __future__ import division, print_function

import math

from compat import perf_counter
from events import emit
from protocol import window_steps

# The median of the first and the second half of the steps this close: the measurement is stable.
STABLE_TOLERANCE = 0.05


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return None
    pos = (len(ordered) - 1) * q
    lo = int(math.floor(pos))
    hi = int(math.ceil(pos))
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summary(values):
    return {"median": round(percentile(values, 0.5), 3), "p10": round(percentile(values, 0.1), 3),
            "p90": round(percentile(values, 0.9), 3), "n": len(values)}


class StepTimer(object):
    """Times each training step end to end (input + compute), as the user's progress bar did.

    The loss is read as a Python float on every step, which also waits for the device, so an
    asynchronous backend cannot make a step look faster than it is.

    Slow-step bound: a steady step (any after the first, which pays tracing) longer than `bound_ms` ends the
    run after that step, which becomes its only measured step (`bound` = True), so a run that is hundreds of
    times slower than float32 costs two steps, not seven, and is still compared step for step with float32's.
    First-step bound: a first step longer than `first_bound_ms` (float32's first step plus the whole steady
    bound, and several times float32's first step: engines/spec.py) ends the run after that one step, its one
    measured step, one-time work included (`bound_on` = "first_step"; the analysis compares it with float32's
    first step), so a pathological run costs one step, not two.
    A step the watchdog (step_watchdog.py) ends at its bound, before it finishes (the first step at the first-step
    bound, a steady one at the steady bound), is recorded by `cut_in_step`: its time is censored, the step lasted at
    least that long (`cut` = True).

    Profiled window: with `window_steps`, once the measurement is done the run goes on for that many
    steps (fewer where its steps are long: protocol.window_steps), kept apart from the timed ones (`window_ms`); the
    caller profiles them.
    """

    def __init__(self, warmup_steps, min_steps, max_steps, max_measure_s, tolerance, clock=perf_counter,
                 bound_ms=None, window_steps=0, first_bound_ms=None):
        self.clock = clock
        self.warmup_steps = warmup_steps
        self.min_steps = min_steps
        self.max_steps = max_steps
        self.max_measure_s = max_measure_s
        self.tolerance = tolerance
        self.bound_ms = bound_ms
        self.first_bound_ms = first_bound_ms if bound_ms is not None else None
        self.window_steps = window_steps
        self.model = None
        self.start = None
        self.last = None
        self.measure_start = None
        self.first_step_ms = None
        self.warmup_ms = []
        self.step_ms = []
        self.window_ms = []
        self.losses = []
        self.stop_reason = None
        self.bound = False
        self.bound_limit_ms = None
        self.bound_on = None  # which step met the bound: "first_step" (one-time work in it) or "steady_step"
        self.cut = False  # the step that met the bound was ended inside it: its time is a lower bound
        self.in_window = False
        self.window_hold = 0  # steps to run, untimed and unprofiled, before the window's first
        self.done = False

    @property
    def may_be_bound(self):
        return self.bound_ms is not None

    def begin(self):
        self.start = self.last = self.clock()

    def train_begin(self):
        """A fit call begins (the built-in workload makes one)."""
        self.begin()

    def skip_time(self):
        """Leave out of the next step what ran since the last one (the profiler starting or stopping)."""
        self.last = self.clock()

    def end_step(self, logs):
        """Record one finished step; True when training should stop."""
        if self.done:
            # Keras 2.0-era loops honour stop_training only at the end of an epoch: ignore the rest.
            return True
        loss = (logs or {}).get("loss")
        loss = float(loss) if loss is not None else None  # waits for the device first
        now = self.clock()
        elapsed_ms = (now - self.last) * 1000.0
        self.last = now
        if self.in_window and self.window_hold > 0:
            self.window_hold -= 1
            emit("step", phase="before_window", ms=round(elapsed_ms, 3), loss=loss)
            return False
        if self.in_window:
            self.window_ms.append(elapsed_ms)
            emit("step", phase="window", index=len(self.window_ms) - 1, ms=round(elapsed_ms, 3), loss=loss)
            self.done = len(self.window_ms) >= self.window_steps
            return self.done
        if loss is not None:
            self.losses.append(loss)
        done = len(self.warmup_ms) + len(self.step_ms)
        if self.first_step_ms is None or len(self.warmup_ms) < self.warmup_steps:
            first = self.first_step_ms is None
            if first:
                self.first_step_ms = elapsed_ms
            self.warmup_ms.append(elapsed_ms)
            # The first step pays tracing and autotuning: only its own bound (far beyond float32's first step,
            # tracing included) ends a run there; later steps are judged like float32's median, steady.
            limit = self.first_bound_ms if first else self.bound_ms
            if limit is not None and elapsed_ms > limit:
                # Far beyond float32 already: this step is the measurement, a bound on the slowdown.
                return self._met_bound(elapsed_ms, limit, "first_step" if first else "steady_step", done, loss)
            emit("step", phase="warmup", index=done, ms=round(elapsed_ms, 3), loss=loss)
            return False
        if self.measure_start is None:
            self.measure_start = now - elapsed_ms / 1000.0
        if not self.step_ms and len(self.warmup_ms) == 1 and self.bound_ms is not None and elapsed_ms > self.bound_ms:
            # No warm-up step after the first: the first steady step is the one the bound judges.
            return self._met_bound(elapsed_ms, self.bound_ms, "steady_step", done, loss)
        self.step_ms.append(elapsed_ms)
        emit("step", phase="measure", index=done, ms=round(elapsed_ms, 3), loss=loss)
        if not self.should_stop(now):
            return False
        if self.window_steps > 0:
            self.in_window = True
            self.window_steps = window_steps(self.window_steps, percentile(self.step_ms, 0.5))  # fewer: long steps
            return False
        self.done = True
        return True

    def _met_bound(self, elapsed_ms, limit, on, index, loss):
        """The step just ended passed `limit`: it is the run's one measured step, and the run ends here."""
        self.step_ms = [elapsed_ms]
        self.bound = True
        self.bound_limit_ms = limit
        self.bound_on = on
        self.stop_reason = "slow_step_bound"
        self.done = True
        emit("step", phase="measure", index=index, ms=round(elapsed_ms, 3), loss=loss, bound=True,
             limit_ms=round(limit, 3), bound_on=on)
        return True

    def judges_next_step(self):
        """Whether the slow-step bound judges the step that starts now: a steady step before any measured one (the
        same steps end_step holds against `bound_ms`; the first step is judged after it ends, never inside)."""
        if self.bound_ms is None or self.done or self.in_window or self.first_step_ms is None or self.step_ms:
            return False
        return len(self.warmup_ms) < self.warmup_steps or len(self.warmup_ms) == 1

    def judges_first_step(self):
        """Whether the first-step bound judges the step that starts now: the run's first, where it has that bound."""
        return self.first_bound_ms is not None and self.first_step_ms is None and not self.done

    def cut_in_step(self, elapsed_ms):
        """The step that started at `last` was ended inside, `elapsed_ms` after it began, past its bound (the
        first-step bound for the first step, else the steady one): it is the run's one measured step, censored (it
        lasted at least that long)."""
        index = len(self.warmup_ms) + len(self.step_ms)
        first = self.first_step_ms is None
        if first:
            self.first_step_ms = elapsed_ms
        if len(self.warmup_ms) < self.warmup_steps:
            self.warmup_ms.append(elapsed_ms)  # as a warm-up step that meets the bound after it ends is kept
        self.step_ms = [elapsed_ms]
        self.bound = True
        self.cut = True
        self.bound_limit_ms = self.first_bound_ms if first else self.bound_ms
        self.bound_on = "first_step" if first else "steady_step"
        self.stop_reason = "slow_step_bound"
        self.done = True
        emit("step", phase="measure", index=index, ms=round(elapsed_ms, 3), loss=None, bound=True,
             limit_ms=round(self.bound_limit_ms, 3), bound_on=self.bound_on, cut_in_step=True)

    def should_stop(self, now):
        n = len(self.step_ms)
        if n >= self.max_steps:
            self.stop_reason = "max_steps"
            return True
        # The time budget ends a slow run once it has a median worth the name (3+ steps).
        if self.measure_start is not None and now - self.measure_start >= self.max_measure_s and n >= 3:
            self.stop_reason = "time_budget"
            return True
        if n >= self.min_steps:
            half = n // 2
            first = percentile(self.step_ms[:half], 0.5)
            second = percentile(self.step_ms[half:], 0.5)
            overall = percentile(self.step_ms, 0.5)
            if overall and abs(first - second) / overall <= self.tolerance:
                self.stop_reason = "stable"
                return True
        return False
