"""Outcome rules: what the measurement says happened (fp16_faster), never a cause."""

from __future__ import annotations

from fp16doctor.analysis.context import Context
from fp16doctor.analysis.rules.common import (
    Finding,
    make_finding,
    roofline_estimates,
    stacks_of,
    where_of,
)


def rule_fp16_faster(ctx: Context) -> Finding | None:
    faster = [p for p in ctx.pairs if p.faster]
    if not faster:
        return None
    best = max(faster, key=lambda p: p.speedup)
    evidence = [p.describe() for p in sorted(faster, key=lambda p: -p.speedup)]
    for est in roofline_estimates(ctx):
        if (
            est.predicted_speedup
            and est.measured_speedup
            and (est.machine, est.stack) == (best.reduced.machine, best.reduced.stack)
            and est.precision == best.reduced.precision
        ):
            evidence.append(f"best case on this GPU: {est.predicted_speedup:.1f}x ({est.note})")
    spread_known = any(r.p10_ms and r.p90_ms for p in faster for r in (p.fp32, p.reduced))
    recommendation = ""
    ideas = []
    if best.reduced.precision == "float16":
        recommendation = "Pure float16 (floatx) risks the numerics of training; mixed_float16 keeps float32 weights."
        ideas = [{"precision": "mixed_float16", "why": "mixed precision keeps float32 weights with loss scaling"}]
    return make_finding(
        "fp16_faster",
        f"{best.reduced.precision} is {best.speedup:.2f}x faster than float32",
        "info",
        0.9 if spread_known else 0.8,
        evidence,
        recommendation,
        remedy_ideas=ideas,
        speedup=round(best.speedup, 3),
        precision=best.reduced.precision,
        stacks=stacks_of([p.reduced for p in faster]),
        where=where_of([p.reduced for p in faster]),
    )


