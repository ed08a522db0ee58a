"""The terminal's short "where the time went" (`explain --full`): each 16-bit run's biggest op differences against
float32 under the analysis' words for the table (op_compare: OPS_READING, each table's title, caption and caveats);
the report has the full tables. Data in, a rich renderable out."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from fp16doctor.analysis import Diagnosis
from fp16doctor.analysis.op_compare import OPS_HEADING, OPS_READING, OpComparison
from fp16doctor.analysis.values import SHORT_PASS, fmt_ms, fmt_signed_ms, pass_words

TOP_OPS = 5
# The implementation column's width at most: oneDNN names such as
# "brg_conv_bwd:avx10_1_512+brg_conv_fwd:avx10_1_512" are cut to it, and to what the other columns leave of
# TERMINAL_WIDTH (the report keeps them whole), so the layer and pass columns keep their words at 80 columns.
IMPL_WIDTH = 22
TERMINAL_WIDTH = 80
# The layer column's width at most: a layer name fits; an op outside the layers (tf.data's
# "Iterator::Root::Prefetch::FlatMap[0]::Generator") keeps its end, the part that says what it is.
LAYER_WIDTH = 10
# The widest time fmt_ms prints ("231 ms", "13.2 s") and its signed form, and what separates two columns.
TIME_WIDTH, DIFF_WIDTH, SEPARATOR = 7, 8, 3


def _short(name: str, width: int = IMPL_WIDTH) -> str:
    return name if len(name) <= width else name[: width - 1] + "\u2026"


def _short_tail(name: str, width: int = LAYER_WIDTH) -> str:
    return name if len(name) <= width else "\u2026" + name[-(width - 1):]


def ops_table(comparison: OpComparison, count: int = TOP_OPS) -> RenderableType:
    """The `count` biggest differences per layer and pass with the 16-bit kernel, under the analysis' title, caption
    and caveats (OpComparison's words); fits 80 columns."""
    table = Table(title=comparison.title, title_justify="left", show_edge=False, pad_edge=False, box=box.SIMPLE_HEAD)
    passes = max(len(p) for p in SHORT_PASS.values())
    fixed = (LAYER_WIDTH + passes + TIME_WIDTH + max(TIME_WIDTH, len(comparison.precision)) + DIFF_WIDTH
             + 5 * SEPARATOR)
    impl_width = max(len("implementation"), min(IMPL_WIDTH, TERMINAL_WIDTH - fixed))
    table.add_column("layer", no_wrap=True, min_width=len("layer"), max_width=LAYER_WIDTH)
    table.add_column("pass", no_wrap=True, min_width=passes)
    table.add_column("float32", justify="right", no_wrap=True, min_width=TIME_WIDTH)
    table.add_column(comparison.precision, justify="right", no_wrap=True)
    table.add_column("diff", justify="right", no_wrap=True, min_width=DIFF_WIDTH)
    table.add_column("implementation", overflow="ellipsis", no_wrap=True, max_width=impl_width)
    # Rows with a difference first; without float32 ops there is none, and the 16-bit times lead.
    compared = [r for r in comparison.rows if r.difference_ms is not None] or list(comparison.rows)
    for row in compared[:count]:
        style = "red" if (row.difference_ms or 0) > 0 else "green" if (row.difference_ms or 0) < 0 else ""
        table.add_row(_short_tail(row.layer), pass_words(row.pass_, short=True),
                      fmt_ms(row.fp32_ms), fmt_ms(row.reduced_ms), Text(fmt_signed_ms(row.difference_ms), style=style),
                      _short(row.impls[0], impl_width) if row.impls else "")
    more = len(comparison.rows) - count
    notes = [_indented(comparison.caption(), "dim")]
    notes += [_indented(f"{more} more rows in the report", "dim")] if more > 0 else []
    notes += [_indented(caveat, "yellow") for caveat in comparison.caveats]
    return Group(table, *notes)


def _indented(text: str, style: str) -> Padding:
    """A note under a table, two columns in, its wrapped lines too."""
    return Padding(Text(text, style=style), (0, 0, 0, 2))


def where_time_went(diagnosis: Diagnosis, count: int = TOP_OPS) -> RenderableType | None:
    """`explain --full`'s "Where the time went": how to read the tables, then a short ops table per 16-bit run with
    measured ops; None without any."""
    if not diagnosis.comparisons:
        return None
    parts: list[RenderableType] = [Text(OPS_HEADING, style="bold"), _indented(OPS_READING, "dim")]
    for comparison in diagnosis.comparisons:
        parts += [Text(""), ops_table(comparison, count)]
    return Group(*parts)


__all__ = ["TOP_OPS", "ops_table", "where_time_went"]
