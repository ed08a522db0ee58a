"""The markdown summary people paste into a GitHub issue."""

from __future__ import annotations

import copy

from report_helpers import HOSTILE_ATTR, HOSTILE_SCRIPT, fixed_sources, hostile_doc

from fp16doctor.report.markdown import markdown_from_view, md_code, md_text
from fp16doctor.report.viewmodel import build_report


def _md(docs) -> str:
    return markdown_from_view(build_report(docs, fixed_sources()))


def test_summary_has_gpu_verdict_and_table(seed_doc):
    md = _md([seed_doc])
    assert md.startswith("## fp16doctor: float16 vs float32 on NVIDIA TITAN V\n")
    # The verdict as the detail says it (its "Verdicts" section), no "Verdict: On <GPU>:" wording of the summary's.
    assert "**Verdicts:**\n\n- float16 is 1.60x slower than float32 (800 ms vs 500 ms per step)" in md
    assert "| user | float32 | 500 ms | — | 256 | baseline | — | ok |" in md
    assert "| user | float16 | 800 ms | — | 160 | 1.60x slower | — | ok |" in md
    assert "```sh\nfp16doctor diagnose" in md


def test_table_rows_have_the_header_width(rich_doc):
    md = _md([rich_doc]).split("**Runs:**", 1)[1].split("\n\n**", 1)[0]  # the runs' table
    table = [line for line in md.splitlines() if line.startswith("|")]
    widths = {line.count(" | ") for line in table}
    assert len(widths) == 1 and len(table) == 2 + 6


def test_comparison_names_both_machines(seed_doc, cpu_doc):
    md = _md([seed_doc, cpu_doc])
    # Each document under its machines' name (no "Machines compared:" line of the summary's own).
    assert "### NVIDIA TITAN V" in md and "### Example EPYC (CPU only)" in md
    assert md.index("### NVIDIA TITAN V") < md.index("### Example EPYC (CPU only)")


def test_hostile_text_stays_text():
    md = _md([hostile_doc()])
    assert HOSTILE_SCRIPT not in md and "<img" not in md and "<script" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md


def test_pipes_and_newlines_cannot_break_the_table(seed_doc):
    doc = copy.deepcopy(seed_doc)
    doc["runs"][0]["stack"] = "a|b\nc"
    doc["runs"][1]["stack"] = "a|b\nc"
    md = _md([doc])
    assert "| a\\|b c | float32 |" in md
    assert HOSTILE_ATTR not in md


def test_inline_helpers():
    assert md_text("*x* [y](z) `q`") == "\\*x\\* \\[y\\](z) \\`q\\`"
    assert md_code("a`b") == "``a`b``"


def test_findings_are_the_answers_first_lines(seed_doc):
    """The summary keeps the answer's first findings, each in its one line (its fix's first sentence or a pointer
    to the prescription), and the answer's line naming the rest; their evidence is the report's."""
    from fp16doctor.report.markdown import TOP_FINDINGS

    view = build_report([seed_doc], fixed_sources())
    md = markdown_from_view(view)
    answer = view.documents[0].answer
    assert answer is not None
    (findings,) = [s for s in answer.sections(top=TOP_FINDINGS) if s.id == "findings"]
    shown = md.split(f"**{findings.heading}:**\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.lstrip("- ").replace("\\", "") for line in shown] == [line.text for line in findings.lines]


def test_the_summary_lists_what_the_prescription_was_chosen_from() -> None:
    def run(precision: str, ms: float) -> dict:
        return {"stack": "host", "precision": precision, "device": "cpu", "status": "ok",
                "step_time_ms": {"median": ms, "p10": ms * 0.98, "p90": ms * 1.02}}

    doc = {"schema_version": 1, "host": {"cpu": {"model": "test CPU", "flags": ["avx512_bf16"]}, "gpus": []},
           "runs": [run("float32", 100), run("mixed_bfloat16", 50), run("float16", 550)]}
    md = _md([doc])
    # The answer lists each configuration once, against float32, a caveat many rows share as one note.
    assert md.index("**What to do:**\n\n- Use mixed_bfloat16:") < md.index("**Each configuration against float32:**")
    assert "- mixed_bfloat16: 2.00x faster (1.90-2.10x), 50 ms vs 100 ms\n" in md
    assert "- float16: 5.50x slower (5.24-5.78x), 550 ms vs 100 ms \\[N1\\]" in md
    assert "- \\[N1\\] Pure fp16: weights and optimizer state in float16" in md


def test_a_document_without_runs_has_no_empty_runs_heading(seed_doc):
    findings_only = {k: v for k, v in copy.deepcopy(seed_doc).items() if k != "runs"}
    md = _md([findings_only])
    assert "**Runs" not in md and "| stack | precision |" not in md
    assert "**Runs:**" in _md([seed_doc])
