"""Numbers as a reader sees them, shared by the HTML template, the charts and the markdown summary.

Milliseconds have one formatter for all of fp16doctor: `fp16doctor.analysis.values.fmt_ms`."""

from __future__ import annotations

from fp16doctor.analysis.values import fmt_signed_ms
from fp16doctor.workload.protocol import PRECISIONS


def format_delta(value: float | None) -> str:
    """A signed time difference: "+12.5 s" (16 bits took longer), "−3.1 ms" (16 bits saved it)."""
    return fmt_signed_ms(value)


def format_ratio(value: float | None) -> str:
    """A speedup factor, 1.00× meaning no change."""
    if value is None:
        return "—"
    return f"{value:.2f}×"


def format_pct(fraction: float | None) -> str:
    """A fraction (a share of the step, a confidence) as a whole percentage."""
    if fraction is None:
        return "—"
    return f"{fraction * 100:.0f} %"


def format_rate(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}"


def precision_rank(precision: str) -> int:
    return PRECISIONS.index(precision) if precision in PRECISIONS else len(PRECISIONS)
