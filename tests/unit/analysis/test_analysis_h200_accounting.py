"""The whole GPU step accounted for on the H200 recording as recorded (docs/examples/gpu-h200-keras-torch-full): a
verdict's difference over the ledgers' parts (the kernels, the batch's copy, the host's batch) and what no part
places, each counted once; the device change of a verdict counts kernels, not the copy of an identical batch."""

from __future__ import annotations

import json
from typing import Any

import pytest


def _verdict(h200, precision: str, variant: str = "original") -> dict[str, Any]:
    return next(v for v in h200.to_dict()["verdicts"] if (v["precision"], v["variant"]) == (precision, variant))


def test_in_memory_float16_is_accounted_over_copy_and_kernels_and_the_rest_is_sized(h200):
    verdict = _verdict(h200, "float16", "synthetic_input")
    parts = verdict["accounted"]
    # The recording's kernels: 20.9 ms a step in float32, 14.8 ms in float16; its pageable copy 15.2 ms and 7.2 ms.
    assert parts["kernels_ms"] == pytest.approx(-6.2, abs=0.2)
    assert parts["copies_ms"] == pytest.approx(-8.0, abs=0.2)
    assert sum(v for k, v in parts.items() if k != "source") == pytest.approx(verdict["difference_ms"], abs=0.01)
    assert parts["unplaced_host_ms"] < 0  # what no part of the ledgers places, said as a size
    assert parts["source"] == "ledgers"
    named = {c["id"]: c["explains_ms"] for c in verdict["causes"]}
    assert named["smaller_16bit_batches"] == pytest.approx(8.0, abs=0.2)
    assert named["fast_16bit_kernels"] == pytest.approx(parts["kernels_ms"] * -1, abs=0.01)  # the ledger's kernels
    assert verdict["cause"] == "smaller_16bit_batches"
    assert "of the timed difference, unplaced −22 ms, copies −8.0 ms and kernels −6.2 ms" in verdict["headline"]
    assert "host time no op" not in verdict["headline"]
    assert "unexplained" not in verdict["headline"]


def test_no_finding_credits_the_kernels_with_the_gain(h200):
    words = json.dumps(h200.to_dict()["findings"], ensure_ascii=False)
    assert "are what made the step faster" not in words


def test_the_mixed_verdicts_device_change_counts_kernels_not_the_copy_of_one_batch(h200):
    mixed16, mixedbf16 = _verdict(h200, "mixed_float16"), _verdict(h200, "mixed_bfloat16")
    # Both copied the same float32 batch (12 ms and 16 ms a copy); their kernels changed alike (21 -> 15, 21 -> 16 ms).
    assert mixed16["kernel_difference_ms"] == pytest.approx(-6.0, abs=0.3)
    assert mixedbf16["kernel_difference_ms"] == pytest.approx(-5.3, abs=0.3)
    for verdict in (mixed16, mixedbf16):
        assert "of kernel time per step" in verdict["headline"]
        assert "of device time per step" not in verdict["headline"]
        assert not any(c["id"] == "smaller_16bit_batches" for c in verdict["causes"])  # a float32 batch in both


def test_each_in_memory_runs_idle_split_adds_up_to_its_idle_time_and_is_on_its_verdict(h200_doc, h200):
    from fp16doctor.analysis.context import build_context

    ctx = build_context(h200_doc)
    in_memory = [r for r in ctx.ok_runs() if r.variant == "synthetic_input"]
    assert len(in_memory) == 4
    for run in in_memory:
        device = run.device_time
        assert device is not None and device.idle is not None and device.host_ms
        assert device.idle.total_ms == pytest.approx(device.host_ms, rel=0.10)
    for verdict in (v for v in h200.to_dict()["verdicts"] if v["variant"] == "synthetic_input"):
        idle = verdict["device_idle"]
        run = next(r for r in in_memory if r.precision == verdict["precision"])
        assert (idle["waiting_on_data_ms"] or 0) + (idle["launch_gaps_ms"] or 0) + idle["other_ms"] == pytest.approx(
            run.device_time.host_ms, rel=0.10)
        # A kind dominates only where every kind was measured: with launch gaps unknown, none is said to.
        assert (idle["dominant"] is None if idle["launch_gaps_ms"] is None
                else idle["dominant"] in ("waiting_on_data_ms", "launch_gaps_ms", "other_ms"))
    # float16's own: the recorded rows hold no timestamps, so a launch gap is not told from the rest, and it says so.
    float16 = _verdict(h200, "float16", "synthetic_input")
    assert float16["device_idle"]["launch_gaps_ms"] is None
    assert "the device idled 46 ms a step" in float16["headline"]
    # Nor did it record the host's batch spans: the data wait is not measured, never said to be 0 ms.
    assert float16["device_idle"]["waiting_on_data_ms"] is None
    assert "0 ms waiting" not in float16["headline"] and "not split" in float16["headline"]


