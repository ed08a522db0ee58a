"""Host or device, said first (analysis/device.py), on the first real GPU diagnosis: the seed script on an NVIDIA H200,
Keras 3 on PyTorch, recorded before device time existed (docs/examples/gpu-h200-keras-torch-full, as recorded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document
from fp16doctor.analysis.context import build_context


def _verdict(h200, precision: str, variant: str = "original") -> dict[str, Any]:
    return next(v for v in h200.to_dict()["verdicts"] if v["precision"] == precision and v["variant"] == variant)


@pytest.mark.parametrize(("precision", "variant", "busy_ms"), [
    ("float32", "synthetic_input", 36.1), ("float16", "synthetic_input", 22.0),
    ("float32", "original", 36.3), ("float16", "original", 21.6),
])
def test_each_runs_device_time_counts_every_kernel_and_copy_once(h200_doc, precision, variant, busy_ms):
    run = next(r for r in build_context(h200_doc).runs if (r.precision, r.variant) == (precision, variant))
    assert run.device_time is not None and run.device_time.method == "kernel_sum"
    assert run.device_time.busy_ms == pytest.approx(busy_ms, abs=1.5)


def test_float16_in_the_users_pipeline_is_bound_by_the_host_and_the_device_can_change_little(h200):
    verdict = _verdict(h200, "float16")
    assert verdict["bound_by"] == "host"
    assert verdict["device_busy_ms"] == pytest.approx(21.6, abs=1.5)
    assert verdict["fp32_device_busy_ms"] == pytest.approx(36.3, abs=1.5)
    assert verdict["precision_bound"]["max_speedup"] <= 1.15
    # The difference, split: the device did less work in float16; the host's part is the rest of the 362 ms.
    assert verdict["device_difference_ms"] < 0 < verdict["host_difference_ms"]
    split = verdict["device_difference_ms"] + verdict["host_difference_ms"]
    assert split == pytest.approx(verdict["difference_ms"], abs=0.01)
    assert "the host sets the pace" in verdict["headline"]


def test_the_host_findings_quote_the_gpus_busy_share(h200):
    found = {f["id"]: f for f in h200.to_dict()["findings"]}
    bound = found["input_pipeline_bound"]
    assert any("the GPU was busy 36 ms of the 295 ms profiled step (12%)" in line for line in bound["evidence"])
    copies = found["pageable_copies"]
    in_memory = next(line for line in copies["evidence"] if line.startswith("host / float32, synthetic_input"))
    assert "pageable memory take 15 ms per step" in in_memory


def test_every_ops_comparison_counts_each_device_activity_once(h200_doc, h200):
    ctx = build_context(h200_doc)
    for comparison in h200.comparisons:
        names = [r.layer for r in comparison.rows]
        assert "Activity Buffer Request" not in names
        copies = [r for r in comparison.rows if any(i.startswith("Memcpy HtoD") for i in r.impls + r.fp32_impls)
                  or r.layer.startswith("Memcpy HtoD")]
        assert len(copies) == 1, comparison.precision  # the batch copy, in one row
        for row in comparison.rows:
            kernel = row.layer.lower()
            if any(word in kernel for word in ("wgrad", "dgrad", "backward")):
                assert row.pass_ != "forward", row.layer
            if "max_pool_backward" in kernel or ("max_pooling" in kernel and row.pass_ == "backward_data"):
                assert abs(row.difference_ms or 0.0) < 0.1 or row.fp32_ms is not None
    for run in ctx.runs:
        if run.ops is not None and run.device_time is not None:
            device_rows = sum(i.ms_per_step for i in run.ops.items if not i.host_time)
            assert device_rows == pytest.approx(run.device_time.busy_ms, rel=0.01), run.label


def test_max_pool_backward_twins_of_two_dtypes_are_one_row():
    from fp16doctor.analysis.op_compare import twin_name

    half = "void at::native::(anonymous namespace)::max_pool_backward_nchw<c10::Half, float, int>(c10::Half const*)"
    single = "void at::native::(anonymous namespace)::max_pool_backward_nchw<float, float, int>(float const*)"
    assert twin_name(half) == twin_name(single)


def test_a_cpu_document_has_no_device_time_and_no_host_or_device_verdict():
    cpu = Path(__file__).resolve().parents[3] / "docs" / "examples" / "cpu-xeon-amx-quick" / "results.json"
    diagnosis = diagnose_document(json.loads(cpu.read_text(encoding="utf-8")))
    assert all("bound_by" not in v and "precision_bound" not in v for v in diagnosis.to_dict()["verdicts"])
    assert all(r.device_step is None for r in diagnosis.runs)
    assert "pageable_copies" not in {f["id"] for f in diagnosis.to_dict()["findings"]}


def test_the_float16_verdicts_accounting_is_its_ledgers_part_changes(h200):
    """float16's verdict said "−6.2 ms is the kernels', −8.5 ms the batch's copy and +377 ms host time no op in the
    trace accounts for" beside a parts line of "host batch +477 ms ... unplaced −100 ms": one difference, two
    accountings. Where the pair has ledgers, its `accounted` and its sentence are the ledgers' part changes."""
    import re

    from fp16doctor.analysis.ledger import COPIES, HOST_BATCH, KERNELS, LAUNCH_GAPS, UNPLACED, part_change
    from fp16doctor.analysis.words import pair_ledgers

    verdict = _verdict(h200, "float16")
    typed = next(v for v in h200.verdicts if (v.precision, v.variant) == ("float16", "original"))
    mine, base = pair_ledgers(typed, h200.ledgers)
    assert mine is not None and base is not None
    parts = verdict["accounted"]
    assert parts["source"] == "ledgers"
    for key, name in (("kernels_ms", KERNELS), ("copies_ms", COPIES), ("host_rows_ms", HOST_BATCH),
                      ("launch_gaps_ms", LAUNCH_GAPS), ("unplaced_host_ms", UNPLACED)):
        assert parts[key] == pytest.approx(part_change(mine, base, name), abs=0.001), key
    assert parts["host_rows_ms"] == pytest.approx(477, abs=1)
    assert parts["unplaced_host_ms"] == pytest.approx(-100, abs=1)
    summed = sum(v for k, v in parts.items() if k != "source")
    assert summed == pytest.approx(verdict["difference_ms"], abs=0.01)
    # The sentence's figures are the parts line's, in its words, and the unplaced time is named as the ledger names it.
    clause = verdict["headline"].split("of the timed difference, ", 1)[1].split(";", 1)[0]
    assert clause == "host batch +477 ms, unplaced −100 ms, copies −8.5 ms and kernels −6.2 ms"
    assert "host time no op" not in clause and "+377 ms" not in verdict["headline"]
    line = next(r for r in h200.answer.precisions if r.label == "float16")
    figure = re.compile(r"[+−]\d+(?:\.\d+)? (?:ms|s)\b")
    assert figure.findall(clause) and set(figure.findall(clause)) <= set(figure.findall(line.parts)), line.parts
    for said in ("copies −8.5 ms", "host batch +477 ms", "unplaced −100 ms"):
        assert said in line.parts
    # One rule names the parts in both: the same changes, in the same order (the parts line adds each part's before
    # and after, and the step's change), and a lone small part by its name, never as "the other parts".
    named = [re.sub(r" \(.*\)$", "", p) for p in line.parts.split(": ", 1)[1].split("; ") if "the step" not in p]
    assert ", ".join(named[:-1]) + " and " + named[-1] == clause
    assert "the other parts" not in line.parts


def test_a_pair_without_ledgers_keeps_the_device_splits_accounting(h200_doc):
    """No ledgers (here none given; a run cut short has none either): the verdict's `accounted` and its sentence are
    the device split's own, its unplaced time the host time no op in the trace accounts for."""
    from fp16doctor.analysis.causes import account
    from fp16doctor.analysis.device import device_split
    from fp16doctor.analysis.verdicts import verdict_for

    ctx = build_context(h200_doc)
    acc = next(a for a in account(ctx, {}, ())
               if (a.pair.reduced.precision, a.pair.reduced.variant) == ("float16", "original"))
    assert acc.ledgers is None and acc.significant
    verdict = verdict_for(acc).to_dict()
    split = device_split(acc.pair)
    assert split is not None
    parts = verdict["accounted"]
    assert parts == split.accounted(acc.difference_ms).to_dict() and parts["source"] == "device_split"
    assert parts["host_rows_ms"] == 0 and parts["unplaced_host_ms"] == pytest.approx(376.7, abs=0.1)
    assert "−6.2 ms is the kernels', −8.5 ms the batch's copy and +377 ms host time no op in the trace accounts for" \
        in verdict["headline"]
