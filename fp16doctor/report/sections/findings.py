"""The findings, ranked as the analysis ranked them: evidence, the time each explains, the fix as code for the
run's stack."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fp16doctor.analysis import SEVERITY_RANK
from fp16doctor.analysis.answer import places_of
from fp16doctor.analysis.finding import Finding, is_code_line
from fp16doctor.analysis.values import pass_words
from fp16doctor.knowledge.kernels import kernel_short_name
from fp16doctor.report.redact import redact_text
from fp16doctor.report.sections.common import num as _num
from fp16doctor.report.sections.common import text as _text
from fp16doctor.report.sections.inputs import DocumentInput


@dataclass(frozen=True)
class FixView:
    stack_label: str
    code: str


@dataclass(frozen=True)
class TextPart:
    kind: str  # "text" or "code"
    text: str


@dataclass(frozen=True)
class FindingOpView:
    """A measured op a speed finding names: which layer and pass, what ran and how long."""

    where: str  # "conv2d backward weights"
    impl: str  # its short name
    dtype: str
    ms_per_step: float | None
    fp32_ms_per_step: float | None
    impl_whole: str = ""  # the whole name where the short one differs (shown in a collapsed detail)


@dataclass(frozen=True)
class FindingView:
    id: str
    title: str
    severity: str
    confidence: float | None
    evidence: list[str]
    recommendation: str  # prose only, code blocks left out (the markdown summary uses it)
    recommendation_parts: list[TextPart]  # prose and indented code blocks, in order
    fix: FixView | None  # code for the stack, when the recommendation brings none of its own
    # What it explains, as every output says it (Finding.explains_words): "explains 362 ms of float16, measured"
    explains: str = ""
    ops: tuple[FindingOpView, ...] = ()




def _rank_findings(findings: Sequence[Finding]) -> list[Finding]:
    """The analysis' own `rank` when it gives one (causes first); else severity, then confidence."""

    def key(item: tuple[int, Finding]) -> tuple[int, float, int, float, int]:
        index, f = item
        return (
            0 if f.rank is not None else 1,
            f.rank if f.rank is not None else 0.0,
            SEVERITY_RANK.get(f.severity, 3),
            -(f.confidence or 0.0),
            index,
        )

    return [f for _, f in sorted(enumerate(findings), key=key)]


def split_recommendation(text: str) -> list[TextPart]:
    """Prose and code apart: lines indented by four spaces (or a tab) are code, as in markdown."""
    parts: list[TextPart] = []
    for line in text.splitlines():
        kind = "code" if is_code_line(line) else "text"
        content = line[4:] if line.startswith("    ") else line.strip()
        if kind == "text" and not content:
            continue
        if parts and parts[-1].kind == kind:
            joiner = "\n" if kind == "code" else " "
            parts[-1] = TextPart(kind, parts[-1].text + joiner + content)
        else:
            parts.append(TextPart(kind, content))
    return parts


def _finding_views(findings: Sequence[Finding], places: Sequence[tuple[str, str]]) -> list[FindingView]:
    views = []
    for f in _rank_findings(findings):
        parts = split_recommendation(_text(f.recommendation))
        # The code the analysis chose for the finding's stack (fixes.attach_fixes), where it brings none of its own.
        fix = FixView(_text(f.fix_flavour), redact_text(f.fix_code)) if f.fix_code else None
        views.append(
            FindingView(
                id=_text(f.id) or "finding",
                title=_text(f.title) or _text(f.id) or "Finding",
                severity=f.severity if f.severity in SEVERITY_RANK else "info",
                confidence=f.confidence,
                evidence=[_text(e) for e in f.evidence],
                recommendation=" ".join(p.text for p in parts if p.kind == "text"),
                recommendation_parts=parts,
                fix=fix,
                explains=_text(f.explains_words(f.place(places), basis=True)),
                ops=tuple(_finding_ops(f)),
            )
        )
    return views



FINDING_OPS = 5  # a finding lists its biggest ops; "Where the time went" has the rest


def _finding_ops(finding: Finding) -> list[FindingOpView]:
    out = []
    for op in finding.ops[:FINDING_OPS]:
        named = _text(op.get("layer")) or _text(op.get("name"))
        where = " ".join(p for p in (named, _text(pass_words(op.get("pass")))) if p)
        whole = _text(op.get("impl"))
        short = _text(kernel_short_name(whole)) if whole else ""
        out.append(FindingOpView(where or "?", short, _text(op.get("dtype")),
                                 _num(op.get("ms_per_step")), _num(op.get("float32_ms_per_step")),
                                 whole if whole != short else ""))
    return out



def build(source: DocumentInput) -> list[FindingView]:
    return _finding_views(source.diagnosis.findings, places_of(source.diagnosis))
