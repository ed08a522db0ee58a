"""Numbers as a reader sees them, shared by the HTML template, the charts and the markdown summary."""

from __future__ import annotations

from fp16doctor.results import PRECISIONS


def format_ms(value: float | None) -> str:
    """Milliseconds with three significant digits: 512 ms, 51.2 ms, 5.12 ms; seconds past 10 s."""
    if value is None:
        return "—"
    if value >= 10_000:
        return f"{value / 1000:.1f} s"
    if value >= 100:
        return f"{value:.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms"


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
