"""Mode-aware advice: a document whose workload says inference (or whose library runs nothing else) gets no advice
that only training has, and an inference-only library none of a framework's training-time switches
(knowledge/modes.py marks them, once)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document
from fp16doctor.analysis.advice import advice_of
from fp16doctor.knowledge.modes import (
    FRAMEWORK_ONLY_ADVICE,
    TRAINING_ONLY_ADVICE,
    advice_applies,
    inference_only_library,
)
from fp16doctor.results import validate

CASES_DIR = Path(__file__).resolve().parents[2] / "data" / "cases"
CASE_FILES = sorted(CASES_DIR.glob("*.json"))
# What training-only advice says, in the words the analysis writes it: a second check beside the advice ids, so a
# caveat or idea written without its id is still caught.
TRAINING_WORDS = ("optimizer state", "1/2048", "1/256", "loss scal", "changes the training", "weight updates",
                  "gradscaler")


def _load(path: Path) -> dict[str, Any]:
    return validate(json.loads(path.read_text(encoding="utf-8")), source=path.name)


def _says_inference(doc: Mapping[str, Any]) -> bool:
    return any((r.get("workload") or {}).get("mode") == "inference" for r in doc["runs"])


def _library(doc: Mapping[str, Any]) -> str | None:
    return next((lib for r in doc["runs"] if (lib := inference_only_library(r.get("software") or {}))), None)


def _ideas(diagnosis: Any) -> Iterator[Mapping[str, Any]]:
    for prescription in diagnosis.to_dict()["prescriptions"]:
        yield from prescription["untested"]


def _advice(idea: Mapping[str, Any]) -> set[str]:
    return set(advice_of(idea.get("precision"), idea.get("variant"), idea.get("advice")))


def _advice_texts(diagnosis: Any) -> Iterator[str]:
    """Every caveat, note, idea and recommendation a user reads as what to do."""
    for prescription in diagnosis.to_dict()["prescriptions"]:
        yield str(prescription["recommended"].get("caveat") or "")
        yield str(prescription["recommended"].get("how") or "")
        for entry in prescription["measured"]:
            yield str(entry.get("caveat") or "")
            yield from (str(n) for n in entry.get("notes") or [])
        for idea in prescription["untested"]:
            yield " ".join(str(idea.get(k) or "") for k in ("setting", "why", "no_command"))
    for finding in diagnosis.to_dict()["findings"]:
        yield str(finding.get("recommendation") or "")


INFERENCE_CASES = [p for p in CASE_FILES if _says_inference(_load(p)) or _library(_load(p))]


def test_the_case_set_holds_inference_documents_and_inference_only_libraries() -> None:
    assert len(INFERENCE_CASES) >= 10
    assert sum(1 for p in INFERENCE_CASES if _library(_load(p))) >= 3


@pytest.mark.parametrize("path", INFERENCE_CASES, ids=[p.stem for p in INFERENCE_CASES])
def test_no_inference_document_gets_training_only_advice(path: Path) -> None:
    doc = _load(path)
    diagnosis = diagnose_document(doc)
    marked = [idea for idea in _ideas(diagnosis) if _advice(idea) & set(TRAINING_ONLY_ADVICE)]
    assert marked == []
    said = [text for text in _advice_texts(diagnosis) if any(w in text.lower() for w in TRAINING_WORDS)]
    assert said == []
    if _library(doc):
        switches = [idea for idea in _ideas(diagnosis) if _advice(idea) & set(FRAMEWORK_ONLY_ADVICE)]
        assert switches == []


def _doc(mode: str | None, software: dict[str, str]) -> dict[str, Any]:
    runs = []
    for precision, ms in (("float32", 111.0), ("float16", 166.0)):
        run: dict[str, Any] = {"stack": "user", "precision": precision, "device": "gpu:0", "status": "ok",
                               "software": software, "step_time_ms": {"median": ms},
                               "workload": {"batch_size": 1, **({"mode": mode} if mode else {})}}
        runs.append(run)
    return {"schema_version": 1, "host": {"gpus": [{"name": "Tesla T4", "compute_capability": "7.5"}]}, "runs": runs}


def test_training_gets_the_pure_float16_caveat_and_inference_does_not() -> None:
    torch = {"torch": "2.3.0"}
    trained = diagnose_document(_doc("training", torch))
    served = diagnose_document(_doc("inference", torch))
    caveat = next(m["caveat"] for m in trained.to_dict()["prescriptions"][0]["measured"] if m["precision"] == "float16")
    assert "1/2048" in caveat
    assert all(m["caveat"] is None for m in served.to_dict()["prescriptions"][0]["measured"])


def test_an_inference_only_library_is_inference_without_saying_so() -> None:
    diagnosis = diagnose_document(_doc(None, {"ctranslate2": "4.0.0"}))
    assert all(m["caveat"] is None for m in diagnosis.to_dict()["prescriptions"][0]["measured"])
    ideas = list(_ideas(diagnosis))
    assert not [i for i in ideas if str(i.get("precision", "")).startswith("mixed_")]
    assert not [i for i in ideas if "compile" in str(i.get("setting") or "")]


def test_inference_with_a_framework_keeps_the_framework_switches() -> None:
    diagnosis = diagnose_document(_doc("inference", {"torch": "2.3.0"}))
    ideas = list(_ideas(diagnosis))
    assert any("torch.compile" in str(i.get("setting")) for i in ideas)  # a framework still compiles for inference
    assert all(i.get("advice") not in TRAINING_ONLY_ADVICE for i in ideas)


@pytest.mark.parametrize(("advice", "inference", "library", "applies"), [
    ("weight_updates", True, None, False), ("weight_updates", False, None, True),
    ("loss_scaling", True, "ctranslate2", False), ("mixed_policy", True, None, True),
    ("mixed_policy", True, "tensorrt", False), ("framework_compiler", False, "llama.cpp", False),
    (None, True, "onnxruntime", True),
])
def test_advice_applies_by_mode_and_library(advice: str | None, inference: bool, library: str | None,
                                            applies: bool) -> None:
    assert advice_applies(advice, inference, library) is applies


def test_inference_only_libraries_by_the_names_documents_give() -> None:
    assert inference_only_library({"CTranslate2": "4.7.1", "torch": "2.5"}) == "ctranslate2"
    assert inference_only_library(["llama.cpp"]) == "llama.cpp"
    assert inference_only_library({"torch": "2.5", "transformers": "4.40"}) is None


def test_autocast_for_inference_needs_no_grad_scaler() -> None:
    served = _doc("inference", {"torch": "2.3.0"})
    trained = _doc("training", {"torch": "2.3.0"})
    for doc in (served, trained):
        doc["runs"][1].update(precision="mixed_float16", step_time_ms={"median": 60.0})
    how = {name: diagnose_document(doc).to_dict()["prescriptions"][0]["recommended"]["how"]
           for name, doc in (("served", served), ("trained", trained))}
    assert "GradScaler" in how["trained"] and "GradScaler" not in how["served"]


def _torch_half_doc(mode: str) -> dict[str, Any]:
    """Plain .half() against float32 on an RTX 2080 Ti under PyTorch 1.2 (before torch.cuda.amp), hand-written."""
    def run(precision: str, ms: float) -> dict[str, Any]:
        return {"stack": "torch-1.2", "precision": precision, "variant": "original", "device": "gpu:0",
                "status": "ok", "software": {"torch": "1.2.0", "cuda": "10.0.130", "cudnn": "7.6.2"},
                "workload": {"name": "conv3d", "batch_size": 8, "mode": mode}, "step_time_ms": {"median": ms}}
    return {"schema_version": 1, "host": {"gpus": [{"index": 0, "name": "GeForce RTX 2080 Ti",
                                                     "compute_capability": "7.5"}]},
            "runs": [run("float32", 40.0), run("float16", 62.0)]}


def test_a_missing_mixed_precision_api_is_no_reason_a_plain_half_inference_is_slow() -> None:
    """torch.cuda.amp arrived in 1.6: an older PyTorch lacks it, which matters to training, not to a .half() model
    run forward only."""
    inference = diagnose_document(_torch_half_doc("inference"))
    assert not any("torch.cuda.amp" in e for f in inference.to_dict()["findings"] for e in f.get("evidence") or [])
    training = diagnose_document(_torch_half_doc("training"))
    assert any("torch.cuda.amp" in e for f in training.to_dict()["findings"] for e in f.get("evidence") or [])


def test_float32_is_said_in_the_framework_that_ran() -> None:
    """'keep floatx float32' is Keras' word: a PyTorch document's float32 is the model and inputs without autocast."""
    (prescription,) = diagnose_document(_torch_half_doc("inference")).to_dict()["prescriptions"]
    assert prescription["recommended"]["precision"] == "float32"
    assert "floatx" not in prescription["recommended"]["how"] and "autocast" in prescription["recommended"]["how"]


def _two_jax_releases(newer: str, older_ms: float) -> dict[str, Any]:
    """One 16-bit type on two JAX releases of one CPU, no float32 run (hand-written)."""
    def run(stack: str, version: str, ms: float) -> dict[str, Any]:
        return {"stack": stack, "precision": "bfloat16", "variant": "original", "device": "cpu",
                "status": "ok", "software": {"jax": version}, "workload": {"name": "matmul", "mode": "inference"},
                "step_time_ms": {"median": ms}}
    return {"schema_version": 1, "host": {"cpu": {"model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"},
                                          "gpus": []},
            "runs": [run("old", "0.4.20", older_ms), run("new", newer, 14.0)]}


def test_a_newer_release_much_faster_on_the_same_type_names_the_old_stack_and_only_then() -> None:
    """No float32 to compare with: the same type on two stacks of one machine is the measurement."""
    found = {f["id"]: f for f in diagnose_document(_two_jax_releases("0.4.21", 55.0)).to_dict()["findings"]}
    assert found["old_stack"]["title"] == "This software stack lacks the fast bf16 paths"  # bfloat16 was measured
    # Within the band, or no newer library: no such claim.
    assert "old_stack" not in {f.id for f in diagnose_document(_two_jax_releases("0.4.21", 16.0)).findings}
    assert "old_stack" not in {f.id for f in diagnose_document(_two_jax_releases("0.4.20", 55.0)).findings}
