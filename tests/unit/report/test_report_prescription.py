"""The prescription and the verdicts read the same, the prescription first, in every output: the terminal's
explain, explain --json, the HTML report and the markdown summary, all rendered from one document."""

from __future__ import annotations

import html
import io
import sys
from pathlib import Path

from rich.console import Console

from fp16doctor.analysis import diagnose_document
from fp16doctor.report.html import render_view
from fp16doctor.report.markdown import markdown_from_view
from fp16doctor.report.viewmodel import build_report
from fp16doctor.textout.findings import findings_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attribution"))
from attribution_data import XEON  # noqa: E402
from test_analysis_recorded import recorded_doc  # noqa: E402


def terminal(doc: dict) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=400, color_system=None).print(findings_text(doc, diagnose_document(doc)))
    return buffer.getvalue()


def test_one_prescription_and_the_same_verdicts_first_everywhere() -> None:
    doc = recorded_doc(XEON)
    doc["invocation"] = {"argv": ["fp16doctor", "diagnose", "--quick"]}
    prescription, = diagnose_document(doc).prescriptions
    headline = prescription["headline"]
    assert headline.startswith("Use mixed_bfloat16 on host")
    view = build_report([doc])
    outputs = {
        "terminal": terminal(doc),
        "html": html.unescape(render_view(view)),
        "markdown": markdown_from_view(view),
    }
    for name, text in outputs.items():
        assert headline in text, name
        assert prescription["recommended"]["how"] in text, name
        first_verdict = text.find("float16 is")
        assert 0 <= text.index(headline) < first_verdict, f"{name}: the prescription comes before the verdicts"
        for verdict in diagnose_document(doc).verdicts:  # each verdict, word for word, as the analysis put it
            assert verdict["headline"] in text, (name, verdict["headline"])
