"""A finding leaves the analysis typed and frozen, and is the record results.json keeps: read back from any saved
document (`of`), written as it was (`to_dict`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from saved_documents import ROOT, documents_with, load

from fp16doctor.analysis import analyse, diagnose_document, saved_diagnosis
from fp16doctor.analysis.finding import Finding

DOCUMENTS = documents_with("findings")


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_finding_round_trips_through_its_saved_form(path: Path) -> None:
    doc = load(path)
    assert doc is not None
    diagnosis = saved_diagnosis(doc)
    for finding in (*diagnosis.findings, *diagnosis.saved_findings):
        saved = json.loads(json.dumps(finding.to_dict()))  # what results.json and --json write
        assert Finding.of(saved) == finding
        assert Finding.of(saved).to_dict() == saved


def test_the_h200_findings_are_read_by_their_fields() -> None:
    doc = json.loads((ROOT / "docs/examples/gpu-h200-keras-torch-full/results.json").read_text(encoding="utf-8"))
    diagnosis = diagnose_document(doc)
    first = diagnosis.findings[0]
    assert (first.id, first.rank, first.severity, first.precision) == ("host_fp16_emulation", 1, "warning", "float16")
    assert first.basis == "measured_ops" and first.explains_ms is not None and first.evidence
    assert first.remedy_places == (("host", "host", True),)  # it recommends a configuration there
    assert [f.to_dict() for f in diagnosis.findings] == analyse(doc)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.title = "something else"  # type: ignore[misc]
    with pytest.raises(TypeError):
        first.record["title"] = "something else"  # type: ignore[index]


def test_a_hand_written_finding_of_odd_fields_reads_without_error() -> None:
    odd = Finding.of({"id": 7, "rank": "first", "evidence": "one line", "ops": [1, {"name": "conv"}], "fix": "code"})
    assert (odd.id, odd.rank, odd.evidence, len(odd.ops), odd.fix) == ("7", None, (), 1, None)
    assert odd.severity == "info" and odd.to_dict()["evidence"] == "one line"
