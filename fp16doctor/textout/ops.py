"""The terminal's short "where the time went": the analysis' verdicts as it phrased them, then each 16-bit run's
biggest op differences against float32 (the report has the full tables). Data in, a rich renderable out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fp16doctor.analysis.op_compare import LOW_COVERAGE, OpComparison, op_comparisons
from fp16doctor.analysis.values import fmt_ms
from fp16doctor.textout.findings import verdicts_text

TOP_OPS = 5
SHORT_PASS = {"backward_weights": "bwd weights", "backward_data": "bwd data"}
WINDOW_WORDS = {"after_timing": "a window after the timed steps", "first_step": "the first step of a cut-short run",
                "bound_step": "the step that cut the run short"}


def _delta(value: float | None) -> str:
    if value is None:
        return "–"
    return ("+" if value > 0 else "-" if value < 0 else "±") + fmt_ms(abs(value))


def _title(comparison: OpComparison) -> str:
    where = [comparison.stack] if comparison.stack != "host" else []
    if comparison.variant != "original":
        where.append(comparison.variant)
    if comparison.machine != "host":
        where.append(f"on {comparison.machine}")
    suffix = f" ({', '.join(where)})" if where else ""
    return f"Where the time went: {comparison.precision} vs float32{suffix}"


def ops_table(comparison: OpComparison, count: int = TOP_OPS) -> RenderableType:
    """The `count` biggest differences per layer and pass with the 16-bit kernel, and what measured them; fits
    80 columns."""
    table = Table(title=_title(comparison), title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("layer", overflow="fold", max_width=18)
    table.add_column("pass", overflow="fold", max_width=11)
    table.add_column("float32", justify="right", no_wrap=True)
    table.add_column(comparison.precision, justify="right", no_wrap=True)
    table.add_column("diff", justify="right", no_wrap=True)
    table.add_column("implementation", overflow="ellipsis", no_wrap=True)
    # Rows with a difference first; without float32 ops there is none, and the 16-bit times lead.
    compared = [r for r in comparison.rows if r.difference_ms is not None] or list(comparison.rows)
    for row in compared[:count]:
        style = "red" if (row.difference_ms or 0) > 0 else "green" if (row.difference_ms or 0) < 0 else ""
        table.add_row(row.layer, SHORT_PASS.get(row.pass_, row.pass_.replace("_", " ")), fmt_ms(row.fp32_ms),
                      fmt_ms(row.reduced_ms), Text(_delta(row.difference_ms), style=style),
                      row.impls[0] if row.impls else "")
    side = comparison.reduced
    bits = [f"measured with {side.source or 'an unknown source'}"]
    if side.coverage is not None:
        bits.append(f"coverage {side.coverage:.0%}")
    if side.window_kind in WINDOW_WORDS:
        bits.append(WINDOW_WORDS[side.window_kind])
    if len(comparison.rows) > count:
        bits.append(f"{len(comparison.rows) - count} more rows, and float32's kernels, in the report")
    notes = [Text("  " + "; ".join(bits), style="dim")]
    if comparison.fp32 is None:
        notes.append(Text("  the float32 run has no measured ops: only the 16-bit times are shown", style="yellow"))
    if comparison.low_coverage:
        notes.append(Text(f"  low coverage (below {LOW_COVERAGE:.0%}): part of the step is not attributed to any op",
                          style="yellow"))
    return Group(table, *notes)


def time_went_text(doc: Mapping[str, Any], verdicts: Sequence[Mapping[str, Any]] | None = None,
                   count: int = TOP_OPS) -> RenderableType | None:
    """The verdicts (the document's own unless given), then a short ops table per 16-bit run with measured ops;
    None when there is neither."""
    chosen = verdicts if verdicts is not None else [v for v in (doc.get("verdicts") or []) if isinstance(v, Mapping)]
    parts: list[RenderableType] = []
    headline = verdicts_text(chosen)
    if headline is not None:
        parts.append(headline)
    for index, comparison in enumerate(op_comparisons(doc)):
        if index or headline is None:  # the verdicts end with a blank line of their own
            parts.append(Text(""))
        parts.append(ops_table(comparison, count))
    return Group(*parts) if parts else None


__all__ = ["TOP_OPS", "ops_table", "time_went_text"]
