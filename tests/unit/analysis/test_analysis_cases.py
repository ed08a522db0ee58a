"""The analysis on real public reports written as results files (tests/data/cases/*.json).

Each file cites its source and states which finding ids must be present and which must be absent, and, where the
source gives the reason, the cause per 16-bit precision (`expected.cause`): every verdict of that precision that is
slower or faster must name it as its measured `cause` or its `likely_cause`. At least 90 % of the files must come
out exactly right, and the original question must always be right.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.analysis import analyse, diagnose_document, measured_time_ms
from fp16doctor.analysis.registry import REGISTRY
from fp16doctor.results import validate

CASES_DIR = Path(__file__).resolve().parents[2] / "data" / "cases"
CASE_FILES = sorted(CASES_DIR.glob("*.json"))
CONTRACT_IDS = set(REGISTRY)  # every id the analysis may speak, registered once


def _load(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return validate(doc, source=path.name)


def _named_causes(verdict: dict[str, Any]) -> set[str]:
    """What a verdict names as the reason: its measured cause and its likely cause."""
    likely = verdict.get("likely_cause") or {}
    return {c for c in (verdict.get("cause"), likely.get("id")) if c}


def _mistakes(doc: dict[str, Any]) -> list[str]:
    diagnosis = diagnose_document(doc)
    found = {f["id"] for f in diagnosis.to_dict()["findings"]}
    expected = doc["expected"]
    missing = [f"missing {i}" for i in expected["present"] if i not in found]
    wrong = [f"false {i}" for i in expected["absent"] if i in found]
    for precision, cause in expected.get("cause", {}).items():
        decided = [v for v in diagnosis.to_dict()["verdicts"]
                   if v["precision"] == precision and v["outcome"] in ("slower", "faster")]
        if not decided:
            wrong.append(f"no {precision} verdict")
        wrong += [f"{precision} verdict on {v['stack']} names {sorted(_named_causes(v)) or 'no cause'}, not {cause}"
                  for v in decided if cause not in _named_causes(v)]
    return missing + wrong


def test_case_set_is_broad_enough() -> None:
    docs = [_load(p) for p in CASE_FILES]
    assert len(docs) >= 12
    frameworks = {k for d in docs for r in d["runs"] for k in ("tensorflow", "torch", "jax") if r["software"].get(k)}
    assert frameworks == {"tensorflow", "torch", "jax"}
    assert any(not d["host"]["gpus"] for d in docs), "needs CPU-only cases"
    capabilities = {g["compute_capability"][0] for d in docs for g in d["host"]["gpus"] if g.get("compute_capability")}
    assert {"3", "6", "7", "8"} <= capabilities  # Kepler, Pascal, Volta/Turing, Ampere
    gpu_names = " ".join(g["name"].lower() for d in docs for g in d["host"]["gpus"])
    assert "amd" in gpu_names and "apple" in gpu_names, "needs AMD (ROCm) and Apple (MPS) cases"
    modes = {r.get("workload", {}).get("mode") for d in docs for r in d["runs"]}
    assert {"training", "inference"} <= modes
    precisions = {r["precision"] for d in docs for r in d["runs"]}
    assert {"float16", "mixed_float16", "bfloat16", "mixed_bfloat16"} <= precisions
    assert sum(1 for d in docs if d["expected"].get("cause")) >= 8, "cases state the cause their source gives"


@pytest.mark.parametrize("path", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_case_file_is_well_formed(path: Path) -> None:
    doc = _load(path)
    assert doc["source"], "every case cites where it comes from"
    assert set(doc["expected"]["present"]) <= CONTRACT_IDS
    assert set(doc["expected"]["absent"]) <= CONTRACT_IDS
    assert not set(doc["expected"]["present"]) & set(doc["expected"]["absent"])
    assert set(doc["expected"].get("cause", {}).values()) <= CONTRACT_IDS
    assert set(doc["expected"].get("cause", {})) <= {r["precision"] for r in doc["runs"]}


def test_at_least_90_percent_of_public_cases_exactly_right() -> None:
    results = {p.stem: _mistakes(_load(p)) for p in CASE_FILES}
    wrong = {name: m for name, m in results.items() if m}
    right = len(results) - len(wrong)
    assert right / len(results) >= 0.9, f"{right}/{len(results)} right; wrong: {wrong}"


def test_original_question_exactly_right() -> None:
    assert _mistakes(_load(CASES_DIR / "volta-titanv-keras215-floatx16.json")) == []


def test_every_finding_carries_numbers_and_a_fix() -> None:
    for path in CASE_FILES:
        for finding in analyse(_load(path)):
            assert finding["id"] in CONTRACT_IDS
            assert finding["severity"] in ("info", "warning", "critical")
            assert 0 < finding["confidence"] < 1
            assert any(ch.isdigit() for line in finding["evidence"] for ch in line), (path.name, finding["id"])
            assert finding["recommendation"].strip(), (path.name, finding["id"])


def test_ranks_follow_measured_time_then_severity() -> None:
    """What was measured to account for time comes first (the lc0 case: a measured framework path, 4 ms of its
    4 ms, before the GPU's critical lack of Tensor Cores); the rest by severity."""
    order = {"critical": 0, "warning": 1, "info": 2}
    for path in CASE_FILES:
        findings = analyse(_load(path))
        assert [f["rank"] for f in findings] == list(range(1, len(findings) + 1))
        measured = [bool(measured_time_ms(f)) or bool(f.get("prescribed")) for f in findings]
        assert measured == sorted(measured, reverse=True), path.name
        rest = [order[f["severity"]] for f, m in zip(findings, measured, strict=True) if not m]
        assert rest == sorted(rest), path.name


def test_every_verdict_without_a_measured_cause_names_a_likely_one_or_says_why() -> None:
    for path in CASE_FILES:
        for verdict in diagnose_document(_load(path)).to_dict()["verdicts"]:
            measured = sum(c["explains_ms"] for c in verdict["causes"] if c["basis"] in ("measured_ops", "experiment"))
            if verdict["outcome"] == "no_significant_difference" or measured >= abs(verdict["difference_ms"]) / 2:
                continue
            assert verdict["likely_cause"] or verdict.get("no_likely_cause"), (path.name, verdict["headline"])
            if verdict["likely_cause"]:
                assert verdict["likely_cause"]["basis"] in ("device_fact", "estimate")
                assert "probably because" in verdict["headline"] or verdict["cause"] == verdict["likely_cause"]["id"]


# The public cases each of these rules was written for: the rule's own test is that they come out right.
RULE_CASES = {
    # No float32 run: two 16-bit types, both native on the GPU, one slower (hardware.PEER_PATH_MIN_SLOWDOWN).
    "framework_16bit_path": ["ampere-a100-jax-bf16-batched-matmul-cublas", "ampere-a100-jax-fp16-conv-bias-fusion",
                             "ampere-a100-triton-bf16-matmul-conversions",
                             # An RTX card named without its model: Tensor Cores by the name (gpus.NAME_FLOORS).
                             "turing-rtx2060-tf-efficientdet-keras-policy-first-report"],
    # Bound elsewhere: the same model faster in 16 bits at a larger batch (overhead.LARGER_BATCH_FACTOR), or a model
    # known by its FLOPs alone whose arithmetic is a sliver of the step (roofline totals estimate).
    "small_model_overhead": ["turing-t4-tensorflow-fastertransformer-decoder-batch1-fp16",
                             "turing-rtx2080ti-pytorch-resnet50-batch2-half",
                             # The first reports alone: a batch of one or two on a big GPU (overhead.SMALL_BATCH_MAX).
                             "turing-t4-tensorflow-fastertransformer-decoder-batch1-fp16-first-report",
                             "turing-rtx2070-pytorch-batch1-half-first-report"],
    # Casts the runs point at: stated counts against a twin stack (overhead.CAST_COUNT_FACTOR), mixed precision far
    # slower on a tiny training step (overhead.MIXED_TINY_STEP_CONFIDENCE).
    "cast_overhead": ["gpu-paddle-amp-cast-count-old-vs-new", "amd-radeon8060s-ocannl-mixed-cast-twins"],
    # A gain a newer stack (stack.STACK_GAIN_GAP) or a measured variant (causes._account_held_back) beat.
    "old_stack": ["ampere-rtx3090-pytorch-conv3d-amp-cudnn805", "turing-rtx2080ti-opencv-maskrcnn-fp16-tensorop"],
}


@pytest.mark.parametrize(("rule", "case"), [(r, c) for r, cases in RULE_CASES.items() for c in cases])
def test_each_rule_is_right_on_the_cases_it_was_written_for(rule: str, case: str) -> None:
    doc = _load(CASES_DIR / f"{case}.json")
    assert rule in doc["expected"]["present"] or rule in doc["expected"].get("cause", {}).values()
    assert _mistakes(doc) == []


def test_a_document_without_float32_gets_verdicts_between_its_16_bit_types_and_a_prescription() -> None:
    diagnosis = diagnose_document(_load(CASES_DIR / "ampere-a100-jax-fp16-conv-bias-fusion.json"))
    (verdict,) = diagnosis.to_dict()["verdicts"]
    assert verdict["baseline"] == "bfloat16" and verdict["precision"] == "float16" and verdict["outcome"] == "slower"
    assert "than bfloat16" in verdict["headline"]
    (prescription,) = diagnosis.to_dict()["prescriptions"]
    assert prescription["baseline"] == "bfloat16" and prescription["recommended"]["precision"] == "bfloat16"
    assert "no float32 run" in prescription["headline"]


def test_a_measured_variant_that_beats_the_16_bit_run_is_prescribed() -> None:
    diagnosis = diagnose_document(_load(CASES_DIR / "volta-v100-tf22-keras-mixed-depthwise.json"))
    (prescription,) = diagnosis.to_dict()["prescriptions"]
    assert prescription["recommended"]["precision"] == "mixed_float16"
    assert prescription["recommended"]["variant"] in ("graph_rewrite", "depthwise_float32")
    assert prescription["recommended"]["setting"]  # the change its experiment names, as the user would make it
