"""Outcome rules: what the measurement says happened (fp16_faster for the float16 family, bf16_faster for the
bfloat16 family), never a cause."""

from __future__ import annotations

from fp16doctor.analysis.context import BF16, Context, Pair
from fp16doctor.analysis.rules.common import (
    Finding,
    make_finding,
    roofline_estimates,
    stacks_of,
    where_of,
)
from fp16doctor.analysis.values import variant_words
from fp16doctor.workload.protocol import BF16 as BF16_FAMILY
from fp16doctor.workload.protocol import FP16, is_pure


def rule_fp16_faster(ctx: Context) -> Finding | None:
    """float16 or mixed_float16 measured faster than float32, as written or with a change a document measured."""
    return _faster("fp16_faster", ctx, [p for p in [*ctx.fp16_pairs(), *ctx.changed_pairs()]
                                        if p.faster and p.reduced.precision not in BF16])


def rule_bf16_faster(ctx: Context) -> Finding | None:
    """bfloat16 or mixed_bfloat16 measured faster than float32: the bfloat16 family's own outcome (fp16_faster's
    meaning stays the float16 family's)."""
    return _faster("bf16_faster", ctx, [p for p in [*ctx.pairs, *ctx.changed_pairs()]
                                        if p.faster and p.reduced.precision in BF16])


def _with(variant: str) -> str:
    """" with batches in memory": what a run that is not the script as written changed; "" for the script."""
    words = variant_words(variant)
    return f" with {words}" if words else ""


def _faster(fid: str, ctx: Context, faster: list[Pair]) -> Finding | None:
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
            evidence.append(f"best case on this GPU: {est.predicted_times()} ({est.note})")
    spread_known = any(r.p10_ms and r.p90_ms for p in faster for r in (p.fp32, p.reduced))
    recommendation = ""
    ideas = []
    if is_pure(best.reduced.precision, FP16) and best.reduced.advice_applies("weight_updates"):
        # Pure float16 weights and optimizer state are a training risk; inference has neither updates nor state.
        recommendation = "Pure float16 (floatx) risks the numerics of training; mixed_float16 keeps float32 weights."
        ideas = [{"precision": "mixed_float16", "why": "mixed precision keeps float32 weights with loss scaling",
                  "advice": "weight_updates"}]
    elif is_pure(best.reduced.precision, BF16_FAMILY) and best.reduced.advice_applies("weight_updates"):
        # bfloat16 keeps 8 bits of mantissa: pure bfloat16 weights lose updates smaller than 1/256 of a weight.
        recommendation = ("Pure bfloat16 weights lose small updates in training; mixed_bfloat16 keeps float32 "
                          "weights (no loss scaling needed).")
        ideas = [{"precision": "mixed_bfloat16", "why": "mixed precision keeps float32 weights",
                  "advice": "weight_updates"}]
    return make_finding(
        fid,
        f"{best.reduced.precision}{_with(best.reduced.variant)} is {best.shown.figure('than float32')}",
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


