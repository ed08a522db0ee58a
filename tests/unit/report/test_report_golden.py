"""Golden files of the rendered report: any change to what a reader sees shows up as a diff here.

Regenerate after an intended change with FP16DOCTOR_REGEN_GOLDEN=1 and review the diff in git.
The findings are fixed ones so these files do not move with the rules; the verdicts are the analysis' own
(the report renders them word for word), so a change in what the analysis decides shows up here too.
"""

from __future__ import annotations

import difflib
import os
import re

import pytest
from report_helpers import GOLDEN, fixed_sources, load_fixture

from fp16doctor.report.html import render_view
from fp16doctor.report.markdown import markdown_from_view
from fp16doctor.report.viewmodel import build_report

CASES = {
    "seed-titanv": ["seed"],
    "synthetic-two-stacks": ["synthetic-two-stacks"],
    "comparison": ["seed", "synthetic-two-stacks", "cpu-only"],
    "cpu-xeon-ops": ["cpu-xeon-ops"],  # measured ops: "Where the time went"
}
PREDICTED = {("user", "float16"): 2.6, ("tf2.16-cuda12", "mixed_float16"): 3.1}


def scrub(text: str) -> str:
    """Volatile parts: the version of the fp16doctor that rendered the report."""
    return re.sub(r"fp16doctor \d+\.\d+\.\d+[\w.+-]*", "fp16doctor VERSION", text)


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    text = scrub(text)
    if os.environ.get("FP16DOCTOR_REGEN_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"{path} missing: run with FP16DOCTOR_REGEN_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(
            list(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), str(path), "rendered"))[:60]
        )
        pytest.fail(f"{name} differs from its golden file (FP16DOCTOR_REGEN_GOLDEN=1 to accept):\n{diff}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_html(case):
    docs = [load_fixture(n) for n in CASES[case]]
    _check(f"report-{case}.html", render_view(build_report(docs, fixed_sources(predicted=PREDICTED))))


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_markdown(case):
    docs = [load_fixture(n) for n in CASES[case]]
    _check(f"report-{case}.md", markdown_from_view(build_report(docs, fixed_sources(predicted=PREDICTED))))


def test_scrub_removes_only_the_version():
    assert scrub("by fp16doctor 0.1.0.dev3+g1234 at") == "by fp16doctor VERSION at"
    assert scrub("fp16doctor diagnose --quick") == "fp16doctor diagnose --quick"
