"""A verdict leaves the analysis typed and frozen, and is the record results.json keeps: read back from any saved
document (`of`), written as it was (`to_dict`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from saved_documents import ROOT, documents_with, load

from fp16doctor.analysis import diagnose_document, saved_diagnosis
from fp16doctor.analysis.verdict import Verdict


@pytest.mark.parametrize("path", documents_with("verdicts"), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_verdict_round_trips_through_its_saved_form(path: Path) -> None:
    doc = load(path)
    assert doc is not None
    for verdict in saved_diagnosis(doc).verdicts:
        saved = json.loads(json.dumps(verdict.to_dict()))  # what results.json and --json write
        assert Verdict.of(saved) == verdict
        assert Verdict.of(saved).to_dict() == saved
    for own in doc.get("verdicts") or []:  # a file's own, as an earlier release may have written them
        if isinstance(own, dict):
            once = Verdict.of(own)
            assert Verdict.of(once.to_dict()) == once


def test_the_h200_verdict_is_read_by_its_fields() -> None:
    doc = json.loads((ROOT / "docs/examples/gpu-h200-keras-torch-full/results.json").read_text(encoding="utf-8"))
    diagnosis = diagnose_document(doc)
    fp16 = next(v for v in diagnosis.verdicts if (v.precision, v.variant) == ("float16", "original"))
    assert fp16.outcome == "slower" and fp16.figure == "2.2x slower" and fp16.bound_by == "host"
    assert fp16.cause == "host_fp16_emulation" and fp16.causes[0].id == fp16.cause
    assert fp16.causes[0].part == "host_batch"
    assert fp16.headline.startswith("float16 is 2.2x slower than float32")
    with pytest.raises(dataclasses.FrozenInstanceError):
        fp16.headline = "float16 is faster"  # type: ignore[misc]
    with pytest.raises(TypeError):
        fp16.record["headline"] = "float16 is faster"  # type: ignore[index]


def test_a_saved_figure_is_said_by_the_one_rule_whatever_the_file_phrased() -> None:
    verdict = Verdict.of({"precision": "float16", "ratio": 0.625, "step_ms": 800.0, "fp32_step_ms": 500.0,
                          "outcome": "slower", "figure": "much slower"})
    assert verdict.figure == "1.60x slower" and verdict.to_dict()["figure"] == "much slower"
