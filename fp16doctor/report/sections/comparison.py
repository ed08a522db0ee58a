"""Across machines: each machine's cells side by side, float32 and the 16-bit precisions, with each 16-bit
run's ratio to the float32 run the analysis paired it with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from markupsafe import Markup

from fp16doctor.analysis.runs import precision_rank
from fp16doctor.report import charts
from fp16doctor.report.sections.inputs import ReportInput
from fp16doctor.report.sections.machines import MachineView
from fp16doctor.workload.protocol import FP16, PRECISIONS, family


@dataclass(frozen=True)
class ComparisonRow:
    machine: str
    stack: str
    variant: str
    times_ms: dict[str, float]  # median step per precision that completed
    speedups: dict[str, float] = field(default_factory=dict)  # the analysis' float32 step / this precision's
    versus: dict[str, str] = field(default_factory=dict)  # those ratios as every output prints them

    def ms(self, precision: str) -> float | None:
        return self.times_ms.get(precision)

    def speedup(self, precision: str) -> float | None:
        """float32 step / this precision's (above 1: faster), as the analysis measured the pair."""
        return self.speedups.get(precision)

    def versus_fp32(self, precision: str) -> str:
        return self.versus.get(precision, "\u2014")

    @property
    def float32_ms(self) -> float | None:
        return self.ms("float32")


# The 16-bit columns of the comparison: the float16 ones always (the question), bfloat16 where measured.
COMPARISON_ALWAYS = tuple(p for p in PRECISIONS if family(p) == FP16)


def _comparison(machines: Sequence[MachineView]) -> list[ComparisonRow]:
    out: list[ComparisonRow] = []
    for m in machines:
        cells: dict[tuple[str, str, str], ComparisonRow] = {}
        for r in m.rows:
            if r.ok and r.step_ms is not None:
                key = (r.stack, r.variant, r.engine)
                row = cells.setdefault(key, ComparisonRow(m.name, f"{r.stack} · {r.engine}" if r.engine else r.stack,
                                                          r.variant, {}))
                row.times_ms[r.precision] = r.step_ms
                if r.speedup_vs_fp32 is not None:
                    row.speedups[r.precision] = r.speedup_vs_fp32
                    row.versus[r.precision] = r.versus_fp32
        out += cells.values()
    return out


def comparison_precisions(rows: Sequence[ComparisonRow]) -> list[str]:
    seen = {p for r in rows for p in r.times_ms if p != "float32"}
    return sorted(seen | set(COMPARISON_ALWAYS), key=precision_rank)




@dataclass(frozen=True)
class ComparisonSection:
    rows: list[ComparisonRow]
    precisions: list[str]
    chart: Markup


def build(source: ReportInput) -> ComparisonSection:
    """Only where the report holds more than one machine; empty otherwise."""
    machines: list[MachineView] = [m for piece in source.pieces for m in piece.get("machines", [])]
    if len(machines) < 2:
        return ComparisonSection([], comparison_precisions([]), charts.step_time_chart([]))
    rows = _comparison(machines)
    bars = [charts.StepBar(r.label, r.precision, r.step_ms or 0.0, r.p10_ms, r.p90_ms, group=m.name)
            for m in machines for r in m.rows if r.ok]
    return ComparisonSection(rows, comparison_precisions(rows),
                             charts.step_time_chart(bars, "Median step time on every machine"))