def test_no_layer_is_called_kept_off_tensor_cores_where_its_kernels_ran_on_them(h200_doc, h200):
    ran = {i["layer"] for r in h200_doc["runs"] for i in (r.get("ops") or {}).get("items", [])
           if i.get("tensor_cores") is True}
    assert {"conv2d", "dense"} <= ran
    words = json.dumps(h200.to_dict()["findings"], ensure_ascii=False)
    assert "kept off Tensor Cores (conv2d" not in words
    assert not any(f["id"] == "tensor_cores_not_eligible" for f in h200.to_dict()["findings"])


def test_the_tf32_finding_reports_the_measured_tf32_off_run_and_keeps_tf32(h200):
    (finding,) = [f for f in h200.to_dict()["findings"] if f["id"] == "tf32_baseline"]
    text = finding["recommendation"]
    assert "disable TF32" not in text and "allow_tf32 = False" not in text
    assert "float32 with TF32 off took 284 ms" in text and "Keep TF32 on" in text


def test_a_configuration_not_compared_is_listed_after_the_compared_ones(h200):
    (prescription,) = h200.to_dict()["prescriptions"]
    rows = prescription["measured"]
    refused = [i for i, row in enumerate(rows) if "not compared" in " ".join(str(n) for n in row.get("notes", []))]
    assert refused and rows[0]["variant"] != "tf32_off"
    assert refused == list(range(len(rows) - len(refused), len(rows)))


def test_the_input_pipelines_expected_gain_is_float32s_and_busy_shares_say_their_window(h200):
    from fp16doctor.analysis.values import fmt_ms

    (finding,) = [f for f in h200.to_dict()["findings"] if f["id"] == "input_pipeline_bound"]
    assert "632 ms" not in finding["recommendation"]  # float16's figure, under a float32 prescription
    # The gain the prescription's input-pipeline change quotes (303 -> 82 ms), not a second pair of figures.
    (prescription,) = h200.to_dict()["prescriptions"]
    change = next(c for c in prescription["user_changes"] if c["kind"] == "input_pipeline")
    gain = fmt_ms(change["step_ms"] - change["changed_step_ms"])
    assert gain == "222 ms" and f"Expected gain: {gain} per step in float32" in finding["recommendation"]
    in_memory = _verdict(h200, "float16", "synthetic_input")["headline"]
    # The busy share is of the 68 ms profiled window's step, beside a 45 ms timed step: it says which.
    assert "68 ms profiled step" in in_memory and "the profiler's window, not the 45 ms timed step" in in_memory


def test_the_roofline_stands_beside_the_measured_kernels_once_per_precision(h200):
    estimates = [e for e in h200.roofline if e.predicted_speedup is not None and e.fp32_kernels_ms]
    assert estimates
    for e in estimates:
        # 2.8 ms of best case against 21 ms of float32's measured kernels: about 13 %, said with what it signals.
        assert e.fp32_kernels_ms == pytest.approx(20.9, abs=0.3)
        assert "run at about 13% of it (a sign of small kernels and launch gaps)" in e.kernels_words()
    (best,) = [s for s in h200.detail if s.id == "best_case"]
    lines = [line.text for line in best.lines if "at most" in line.text]
    assert len(lines) == len({(e.machine, e.stack, e.gpu_name, e.precision, e.fp32_ms, e.fp16_ms)
                              for e in h200.roofline if e.predicted_speedup is not None})
    assert not any("2.8 ms -> 1.4 ms" in line and "you measured" in line for line in lines)


def test_with_timestamps_the_difference_is_placed_over_data_wait_and_launch_gaps_too():
    from fp16doctor.analysis.device import DeviceSplit
    from fp16doctor.attribution.device_time import IdleSplit

    # float32: 36 ms busy (15 ms of copies) in a 112 ms step, 17 ms idle on the host's data, 50 ms in launch gaps;
    # float16: 22 ms busy (7 ms of copies) in 68 ms, 8 ms on data, 30 ms in gaps.
    split = DeviceSplit(22.0, 36.0, 68.0, 112.0, "host", "interval_union", 7.0, 15.0, 0.0,
                        IdleSplit(8.0, 30.0, 8.0), IdleSplit(17.0, 50.0, 9.0))
    parts = split.accounted(-44.0)
    assert parts.to_dict() == {"kernels_ms": -6.0, "copies_ms": -8.0, "host_rows_ms": -9.0, "launch_gaps_ms": -20.0,
                               "unplaced_host_ms": -1.0, "source": "device_split"}
    assert "−20 ms launch and dispatch gaps" in split.words(parts)


