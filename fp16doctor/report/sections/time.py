""""Where the time went", inside each machine's section: each 16-bit run's measured ops beside its float32
partner's, per layer and pass, as the analysis lined them up (analysis/op_compare.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fp16doctor.analysis.op_compare import OpComparison, OpDiff
from fp16doctor.analysis.values import pass_words
from fp16doctor.knowledge.kernels import kernel_short_name
from fp16doctor.report.sections.common import text as _text


@dataclass(frozen=True)
class OpRowView:
    """One row of "Where the time went": a layer and pass, float32 beside the 16-bit run."""

    layer: str
    pass_label: str  # "backward weights"; empty on the summed rest
    fp32_ms: float | None  # None: that run listed no op here
    reduced_ms: float | None
    difference_ms: float | None
    impl: str  # the 16-bit run's implementations (kernels), biggest first, each by its short name
    fp32_impl: str
    tensor_cores: str  # "yes", "no" or "" (not knowable from the kernel's name)
    dtype: str
    ops: int
    rows: int  # 1, or how many rows the summed rest holds
    is_rest: bool  # the rows past the top ones, summed
    fp32_bar_pct: float  # bar lengths, as a share of the table's biggest time
    reduced_bar_pct: float
    impl_whole: str = ""  # the whole names where a short one stands for them (shown in a collapsed detail)
    fp32_impl_whole: str = ""


@dataclass(frozen=True)
class TimeTableView:
    """One 16-bit run's measured ops against its float32 partner's (same machine, stack and variant)."""

    anchor: str
    precision: str
    stack: str
    variant: str
    step_ms: float
    fp32_step_ms: float
    bound: bool
    source: str
    fp32_source: str
    coverage: float | None
    fp32_coverage: float | None
    low_coverage: bool
    window: str  # what the profiled window was, in words
    notes: list[str]
    rows: list[OpRowView]
    reduced_total_ms: float
    fp32_total_ms: float | None
    title: str  # "float16 vs float32, synthetic_input" (OpComparison.title)
    caption: str  # both steps, the ops' source and coverage, the windows (OpComparison.caption)

    @property
    def show_tensor_cores(self) -> bool:
        """Only where some kernel's name said whether it used Tensor Cores (never on a CPU)."""
        return any(r.tensor_cores for r in self.rows)

    @property
    def total_difference_ms(self) -> float | None:
        return None if self.fp32_total_ms is None else self.reduced_total_ms - self.fp32_total_ms


TOP_OPS = 12  # rows per table; the rest are summed into one


def _impl_text(impls: Sequence[str], limit: int = 2, short: bool = True) -> str:
    shown = [_text(kernel_short_name(i) if short else i) for i in impls[:limit]]
    more = f" +{len(impls) - limit}" if len(impls) > limit else ""
    return ", ".join(shown) + more


def _whole(impls: Sequence[str]) -> str:
    """The whole names where the short ones differ; "" where the names are short already."""
    whole = _impl_text(impls, short=False)
    return whole if whole != _impl_text(impls) else ""


def _op_row(row: OpDiff, biggest: float, is_rest: bool) -> OpRowView:
    def bar(ms: float | None) -> float:
        return round(100.0 * (ms or 0.0) / biggest, 1) if biggest > 0 else 0.0

    tc = "" if row.tensor_cores is None else ("yes" if row.tensor_cores else "no")
    return OpRowView(
        layer=_text(row.layer),
        pass_label=_text(pass_words(row.pass_)),
        fp32_ms=row.fp32_ms,
        reduced_ms=row.reduced_ms,
        difference_ms=row.difference_ms,
        impl=_impl_text(row.impls),
        fp32_impl=_impl_text(row.fp32_impls),
        tensor_cores=tc,
        dtype=_text(", ".join(row.dtypes)),
        ops=row.ops,
        rows=row.rows,
        is_rest=is_rest,
        fp32_bar_pct=bar(row.fp32_ms),
        reduced_bar_pct=bar(row.reduced_ms),
        impl_whole=_whole(row.impls),
        fp32_impl_whole=_whole(row.fp32_impls),
    )


def time_table(anchor: str, comparison: OpComparison) -> TimeTableView:
    head, rest = comparison.top(TOP_OPS)
    shown = [*head, *([rest] if rest else [])]
    biggest = max([max(r.reduced_ms or 0.0, r.fp32_ms or 0.0) for r in shown], default=0.0)
    reduced, fp32 = comparison.reduced, comparison.fp32
    return TimeTableView(
        anchor=anchor,
        precision=_text(comparison.precision),
        stack=_text(comparison.stack),
        variant=_text(comparison.variant),
        step_ms=comparison.step_ms,
        fp32_step_ms=comparison.fp32_step_ms,
        bound=comparison.bound,
        source=_text(reduced.source) or "unknown",
        fp32_source=_text(fp32.source) if fp32 is not None else "",
        coverage=reduced.coverage,
        fp32_coverage=fp32.coverage if fp32 is not None else None,
        low_coverage=comparison.low_coverage,
        window=_text(comparison.window),
        notes=[_text(c) for c in comparison.caveats],
        rows=[_op_row(r, biggest, r is rest) for r in shown],
        reduced_total_ms=reduced.total_ms,
        fp32_total_ms=fp32.total_ms if fp32 is not None else None,
        title=_text(comparison.title),
        caption=_text(comparison.caption()),
    )

