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
    assert not any(x.where for x in (*answer.bounds, *answer.prescriptions, *answer.precisions, *answer.changes))
    (bound,) = answer.bounds
    assert bound.kind == "device" and bound.verdict == "the host sets the pace"
    assert any(part.startswith("float16 (665 ms a step = kernels 15 ms + copies 6.8 ms + host batch 638 ms + "
                               "unplaced 5.4 ms): GPU busy 3 %") for part in bound.parts)
    aa = [n for n in answer.notes if n.text.startswith("Not measurable: float32's two identical models")]
    assert len(aa) == 1 and sum(aa[0].id in row.notes for row in (*answer.precisions, *answer.changes)) >= 3
    pure = [n for n in answer.notes if n.text.startswith("Pure fp16")]
    assert len(pure) == 1
    float16 = next(row for row in answer.precisions if row.label == "float16")
    assert pure[0].id in float16.notes and "638 ms" in float16.cause and "162 ms" in float16.cause
    # The verdict's figure, as every output prints it.
    verdict = next(v for v in diagnosis.verdicts if (v.precision, v.variant) == ("float16", "original"))
    assert float16.versus.startswith(verdict.figure)


def test_a_finding_defers_to_the_prescription_by_id() -> None:
    diagnosis, answer = _answer("gpu-h200-keras-torch-full")
    (prescription,) = answer.prescriptions
    assert prescription.changes[0].words.startswith("input pipeline: 303 ms -> 82 ms")
    by_id = {f.id: f for f in answer.findings}
    assert by_id["host_fp16_emulation"].points_to == prescription.id
    assert by_id["input_pipeline_bound"].points_to == prescription.id  # its remedy is the measured change
    assert by_id["pageable_copies"].points_to == prescription.id  # its remedy is the batch_bytes change
    for finding in diagnosis.to_dict()["findings"]:
        assert diagnosis.to_dict()["prescriptions"][0]["headline"] not in str(finding.get("recommendation"))


def test_several_stacks_are_told_apart_and_a_cpus_bound_is_its_ops() -> None:
    _, answer = _answer("cpu-epyc-avx2-three-stacks-quick")
    assert answer.places == 3
    assert all(p.where for p in answer.prescriptions) and all(row.where for row in answer.precisions)
    assert answer.bounds and all(b.kind == "cpu_ops" and b.where for b in answer.bounds)


def test_each_change_is_said_against_the_configuration_it_changes() -> None:
    """Padding channels to 8 on float16 is judged against float16 as written (640 against 665 ms, not resolved), not
    against float32 (2.1x slower, which says nothing of the change); TF32 off, a change to float32, sits beside the
    other changes with its refusal; the precisions' lines keep only the configurations as written and in memory."""
    diagnosis, answer = _answer("gpu-h200-keras-torch-full")
    assert {row.label for row in answer.precisions} == {
        "float16", "mixed_float16", "mixed_bfloat16", "float16, batches in memory",
        "mixed_float16, batches in memory", "mixed_bfloat16, batches in memory"}
    changes = {row.label: row for row in answer.changes}
    padded = changes["float16 with input_channels=8"]
    assert padded.versus == "not resolved (0.87-1.24x, point 1.04x faster)" and padded.steps == "640 ms vs 665 ms"
    assert changes["float16 with batch_dtype=float32"].steps == "691 ms vs 665 ms"
    tf32 = changes["float32 with NVIDIA_TF32_OVERRIDE=0"]
    assert tf32.versus == "not compared" and tf32.steps == "284 ms vs 305 ms"
    refused = next(n for n in answer.notes if n.text.startswith("Not compared with float32"))
    assert refused.id in tf32.notes
    (prescription,) = diagnosis.to_dict()["prescriptions"]
    entry = next(m for m in prescription["measured"] if m["variant"] == "channels_padded"
                 and m["precision"] == "float16")
    assert entry["against"]["precision"] == "float16" and entry["speedup"] < 0.6  # 2.1x slower than float32