def test_a_refused_comparison_gets_no_figure_and_its_finding_quotes_the_steps_it_weighed(h200):
    """TF32 off was timed in a process of its own: "not compared" everywhere, never "same speed (0.6-1.8x)", and the
    finding quotes the 284 ms against float32's own-process 305 ms the comparison weighed (not the rounds' 314 ms)."""
    (prescription,) = h200.prescriptions
    off = prescription.measured_of("float32", "tf32_off")
    assert off is not None and off.comparison_refused and off.versus() == "not compared"
    line = next(p for p in h200.answer.changes if "NVIDIA_TF32_OVERRIDE=0" in p.label)
    assert line.versus == "not compared"
    tf32 = next(f for f in h200.to_dict()["findings"] if f["id"] == "tf32_baseline")
    assert "took 284 ms a step against 305 ms with TF32 (not compared)" in tf32["recommendation"]


def test_the_in_memory_step_has_one_figure_in_every_change(h200):
    """The input pipeline's change said 82 ms in memory and the uint8 estimate 83 ms (the control's median): the
    estimate starts from the same paired figure."""
    (prescription,) = h200.to_dict()["prescriptions"]
    changes = {c["kind"]: c for c in prescription["user_changes"]}
    assert changes["batch_bytes"]["step_ms"] == pytest.approx(changes["input_pipeline"]["changed_step_ms"], abs=0.01)


def test_an_experiment_quotes_the_steps_the_measured_table_gives_its_two_runs(h200):
    """float16 with float32 batches was 678 -> 704 ms in its finding (the runs' own medians) while every other line said
    665 and 691 ms (the paired rounds): the experiment's sentence quotes the paired figures."""
    from fp16doctor.analysis.values import fmt_ms

    (prescription,) = h200.to_dict()["prescriptions"]
    step = {(m["precision"], m["variant"]): m["step_ms"] for m in prescription["measured"]}
    before, after = fmt_ms(step[("float16", "original")]), fmt_ms(step[("float16", "float32_batches")])
    assert (before, after) == ("665 ms", "691 ms")
    words = json.dumps(h200.to_dict()["findings"], ensure_ascii=False)
    assert f"the float16 step went from {before} to {after}" in words
    assert "678 ms" not in words and "704 ms" not in words


def test_an_outcome_measured_with_batches_in_memory_says_so_in_its_title(h200):
    """float16 as written is 2.2x slower; "float16 is 1.8x faster than float32" (its in-memory run) contradicted it."""
    (faster,) = [f for f in h200.to_dict()["findings"] if f["id"] == "fp16_faster"]
    assert faster["title"] == "float16 with batches in memory is 1.8x faster than float32"


def test_every_figure_of_a_cause_line_is_one_of_its_parts_line(h200):
    """float16's cause said "362 ms of 362 ms" beside "host batch +477 ms" in its parts line (the cap at the step's
    difference), and the in-memory line's kernels 6.1 ms (the op rows) beside "kernels −6.2 ms" (the device's time):
    a cause's figure is a part's change as the parts line beside it says it, or the step's, and where its part moved
    more than the step the parts that moved against it are named."""
    import re

    figure = re.compile(r"[+−]?\d+(?:\.\d+)? (?:ms|s)\b")
    rows = [r for r in h200.answer.precisions if r.cause and r.parts]
    assert {r.label for r in rows} == {"float16", "float16, batches in memory"}
    for row in rows:
        said = row.cause.split("): ", 1)[0] if row.cause.startswith("cause: ") else row.cause  # before its evidence
        shown = set(figure.findall(row.parts))
        assert figure.findall(said) and set(figure.findall(said)) <= shown, (said, row.parts)
    float16 = next(r for r in rows if r.label == "float16")
    assert "(host batch +477 ms of the +362 ms step; unplaced −100 ms" in float16.cause
    assert "against it)" in float16.cause and "362 ms of 362 ms" not in float16.cause
    in_memory = next(r for r in rows if r.label == "float16, batches in memory")
    assert "(copies −8.0 ms of the −36 ms step)" in in_memory.cause and "(kernels −6.2 ms)" in in_memory.cause
    # The figure ranking reads stays the cause's share of the difference: never more than the difference.
    verdict = _verdict(h200, "float16")
    (cause,) = verdict["causes"]
    assert cause["part"] == "host_batch" and cause["explains_ms"] == pytest.approx(verdict["difference_ms"])
    assert "measured: host batch +477 ms of the +362 ms step; unplaced −100 ms" in verdict["headline"]
