"""The prescription and the verdicts read the same, the prescription first, in every output: the terminal's
explain, explain --json, the HTML report and the markdown summary, all rendered from one document."""

from __future__ import annotations

import html
import io
import json
import sys
from pathlib import Path

from rich.console import Console

from fp16doctor.analysis import diagnose_document
from fp16doctor.diagnose import DiagnoseOutcome
from fp16doctor.report import write_report
from fp16doctor.report.html import render_view
from fp16doctor.report.markdown import markdown_from_view
from fp16doctor.report.viewmodel import build_report
from fp16doctor.textout.diagnose import diagnose_summary_text
from fp16doctor.textout.findings import findings_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attribution"))
from attribution_data import XEON  # noqa: E402
from test_analysis_causes import EPYC_AVX2_FLAGS, _windowed, op  # noqa: E402
from test_analysis_causes import doc as causes_doc  # noqa: E402
from test_analysis_recorded import recorded_doc  # noqa: E402


def terminal(doc: dict) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=400, color_system=None).print(findings_text(diagnose_document(doc), full=True))
    return buffer.getvalue()


def test_one_prescription_and_the_same_verdicts_first_everywhere() -> None:
    doc = recorded_doc(XEON)
    doc["invocation"] = {"argv": ["fp16doctor", "diagnose", "--quick"]}
    prescription, = diagnose_document(doc).to_dict()["prescriptions"]
    headline = prescription["headline"]
    assert headline.startswith("Use mixed_bfloat16:")
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
        flat = " ".join(text.split())  # a long line is broken at words where it is laid out
        for verdict in diagnose_document(doc).verdicts:  # each verdict, word for word, as the analysis put it
            assert " ".join(verdict.headline.split()) in flat, (name, verdict.headline)


def _everywhere(doc: dict) -> dict[str, str]:
    """Every output of one document, from one diagnosis: explain, diagnose's summary, the HTML and markdown."""
    diagnosis = diagnose_document(doc)
    view = build_report([doc], diagnoses=[diagnosis])
    buffer = io.StringIO()
    console = Console(file=buffer, width=400, color_system=None)
    console.print(findings_text(diagnosis, full=True))
    explain = buffer.getvalue()
    buffer = io.StringIO()
    outcome = DiagnoseOutcome(doc, Path("out/results.json"), None, 0, [], diagnosis)
    Console(file=buffer, width=400, color_system=None).print(diagnose_summary_text(outcome))
    return {"explain": explain, "summary": buffer.getvalue(), "html": html.unescape(render_view(view)),
            "markdown": markdown_from_view(view)}


def test_caveats_and_the_runs_table_read_the_same_in_every_output() -> None:
    """A verdict whose profiled windows missed most of the timed difference: its caveat, the prescription's notes
    and each run's ratio to float32 are the analysis' words and numbers in every output."""
    fp32 = [op("conv2d", "backward_weights", 300.0, "ynn_fusion.1", "float32"),
            op("conv2d", "forward", 700.0, "ynn_fusion.2", "float32", "Conv")]
    mixed = [op("conv2d", "backward_weights", 381.0, "ynn_fusion.1", "float16"),
             op("conv2d", "forward", 700.0, "ynn_fusion.2", "float16", "Conv")]
    doc = causes_doc(_windowed(990.0, 1069.0, fp32, "float32"), _windowed(1426.0, 1124.0, mixed, "mixed_float16"),
                     flags=EPYC_AVX2_FLAGS)
    diagnosis = diagnose_document(doc)
    (verdict,) = diagnosis.to_dict()["verdicts"]
    assert "did not recur there" in verdict["headline"]  # the window caveat, phrased once by the analysis
    reduced = next(r for r in diagnosis.runs if r.precision == "mixed_float16")
    assert reduced.speedup == verdict["ratio"] or abs(reduced.speedup - verdict["ratio"]) < 1e-4
    notes = [n for p in diagnosis.to_dict()["prescriptions"] for m in p["measured"] for n in m["notes"]]
    for name, text in _everywhere(doc).items():
        flat = " ".join(text.split())
        assert reduced.versus_fp32 in flat, (name, reduced.versus_fp32)
        if name != "explain":  # explain lists the runs as "Measured", with the same ratio
            assert "baseline" in flat, name
        if name == "summary":  # the answer: each configuration's line and the shared notes, said once each
            for row in diagnosis.answer.precisions:
                assert " ".join(row.text.split()) in flat, (name, row.text)
            for shared in diagnosis.answer.notes:
                assert " ".join(shared.text.split()) in flat, (name, shared.text)
            continue  # the verdict's sentence, the op tables and their caveats are the detail (report, --full)
        assert verdict["headline"] in flat, name
        for note in notes:
            assert note in flat, (name, note)
        for caveat in [c for comparison in diagnosis.comparisons for c in comparison.caveats]:
            assert caveat in flat, (name, caveat)


def test_a_backend_change_is_said_with_its_command_and_cost_in_every_output() -> None:
    from test_analysis_backends import EXAMPLE, _jax_runs

    doc = json.loads((EXAMPLE / "results.json").read_text(encoding="utf-8"))
    for key in ("findings", "verdicts", "prescriptions", "stack_comparisons"):
        doc.pop(key, None)
    torch_fp32 = next(r for r in doc["runs"] if r["stack"] == "host" and r["precision"] == "float32"
                      and r["variant"] == "synthetic_input" and not r.get("experiment"))
    doc["runs"] += _jax_runs(torch_fp32)
    change = next(c.to_dict() for p in diagnose_document(doc).prescriptions for c in p.user_changes
                  if c.kind == "backend")
    for name, text in _everywhere(doc).items():
        flat = " ".join(text.split())
        assert "backend jax:" in flat and "KERAS_BACKEND=jax" in flat, name
        assert change["cost"].split(":")[0] in flat, name


def test_the_measured_table_refers_to_the_answers_notes_instead_of_repeating_them(tmp_path: Path) -> None:
    """The A/A control's note was written out on every row it held against; the answer says it once (N1)."""
    h200 = Path(__file__).resolve().parents[3] / "docs" / "examples" / "gpu-h200-keras-torch-full" / "results.json"
    doc = json.loads(h200.read_text(encoding="utf-8"))
    answer = diagnose_document(doc).answer
    assert answer is not None and answer.notes
    page = tmp_path / "report.html"
    write_report([doc], page, "html")
    text = html.unescape(page.read_text(encoding="utf-8"))
    start = text.index('class="measured-configs"')
    table = text[start:text.index("</table>", start)]
    assert 'class="note-ref" href="#a1-note-N1"' in table
    for note in answer.notes:
        assert note.text not in table, note.id
        assert f'id="a1-note-{note.id}"' in text  # the target each reference links to
