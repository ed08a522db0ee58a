"""Every ratio carries the interval its repeats support, and the outcome follows the interval."""

from __future__ import annotations

import math
from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document
from fp16doctor.analysis.intervals import DEFAULT_BAND, Timing, ratio_interval, t_quantile

# Multiplicative round-to-round noise, zero-mean in logs: +n, -n, +n/2, -n/2, 0, ...
PATTERN = (1.0, -1.0, 0.5, -0.5, 0.0, 0.8, -0.8)


def rounds(median: float, noise: float, n: int = 7, shift: int = 0) -> list[float]:
    return [median * math.exp(noise * PATTERN[(i + shift) % len(PATTERN)]) for i in range(n)]


def run(precision: str, step: dict[str, Any]) -> dict[str, Any]:
    return {"stack": "host", "precision": precision, "variant": "original", "device": "cpu", "status": "ok",
            "step_time_ms": step}


def doc_of(fp32: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": 1, "host": {"cpu": {"flags": ["avx2"]}, "gpus": []},
            "runs": [run("float32", fp32), run("float16", other)]}


def interleaved(median: float, noise: float, shift: int = 0) -> dict[str, Any]:
    values = rounds(median, noise, shift=shift)
    return {"median": sorted(values)[len(values) // 2], "rounds": values, "design": "interleaved", "n": 70}


def test_three_percent_slower_with_one_percent_noise_is_slower() -> None:
    verdict, = diagnose_document(doc_of(interleaved(100, 0.01), interleaved(103, 0.01, shift=3))).verdicts
    assert verdict["outcome"] == "slower"
    low, high = verdict["ratio_interval"]
    assert low < verdict["ratio"] < high < 1
    assert verdict["repeats"] == 7 and verdict["confidence_level"] == 0.95
    assert "interval" in verdict["headline"] and "7 paired rounds" in verdict["headline"]


def test_three_percent_slower_with_eight_percent_noise_is_no_difference() -> None:
    verdict, = diagnose_document(doc_of(interleaved(100, 0.08), interleaved(103, 0.08, shift=3))).verdicts
    assert verdict["outcome"] == "no_significant_difference"
    low, high = verdict["ratio_interval"]
    assert low < 1 < high
    assert verdict["cause"] is None


def test_paired_rounds_cancel_drift_that_unpaired_rounds_cannot() -> None:
    """Both configurations drift together by 20 % over the rounds: pairing sees a steady 5 % while the same
    rounds judged unpaired cannot tell."""
    drift = [1.0, 1.05, 1.1, 1.15, 1.2]
    fp32 = [100 * d for d in drift]
    fp16 = [105 * d * (1.002 if i % 2 else 0.998) for i, d in enumerate(drift)]
    paired = ratio_interval(Timing(100, rounds=tuple(fp32), design="interleaved"),
                            Timing(105, rounds=tuple(fp16), design="interleaved"))
    unpaired = ratio_interval(Timing(100, rounds=tuple(fp32), design="sequential"),
                              Timing(105, rounds=tuple(fp16), design="sequential"))
    assert paired.method == "paired_rounds" and paired.outcome == "slower"
    assert unpaired.method == "unpaired_rounds" and unpaired.outcome == "no_significant_difference"
    assert paired.high - paired.low < (unpaired.high - unpaired.low) / 5


def test_interval_is_recomputed_from_the_document_alone() -> None:
    """explain needs nothing but the rounds: the interval is a t interval on the per-round log ratios."""
    fp32, fp16 = interleaved(100, 0.02), interleaved(150, 0.02, shift=2)
    verdict, = diagnose_document(doc_of(fp32, fp16)).verdicts
    logs = [math.log(a / b) for a, b in zip(fp32["rounds"], fp16["rounds"], strict=True)]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    half = t_quantile(len(logs) - 1) * sd / math.sqrt(len(logs))
    assert verdict["ratio_interval"] == pytest.approx([math.exp(mean - half), math.exp(mean + half)], abs=1e-4)
    d_low, d_high = verdict["difference_interval_ms"]
    assert d_low < verdict["difference_ms"] < d_high


def test_a_median_without_spread_is_judged_by_the_stated_default_band() -> None:
    inside = diagnose_document(doc_of({"median": 100.0}, {"median": 100.0 * (1 + DEFAULT_BAND) * 0.99})).verdicts
    outside = diagnose_document(doc_of({"median": 100.0}, {"median": 100.0 * (1 + DEFAULT_BAND) * 1.01})).verdicts
    assert inside[0]["outcome"] == "no_significant_difference"
    assert outside[0]["outcome"] == "slower"
    assert outside[0]["interval_method"] == "default_band" and outside[0]["repeats"] == 0


def test_fewer_than_three_rounds_fall_back_to_the_spread() -> None:
    fp32 = {"median": 100.0, "p10": 90.0, "p90": 110.0, "rounds": [100.0, 101.0], "design": "interleaved"}
    fp16 = {"median": 130.0, "p10": 120.0, "p90": 140.0, "rounds": [130.0, 131.0], "design": "interleaved"}
    verdict, = diagnose_document(doc_of(fp32, fp16)).verdicts
    assert verdict["interval_method"] == "spread"
    assert verdict["ratio_interval"][0] == pytest.approx(100 / 130 / 1.1, abs=1e-4)


def test_printed_digits_follow_the_interval() -> None:
    narrow = diagnose_document(doc_of(interleaved(100, 0.005), interleaved(224, 0.005, shift=1))).verdicts[0]
    wide = diagnose_document(doc_of(interleaved(100, 0.08), interleaved(224, 0.08, shift=1))).verdicts[0]
    assert "2.24x slower" in narrow["headline"]
    assert "2.2x slower" in wide["headline"] and "2.24x" not in wide["headline"]


def test_float32s_two_models_are_the_rounds_baseline_and_its_control_still_the_noise_floor() -> None:
    """float32 runs twice a round (its model and the A/A control): each round's baseline is their geometric
    mean, so noise of one float32 block that the other does not share moves the ratio half as much; float32
    against its control is still judged on float32's own model."""
    own = rounds(100, 0.06)
    control = [100 * 100 / v for v in own]  # the mirror image: together they are 100 every round
    fp16 = [500.0] * len(own)
    both = ratio_interval(Timing(100, rounds=tuple(own), design="interleaved", aa_rounds=tuple(control)),
                          Timing(500, rounds=tuple(fp16), design="interleaved"))
    alone = ratio_interval(Timing(100, rounds=tuple(own), design="interleaved"),
                           Timing(500, rounds=tuple(fp16), design="interleaved"))
    assert both.speedup == pytest.approx(0.2) and both.high - both.low < 1e-9
    assert alone.high - alone.low > 0.01
    missing_round = Timing(100, rounds=tuple(own), design="interleaved", aa_rounds=tuple(control[:-1]))
    assert missing_round.baseline_rounds == tuple(own)  # a control without every round: float32's own rounds

    fp32_step = {**interleaved(100, 0.06), "aa_rounds": control}
    verdict, = diagnose_document(doc_of(fp32_step, {"median": 500.0, "rounds": fp16, "design": "interleaved",
                                                    "n": 7})).verdicts
    assert verdict["ratio_interval"][1] - verdict["ratio_interval"][0] < 1e-3
    low, high = verdict["noise_floor_interval"]
    assert low < 1 < high and high - low > 0.05  # the control against float32's own model, not the mean


def test_a_backend_whose_invocations_vary_more_than_their_rounds_gets_a_wider_interval_that_says_so() -> None:
    """Keras 3 on PyTorch moved between diagnoses by more than one diagnose's rounds allowed (docs/benchmarks.md):
    its rounds interval is widened by that measured variation and the headline says so; TensorFlow's is not."""
    def verdict_on(backend: str) -> dict[str, Any]:
        doc = doc_of(interleaved(100, 0.01), interleaved(500, 0.01, shift=3))
        for one in doc["runs"]:
            one["software"] = {"keras": "3.15.1", "keras_api": "keras3-legacy", "keras_backend": backend}
        verdict, = diagnose_document(doc).verdicts
        return verdict

    torch, tensorflow = verdict_on("torch"), verdict_on("tensorflow")
    assert torch["ratio"] == tensorflow["ratio"]
    assert torch["interval_widened_by"] == 0.09 and "interval_widened_by" not in tensorflow
    width = {name: v["ratio_interval"][1] / v["ratio_interval"][0] for name, v in (("torch", torch),
                                                                                 ("tf", tensorflow))}
    assert width["torch"] > math.exp(2 * 1.96 * 0.09) * 0.999 > width["tf"]
    assert "widened by the 9% this backend's diagnoses vary between invocations" in torch["headline"]
    assert "widened" not in tensorflow["headline"]
    low, high = torch["difference_interval_ms"]
    assert low < torch["difference_ms"] < high
