"""Between stacks, for the terminal: the analysis' stack comparisons (`explain`, `diagnose`) and `fp16doctor compare`'s
two documents. Data in, a rich renderable out; the analysis phrased every sentence."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.text import Text

from fp16doctor.analysis.stack_compare import DocumentComparison, OpChange, StackComparison, StackSide
from fp16doctor.analysis.values import fmt_ms, fmt_signed_ms, fmt_versus

TOP_CHANGES = 5


def _change_line(change: OpChange) -> Text:
    impls = (change.impl_from or "-") if change.impl_from == change.impl_to else \
        f"{change.impl_from or '-'} -> {change.impl_to or '-'}"
    style = "red" if change.difference_ms > 0 else "green"
    return Text.assemble(f"    {change.where:<34} {fmt_ms(change.ms_from):>8} -> {fmt_ms(change.ms_to):>8}  ",
                         (f"{fmt_signed_ms(change.difference_ms):>9}", style), f"  {impls}\n")


def _comparison(comparison: StackComparison, count: int, rest_in: str) -> Text:
    text = Text()
    style = "red" if comparison.step_change_ms > 0 and comparison.significant else \
        "green" if comparison.significant else ""
    text.append(f"  {comparison.headline}\n", style=style)
    for change in comparison.changes[:count]:
        text.append_text(_change_line(change))
    if comparison.changes:
        rest = len(comparison.changes) - count
        basis = "wall-clock shares" if comparison.wall else "self times"
        more = f"; {rest} more {rest_in}" if rest > 0 else ""
        text.append(f"    16-bit ops matched by layer type, position and pass, on {basis}{more}\n", style="dim")
    return text


def stack_comparisons_text(comparisons: Sequence[StackComparison], count: int = TOP_CHANGES) -> Text | None:
    """'Between stacks' and each comparison's sentence with its biggest op changes; None when there is none."""
    if not comparisons:
        return None
    text = Text("Between stacks\n", style="bold")
    for comparison in comparisons:
        text.append_text(_comparison(comparison, count, "in the report"))
    return text


def _versus(side: StackSide) -> str:
    return fmt_versus(side.ratio, side.ratio_interval, side.outcome, than="than float32")


def compare_text(result: DocumentComparison, count: int = TOP_CHANGES) -> RenderableType:
    """`fp16doctor compare`: the machine, each configuration's ratio before and after, and what changed in its ops."""
    parts: list[RenderableType] = [Text.assemble(("Comparing ", "bold"), (result.label_from, "bold"),
                                                 " (before) with ", (result.label_to, "bold"),
                                                 f" (after) on {result.machine}")]
    for comparison in result.comparisons:
        text = Text(f"\n{comparison.precision}\n", style="bold")
        for side, when in ((comparison.from_, "before"), (comparison.to, "after")):
            text.append(f"  {when:<7} {side.stack}: {_versus(side)}  ({fmt_ms(side.step_ms)} vs "
                        f"{fmt_ms(side.fp32_step_ms)} per step; {side.software})\n")
        text.append_text(_comparison(comparison, count, "with --json"))
        parts.append(text)
    if not result.comparisons:
        parts.append(Text("\nNo configuration was measured in both files.", style="yellow"))
    for label, only in ((result.label_from, result.only_from), (result.label_to, result.only_to)):
        if only:
            parts.append(Text(f"only in {label}: {', '.join(only)}", style="dim"))
    return Group(*parts)


def slower_message(result: DocumentComparison, pct: float) -> tuple[str, str] | None:
    """(message, hint) when a configuration's ratio fell by more than `pct` % beyond both intervals, else None."""
    fallen = result.slower_than(pct)
    if not fallen:
        return None
    named = ", ".join(f"{c.precision} ({c.from_.figure} -> {c.to.figure}, {fall:.0%} beyond the intervals)"
                      for c, fall in fallen)
    return (f"slower than {result.label_from} by more than {pct:g} %: {named}",
            "the ops that changed are listed above (or under stack_comparisons with --json)")


__all__ = ["TOP_CHANGES", "compare_text", "slower_message", "stack_comparisons_text"]
