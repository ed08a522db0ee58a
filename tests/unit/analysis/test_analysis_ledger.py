"""Each timed configuration's ledger: its step split into parts that add up to it, in every document the project
keeps, in `explain --json`, and in the answer's words (the bound line, a decided configuration's parts)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_analysis_explain_cli import run_explain

from fp16doctor.analysis import diagnose_document
from fp16doctor.analysis.context import build_context
from fp16doctor.analysis.ledger import ADDS_UP, OTHER_PARTS, Ledger, _Measured, allocate, ledgers, named_changes

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "docs" / "examples"
DATA = ROOT / "tests" / "data"
DOCUMENTS = sorted([*EXAMPLES.glob("*/results.json"), *(DATA / "recordings").glob("*/*.results.json"),
                    *(DATA / "examples").glob("*.json"), *(DATA / "cases").glob("*.json")])


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_ledger_adds_up_to_its_step_and_no_part_is_negative(path: Path) -> None:
    for ledger in diagnose_document(_load(path)).ledgers:
        assert ledger.unplaced_ms >= 0 and all(p.ms >= 0 and p.clipped_ms >= 0 for p in ledger.parts), ledger
        assert abs(ledger.placed_ms + ledger.unplaced_ms - ledger.step_ms) <= ADDS_UP * ledger.step_ms, ledger
        saved = json.loads(json.dumps(ledger.to_dict()))
        assert Ledger.of(saved).to_dict() == saved  # results.json keeps it whole


def test_explain_json_carries_a_ledger_per_timed_configuration_and_the_answer() -> None:
    path = EXAMPLES / "gpu-h200-keras-torch-full" / "results.json"
    code, stdout, stderr = run_explain(path, "--json")
    assert code == 0, stderr
    out = json.loads(stdout)
    timed = [r for r in _load(path)["runs"] if r["status"] == "ok"]
    assert len(out["ledgers"]) == len(timed)
    float16 = next(led for led in out["ledgers"] if (led["precision"], led["variant"]) == ("float16", "original"))
    parts = {p["name"]: p["ms"] for p in float16["parts"]}
    # The host builds float16's batch in 638 ms of its 665 ms step; the GPU's kernels and copies take 22 ms of it.
    assert parts["host_batch"] == pytest.approx(638.5, abs=0.1)
    assert parts["kernels"] + parts["copies"] == pytest.approx(21.6, abs=0.1)
    assert sum(parts.values()) + float16["unplaced_ms"] == pytest.approx(float16["step_ms"], rel=ADDS_UP)
    answer = out["answer"]
    assert answer["order"][:3] == ["bound", "what_to_do", "precisions"]
    texts = [row.strip() for section in answer["sections"] for line in section["lines"]
             for row in line["text"].splitlines()]
    assert texts and all(row in answer["text"] for row in texts)


def test_the_h200_float16_line_reconciles_its_host_batch_with_its_step() -> None:
    """638 - 162 = 477 ms more host batch, 362 ms more step: the rest of float16's step is shorter, and the line says
    by how much, part by part, so the reader can add it up."""
    answer = diagnose_document(_load(EXAMPLES / "gpu-h200-keras-torch-full" / "results.json")).answer
    float16 = next(row for row in answer.precisions if row.label == "float16")
    assert float16.parts.startswith("against float32's parts: host batch +477 ms (162 -> 638 ms); unplaced −100 ms")
    assert float16.parts.endswith("the step +362 ms")
    signed = [float(m.replace("−", "-")) for m in re.findall(r"([+−]\d+(?:\.\d+)?) ms", float16.parts)]
    assert sum(signed[:-1]) == pytest.approx(signed[-1], abs=1.0)


def test_a_cut_run_is_a_bound_with_the_ops_still_running_at_the_cut() -> None:
    """The AMX Xeon's float16 ran oneDNN's reference kernels until the slow-step bound cut its first step: its line
    says the bound and its rule, never "ms a step", and its ops, which shared two cores, as having run at once."""
    diagnosis = diagnose_document(_load(EXAMPLES / "cpu-xeon-amx-quick" / "results.json"))
    ledger = next(led for led in diagnosis.ledgers if (led.precision, led.variant) == ("float16", "original"))
    assert ledger.cut and ledger.bound_rule == "float32's first step 864 ms + 5000 ms"
    assert len(ledger.in_flight) == 2
    (bound,) = diagnosis.answer.bounds
    line = next(part for part in bound.parts if part.startswith("float16 "))
    assert line.startswith("float16 (cut at fp16doctor's bound after 5865 ms (float32's first step 864 ms + 5000 ms)")
    assert "a step" not in line and "which ran at once" in line and "running at the cut" in line


@pytest.mark.parametrize("name", ["cpu-xeon-amx-quick", "cpu-epyc-avx512bf16-quick", "gpu-h200-keras-torch-full"])
def test_each_bound_line_adds_its_parts_up_to_its_step(name: str) -> None:
    """"X ms a step = a + b + c": the figures on the line add up to the step (to the rounding of what is printed)."""
    for bound in diagnose_document(_load(EXAMPLES / name / "results.json")).answer.bounds:
        for part in bound.parts:
            step_text, _, rest = part.partition(" = ")
            step = float(re.findall(r"(\d+(?:\.\d+)?) ms", step_text)[0])
            figures = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?) ms", rest.split(")")[0])]
            assert sum(figures) == pytest.approx(step, rel=0.01, abs=1.0), part


def test_ops_that_ran_at_once_never_add_past_their_step() -> None:
    """Op times recorded without intervals may overlap (two cores): the step holds what it can, in the stated order
    (input first, then compute), and the ledger says what it could not hold instead of a part larger than the step."""
    doc = {"schema_version": 1, "host": {"gpus": []}, "runs": [{
        "stack": "host", "precision": "float16", "device": "cpu", "status": "ok", "step_time_ms": {"median": 100.0},
        "ops": {"source": "tf_profiler", "items": [
            {"name": "Generator", "pass": "input", "ms_per_step": 10.0},
            {"name": "Conv2DBackpropFilter", "layer": "conv2d", "pass": "backward_weights", "ms_per_step": 80.0},
            {"name": "Conv2DBackpropInput", "layer": "conv2d", "pass": "backward_data", "ms_per_step": 60.0}]}}]}
    (ledger,) = ledgers(build_context(doc))
    assert [(p.name, p.ms, p.clipped_ms) for p in ledger.parts] == [("input", 10.0, 0.0), ("compute", 90.0, 50.0)]
    assert ledger.unplaced_ms == 0.0


def test_allocation_gives_overlap_to_the_first_part_and_leaves_the_rest_unplaced() -> None:
    parts, unplaced = allocate(50.0, [_Measured("copies", 10.0, "device_time"), _Measured("kernels", 30.0,
                                                                                          "device_time")])
    assert [(p.name, p.ms) for p in parts] == [("kernels", 30.0), ("copies", 10.0)] and unplaced == 10.0
    parts, unplaced = allocate(35.0, [_Measured("kernels", 30.0, "device_time"), _Measured("copies", 10.0,
                                                                                           "device_time")])
    assert [(p.name, p.ms, p.clipped_ms) for p in parts] == [("kernels", 30.0, 0.0), ("copies", 5.0, 5.0)]
    assert unplaced == 0.0


def test_a_step_change_names_its_largest_parts_and_groups_two_or_more_small_ones() -> None:
    four = [("kernels", -6.2), ("copies", -8.5), ("host_batch", 477.0), ("unplaced", -100.0)]
    assert named_changes(four) == [("host_batch", 477.0), ("unplaced", -100.0), ("copies", -8.5), ("kernels", -6.2)]
    five = [*four, ("launch_gaps", 1.0)]
    assert named_changes(five) == [("host_batch", 477.0), ("unplaced", -100.0), ("copies", -8.5),
                                   (OTHER_PARTS, pytest.approx(-5.2))]
    assert named_changes([("kernels", 0.01), ("copies", -3.0)]) == [("copies", -3.0)]  # under what words show


def test_a_configuration_timed_two_ways_says_both_where_they_disagree() -> None:
    """On the H200, mixed_float16 and mixed_bfloat16 ran 1.31x and 1.33x faster than float32 in processes of their
    own, and at float32's speed in the interleaved rounds: the answer says both, and which one a user's fit() sees."""
    answer = diagnose_document(_load(EXAMPLES / "gpu-h200-keras-torch-full" / "results.json")).answer
    notes = {n.id: n.text for n in answer.notes}
    rows = {row.label: [notes[i] for i in row.notes] for row in answer.precisions}
    assert any("233 ms against float32's 305 ms (1.31x faster)" in n for n in rows["mixed_float16"])
    assert any("230 ms against float32's 305 ms (1.33x faster)" in n for n in rows["mixed_bfloat16"])
    assert any("float32's 109 ms" in n for n in rows["mixed_bfloat16, batches in memory"])
    assert not any(n.startswith("Timed two ways") for n in rows["float16, batches in memory"])  # 1.80x and 1.86x


def test_the_input_pipelines_worth_is_the_range_its_two_timings_give() -> None:
    """float32 went from 303 to 82 ms in the rounds (3.7x) and from 305 to 109 ms in processes of its own (2.8x): the
    prescription says 2.8-3.7x, never the flattering end alone, and why float16's in-memory gain waits."""
    diagnosis = diagnose_document(_load(EXAMPLES / "gpu-h200-keras-torch-full" / "results.json"))
    (prescription,) = diagnosis.to_dict()["prescriptions"]
    assert "(2.8-3.7x faster)" in prescription["headline"]
    assert "float16 was 1.8x faster, to measure again after the fix (pure float16: watch its loss)" in \
        prescription["headline"]
    first = diagnosis.answer.prescriptions[0].changes[0].words
    assert "2.8-3.7x faster: 3.7x in the interleaved rounds, 2.8x in processes of their own, 305 ms -> 109 ms" in first
