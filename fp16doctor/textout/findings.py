"""`fp16doctor explain` for the terminal: the answer (textout/answer.py), then with --full the detail (the
prescription's measured table, the verdicts, the runs, the roofline, each ranked finding with its evidence and
fix). Data in, a rich renderable out.

Plain styled text rather than panels, so long evidence lines wrap in any terminal width (and soft-wrap
consoles) instead of being cut off.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from fp16doctor.analysis import Diagnosis
from fp16doctor.analysis.answer import Section
from fp16doctor.analysis.detail import BETWEEN_AFTER, DETAIL_HEADINGS, DETAIL_ORDER, findings_about
from fp16doctor.textout.answer import answer_sections, sections_text
from fp16doctor.textout.ops import where_time_went
from fp16doctor.textout.stack_compare import stack_comparisons_text


def findings_text(diagnosis: Diagnosis, full: bool = False) -> RenderableType:
    """The answer (answer.py: the bound, what to do, a line per precision, the notes, a line per finding); with
    `full`, then the detail: the prescription's measured table, the verdicts, measured runs, the roofline, and each
    finding with its evidence and recommendation, most important first."""
    findings = diagnosis.findings
    head, rest = answer_sections(diagnosis.answer, findings=not full, whole_code=full)
    parts: list[RenderableType] = [t for t in (head, rest) if t.plain]
    if not full:
        if not findings and not parts:  # nothing to answer: the detail's words on the findings as a whole
            parts.append(sections_text([Section("finding_detail", DETAIL_HEADINGS["finding_detail"],
                                                findings_about(diagnosis.detail))]))
        return Group(*parts)
    if parts:
        parts.append(Text("\nDetail", style="bold underline"))
    # The detail, as the analysis composed it (detail.py); the comparisons between stacks, op by op, as table data
    # laid out in cells, after the verdicts.
    sections = diagnosis.detail
    cut = sum(DETAIL_ORDER.index(s.id) <= DETAIL_ORDER.index(BETWEEN_AFTER) for s in sections)
    parts += [t for t in (sections_text(sections[:cut]),) if t.plain]
    for table in (stack_comparisons_text(diagnosis.stack_comparisons), where_time_went(diagnosis)):
        if table is not None:
            parts.append(table)
    parts += [t for t in (sections_text(sections[cut:]),) if t.plain]
    return Group(*parts)
