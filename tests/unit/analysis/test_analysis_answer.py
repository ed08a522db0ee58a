"""The answer (analysis/answer.py) is built once from a diagnosis: the bound, the prescription, a line per
configuration with its cause, findings pointing at the prescription, each shared caveat one note; a location is
named only where a document has more than one machine or stack to tell apart."""

from __future__ import annotations

import json
from pathlib import Path

from fp16doctor.analysis import Answer, Diagnosis, diagnose_document

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


def _answer(name: str) -> tuple[Diagnosis, Answer]:
    diagnosis = diagnose_document(json.loads((EXAMPLES / name / "results.json").read_text(encoding="utf-8")))
    return diagnosis, diagnosis.answer


def test_one_machine_and_stack_names_no_location_and_shares_its_caveats_as_notes() -> None:
    diagnosis, answer = _answer("gpu-h200-keras-torch-full")
    assert answer.places == 1
    assert not any(x.where for x in (*answer.bounds, *answer.prescriptions, *answer.precisions))
    (bound,) = answer.bounds
    assert bound.kind == "device" and bound.verdict == "the host sets the pace"
    assert any(part.startswith("float16 4 %") for part in bound.parts)
    aa = [n for n in answer.notes if n.text.startswith("Not measurable: float32's two identical models")]
    assert len(aa) == 1 and sum(aa[0].id in row.notes for row in answer.precisions) >= 3
    pure = [n for n in answer.notes if n.text.startswith("Pure fp16")]
    assert len(pure) == 1
    float16 = next(row for row in answer.precisions if row.label == "float16")
    assert pure[0].id in float16.notes and "638 ms" in float16.cause and "162 ms" in float16.cause
    # The verdict's figure, as every output prints it.
    verdict = next(v for v in diagnosis.verdicts if v["precision"] == "float16" and v["variant"] == "original")
    assert float16.versus.startswith(verdict["figure"])


def test_a_finding_defers_to_the_prescription_by_id() -> None:
    diagnosis, answer = _answer("gpu-h200-keras-torch-full")
    (prescription,) = answer.prescriptions
    assert prescription.changes[0].words.startswith("input pipeline: 303 ms -> 82 ms")
    by_id = {f.id: f for f in answer.findings}
    assert by_id["host_fp16_emulation"].points_to == prescription.id
    assert by_id["input_pipeline_bound"].points_to == prescription.id  # its remedy is the measured change
    assert by_id["pageable_copies"].points_to == prescription.id  # its remedy is the batch_bytes change
    for finding in diagnosis.findings:
        assert diagnosis.prescriptions[0]["headline"] not in str(finding.get("recommendation"))


def test_several_stacks_are_told_apart_and_a_cpus_bound_is_its_ops() -> None:
    _, answer = _answer("cpu-epyc-avx2-three-stacks-quick")
    assert answer.places == 3
    assert all(p.where for p in answer.prescriptions) and all(row.where for row in answer.precisions)
    assert answer.bounds and all(b.kind == "cpu_ops" and b.where for b in answer.bounds)
