"""How many steps a profiled window holds on the machine the tests run on (protocol.window_steps)."""

from __future__ import annotations

from collections.abc import Sequence

from fp16doctor.engines.spec import QUICK
from fp16doctor.workload.protocol import WINDOW_TARGET_S


def assert_window_sized(steps: int, window_ms: Sequence[float]) -> None:
    """The size's profile steps, or one where a step takes about a second or more: 16 bits on an AVX2-only CPU
    step in 1.8-2.1 s at the quick size. The window's own steps stand for the step the rule read before it (a
    warm-up's or the timed steps' median), so one step is taken where they took 80 % of the target or more."""
    assert steps == len(window_ms) or not window_ms, (steps, window_ms)
    step_ms = sorted(window_ms)[len(window_ms) // 2] if window_ms else 0.0
    assert steps == QUICK.profile_steps or (steps == 1 and step_ms >= 0.8 * WINDOW_TARGET_S * 1000.0), (
        steps, window_ms)
