"""Between stacks: for one machine and 16-bit precision measured in two stacks, the ratio in each and the 16-bit ops
that changed, matched by layer type, position and pass (the analysis' `stack_comparisons`, in its own words)."""

from __future__ import annotations

from dataclasses import dataclass

from fp16doctor.analysis.stack_compare import OpChange, StackComparison
from fp16doctor.analysis.values import fmt_ms, fmt_signed_ms
from fp16doctor.report.sections.inputs import ReportInput

TOP_CHANGES_HTML = 12  # the report's table; the rest is summed in one row


@dataclass(frozen=True)
class ChangeRowView:
    where: str  # "Conv2D #1 backward weights"
    layers: str  # "conv2d_1 -> conv2d": the names the two stacks gave the layer
    impl_from: str
    impl_to: str
    ms_from: str
    ms_to: str
    difference: str
    tone: str  # "slower" (took longer in `to`) or "faster"
    against: bool  # moved against the 16-bit step's change


@dataclass(frozen=True)
class StackChangeView:
    machine: str
    title: str  # "float16: tf1.7-cpu -> cpu"
    sides: list[str]  # the two stacks' names, heading their columns
    side_lines: list[str]  # each stack where it stood against float32, with its software (StackSide.line)
    sentence: str
    tone: str  # "slower" / "faster": where the 16-bit step went; "same" inside the runs' interval
    rows: list[ChangeRowView]
    rest: str  # "27 more changes, net -12 ms", or ""
    caption: str  # how the ops were matched and timed (StackComparison.caption)
    matching: str  # why by position, never by name (StackComparison.MATCHING)
    comparison: StackComparison  # the analysis' table data: its caption under a shorter table (the markdown's)
    document: int = 0  # the index of the document it compares within


def _row(change: OpChange) -> ChangeRowView:
    names = [n for n in (change.layer_from, change.layer_to) if n]
    layers = " -> ".join(names) if len(set(names)) > 1 else (names[0] if names else "")
    return ChangeRowView(change.where, layers, change.impl_from or "\u2014", change.impl_to or "\u2014",
                         fmt_ms(change.ms_from), fmt_ms(change.ms_to), fmt_signed_ms(change.difference_ms),
                         "slower" if change.difference_ms > 0 else "faster", change.against)


def stack_change_view(machine: str, comparison: StackComparison, document: int = 0) -> StackChangeView:
    shown, hidden = comparison.changes[:TOP_CHANGES_HTML], comparison.changes[TOP_CHANGES_HTML:]
    rest = (f"{len(hidden)} more change{'s' if len(hidden) != 1 else ''}, net "
            f"{fmt_signed_ms(sum(c.difference_ms for c in hidden))}") if hidden else ""
    tone = ("same" if not comparison.significant else "slower" if comparison.step_change_ms > 0 else "faster")
    sides = (comparison.from_, comparison.to)
    return StackChangeView(machine, f"{comparison.precision}: {comparison.from_.stack} \u2192 {comparison.to.stack}",
                           [side.stack for side in sides], [side.line() for side in sides], comparison.headline,
                           tone, [_row(c) for c in shown], rest,
                           comparison.caption(len(shown), "summed in the last row"), comparison.MATCHING, comparison,
                           document)


def build(source: ReportInput) -> list[StackChangeView]:
    """Every document's stack comparisons, each machine named as the report names it."""
    return [stack_change_view(d.names.get(c.machine, c.machine), c, d.index)
            for d in source.documents for c in d.diagnosis.stack_comparisons]
