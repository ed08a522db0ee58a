"""The terminal's short version of "where the time went" (explain --full), and diagnose's summary's order."""

from __future__ import annotations

import copy
import io
from pathlib import Path

from report_helpers import load_fixture
from rich.console import Console, RenderableType

from fp16doctor.analysis import Diagnosis, diagnose_document
from fp16doctor.analysis.op_compare import OPS_READING
from fp16doctor.diagnose import DiagnoseOutcome
from fp16doctor.textout.diagnose import diagnose_summary_text
from fp16doctor.textout.findings import findings_text
from fp16doctor.textout.ops import where_time_went


def _render(renderable: RenderableType | None, width: int = 80) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return out.getvalue()


def _diagnosed(name: str) -> Diagnosis:
    """What the analysis made of a results file, once, as every output receives it."""
    return diagnose_document(load_fixture(name))


def test_top_five_differences_per_16_bit_run_fit_80_columns():
    text = _render(where_time_went(_diagnosed("cpu-xeon-ops")))
    assert text.startswith("Where the time went") and " ".join(OPS_READING.split()) in " ".join(text.split())
    titles = {line.strip() for line in text.splitlines()}
    assert {"float16 vs float32", "mixed_bfloat16 vs float32"} <= titles
    first = next(line for line in text.splitlines() if line.startswith("conv2d "))
    assert "bwd weights" in first and "12.5 s" in first and "ref:any" in first
    float16_part = text.split("float16 vs float32")[1].split("mixed_bfloat16 vs float32")[0]
    assert sum(1 for line in float16_part.splitlines() if line.startswith("conv2d")) == 5
    assert "13 more rows in the report" in " ".join(float16_part.split())
    assert max(len(line) for line in text.splitlines()) <= 80


def test_explain_full_shows_where_the_time_went_after_the_verdicts():
    diagnosis = _diagnosed("cpu-xeon-ops")
    text = _render(findings_text(diagnosis, full=True), width=200)
    assert text.index("Verdicts") < text.index("Where the time went") < text.index("Findings, with their evidence")


def test_cut_short_run_says_its_window_and_low_coverage():
    text = " ".join(_render(where_time_went(_diagnosed("cpu-cut-short")), width=200).split())
    assert "the first step of a run cut short (its only step, profiled)" in text
    assert "Low coverage: the 16-bit run's listed ops account for only" in text


def test_without_ops_there_is_no_table():
    assert where_time_went(_diagnosed("seed-gtx1080-no-ops")) is None
    assert where_time_went(diagnose_document({"runs": []})) is None


def test_diagnose_summary_lays_out_the_answer_in_its_order_then_the_runs():
    doc = load_fixture("cpu-xeon-ops")
    outcome = DiagnoseOutcome(doc, Path("out/results.json"), None, 0, [], diagnose_document(doc))
    text = _render(diagnose_summary_text(outcome), width=100)
    assert (text.index("What bounds the step") < text.index("What to do") < text.index("Each configuration")
            < text.index("Findings") < text.index("Runs"))


LONG_IMPL = "brg_conv_bwd:avx10_1_512+brg_conv_fwd:avx10_1_512"


def test_long_onednn_names_keep_the_layer_and_pass_columns_at_80_columns() -> None:
    doc = copy.deepcopy(load_fixture("cpu-xeon-ops"))
    for run in doc["runs"]:
        for item in (run.get("ops") or {}).get("items", []):
            item["impl"] = LONG_IMPL
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(where_time_went(diagnose_document(doc)))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80, text
    rows = [line for line in text.splitlines() if line.startswith("conv2d ")]
    assert rows and all("bwd weights" in line or "forward" in line or "bwd data" in line for line in rows), rows
    assert any(line.startswith("conv2d_1 ") for line in text.splitlines()), text
    assert "brg_conv_bwd:avx10_1_\u2026" in text  # cut to fit, with the ellipsis that says so
