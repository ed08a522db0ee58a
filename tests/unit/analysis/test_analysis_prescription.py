"""The prescription every output reads is typed and frozen, and is the same data results.json keeps: read back from
any saved document (`of`), written as it was (`to_dict`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from saved_documents import ROOT, documents_with, load

from fp16doctor.analysis import diagnose_document, saved_diagnosis
from fp16doctor.analysis.prescription import MeasuredRow, Prescription

DOCUMENTS = documents_with("prescriptions")


def test_there_are_documents_to_read() -> None:
    assert len(DOCUMENTS) > 20
    assert any(p.parent.name == "gpu-h200-keras-torch-full" for p in DOCUMENTS)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_prescription_round_trips_through_its_saved_form(path: Path) -> None:
    doc = load(path)
    assert doc is not None
    diagnosis = saved_diagnosis(doc)
    for prescription in diagnosis.prescriptions:
        saved = json.loads(json.dumps(prescription.to_dict()))  # what results.json and --json write
        assert Prescription.of(saved) == prescription
        assert Prescription.of(saved).to_dict() == saved
    # The file's own prescriptions (an earlier release may have written them) read as typed data too.
    for own in doc.get("prescriptions") or []:
        once = Prescription.of(own)
        assert Prescription.of(once.to_dict()) == once
        assert once.headline == own["headline"] and len(once.measured) == len(own["measured"])


def test_the_h200_prescription_reads_as_the_file_wrote_it() -> None:
    doc = json.loads((ROOT / "docs/examples/gpu-h200-keras-torch-full/results.json").read_text(encoding="utf-8"))
    (prescription,) = diagnose_document(doc).prescriptions
    assert prescription.recommended.precision == "float32" and not prescription.recommended.changes_something
    off = prescription.measured_of("float32", "tf32_off")
    assert off is not None and off.setting == "NVIDIA_TF32_OVERRIDE=0" and off.versus() == "not compared"
    assert off.aa_check is not None and not off.aa_check.passed
    fp16 = prescription.measured_of("float16", "original")
    assert fp16 is not None and fp16.versus().startswith("2.") and "slower" in fp16.versus()


def test_a_prescription_cannot_be_changed_after_the_analysis() -> None:
    doc = json.loads((ROOT / "docs/examples/gpu-h200-keras-torch-full/results.json").read_text(encoding="utf-8"))
    (prescription,) = diagnose_document(doc).prescriptions
    with pytest.raises(dataclasses.FrozenInstanceError):
        prescription.headline = "Use float16"  # type: ignore[misc]
    change = prescription.user_changes[0]
    with pytest.raises(TypeError):
        change.facts["how"] = "something else"  # type: ignore[index]


def test_a_row_saved_before_notes_were_kept_gets_them_from_its_fields() -> None:
    row = MeasuredRow.of({"precision": "float16", "variant": "original", "step_ms": 16150.0, "speedup": 1 / 161.5,
                          "speedup_interval": [0.0, 1 / 161.5], "outcome": "slower", "bound": True,
                          "caveat": "pure fp16: weights in float16"})
    assert row.notes[0] == "pure fp16: weights in float16"
    assert row.notes[1].startswith("cut short by the slow-step bound")
    assert row.versus() == ">= 162x slower" and row.config == "float16"
