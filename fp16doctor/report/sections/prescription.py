"""The report's "What to do, in detail": beside each prescription's headline on the first screen, the answer's own
lines for it (the changes to make first, their cost, how to make them, how to set the recommended configuration, the
ideas nobody measured with their commands), then the detail's measured table (fastest first, each row's notes by the
answer's ids) and each precision with batches in memory. Nothing here chooses or words anything."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fp16doctor.analysis.answer import Answer, AnswerLine, PrescriptionLine, notes_of
from fp16doctor.analysis.detail import DETAIL_HEADINGS
from fp16doctor.analysis.prescription import Prescription
from fp16doctor.analysis.values import fmt_ms
from fp16doctor.report.sections.inputs import ReportInput

# The answer's lines a prescription's card lays out (its headline stands on the first screen).
CARD_KINDS = ("change", "cost", "prose", "code", "how", "untested", "command")


@dataclass(frozen=True)
class MeasuredConfigView:
    config: str
    step: str
    versus_fp32: str  # "2.19x faster (2.08-2.30x)", "the baseline"
    note: str  # its notes the answer does not already say
    recommended: bool
    note_ids: tuple[str, ...] = ()  # the answer's notes it carries ("N1"), said once there


@dataclass(frozen=True)
class PrescriptionView:
    where: str  # the place the answer names it by ("" where the document has one)
    tone: str  # "faster" (a 16-bit or switched configuration) or "same" (float32)
    lines: tuple[AnswerLine, ...]  # the answer's lines for it, in its order (CARD_KINDS)
    measured: list[MeasuredConfigView]
    in_memory: tuple[str, ...]  # the detail's: each precision with batches in memory
    baseline: str = "float32"  # what the table's ratios are against (a 16-bit type where no float32 ran)
    doc_index: int = 1  # its document's place in the report (1-based): where its answer's notes are
    measured_heading: str = DETAIL_HEADINGS["measured"]


def prescription_view(prescription: Prescription, answer: Answer, line: PrescriptionLine,
                      doc_index: int = 1) -> PrescriptionView:
    """A prescription beside the answer's `line` for it (its id "P1"), laid out as the answer and its detail say
    it."""
    chosen = (prescription.recommended.precision, prescription.recommended.variant)
    measured = []
    for row in prescription.measured:
        ids, rest = notes_of(answer, row)
        measured.append(MeasuredConfigView(row.config, fmt_ms(row.step_ms), row.versus(), "; ".join(rest),
                                           (row.precision, row.variant) == chosen, ids))
    said = [said for s in answer.sections(findings=False) if s.id in ("what_to_do", "how") for said in s.lines
            if said.ref == line.id and said.kind in CARD_KINDS]
    return PrescriptionView(line.where, "faster" if prescription.recommended.changes_something else "same",
                            tuple(said), measured, line.in_memory, prescription.baseline, doc_index)


def prescription_views(prescriptions: Sequence[Prescription], answer: Answer,
                       doc_index: int = 1) -> list[PrescriptionView]:
    """One view per prescription, in the answer's order (its ids P1, P2, ...)."""
    return [prescription_view(p, answer, line, doc_index)
            for p, line in zip(prescriptions, answer.prescriptions, strict=False)]


def build(source: ReportInput) -> list[PrescriptionView]:
    """Every document's prescriptions."""
    return [p for i, d in enumerate(source.documents, 1)
            for p in prescription_views(d.diagnosis.prescriptions, d.diagnosis.answer, i)]
