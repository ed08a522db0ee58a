"""What the report shows, computed before any template runs.

`build_report(docs, diagnoses)` turns one or more results documents, each with the diagnosis the analysis made of
it (built once, by the caller or here), into typed, redacted view objects, section by section as
`report/sections` lists them. Templates and the markdown renderer only format these objects; the analysis
decided every verdict, pairing and ratio in them.

Every optional key of results.json may be missing; a missing number shows as a dash, never a crash.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from fp16doctor import __version__
from fp16doctor.analysis import Answer, Diagnosis, saved_diagnosis
from fp16doctor.analysis.answer import Section
from fp16doctor.analysis.detail import findings_about
from fp16doctor.analysis.values import listed_words
from fp16doctor.report.redact import redact
from fp16doctor.report.sections import SECTIONS
from fp16doctor.report.sections.answer import AnswerView
from fp16doctor.report.sections.common import text
from fp16doctor.report.sections.comparison import ComparisonRow, ComparisonSection
from fp16doctor.report.sections.environment import EnvironmentSection, EnvironmentView
from fp16doctor.report.sections.findings import FindingOpView, FindingView, FixView, TextPart
from fp16doctor.report.sections.inputs import DocumentInput, ReportInput, document_input
from fp16doctor.report.sections.machines import ChartsView, MachineView, RunRow
from fp16doctor.report.sections.prescription import PrescriptionView
from fp16doctor.report.sections.reproduce import ReproduceView
from fp16doctor.report.sections.time import OpRowView, TimeTableView
from fp16doctor.report.sections.verdict import VerdictView
from fp16doctor.stacks import all_stacks


@dataclass(frozen=True)
class DocumentView:
    anchor: str
    title: str
    created: str | None
    tool_version: str | None
    note: str | None
    sections: dict[str, Any]  # each document section's piece, in SECTIONS' order
    # The analysis' answer (analysis/answer.py): what the first screen and the markdown lay out, in its order.
    answer: Answer | None = None
    # The analysis' detail (analysis/detail.py, Diagnosis.detail): what a full view lays out after the answer.
    detail: tuple[Section, ...] = ()
    busy: str | None = None  # "measured on a busy machine: other processes used 48 % of the CPU ..." (busy.py)

    @property
    def section_names(self) -> list[str]:
        return list(self.sections)

    @property
    def machines(self) -> list[MachineView]:
        return list(self.sections.get("machines", []))

    @property
    def findings(self) -> list[FindingView]:
        return list(self.sections.get("findings", []))

    @property
    def findings_about(self) -> list[str]:
        """The detail's words on the findings as a whole (where they come from, or that there are none)."""
        return [line.text for line in findings_about(self.detail)]

    @property
    def environment(self) -> EnvironmentView:
        piece: EnvironmentSection = self.sections["environment"]
        return piece.environment

    @property
    def workload(self) -> list[tuple[str, str]]:
        piece: EnvironmentSection = self.sections["environment"]
        return piece.workload

    @property
    def reproduce(self) -> ReproduceView:
        piece: ReproduceView = self.sections["reproduce"]
        return piece


@dataclass(frozen=True)
class ReportView:
    title: str
    heading: str
    subtitle: str
    documents: list[DocumentView]
    sections: dict[str, Any]  # each report section's piece, in SECTIONS' order
    results_json: EmbeddedResults
    generator: str = field(default_factory=lambda: f"fp16doctor {__version__}")

    @property
    def section_names(self) -> list[str]:
        return list(self.sections)

    @property
    def is_comparison(self) -> bool:
        return len(self.documents) > 1 or sum(len(d.machines) for d in self.documents) > 1

    @property
    def headline(self) -> list[VerdictView]:
        return list(self.sections.get("verdict", []))

    @property
    def answers(self) -> list[AnswerView]:
        return list(self.sections.get("answer", []))

    @property
    def prescriptions(self) -> list[PrescriptionView]:
        return list(self.sections.get("prescription", []))

    @property
    def comparison(self) -> list[ComparisonRow]:
        piece: ComparisonSection = self.sections["comparison"]
        return piece.rows

    @property
    def comparison_precisions(self) -> list[str]:
        piece: ComparisonSection = self.sections["comparison"]
        return piece.precisions

    @property
    def comparison_chart(self) -> Markup:
        piece: ComparisonSection = self.sections["comparison"]
        return piece.chart


def roofline_of(diagnosis: Diagnosis) -> dict[tuple[str, str], float]:
    """Roofline best-case speedups by (stack, precision), where the analysis could estimate them."""
    return {(e.stack, e.precision): e.predicted_speedup for e in diagnosis.roofline
            if e.predicted_speedup is not None and e.predicted_speedup > 0}


