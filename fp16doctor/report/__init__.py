"""The report people share: one self-contained HTML file, or a markdown summary for an issue.

    render_html(docs) -> str          the full report (inline CSS and SVG, results embedded once)
    render_markdown(docs) -> str      a short summary with the verdict and a table
    write_report(docs, out, fmt)      either of them, written to `out` ("html" or "markdown")

Several documents make one comparison report, grouped by machine. Each takes `diagnoses`, the analysis of each
document where the caller made it already (diagnose does); otherwise the report makes it, once per document.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fp16doctor.errors import DoctorError

if TYPE_CHECKING:
    from fp16doctor.analysis import Diagnosis

FORMATS = ("html", "markdown")


def render_html(docs: Sequence[dict[str, Any]], diagnoses: Sequence[Diagnosis] | None = None) -> str:
    from fp16doctor.report.html import render_view
    from fp16doctor.report.viewmodel import build_report

    _require_docs(docs)
    return render_view(build_report(docs, diagnoses=diagnoses))


def render_markdown(docs: Sequence[dict[str, Any]], diagnoses: Sequence[Diagnosis] | None = None) -> str:
    from fp16doctor.report.markdown import markdown_from_view
    from fp16doctor.report.viewmodel import build_report

    _require_docs(docs)
    return markdown_from_view(build_report(docs, diagnoses=diagnoses))


def write_report(docs: Sequence[dict[str, Any]], out: Path, fmt: str,
                 diagnoses: Sequence[Diagnosis] | None = None) -> None:
    """Render and write atomically; an unwritable path is a DoctorError with a hint."""
    from fp16doctor.redaction import redact_home_paths
    from fp16doctor.results import write_atomic

    if fmt not in FORMATS:
        raise DoctorError(f"unknown report format {fmt!r}", hint="use html or markdown")
    out = Path(out)
    # As results.json does: a path into the report's own folder (a script's log) relative to it, homes as ~.
    here = {os.path.abspath(out.parent), str(out.parent.resolve())}
    shown = [redact_home_paths(doc, relative_to=here) for doc in docs]
    text = render_html(shown, diagnoses) if fmt == "html" else render_markdown(shown, diagnoses)
    if out.is_dir():
        raise DoctorError(f"{out} is a directory", hint="give a file name, e.g. --out report.html")
    try:
        write_atomic(out, text)
    except OSError as exc:
        raise DoctorError(
            f"cannot write the report to {out}: {exc.strerror or exc.__class__.__name__}",
            hint="choose a writable path for --out (the folder must exist or be creatable)",
        ) from None


def _require_docs(docs: Sequence[dict[str, Any]]) -> None:
    if not docs:
        raise DoctorError("no results to report on", hint="pass at least one results.json")


__all__ = ["FORMATS", "render_html", "render_markdown", "write_report"]
