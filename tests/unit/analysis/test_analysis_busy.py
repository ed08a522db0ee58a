"""A busy machine (analysis/busy.py): what else used the CPU while the rounds measured is said with its figure in
the answer's first lines, and a comparison it left unsettled that would change the prescription is never prescribed
on: the prescription says it is not settled, with the figure and the command to rerun on a quiet machine."""

from __future__ import annotations

import copy
from typing import Any

from fp16doctor.analysis import compare_results, diagnose_document
from fp16doctor.analysis.busy import BUSY_OTHERS_PCT, contention_of
from fp16doctor.workload import contention as workload_contention

# A 2-core machine with one core held by another process: float32's steps swing 400-900 ms, mixed_bfloat16's too.
FP32 = {"median": 560.0, "rounds": [620.0, 400.0, 900.0, 500.0, 700.0, 450.0], "design": "interleaved", "n": 6,
        "group": 0, "aa_rounds": [500.0, 640.0, 450.0, 800.0, 520.0, 600.0]}
BF16 = {"median": 390.0, "rounds": [300.0, 420.0, 350.0, 480.0, 280.0, 500.0], "design": "interleaved", "n": 6,
        "group": 0}
BUSY = {"seconds": 11.0, "others_cpu_pct": 48.0, "steal_pct": 0.0, "own_cpu_pct": 50.0, "cores": 2,
        "load_1min": [1.9, 2.4], "cpu_mhz": [2400.0, 2400.0]}


def document(fp32: dict[str, Any], bf16: dict[str, Any], contention: dict[str, Any] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"stack": "host", "group": 0}
    if contention is not None:
        entry["contention"] = contention
    return {"schema_version": 1, "invocation": {"argv": ["fp16doctor", "diagnose", "--quick"], "size": "quick"},
            "host": {"cpu": {"model": "Intel Xeon", "cores": 2,
                             "flags": ["avx2", "avx512_bf16", "amx_bf16", "avx512_fp16"]}, "gpus": []},
            "runs": [{"stack": "host", "precision": p, "variant": "original", "device": "cpu", "status": "ok",
                      "step_time_ms": s} for p, s in (("float32", fp32), ("mixed_bfloat16", bf16))],
            "timing_rounds": [entry]}


def test_a_wide_interval_on_a_busy_machine_is_not_settled_with_the_figure_and_the_command() -> None:
    diagnosis = diagnose_document(document(FP32, BF16, BUSY))
    prescription, = diagnosis.to_dict()["prescriptions"]
    headline = prescription["headline"]
    assert headline.startswith("Not settled: mixed_bfloat16 measured 1.5x (0.9-2.6x) while other processes used "
                               "48 % of the CPU; rerun on a quiet machine, with more time for its rounds: "
                               "fp16doctor diagnose --quick --precision float32 --precision mixed_bfloat16 "
                               "--budget 180")
    assert "Use float32" not in headline
    unsettled = prescription["unsettled"]
    assert unsettled["precision"] == "mixed_bfloat16" and unsettled["speedup"] >= 1.3
    assert unsettled["speedup_interval"][0] < 1 < unsettled["speedup_interval"][1]
    assert unsettled["contention"]["others_cpu_pct"] == 48.0 and unsettled["contention"]["busy"] is True
    # The answer's first lines say it, with its figure.
    first = diagnosis.answer.text(findings=False).splitlines()[:3]
    assert any("Not settled" in line and "48 % of the CPU" in line for line in first)


def test_the_same_interval_on_a_quiet_machine_reads_as_before() -> None:
    quiet = {**BUSY, "others_cpu_pct": 3.0}
    for contention in (None, quiet):
        prescription, = diagnose_document(document(FP32, BF16, contention)).to_dict()["prescriptions"]
        assert prescription["headline"].startswith("Use float32: no measured configuration is significantly faster")
        assert "unsettled" not in prescription and "contention" not in prescription


