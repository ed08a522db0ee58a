"""A CPU where 16 bits are pathological, on any CPU: the slow-step bound forced.

On an Intel Xeon with AVX512-FP16 and AMX-BF16, TensorFlow's oneDNN runs the 16-bit convolutions' weight gradients
with its reference kernel (20-30 s a step against 150 ms in float32), so every float16 and mixed_float16 run is cut
by the slow-step bound and left out of the interleaved rounds. A multiple of 0.1 puts the steady bound at a tenth of
float32's step and the first-step bound at float32's first step plus that tenth, so every 16-bit run takes that
branch here too, whatever the CPU: the tests that pass these variables assert what a diagnose does with cut runs.
Which step ends a forced run depends on the CPU: its first, where the 16-bit first step is longer than float32's
first step plus a tenth of float32's step (usual: 16 bits run slower on a CPU), else its second (`bound_on`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

# engines/base.py SLOW_STEP_MULTIPLE_ENV: the bound is min(multiple, ...) x float32's step.
FORCED_CUT = {"FP16DOCTOR_SLOW_STEP_MULTIPLE": "0.1"}


def forced_cut_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment with the slow-step bound forced (for a subprocess or a Slurm job's environment)."""
    return {**(os.environ if base is None else base), **FORCED_CUT}


def is_cut(run: Mapping[str, Any]) -> bool:
    """A run the slow-step bound ended: its one measured step is a bound on the slowdown."""
    return bool(run.get("bound")) and run.get("stop_reason") == "slow_step_bound"


def cut_on_first_step(run: Mapping[str, Any]) -> bool:
    """A cut run whose first step met the first-step bound (its one step is its first), not a later step."""
    assert run.get("bound_on") in ("first_step", "steady_step"), run.get("bound_on")
    return run["bound_on"] == "first_step"


def assert_cut_window(run: Mapping[str, Any], ops: Mapping[str, Any]) -> None:
    """A cut run is profiled on the step that met the bound: its first step (`first_step`), or the later warm-up step
    (`bound_step`), one step either way, and it ran no other warm-up step after that one."""
    first = cut_on_first_step(run)
    assert ops["window"]["kind"] == ("first_step" if first else "bound_step"), (run["bound_on"], ops["window"])
    assert ops["window"]["steps"] == 1
    assert len(run["warmup_step_ms"]) == (1 if first else 2), run["warmup_step_ms"]
    assert run["warmup_step_ms"][0] == run["first_step_ms"]


def assert_cut_and_said(run: Mapping[str, Any]) -> None:
    """What a cut run must carry on any CPU: its one step, the bound it passed, the window it was profiled on, and
    why it is not in the interleaved rounds."""
    assert is_cut(run), run.get("stop_reason")
    step = run["step_time_ms"]
    bound = run["slow_step_bound"]
    limit = bound["first_step_limit_ms"] if cut_on_first_step(run) else bound["limit_ms"]
    assert run["bound_limit_ms"] == limit and step["n"] == 1 and step["median"] > limit
    if cut_on_first_step(run):
        # The first step, one-time work included, against float32's first step plus the whole steady bound.
        assert step["median"] == run["first_step_ms"] > bound["float32_first_step_ms"] + bound["limit_ms"]
    assert "design" not in step and "rounds" not in step  # no paired rounds behind it
    assert "slow-step bound" in run["rounds_left_out"], run.get("rounds_left_out")
