"""Between stacks, for the terminal: the analysis' stack comparisons (`explain`, `diagnose`) and `fp16doctor compare`'s
two documents. Data in, a rich renderable out; the analysis phrased every sentence."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from fp16doctor.analysis.stack_compare import DocumentComparison, StackComparison, StackSide
from fp16doctor.analysis.values import fmt_ms, fmt_signed_ms, fmt_versus, pass_words

TOP_CHANGES = 5


def _changes_table(comparison: StackComparison, count: int) -> Table:
    """The biggest op changes: layer, pass, the time in each stack, the change and the implementations; fits 80
    columns (a long implementation name wraps, whole)."""
    table = Table(show_edge=False, pad_edge=False, box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0))
    table.add_column("layer", no_wrap=True, min_width=9, max_width=16, overflow="ellipsis")
    table.add_column("pass", min_width=11, max_width=12)  # "bwd weights" over "(other way)"
    for stack in (comparison.from_.stack, comparison.to.stack):
        table.add_column(stack, justify="right", no_wrap=True, min_width=max(7, len(stack)))  # a name kept whole
    table.add_column("change", justify="right", no_wrap=True, min_width=8)
    table.add_column("implementation", overflow="fold", min_width=20)
    for change in comparison.changes[:count]:
        impls = (change.impl_from or "-") if change.impl_from == change.impl_to else \
            f"{change.impl_from or '-'} -> {change.impl_to or '-'}"
        table.add_row(change.layer, pass_words(change.pass_, short=True) + (" (other way)" if change.against else ""),
                      fmt_ms(change.ms_from),
                      fmt_ms(change.ms_to), Text(fmt_signed_ms(change.difference_ms),
                                                 style="red" if change.difference_ms > 0 else "green"), impls)
    return table


def _comparison(comparison: StackComparison, count: int, rest_in: str, sides: bool = True) -> list[RenderableType]:
    """Its sentence, each side's line (`sides`: where no line above says them), its biggest op changes and their
    caption."""
    style = "red" if comparison.step_change_ms > 0 and comparison.significant else \
        "green" if comparison.significant else ""
    parts: list[RenderableType] = [Text(f"  {comparison.headline}", style=style)]
    parts += [Text(f"    {side.line()}") for side in (comparison.from_, comparison.to)] if sides else []
    if comparison.changes:
        parts.append(Padding(_changes_table(comparison, count), (0, 0, 0, 2)))
        parts.append(Text(f"  {comparison.caption(count, rest_in)}", style="dim"))
    return parts


def stack_comparisons_text(comparisons: Sequence[StackComparison], count: int = TOP_CHANGES) -> Group | None:
    """The detail of each comparison between stacks (`explain --full`): its sentence with its biggest op changes
    (the sentence alone is the answer's, Answer.between); None when there is none."""
    if not comparisons:
        return None
    parts: list[RenderableType] = [Text("Between stacks, op by op", style="bold"),
                                   Text(f"  {StackComparison.MATCHING}", style="dim")]
    for comparison in comparisons:
        parts += _comparison(comparison, count, "in the report")
    return Group(*parts)


def _versus(side: StackSide) -> str:
    return fmt_versus(side.ratio, side.ratio_interval, side.outcome, than="than float32")


def compare_text(result: DocumentComparison, count: int = TOP_CHANGES) -> RenderableType:
    """`fp16doctor compare`: the machine, each configuration's ratio before and after, and what changed in its ops."""
    parts: list[RenderableType] = [Text.assemble(("Comparing ", "bold"), (result.label_from, "bold"),
                                                 " (before) with ", (result.label_to, "bold"),
                                                 f" (after) on {result.machine}")]
    parts += [Text(line, style="yellow") for line in result.busy]  # a ratio measured through other work
    for comparison in result.comparisons:
        parts.append(Text(f"\n{comparison.precision}", style="bold"))
        for side, when in ((comparison.from_, "before"), (comparison.to, "after")):
            parts.append(Text(f"  {when:<7} {side.stack}: {_versus(side)}  ({fmt_ms(side.step_ms)} vs "
                              f"{fmt_ms(side.fp32_step_ms)} per step; {side.software})"))
        parts += _comparison(comparison, count, "with --json", sides=False)
    if not result.comparisons:
        parts.append(Text("\nNo configuration was measured in both files.", style="yellow"))
    only = [f"only in {label}: {', '.join(configs)}" for label, configs in
            ((result.label_from, result.only_from), (result.label_to, result.only_to)) if configs]
    if only:
        parts += [Text(""), *(Text(line, style="dim") for line in only)]
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
