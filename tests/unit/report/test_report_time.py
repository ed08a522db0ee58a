"""Where the time went, and the verdicts the analysis made, on hand-written results files with and without ops.

These run the real analysis: the report only renders its verdicts, so what is asserted about a verdict here is
what any CPU's results of this shape must give (the ops say what ran), not one machine's outcome.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from report_helpers import load_fixture

from fp16doctor.analysis.op_compare import op_comparisons
from fp16doctor.report.html import render_view
from fp16doctor.report.markdown import markdown_from_view
from fp16doctor.report.viewmodel import ReportView, Sources, build_report


def _sources() -> Sources:
    return Sources(roofline=lambda doc: {}, known_stacks=lambda: {"cpu"})


def _report(doc: dict[str, Any]) -> ReportView:
    return build_report([doc], _sources())


def _text(html: str) -> str:
    """The page's text as a reader sees it: tags gone, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.fixture
def ops_doc() -> dict[str, Any]:
    return load_fixture("cpu-xeon-ops")


def test_ref_any_weight_gradient_is_the_top_row_with_its_layer_impl_and_time(ops_doc):
    machine = _report(ops_doc).documents[0].machines[0]
    tables = {t.precision: t for t in machine.time_tables}
    assert set(tables) == {"float16", "mixed_bfloat16"}  # each 16-bit run with ops, against float32
    top = tables["float16"].rows[0]
    assert (top.layer, top.pass_label, top.impl) == ("conv2d", "backward weights", "ref:any")
    assert top.reduced_ms == pytest.approx(12527.1) and top.fp32_ms == pytest.approx(5.1)
    assert top.fp32_impl == "brgconv_bwd_w:avx10_1_512"
    diffs = [r.difference_ms for r in tables["float16"].rows if not r.is_rest]
    assert diffs == sorted(diffs, key=lambda d: -abs(d or 0.0))  # biggest differences first


def test_the_verdict_names_the_slow_kernel_measured(ops_doc):
    report = _report(ops_doc)
    verdict = next(v for v in report.headline if v.precision == "float16")
    assert verdict.cause_id == "slow_fp16_kernels" and verdict.basis == "measured_ops"
    assert verdict.tone == "slower" and "(measured:" in verdict.sentence
    assert "conv2d backward weights ran ref:any" in verdict.sentence
    finding = next(f for f in report.documents[0].findings if f.id == "slow_fp16_kernels")
    assert re.fullmatch(r"explains [0-9.]+ s of float16, measured", finding.explains)
    assert finding.ops[0].where == "conv2d backward weights" and finding.ops[0].impl == "ref:any"


def test_html_shows_where_the_time_went(ops_doc):
    text = _text(render_view(_report(ops_doc)))
    assert "Where the time went" in text
    assert "conv2d backward weights 5.1 ms 12.5 s +12.5 s" in text
    assert "ref:any float32: brgconv_bwd_w:avx10_1_512" in text
    # The caption is the analysis' (OpComparison.caption), as the markdown lays it out too.
    assert "ops from tf_profiler + onednn_verbose, coverage 96 % (float32 91 %)" in text
    assert "window: float16: a profiled window after the timed steps (1 step)" in text
    assert re.search(r"explains [0-9.]+ s of float16, measured", text)
    assert "Tensor Cores" not in text  # no kernel name says either way on a CPU


def test_markdown_shows_where_the_time_went(ops_doc):
    md = markdown_from_view(_report(ops_doc))
    assert "**Where the time went, float16 vs float32:**" in md
    assert "float16 step 24.5 s, float32 126 ms; ops from tf_profiler + onednn_verbose, coverage 96 %" in md
    # Each implementation in a cell of its own (no "(float32: ...)" wording of the summary's).
    assert "| `conv2d` | backward weights | 5.1 ms | 12.5 s | +12.5 s | `ref:any` | `brgconv_bwd_w:avx10_1_512` |" in md
    # The finding that accounts for it, as the answer says it.
    assert ("2. CRITICAL slow_fp16_kernels: conv2d backward weights ran ref:any in float16 "
            "(explains 23.7 s of float16)") in md


def test_rows_past_the_top_are_summed(ops_doc):
    [table] = [t for t in _report(ops_doc).documents[0].machines[0].time_tables if t.precision == "float16"]
    assert len(table.rows) == 13 and table.rows[-1].is_rest
    rest = table.rows[-1]
    comparison = next(c for c in op_comparisons(ops_doc) if c.precision == "float16")
    assert rest.rows == len(comparison.rows) - 12
    assert rest.reduced_ms == pytest.approx(sum(r.reduced_ms or 0 for r in comparison.rows[12:]))
    assert table.reduced_total_ms == pytest.approx(sum(i["ms_per_step"] for i in ops_doc["runs"][1]["ops"]["items"]))


