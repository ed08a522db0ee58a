"""The report's sections, in the order the page shows them: one module per section, one entry in SECTIONS.

A section's `build` makes its piece of the view model: a "document" section from one results document and the
diagnosis the analysis made of it (`DocumentInput`), a "report" section, at the top of the page, from every
document and their pieces (`ReportInput`; document sections are built first). Its HTML is
templates/_<name>.html.j2, which the page includes in this order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fp16doctor.report.sections import (
    answer,
    comparison,
    environment,
    findings,
    machines,
    prescription,
    reproduce,
    stack_changes,
    verdict,
)


@dataclass(frozen=True)
class Section:
    name: str  # its piece's name in the view, and its template: templates/_<name>.html.j2
    scope: str  # "report" (the top of the page) or "document" (inside each results file's article)
    build: Callable[[Any], Any]  # DocumentInput or ReportInput -> its piece of the view


SECTIONS: tuple[Section, ...] = (
    Section("answer", "report", answer.build),
    Section("prescription", "report", prescription.build),
    Section("verdict", "report", verdict.build),
    Section("stack_changes", "report", stack_changes.build),
    Section("comparison", "report", comparison.build),
    Section("machines", "document", machines.build),
    Section("findings", "document", findings.build),
    Section("environment", "document", environment.build),
    Section("reproduce", "document", reproduce.build),
)

__all__ = ["SECTIONS", "Section"]