def test_a_settled_answer_on_a_busy_machine_still_says_the_machine_was_busy() -> None:
    fp32 = {"median": 200.0, "rounds": [200.0, 202.0, 198.0, 201.0, 199.0, 200.0], "design": "interleaved", "n": 6,
            "group": 0, "aa_rounds": [201.0, 199.0, 200.0, 202.0, 198.0, 200.0]}
    bf16 = {"median": 100.0, "rounds": [100.0, 101.0, 99.0, 100.5, 99.5, 100.0], "design": "interleaved", "n": 6,
            "group": 0}
    prescription, = diagnose_document(document(fp32, bf16, BUSY)).to_dict()["prescriptions"]
    assert prescription["recommended"]["precision"] == "mixed_bfloat16" and "unsettled" not in prescription
    assert "(measured while other processes used 48 % of the CPU)" in prescription["headline"]
    assert prescription["contention"]["others_cpu_pct"] == 48.0


def test_the_hosts_machine_load_alone_names_a_busy_machine_at_least_as_busy_as_its_busiest() -> None:
    found = contention_of({"machine_load": {"cores": 2, "after": {"load_1min": 2.1},
                                            "busiest_others": [{"pid": 7, "name": "burn", "cpu_pct": 99.0}]}})
    assert found is not None and found.busy and found.others_pct == 49.5 and found.source == "machine_load"
    assert "at least 50 % of the CPU" in found.words()
    assert contention_of({"machine_load": {"cores": 2, "busiest_others": []}}) is None
    assert BUSY_OTHERS_PCT < 48.0


def test_compare_says_which_document_was_measured_on_a_busy_machine() -> None:
    quiet = document(FP32, BF16, {**BUSY, "others_cpu_pct": 2.0})
    busy = document(FP32, BF16, BUSY)
    result = compare_results(quiet, copy.deepcopy(busy), ("before.json", "after.json"))
    assert result.busy == ("after.json measured on a busy machine: other processes used 48 % of the CPU "
                           "while its rounds ran",)
    assert result.to_dict()["busy"] == list(result.busy)
    assert diagnose_document(busy).busy is not None and diagnose_document(quiet).busy is None


def test_the_workload_reads_others_cpu_as_the_machines_busy_time_less_its_own() -> None:
    """/proc/stat over both cores: 400 ticks in all, 300 busy of which 10 stolen; this process 1.5 s (150 ticks)."""
    before = {"at": 0.0, "stat": (1000, 5000, 50, 2), "own_s": 10.0, "load_1min": 1.0, "cpu_mhz": 2000.0}
    after = {"at": 2.0, "stat": (1300, 5400, 60, 2), "own_s": 11.5, "load_1min": 2.0, "cpu_mhz": None}
    record = workload_contention.contention(before, after, tick_hz=100.0)
    assert record == {"seconds": 2.0, "others_cpu_pct": 35.0, "steal_pct": 2.5, "own_cpu_pct": 37.5, "cores": 2,
                      "load_1min": [1.0, 2.0], "cpu_mhz": [2000.0, None]}


def test_the_workload_reads_proc_stat_and_leaves_out_what_it_cannot_read() -> None:
    text = "cpu  100 0 50 800 10 0 0 5 0 0\ncpu0 50 0 25 400 5 0 0 2 0 0\ncpu1 50 0 25 400 5 0 0 3 0 0\n"
    files = {workload_contention.STAT: text, workload_contention.LOADAVG: "1.50 1.2 1.0 2/300 77\n"}
    reading = workload_contention.reading(read=files.get, clock=lambda: 5.0, own_s=lambda: 1.0)
    assert reading["stat"] == (155, 965, 5, 2) and reading["load_1min"] == 1.5 and reading["cpu_mhz"] is None
    empty = workload_contention.reading(read=lambda path: None, clock=lambda: 5.0, own_s=lambda: 1.0)
    assert workload_contention.contention(empty, empty) == {"seconds": 0.0}
