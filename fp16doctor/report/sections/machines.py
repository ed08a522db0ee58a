"""One card per machine: its verdicts, the run table (each 16-bit run against the float32 partner the analysis
paired it with), where the time went and the charts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from markupsafe import Markup

from fp16doctor.analysis import RunRow as AnalysedRun
from fp16doctor.analysis.op_compare import OPS_HEADING, OPS_READING
from fp16doctor.analysis.roofline import RooflineEstimate
from fp16doctor.analysis.runs import CHART_CAPTIONS, DeviceStep, precision_rank
from fp16doctor.report import charts
from fp16doctor.report.sections.common import text as _text
from fp16doctor.report.sections.inputs import DocumentInput, MachineInput
from fp16doctor.report.sections.time import TimeTableView, time_table
from fp16doctor.report.sections.verdict import VerdictView, machine_verdicts


@dataclass(frozen=True)
class RunRow:
    """One run as the report's run table shows it (the analysis' row, its text redacted)."""

    stack: str
    precision: str
    variant: str
    engine: str
    device: str
    status: str
    error: str | None
    batch_size: int | None
    step_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    samples: int | None
    images_per_s: float | None
    speedup_vs_fp32: float | None  # the analysis' pair: float32 step / this step
    versus_fp32: str  # "1.60x slower", "baseline", "—": as every output prints it
    first_step_ms: float | None
    input_ms: float | None
    input_share: float | None
    gpu_util_pct: float | None
    loss_nan: bool
    machine: str = ""
    device_step: DeviceStep | None = None  # a GPU run's profiled step: kernels, copies, the device idle

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.step_ms is not None

    @property
    def label(self) -> str:
        parts = [self.stack, self.precision]
        if self.variant != "original":
            parts.append(self.variant)
        if self.engine:
            parts.append(self.engine)
        return " · ".join(parts)

    @property
    def baseline(self) -> bool:
        return self.versus_fp32 == "baseline"


@dataclass(frozen=True)
class ChartsView:
    step_time: Markup
    split: Markup
    speedup: Markup
    speedup_has_prediction: bool
    precisions: list[str] = field(default_factory=list)  # those drawn, for the legends
    split_legend: list[charts.LegendEntry] = field(default_factory=list)  # every colour the split chart uses
    device: Markup = Markup("")  # GPU runs: kernels, copies and the device idle, per profiled step
    device_legend: list[charts.LegendEntry] = field(default_factory=list)
    captions: dict[str, str] = field(default_factory=dict)  # each chart's, the analysis' (runs.CHART_CAPTIONS)
    no_best_case: list[str] = field(default_factory=list)  # why a GPU's run has no best case (the roofline's words)


@dataclass(frozen=True)
class MachineView:
    anchor: str
    name: str
    verdicts: list[VerdictView]
    rows: list[RunRow]
    show_engine: bool
    show_variant: bool
    charts: ChartsView
    time_tables: list[TimeTableView] = field(default_factory=list)
    facts: str = ""  # its facts in one line, as the analysis said them (MachineFacts.facts_text)
    time_reading: str = OPS_READING  # how to read its time tables, the analysis' words
    time_heading: str = OPS_HEADING


def run_row(row: AnalysedRun) -> RunRow:
    return RunRow(
        stack=_text(row.stack) or "?",
        precision=_text(row.precision) or "?",
        variant=_text(row.variant) or "original",
        engine=_text(row.engine),
        device=_text(row.device),
        status=_text(row.status),
        error=_text(row.error) or None,
        batch_size=row.batch_size,
        step_ms=row.step_ms,
        p10_ms=row.p10_ms,
        p90_ms=row.p90_ms,
        samples=row.samples,
        images_per_s=row.images_per_s,
        speedup_vs_fp32=row.speedup,
        versus_fp32=row.versus_fp32,
        first_step_ms=row.first_step_ms,
        input_ms=row.input_ms,
        input_share=row.input_share,
        gpu_util_pct=row.gpu_util_pct,
        loss_nan=row.loss_nan,
        machine=row.machine,
        device_step=row.device_step,
    )


def _ordered(rows: list[RunRow]) -> list[RunRow]:
    stacks: dict[str, int] = {}
    variants: dict[str, int] = {"original": -1}
    for r in rows:
        stacks.setdefault(r.stack, len(stacks))
        variants.setdefault(r.variant, len(variants))
    return sorted(rows, key=lambda r: (stacks[r.stack], r.engine, variants[r.variant], precision_rank(r.precision)))


def _machine_charts(rows: Sequence[RunRow], predicted: Mapping[tuple[str, str], float],
                    estimates: Sequence[RooflineEstimate] = ()) -> ChartsView:
    ok = [r for r in rows if r.ok]
    step_bars = [charts.StepBar(r.label, r.precision, r.step_ms or 0.0, r.p10_ms, r.p90_ms) for r in ok]
    split_bars = [
        charts.SplitBar(
            r.label,
            r.precision,
            min(r.input_ms or 0.0, r.step_ms or 0.0),
            max((r.step_ms or 0.0) - (r.input_ms or 0.0), 0.0),
        )
        for r in ok
        if r.input_ms is not None
    ]
    speed_bars = [
        charts.SpeedupBar(r.label, r.precision, r.speedup_vs_fp32, predicted.get((r.stack, r.precision)),
                          r.versus_fp32)
        for r in ok
        if r.precision != "float32"
    ]
    device_bars = [charts.DeviceBar(r.label, r.precision, r.device_step.compute_ms, r.device_step.copies_ms,
                                    r.device_step.idle_ms) for r in ok if r.device_step is not None]
    with_best_case = any(b.predicted is not None for b in speed_bars)
    return ChartsView(
        captions={**CHART_CAPTIONS, "speedup": CHART_CAPTIONS["speedup_best_case" if with_best_case else "speedup"]},
        no_best_case=[] if with_best_case else [_text(w) for w in dict.fromkeys(e.missing_words() for e in estimates)
                                                if w],
        device=charts.device_chart(device_bars),
        device_legend=charts.device_legend(device_bars),
        step_time=charts.step_time_chart(step_bars),
        split=charts.split_chart(split_bars),
        speedup=charts.speedup_chart(speed_bars),
        speedup_has_prediction=with_best_case,
        precisions=sorted({r.precision for r in ok}, key=precision_rank),
        split_legend=charts.split_legend(split_bars),
    )


def machine_view(source: DocumentInput, machine: MachineInput) -> MachineView:
    rows = [run_row(r) for r in machine.rows]
    # The engine column only matters when one machine ran the same cell on several engines.
    engines = {r.engine for r in rows if r.engine}
    if len(engines) <= 1:
        rows = [replace(r, engine="") for r in rows]
    rows = _ordered(rows)
    mine = [c for c in source.diagnosis.comparisons if c.machine == machine.key]
    return MachineView(
        anchor=machine.anchor,
        name=machine.name,
        verdicts=machine_verdicts(machine.name, machine.key, [r.status for r in rows], source.diagnosis.verdicts),
        rows=rows,
        show_engine=len(engines) > 1,
        show_variant=any(r.variant != "original" for r in rows),
        charts=_machine_charts(rows, source.predicted,
                               [e for e in source.diagnosis.roofline if e.machine == machine.key]),
        time_tables=[time_table(f"{machine.anchor}-time-{i + 1}", c) for i, c in enumerate(mine)],
        facts=machine.facts,
    )


def build(source: DocumentInput) -> list[MachineView]:
    return [machine_view(source, m) for m in source.machines]
