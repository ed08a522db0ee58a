"""Intervals that hold across processes: rounds from two or more rounds processes carry the variation between
processes (workload/paired.py between_processes), a single process's are labelled within one, and the A/A control
is judged by the same kind of interval."""

from __future__ import annotations

import math
from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document
from fp16doctor.analysis.intervals import Timing, ratio_interval

# Zero-mean round-to-round noise in logs, the same pattern in every process.
PATTERN = (0.01, -0.01, 0.005, -0.005, 0.0, 0.008)


def steps(median: float, shift: int = 0) -> list[float]:
    return [median * math.exp(PATTERN[(i + shift) % len(PATTERN)]) for i in range(len(PATTERN))]


def step_time(per_process: list[list[float]], aa: list[list[float]] | None = None) -> dict[str, Any]:
    values = [v for one in per_process for v in one]
    step: dict[str, Any] = {"median": sorted(values)[len(values) // 2], "rounds": values, "design": "interleaved",
                            "n": len(values), "group": 0}
    if len(per_process) > 1:
        step["round_groups"] = [g for g, one in enumerate(per_process) for _ in one]
    if aa is not None:
        step["aa_rounds"] = [v for one in aa for v in one]
    return step


def doc(fp16_means: list[float]) -> dict[str, Any]:
    """float32 at 100 ms in every process, float16 at each process's mean, its ratio moving between processes as
    the means say; float32's A/A control beside them."""
    fp32 = [steps(100.0) for _ in fp16_means]
    runs = [{"stack": "host", "precision": "float32", "variant": "original", "device": "cpu", "status": "ok",
             "step_time_ms": step_time(fp32, [steps(100.0, shift=2) for _ in fp16_means])},
            {"stack": "host", "precision": "float16", "variant": "original", "device": "cpu", "status": "ok",
             "step_time_ms": step_time([steps(m, shift=3) for m in fp16_means])}]
    return {"schema_version": 1, "host": {"cpu": {"flags": ["avx2"]}, "gpus": []}, "runs": runs}


def verdict_of(document: dict[str, Any]) -> dict[str, Any]:
    verdict, = diagnose_document(document).to_dict()["verdicts"]
    return verdict


def width(verdict: dict[str, Any]) -> float:
    low, high = verdict["ratio_interval"]
    return math.log(high / low)


def test_blocks_that_disagree_give_a_wider_interval_than_blocks_that_agree() -> None:
    agree = verdict_of(doc([125.0, 125.0]))
    disagree = verdict_of(doc([120.0, 135.0]))
    assert agree["interval_scope"] == disagree["interval_scope"] == "between_processes"
    assert agree["interval_processes"] == disagree["interval_processes"] == 2
    assert width(disagree) > 2 * width(agree)
    assert disagree["interval_between_processes_sd"] > agree["interval_between_processes_sd"]
    assert "12 rounds in 2 processes (the ratio moved by" in disagree["headline"]
    # The interval covers both processes' own ratios: what the next process would say.
    low, high = disagree["ratio_interval"]
    assert low < 100 / 135 and 100 / 120 < high


def test_a_single_process_is_labelled_within_one_process() -> None:
    verdict = verdict_of(doc([125.0]))
    assert verdict["interval_scope"] == "within_process"
    assert "interval_processes" not in verdict and "interval_between_processes_sd" not in verdict
    # Exactly the paired t interval of one process, as before.
    fp32, fp16 = steps(100.0), steps(125.0, shift=3)
    alone = ratio_interval(Timing(100.0, rounds=tuple(fp32), design="interleaved", group=0),
                           Timing(125.0, rounds=tuple(fp16), design="interleaved", group=0))
    assert verdict["ratio_interval"] == pytest.approx([alone.low, alone.high], abs=1e-4)


def test_the_aa_control_is_judged_by_an_interval_that_holds_across_processes_too() -> None:
    """float32's two identical models moving apart between processes widen the control's interval as the ratios'
    are widened: an effect within that variation is not measurable."""
    document = doc([110.0, 112.0])
    fp32 = document["runs"][0]["step_time_ms"]
    fp32["aa_rounds"] = steps(95.0, shift=2) + steps(106.0, shift=2)
    verdict = verdict_of(document)
    low, high = verdict["noise_floor_interval"]
    assert low < 100 / 106 and 100 / 95 < high
    assert verdict["aa_check"]["passed"] is False and verdict["outcome"] == "no_significant_difference"
    steady = verdict_of(doc([110.0, 112.0]))
    assert steady["aa_check"]["passed"] is True and steady["outcome"] == "slower"


def test_rounds_pair_only_within_the_process_that_timed_both() -> None:
    """A configuration timed in one process only pairs with float32's rounds of that process."""
    document = doc([125.0, 125.0])
    fp16 = document["runs"][1]["step_time_ms"]
    fp16.update(rounds=fp16["rounds"][:6], round_groups=[1] * 6)  # timed by the second process alone
    verdict = verdict_of(document)
    assert verdict["repeats"] == 6 and verdict["interval_scope"] == "within_process"