def test_a_change_against_a_run_the_bound_cut_is_a_one_sided_faster_bound() -> None:
    """On the AMX Xeon, float16 was cut at its first step (5865 ms) and oneDNN off ran it in 1641 ms: against a cut
    run the change is at least 3.6x faster, never an interval around a censored step."""
    _, answer = _answer("cpu-xeon-amx-quick")
    line = next(row for row in answer.changes if row.label == "float16 with TF_ENABLE_ONEDNN_OPTS=0")
    assert line.versus == ">= 3.6x faster" and line.steps == "1641 ms vs 5865 ms"
    cut = next(n for n in answer.notes if n.text.startswith("Cut short by the slow-step bound"))
    assert cut.id in line.notes


def test_a_difference_no_cause_is_most_of_lists_each_part_and_the_unplaced_rest() -> None:
    """float16 with batches in memory on the H200: the batch's copy −8.0 ms and the kernels' −6.2 ms of a −36 ms step,
    and −22 ms of host time no op in the trace places, on its one cause line, each as its parts line says it."""
    _, answer = _answer("gpu-h200-keras-torch-full")
    line = next(row for row in answer.precisions if row.label == "float16, batches in memory")
    assert line.cause.startswith("causes: the 16-bit batch, half the bytes, took less time (copies −8.0 ms of the "
                                 "−36 ms step)")
    assert "16-bit kernels saved time (kernels −6.2 ms)" in line.cause
    assert line.cause.endswith("unplaced −22 ms, host time no op in the trace places")
    whole = next(row for row in answer.precisions if row.label == "float16")  # one cause, most of it: its number
    assert whole.cause.startswith("cause: ") and "638 ms" in whole.cause


def test_a_change_timed_in_another_process_says_why_its_base_reads_another_step() -> None:
    """oneDNN off on the Xeon ran in rounds of its own: float32 is 128 ms there (its own process), 125 ms in every
    other line (its rounds); the change's note says which is which."""
    _, answer = _answer("cpu-xeon-amx-quick")
    line = next(row for row in answer.changes if row.label == "float32 with TF_ENABLE_ONEDNN_OPTS=0")
    assert line.steps == "344 ms vs 128 ms"
    apart = next(n for n in answer.notes if n.text.startswith("Timed in two processes"))
    assert apart.id in line.notes and "128 ms is its own process's step, 125 ms in its rounds" in apart.text


def test_a_cause_line_quotes_what_its_finding_measured_of_its_share() -> None:
    """The number a configuration's cause line quotes is its finding's `measured_line` (the share's own figure line,
    kept when the finding is made), never found again among the evidence by what it looks like."""
    quoted = 0
    for path in sorted(EXAMPLES.glob("*/results.json")):
        diagnosis = diagnose_document(json.loads(path.read_text(encoding="utf-8")))
        measured = {f.measured_line for f in diagnosis.findings if f.measured_line}
        quoted += sum(any(row.cause.endswith(f": {m}") for m in measured) for row in diagnosis.answer.precisions)
    assert quoted >= 5
    _, answer = _answer("gpu-h200-keras-torch-full")
    float16 = next(row for row in answer.precisions if row.label == "float16")
    assert float16.cause.endswith(": measured host batch time 638 ms in float16 vs 162 ms in float32 (the training "
                                  "step waits for each batch)")


def test_a_speed_finding_saved_before_measured_line_quotes_its_first_figure_line() -> None:
    from fp16doctor.analysis.finding import Finding

    saved = {"id": "host_fp16_emulation", "title": "Host-side preprocessing runs in float16", "explains_ms": 362.0,
             "evidence": ["accounts for 362 ms of the 362 ms difference", "the host's batch, in half precision",
                          "measured host batch time 638 ms in float16 vs 162 ms in float32"]}
    assert Finding.of(saved).measured_line == "measured host batch time 638 ms in float16 vs 162 ms in float32"
    assert Finding.of({**saved, "explains_ms": None}).measured_line is None
    finding = Finding.of({**saved, "measured_line": "the host's batch, in half precision"})
    assert finding.measured_line == "the host's batch, in half precision" and Finding.of(finding.to_dict()) == finding