def real_known_stacks() -> set[str] | None:
    return {s.name for s in all_stacks()}


@dataclass(frozen=True)
class Sources:
    """Where the report gets what its callers did not hand it; tests substitute fixed ones."""

    diagnose: Callable[[dict[str, Any]], Diagnosis] = saved_diagnosis
    roofline: Callable[[Diagnosis], Mapping[tuple[str, str], float]] = roofline_of
    known_stacks: Callable[[], set[str] | None] = real_known_stacks


def _document_view(source: DocumentInput, pieces: dict[str, Any]) -> DocumentView:
    doc = source.doc
    tool = doc.get("tool") if isinstance(doc.get("tool"), dict) else {}
    assert isinstance(tool, dict)
    return DocumentView(
        anchor=source.anchor,
        title=" + ".join(m.name for m in source.machines),
        created=text(doc.get("created")) or None,
        tool_version=text(tool.get("version")) or None,
        note=text(doc.get("note")) or None,
        sections=pieces,
        answer=source.diagnosis.answer,
        detail=source.diagnosis.detail,
        busy=source.diagnosis.busy.document_words() if source.diagnosis.busy is not None else None,
    )


# The embedded results stay plain JSON up to this many characters (compact); a larger set (a GPU diagnosis' op
# lists with their kernels' names: 1.1 MB for the H200 example) is embedded gzip-compressed and base64-encoded, so
# the page stays small (results.py's reader takes both).
EMBED_PLAIN_MAX = 200_000
EMBED_GZIP = "gzip+base64"


@dataclass(frozen=True)
class EmbeddedResults:
    """The redacted results as the page embeds them: `text` inside the <script>, `encoding` "" (JSON) or gzip+base64."""

    text: Markup
    encoding: str = ""


def embed_json(docs: Sequence[Mapping[str, Any]]) -> EmbeddedResults:
    """The redacted results as JSON that cannot end its <script> element early, compressed when large.

    `<`, `>` and `&` become \\u escapes (still the same JSON), so `</script>` or `<!--` in any string
    stays inert text inside <script type="application/json">; base64 has none of them.
    """
    redacted = [redact(dict(d)) for d in docs]
    compact = json.dumps(redacted, separators=(",", ":"), sort_keys=False, default=str, ensure_ascii=False)
    if len(compact) > EMBED_PLAIN_MAX:
        packed = gzip.compress(compact.encode("utf-8"), compresslevel=9, mtime=0)
        return EmbeddedResults(Markup(base64.b64encode(packed).decode("ascii")), EMBED_GZIP)
    text = json.dumps(redacted, indent=1, sort_keys=False, default=str, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return EmbeddedResults(Markup(text))


def build_report(docs: Sequence[Mapping[str, Any]], sources: Sources | None = None,
                 diagnoses: Sequence[Diagnosis] | None = None) -> ReportView:
    """The whole report's content, computed and redacted; templates only format it. `diagnoses`: the analysis of
    each document where the caller already made it (diagnose does), so it is never made twice."""
    sources = sources or Sources()
    if diagnoses is not None and len(diagnoses) != len(docs):
        raise ValueError("one diagnosis per document")
    made = list(diagnoses) if diagnoses is not None else [sources.diagnose(dict(doc)) for doc in docs]
    used_names: dict[str, int] = {}
    known = sources.known_stacks()
    inputs = [document_input(i, doc, made[i], used_names, sources.roofline(made[i]), known)
              for i, doc in enumerate(docs)]
    pieces = [{s.name: s.build(source) for s in SECTIONS if s.scope == "document"} for source in inputs]
    documents = [_document_view(source, piece) for source, piece in zip(inputs, pieces, strict=True)]
    top = ReportInput(inputs, pieces)
    report_pieces = {s.name: s.build(top) for s in SECTIONS if s.scope == "report"}
    names = [m.name for d in documents for m in d.machines]
    heading = f"float16 vs float32 on {listed_words(names)}" if names else "float16 vs float32"
    subtitle = (
        f"{len(docs)} results file{'s' if len(docs) != 1 else ''}, {len(names)} machine"
        f"{'s' if len(names) != 1 else ''}"
    )
    return ReportView(
        title=f"fp16doctor: {heading}",
        heading=heading,
        subtitle=subtitle,
        documents=documents,
        sections=report_pieces,
        results_json=embed_json(docs),
    )


__all__ = [
    "ChartsView", "ComparisonRow", "DocumentView", "EnvironmentView", "FindingOpView", "FindingView", "FixView",
    "MachineView", "OpRowView", "PrescriptionView", "ReportView", "ReproduceView", "RunRow", "Sources", "TextPart",
    "TimeTableView", "VerdictView", "build_report", "embed_json", "EmbeddedResults",
]
