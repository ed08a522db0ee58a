"""One rule per finding id of docs/results-schema.md, grouped by family: pure functions from the read document to at
most one finding each. Which rules exist, and in what order, is the registry's (analysis/registry.py)."""

from __future__ import annotations

from collections.abc import Callable

from fp16doctor.analysis.context import Context
from fp16doctor.analysis.rules import hardware, host_input, numerics, outcome, overhead, stack
from fp16doctor.analysis.rules.common import Finding, make_finding

Rule = Callable[[Context], Finding | None]

RULES: dict[str, Rule] = {
    "no_fast_fp16_hardware": hardware.rule_no_fast_fp16_hardware,
    "no_tensor_cores": hardware.rule_no_tensor_cores,
    "tensor_cores_not_eligible": hardware.rule_tensor_cores_not_eligible,
    "tf32_baseline": hardware.rule_tf32_baseline,
    "input_pipeline_bound": host_input.rule_input_pipeline_bound,
    "host_fp16_emulation": host_input.rule_host_fp16_emulation,
    "cast_overhead": overhead.rule_cast_overhead,
    "small_model_overhead": overhead.rule_small_model_overhead,
    "measurement_warmup": overhead.rule_measurement_warmup,
    "old_stack": stack.rule_old_stack,
    "stack_incompatible_gpu": stack.rule_stack_incompatible_gpu,
    "pure_float16_floatx": numerics.rule_pure_float16_floatx,
    "numerics_unstable": numerics.rule_numerics_unstable,
    "fp16_faster": outcome.rule_fp16_faster,
}

__all__ = ["RULES", "Finding", "Rule", "make_finding"]