def test_low_coverage_and_first_step_window_are_said():
    doc = load_fixture("cpu-cut-short")
    report = _report(doc)
    [table] = report.documents[0].machines[0].time_tables
    assert table.bound and table.low_coverage
    assert any("only 57%" in n for n in table.notes)
    assert "the first step of a run cut short" in table.window
    # float32 ops the cut-short window did not list are shown, not claimed as time saved
    missing = [r for r in table.rows if r.reduced_ms is None]
    assert missing and all(r.difference_ms is None for r in missing)
    text = _text(render_view(report))
    assert "Low coverage" in text and "not listed" in text


def test_cut_short_run_verdict_says_at_least(tmp_path):
    doc = load_fixture("cpu-cut-short")
    [verdict] = _report(doc).headline
    assert verdict.bound and verdict.tone == "slower"
    assert verdict.figure == ">= 175x slower"
    # float32 recorded no first step: the bound says it is not like for like, and that it is one-sided
    assert ("float16 is >= 175x slower than float32 (cut short by the slow-step bound, its fastest recorded "
            "step against float32's steady step") in verdict.sentence
    assert "22.1 s vs 126 ms; a one-sided bound, no interval from one step): mostly because" in verdict.sentence


def test_seed_style_file_without_ops_gets_a_likely_cause_not_a_charged_one():
    doc = load_fixture("seed-gtx1080-no-ops")
    report = _report(doc)
    [verdict] = report.headline
    assert verdict.tone == "slower" and verdict.basis is None
    assert "probably because" in verdict.sentence and "(estimated:" not in verdict.sentence
    assert report.documents[0].machines[0].time_tables == []
    assert "Where the time went" not in render_view(report)


def test_float32_partner_without_ops_is_said(ops_doc):
    doc = copy.deepcopy(ops_doc)
    del doc["runs"][0]["ops"]
    tables = _report(doc).documents[0].machines[0].time_tables
    table = next(t for t in tables if t.precision == "float16")
    assert any("float32 run has no measured ops" in n for n in table.notes)
    assert table.rows[0].fp32_ms is None and table.rows[0].difference_ms is None


def test_saved_verdicts_are_used_when_there_are_no_runs_to_recompute_from():
    saved = {"machine": "host", "stack": "cpu", "precision": "float16", "ratio": 0.5, "cause": "old_stack",
             "explained_share": 0.8}
    doc = {"schema_version": 1, "host": {"gpus": []}, "runs": [], "verdicts": [saved]}
    [verdict] = _report(doc).headline
    assert verdict.figure == "2.00x slower" and verdict.cause_id == "old_stack"
    assert verdict.sentence == (
        "float16 is 2.00x slower than float32 (stack cpu), mostly because the stack predates fast fp16 paths"
    )
    saved["explained_share"] = 0.3
    assert "partly because the stack predates fast fp16 paths; 70% of it is unexplained" in \
        _report(doc).headline[0].sentence


def test_runs_win_over_saved_verdicts(ops_doc):
    doc = copy.deepcopy(ops_doc)
    doc["verdicts"] = [{"machine": "host", "stack": "host", "precision": "float16", "ratio": 0.9,
                        "cause": "old_stack"}]
    verdict = next(v for v in _report(doc).headline if v.precision == "float16")
    assert verdict.cause_id == "slow_fp16_kernels"


def test_verdicts_go_to_their_own_machine(ops_doc):
    doc = copy.deepcopy(ops_doc)
    remote = copy.deepcopy(doc["runs"][:2])
    for run in remote:
        run["machine"] = "gpu-node"
        run["engine"] = {"kind": "docker", "docker_host": "tcp://gpu-node:2376"}
    doc["runs"] += remote
    machines = _report(doc).documents[0].machines
    assert [m.name for m in machines][1] == "machine gpu-node"  # no GPU named, no record of its machine
    assert [v.precision for v in machines[1].verdicts] == ["float16"]
    assert [t.precision for t in machines[1].time_tables] == ["float16"]
    assert len(machines[0].time_tables) == 2


def test_hostile_op_names_are_text(ops_doc):
    doc = copy.deepcopy(ops_doc)
    doc["runs"][1]["ops"]["items"][1]["impl"] = "<script>alert(1)</script>"
    doc["runs"][1]["ops"]["items"][1]["layer"] = "<img src=x onerror=alert(1)>"
    html = render_view(_report(doc))
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_tensor_core_use_is_shown_where_a_kernel_name_said_it(ops_doc):
    doc = copy.deepcopy(ops_doc)
    for item in doc["runs"][1]["ops"]["items"]:
        if item["layer"] == "conv2d_1" and item["pass"] in ("forward", "backward_data"):
            item["tensor_cores"] = item["pass"] == "forward"  # true on one, false on the other
    table = next(t for t in _report(doc).documents[0].machines[0].time_tables if t.precision == "float16")
    marks = {(r.layer, r.pass_label): r.tensor_cores for r in table.rows}
    assert table.show_tensor_cores
    assert marks[("conv2d_1", "forward")] == "yes" and marks[("conv2d_1", "backward data")] == "no"
    assert marks[("conv2d", "backward weights")] == ""  # unknown stays unknown, never "no"
    assert "Tensor Cores" in _text(render_view(_report(doc)))
