"""Verdicts: one per machine, stack, variant and 16-bit precision, computed from the accounting. The report and
the terminal render these; they never choose a cause themselves."""

from __future__ import annotations

from typing import Any

from fp16doctor.analysis.causes import HALF, Accounting
from fp16doctor.analysis.registry import REGISTRY, SPEED_CAUSES
from fp16doctor.analysis.values import fmt_ms

Verdict = dict[str, Any]


def _ratio_phrase(acc: Accounting) -> tuple[str, str]:
    """("166x slower", "slower") from the measured medians; a cut-short run's ratio is a bound."""
    pair = acc.pair
    if not acc.significant:
        return "no faster or slower (the difference is inside the runs' spread)", "no_significant_difference"
    if acc.difference_ms > 0:
        bound = ">= " if pair.reduced.bound else ""
        return f"{bound}{pair.ratio:.2f}x slower", "slower"
    return f"{pair.speedup:.2f}x faster", "faster"


def _cause_phrase(cause: str) -> str:
    spec = REGISTRY.get(cause)
    title = spec.title if spec else cause
    return title[0].lower() + title[1:]


def verdict_for(acc: Accounting) -> Verdict:
    pair = acc.pair
    reduced, fp32 = pair.reduced, pair.fp32
    phrase, outcome = _ratio_phrase(acc)
    causes = [s for s in acc.shares if s.cause in SPEED_CAUSES]
    explained = sum(s.ms for s in causes)
    share = min(1.0, explained / acc.magnitude_ms) if acc.significant and acc.magnitude_ms else 0.0
    top = causes[0] if causes else None
    where = reduced.stack if reduced.machine == "host" else f"{reduced.stack} on {reduced.machine}"
    variant = "" if reduced.variant == "original" else f", {reduced.variant}"
    headline = f"{reduced.precision} is {phrase} than float32 on {where}{variant}"
    if outcome == "no_significant_difference":
        headline = f"{reduced.precision} is no faster or slower than float32 on {where}{variant} " \
                   "(the difference is inside the runs' spread)"
    elif top is not None:
        basis = {"measured_ops": "measured", "experiment": "confirmed by an experiment",
                 "estimate": "estimated"}[top.basis]
        how = "mostly" if top.ms >= HALF * acc.magnitude_ms else "partly"
        headline += (f": {how} because {_cause_phrase(top.cause)} ({basis}: {fmt_ms(top.ms)} of the "
                     f"{fmt_ms(acc.magnitude_ms)} difference)")
    else:
        headline += f"; no measured cause explains the {fmt_ms(acc.magnitude_ms)} difference"
    unexplained = max(0.0, acc.magnitude_ms - explained) if acc.significant else 0.0
    if acc.significant and top is not None and share < HALF:
        headline += f"; {fmt_ms(unexplained)} ({1 - share:.0%}) of it is unexplained"
    return {
        "machine": reduced.machine,
        "stack": reduced.stack,
        "variant": reduced.variant,
        "precision": reduced.precision,
        "ratio": round(pair.speedup, 4),
        "step_ms": reduced.step_ms,
        "fp32_step_ms": fp32.step_ms,
        "difference_ms": round(acc.difference_ms, 3),
        "outcome": outcome,
        "bound": reduced.bound,
        "cause": top.cause if top else None,
        "basis": top.basis if top else None,
        "explained_share": round(share, 3),
        "unexplained_ms": round(unexplained, 3),
        "causes": [{"id": s.cause, "explains_ms": round(s.ms, 3), "basis": s.basis,
                    **({"confirmed_by": s.confirmed_by} if s.confirmed_by else {})} for s in causes],
        "headline": headline,
    }


def verdicts(accountings: list[Accounting]) -> list[Verdict]:
    return [verdict_for(acc) for acc in accountings]
