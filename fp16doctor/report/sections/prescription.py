"""The report's prescription section: the analysis' prescriptions, phrased as the analysis phrased them, with the
measured configurations and the untested ideas as rows. Nothing here chooses a configuration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fp16doctor.analysis.answer import Answer, notes_of
from fp16doctor.analysis.prescription import Prescription
from fp16doctor.analysis.values import UntestedIdea, fmt_ms
from fp16doctor.analysis.words import change_words, in_memory_words
from fp16doctor.report.sections.inputs import ReportInput


@dataclass(frozen=True)
class MeasuredConfigView:
    config: str
    step: str
    versus_fp32: str  # "2.19x faster (2.08-2.30x)", "the baseline"
    note: str  # its notes the answer does not already say
    recommended: bool
    note_ids: tuple[str, ...] = ()  # the answer's notes it carries ("N1"), said once there


@dataclass(frozen=True)
class UserChangeView:
    """A change to the user's code beyond a precision, measured by a control (`user_changes`)."""

    words: str  # "input pipeline: 303 ms -> 82 ms a step (3.7x faster), measured with batches in memory"
    in_memory: list[str]  # each precision's ratio with batches in memory
    how: str
    cost: str = ""  # what the change costs beyond its code (a backend: a dependency, a behaviour change)


@dataclass(frozen=True)
class PrescriptionView:
    machine: str
    headline: str
    how: str
    tone: str  # "faster" (a 16-bit or switched configuration) or "same" (float32)
    measured: list[MeasuredConfigView]
    untested: list[UntestedIdea]
    changes: list[UserChangeView] = field(default_factory=list)  # measured first: what they are worth
    baseline: str = "float32"  # what the table's ratios are against (a 16-bit type where no float32 ran)
    doc_index: int = 1  # its document's place in the report (1-based): where its answer's notes are


def prescription_view(machine: str, prescription: Prescription, answer: Answer | None = None,
                      doc_index: int = 1) -> PrescriptionView:
    """`answer`: the document's answer, whose shared notes a row refers to by id instead of repeating them."""
    chosen = (prescription.recommended.precision, prescription.recommended.variant)
    measured = []
    for row in prescription.measured:
        ids, rest = notes_of(answer, row) if answer is not None else ((), row.notes)
        measured.append(MeasuredConfigView(row.config, fmt_ms(row.step_ms), row.versus(), "; ".join(rest),
                                           (row.precision, row.variant) == chosen, ids))
    changes = [UserChangeView(change_words(c.facts), [in_memory_words(m) for m in c.in_memory], c.how, c.cost)
               for c in prescription.user_changes]
    return PrescriptionView(machine, prescription.headline, prescription.recommended.how,
                            "faster" if prescription.recommended.changes_something else "same", measured,
                            [u.idea for u in prescription.untested], changes, prescription.baseline, doc_index)


def prescription_views(prescriptions: Sequence[Prescription], names: Mapping[str, str],
                       answer: Answer | None = None, doc_index: int = 1) -> list[PrescriptionView]:
    """One view per prescription, its machine named as the report names it."""
    return [prescription_view(names.get(p.machine, p.machine), p, answer, doc_index) for p in prescriptions]


def build(source: ReportInput) -> list[PrescriptionView]:
    """Every document's prescriptions, each machine named as the report names it."""
    return [p for i, d in enumerate(source.documents, 1)
            for p in prescription_views(d.diagnosis.prescriptions, d.names, d.diagnosis.answer, i)]
