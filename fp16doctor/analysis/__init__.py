"""The analysis: a results document in, ranked findings out. Pure: no I/O, no framework import.

`analyse(doc)` runs one rule per finding id of CONTRACT.md (see `rules.py`) and ranks what they find:
critical before warning before info, then causes of the step time before advice (CAUSE_ORDER), then
by confidence. `roofline.estimate(doc)` gives the best-case fp32/fp16 step times the rules use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fp16doctor.analysis.context import build_context
from fp16doctor.analysis.rules import RULES

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
# Within one severity, causes that decide the step time come before advice about how fp16 is switched on.
CAUSE_ORDER = (
    "stack_incompatible_gpu", "no_fast_fp16_hardware", "numerics_unstable", "no_tensor_cores",
    "host_fp16_emulation", "input_pipeline_bound", "small_model_overhead", "pure_float16_floatx", "old_stack",
    "tensor_cores_not_eligible", "cast_overhead", "tf32_baseline", "measurement_warmup", "fp16_faster",
)


def analyse(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Ranked findings for one results document (any optional key may be missing)."""
    ctx = build_context(doc)
    findings = [f for f in (rule(ctx) for rule in RULES.values()) if f is not None]
    order = {fid: i for i, fid in enumerate(CAUSE_ORDER)}
    findings.sort(key=lambda f: (SEVERITY_RANK.get(f["severity"], 3), order.get(f["id"], 99),
                                 -f["confidence"]))
    for rank, finding in enumerate(findings, start=1):
        finding["rank"] = rank
    return findings


__all__ = ["analyse"]
