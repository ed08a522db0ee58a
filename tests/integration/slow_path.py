"""A CPU where 16 bits are pathological, on any CPU: the slow-step bound forced.

On an Intel Xeon with AVX512-FP16 and AMX-BF16, TensorFlow's oneDNN runs the 16-bit convolutions' weight gradients
with its reference kernel (20-30 s a step against 150 ms in float32), so every float16 and mixed_float16 run is cut
by the slow-step bound after its second step and left out of the interleaved rounds. A multiple of 0.1 puts the
bound at a tenth of float32's step, so every 16-bit run takes that branch here too, whatever the CPU: the tests that
pass these variables assert what a diagnose does with cut runs.
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


def assert_cut_and_said(run: Mapping[str, Any]) -> None:
    """What a cut run must carry on any CPU: its one step, the bound it passed, the window it was profiled on, and
    why it is not in the interleaved rounds."""
    assert is_cut(run), run.get("stop_reason")
    step = run["step_time_ms"]
    assert step["n"] == 1 and step["median"] > run["slow_step_bound"]["limit_ms"]
    assert "design" not in step and "rounds" not in step  # no paired rounds behind it
    assert "slow-step bound" in run["rounds_left_out"], run.get("rounds_left_out")
