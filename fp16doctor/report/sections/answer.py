"""The page's first screen: the analysis' answer (analysis/answer.py) of each document, laid out as it stands.

What bounds the step (each machine's GPU-busy bar, drawn once here, or a CPU's top ops), the prescription's
headline, and one line per 16-bit configuration against float32 with its cause; the notes those lines refer to.
Nothing here composes a sentence: every text is the answer's own; the detail (the prescription's changes and
measured table, the findings, the op tables) follows further down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from fp16doctor.analysis import Answer
from fp16doctor.analysis.answer import CHANGES_HEADING, PRECISIONS_HEADING
from fp16doctor.report import charts
from fp16doctor.report.sections.inputs import ReportInput


@dataclass(frozen=True)
class DeviceBar:
    """A machine's GPU-busy chart for the runs the answer's bound covers (the code as written, each precision);
    the machine's card further down draws every profiled run."""

    machine: str
    svg: Markup
    legend: list[charts.LegendEntry] = field(default_factory=list)


@dataclass(frozen=True)
class AnswerView:
    title: str  # the document's title where the report has several, else ""
    answer: Answer
    device_bars: list[DeviceBar] = field(default_factory=list)
    headings: tuple[str, str] = (PRECISIONS_HEADING, CHANGES_HEADING)  # of answer.precisions and answer.changes


def build(top: ReportInput) -> list[AnswerView]:
    views = []
    many = len(top.documents) > 1
    for source, piece in zip(top.documents, top.pieces, strict=True):
        answer = source.diagnosis.answer
        if answer is None:
            continue
        machines: list[Any] = list(piece.get("machines") or [])
        bars = []
        for m in machines:
            drawn = [charts.DeviceBar(r.label, r.precision, r.device_step.compute_ms, r.device_step.copies_ms,
                                      r.device_step.idle_ms)
                     for r in m.rows if r.ok and r.device_step is not None and r.variant == "original"]
            if drawn:
                bars.append(DeviceBar(m.name if len(machines) > 1 else "", charts.device_chart(drawn),
                                      charts.device_legend(drawn)))
        views.append(AnswerView(f"Results {source.index + 1}" if many else "", answer, bars))
    return views


__all__ = ["AnswerView", "DeviceBar", "build"]
