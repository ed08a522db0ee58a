"""The next bound, prescribed: on the H200 recording (Keras 3 on torch), batches in memory still leave the GPU idle 76
of the 112 ms profiled float32 step, so after the input pipeline the prescription names compiled execution (untested
there, with the command that measures it), the JAX backend where its timings sit beside the document
(bare-keras-jax.json, as the backends test adds them), and uint8 batches from pinned memory where the 15 ms batch copy
is over a tenth of the step (an estimate at the link's rate); every output says them."""

from __future__ import annotations

import copy
import html
import io
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from fp16doctor.analysis import diagnose_document
from fp16doctor.analysis.experiments import plan
from fp16doctor.analysis.next_bound import IDLE_MIN_SHARE
from fp16doctor.analysis.words import change_words
from fp16doctor.diagnose import DiagnoseOutcome
from fp16doctor.invocation import check_diagnose_argv
from fp16doctor.report import render_html, render_markdown
from fp16doctor.textout.diagnose import diagnose_summary_text
from fp16doctor.textout.findings import findings_text
from tests.unit.analysis.test_analysis_backends import _jax_runs

DERIVED = ("findings", "verdicts", "prescriptions", "stack_comparisons")


def _fresh(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    for key in DERIVED:
        doc.pop(key, None)
    return doc


def _control(doc: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in doc["runs"] if r["stack"] == "host" and r["precision"] == "float32"
                and r["variant"] == "synthetic_input" and not r.get("experiment"))


def _changes(doc: dict[str, Any]) -> list[dict[str, Any]]:
    prescription = next(p for p in diagnose_document(doc).to_dict()["prescriptions"] if p["stack"] == "host")
    return prescription["user_changes"]


def test_after_the_input_pipeline_compiled_execution_is_untested_with_a_command_diagnose_accepts(
        h200_doc: dict[str, Any]) -> None:
    changes = _changes(_fresh(h200_doc))
    assert [c["kind"] for c in changes] == ["input_pipeline", "compiled", "batch_bytes"]
    compiled = changes[1]
    assert compiled["basis"] == "untested" and compiled["setting"] == "jit_compile=True"
    assert compiled["backend"] == "torch" and "torch.compile" in compiled["how"]
    command = compiled["command"].split()
    assert "--variant" in command and "synthetic_input+xla" in command and check_diagnose_argv(command) is None
    # The float32 control's profiled step: 112 ms, the device busy 36 ms of it.
    idle = compiled["device_idle"]
    assert idle["step_ms"] == pytest.approx(112.1, abs=0.1) and idle["idle_ms"] == pytest.approx(76.0, abs=0.1)
    assert idle["share"] > IDLE_MIN_SHARE
    words = change_words(compiled)
    assert "untested" in words and "idled 76 ms of the 112 ms" in words
    # Its command is the prescription's untested configuration, which every output prints on a line of its own.
    (prescription,) = diagnose_document(h200_doc).to_dict()["prescriptions"]
    assert any(u["command"] == compiled["command"] and u["setting"] == "jit_compile=True"
               for u in prescription["untested"])


def test_the_batch_copy_over_a_tenth_of_the_step_is_priced_as_uint8_at_the_links_rate(
        h200_doc: dict[str, Any]) -> None:
    change = _changes(_fresh(h200_doc))[-1]
    assert change["kind"] == "batch_bytes" and change["basis"] == "estimate"
    # 15.2 ms of pageable float32 copy a step, 13.6 % of the 112 ms profiled step.
    assert change["copy_ms"] == pytest.approx(15.2, abs=0.05) and change["pageable"] is True
    # 128 x 224 x 336 x 3 values: 115.6 MB of float32, 28.9 MB of uint8, at PCIe gen 5 x16's 63 GB/s.
    assert (change["batch_mb"], change["uint8_mb"], change["rate_gbs"]) == (115.6, 28.9, 63.0)
    assert change["estimated_copy_ms"] == pytest.approx(0.46, abs=0.01)
    words = change_words(change)
    assert "(an estimate)" in words and "PCIe gen 5 x16" in words
    assert "pin_memory=True" in change["how"] and "non_blocking=True" in change["how"]


def test_with_the_jax_timings_the_backend_follows_the_input_pipeline(h200_doc: dict[str, Any]) -> None:
    doc = _fresh(h200_doc)
    doc["runs"] += _jax_runs(_control(doc))
    changes = _changes(doc)
    assert [c["kind"] for c in changes] == ["input_pipeline", "backend", "compiled", "batch_bytes"]
    assert changes[1]["backend"] == "jax"


def test_a_measured_compiled_run_is_ranked_by_what_it_measured(h200_doc: dict[str, Any]) -> None:
    doc = _fresh(h200_doc)
    original = next(r for r in doc["runs"] if r["stack"] == "host" and r["precision"] == "float32"
                    and r["variant"] == "original" and not r.get("experiment"))
    # A compiled float32 run as the xla variant records it (its step a test's figure, not a measurement).
    compiled = copy.deepcopy(original)
    compiled.update(variant="xla", experiment={"changes": {"jit_compile": True}, "tests": None},
                    step_time_ms={"median": 200.0}, ops=None)
    compiled.pop("device_time", None)
    compiled["workload"]["jit_compile"] = True
    doc["runs"].append(compiled)
    changes = _changes(doc)
    measured = next(c for c in changes if c["kind"] == "compiled")
    assert measured["basis"] == "measured" and measured["measured_by"] == "xla"
    assert measured["changed_step_ms"] == pytest.approx(200.0) and measured["speedup"] > 1.4
    assert [c["kind"] for c in changes] == ["input_pipeline", "compiled", "batch_bytes"]
    assert "measured by the xla variant" in change_words(measured)
    # And the experiment that measures it is planned no more.
    assert all(item["variant"] != "xla" for item in plan(doc))


def test_the_compiled_experiment_is_planned_where_the_gpu_idles(h200_doc: dict[str, Any]) -> None:
    """Measured where the idle time is seen: with batches in memory (synthetic_input+xla), never as written."""
    assert not [i for i in plan(_fresh(h200_doc)) if i["variant"] == "xla"]
    items = [i for i in plan(_fresh(h200_doc)) if i["variant"] == "synthetic_input+xla"]
    assert [(i["precision"], i["experiment"]["changes"]) for i in items] == [("float32", {"jit_compile": True})]
    assert "skip_reason" not in items[0]


def test_the_recorded_idle_split_is_what_the_change_says(h200_doc: dict[str, Any]) -> None:
    doc = _fresh(h200_doc)
    _control(doc)["device_time"] = {"busy_ms": 36.1, "step_ms": 112.1, "copies_ms": {"h2d": 15.2},
                                    "h2d_pageable": True,
                                    "idle": {"waiting_on_data_ms": 30.0, "launch_gaps_ms": 40.0, "other_ms": 6.0}}
    compiled = next(c for c in _changes(doc) if c["kind"] == "compiled")
    assert compiled["device_idle"]["split"] == {"waiting_on_data_ms": 30.0, "launch_gaps_ms": 40.0, "other_ms": 6.0}
    assert "30 ms waiting on the host's data, 40 ms in launch and dispatch gaps, 6.0 ms other" in change_words(compiled)


def test_a_busy_device_gets_no_next_bound(h200_doc: dict[str, Any]) -> None:
    doc = _fresh(h200_doc)
    _control(doc)["device_time"] = {"busy_ms": 80.0, "step_ms": 112.1, "copies_ms": {"h2d": 15.2},
                                    "h2d_pageable": True}
    assert [c["kind"] for c in _changes(doc)] == ["input_pipeline"]


def _terminal(renderable: Any) -> str:
    out = io.StringIO()
    Console(file=out, width=1000, color_system=None).print(renderable)
    return out.getvalue()


def test_every_output_shows_the_changes_after_the_input_pipeline(h200_doc: dict[str, Any]) -> None:
    doc = _fresh(h200_doc)
    diagnosis = diagnose_document(doc)
    saved = {**doc, "findings": diagnosis.to_dict()["findings"], "verdicts": diagnosis.to_dict()["verdicts"],
             "prescriptions": diagnosis.to_dict()["prescriptions"], "stack_comparisons": diagnosis.stack_comparisons}
    outcome = DiagnoseOutcome(saved, Path("out/results.json"), None, 0, [], diagnosis)
    page = render_html([saved])
    outputs = {"terminal": _terminal(diagnose_summary_text(outcome)), "explain": _terminal(findings_text(diagnosis)),
               "html": html.unescape(re.sub(r"<[^>]+>", " ", page)), "markdown": render_markdown([saved])}
    for name, text in outputs.items():
        flat = re.sub(r"\s+", " ", text)
        assert "compiled execution (jit_compile=True on torch): untested" in flat, name
        assert "--variant synthetic_input+xla" in flat, name  # the command that measures it, in memory
        assert "uint8 batches from pinned memory" in flat and "(an estimate)" in flat, name
        # The input pipeline's program: whole where there is room, else named with where it is printed whole.
        assert "Rescaling(1. / 255)" in flat or "explain --full prints the program" in flat, name


def test_compiled_execution_is_measured_in_memory_where_the_idle_was_seen(h200_doc: dict[str, Any]) -> None:
    """The untested command measures with batches in memory (a dispatch saving of 20-40 ms is no measurement behind a
    303 ms step whose A/A control is blind under 25 %); once run, the combined variant is compared with the in-memory
    control, and the experiment as written is planned no more."""
    doc = _fresh(h200_doc)
    untested = next(c for c in _changes(doc) if c["kind"] == "compiled")
    assert untested["command"].endswith("--precision float32 --variant synthetic_input --variant synthetic_input+xla")
    assert untested["variant"] == "synthetic_input+xla"
    compiled = copy.deepcopy(_control(doc))
    compiled.update(variant="synthetic_input+xla", experiment={"changes": {"jit_compile": True}, "tests": None},
                    step_time_ms={"median": 60.0}, ops=None)
    compiled.pop("device_time", None)
    compiled["workload"]["jit_compile"] = True
    doc["runs"].append(compiled)
    measured = next(c for c in _changes(doc) if c["kind"] == "compiled")
    assert measured["basis"] == "measured" and measured["measured_by"] == "synthetic_input+xla"
    assert measured["variant"] == "synthetic_input" and measured["changed_step_ms"] == pytest.approx(60.0)
    assert "float32 with batches in memory, measured by the synthetic_input+xla variant" in change_words(measured)
    assert all(item["variant"] != "xla" for item in plan(doc))
    # Batches in memory are a control: the combined run is no configuration to adopt, nor measured against float32
    # as written.
    (prescription,) = diagnose_document(doc).to_dict()["prescriptions"]
    assert all(m["variant"] != "synthetic_input+xla" for m in prescription["measured"])
