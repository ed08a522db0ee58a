"""A 16-bit configuration that rounds the model's integer inputs computes another model: it is said, with the layer
and the fix, and never prescribed, however fast it measured."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document
from fp16doctor.analysis.rules.numerics import rounded_to

ROUNDS_FP32 = [10.0, 10.2, 9.9, 10.1, 10.0, 10.3]
ROUNDS_BF16 = [9.3, 9.5, 9.2, 9.4, 9.3, 9.6]  # about 1.07x faster, its interval clear of 1


def _run(precision: str, rounds: list[float], consumer: dict[str, Any], max_id: float, dtype: str) -> dict[str, Any]:
    return {
        "stack": "host", "precision": precision, "variant": "original", "device": "cpu", "status": "ok",
        "step_time_ms": {"median": sorted(rounds)[3], "n": len(rounds), "rounds": rounds, "design": "interleaved"},
        "workload": {"name": "script", "batch_size": 32},
        "model": {"params": 1, "layers": [consumer, {"type": "Dense", "name": "dense", "in_features": 32,
                                                      "out_features": 2, "compute_dtype": consumer["compute_dtype"]}],
                  "inputs": [{"name": "input_layer", "dtype": dtype, "consumers": [consumer["name"]],
                              "values": {"dtype": dtype, "integer": True, "max_abs": max_id, "sampled": 6400}}]},
    }


def _doc(max_id: float = 19999.0, autocast: bool = True, input_dtype: str = "float32") -> dict[str, Any]:
    layer = {"type": "TokenAndPositionEmbedding", "name": "token_and_position_embedding", "params": 640000}
    fp32 = _run("float32", ROUNDS_FP32, {**layer, "compute_dtype": "float32", "autocast": autocast}, max_id,
                input_dtype)
    bf16 = _run("mixed_bfloat16", ROUNDS_BF16, {**layer, "compute_dtype": "bfloat16", "autocast": autocast}, max_id,
                input_dtype)
    return {"schema_version": 1, "host": {"cpu": {"model": "Intel Xeon", "flags": ["avx512_bf16", "amx_bf16"]},
                                          "gpus": []}, "runs": [fp32, bf16]}


def test_rounding_is_what_a_cast_makes_of_an_id() -> None:
    assert rounded_to(19999, 8) == 19968 and rounded_to(257, 8) == 256  # bfloat16
    assert rounded_to(19999, 11) == 20000 and rounded_to(2049, 11) == 2048  # float16


def test_ids_rounded_by_an_autocasting_layer_are_said_and_never_prescribed() -> None:
    diagnosis = diagnose_document(_doc())
    finding = next(f for f in diagnosis.to_dict()["findings"] if f["id"] == "integer_ids_rounded")
    assert finding["severity"] == "critical"
    said = finding["evidence"][0]
    assert "257 becomes 256 and 19,999 becomes 19,968" in said and "token_and_position_embedding" in said
    assert 'keras.Input(shape=..., dtype="int32")' in finding["recommendation"]
    (prescription,) = diagnosis.to_dict()["prescriptions"]
    assert prescription["recommended"]["precision"] == "float32"
    entry = next(m for m in prescription["measured"] if m["precision"] == "mixed_bfloat16")
    assert entry["outcome"] == "faster" and "integer_ids_rounded" in entry["unsafe"]


@pytest.mark.parametrize(("changes", "why"), [
    ({"max_id": 200.0}, "every id under 256 is exact in bfloat16"),
    ({"autocast": False}, "a layer that does not autocast (Embedding) takes the ids as they are"),
    ({"input_dtype": "int32"}, "Keras never casts an integer input"),
])
def test_exact_or_uncast_ids_change_nothing(changes: dict[str, Any], why: str) -> None:
    diagnosis = diagnose_document(_doc(**changes))
    assert "integer_ids_rounded" not in {f["id"] for f in diagnosis.to_dict()["findings"]}, why
    assert diagnosis.to_dict()["prescriptions"][0]["recommended"]["precision"] == "mixed_bfloat16", why


def test_a_float16_input_rounds_at_the_input_itself() -> None:
    doc = copy.deepcopy(_doc(max_id=5000.0, autocast=False))
    doc["runs"][1]["precision"] = "float16"
    doc["runs"][1]["model"]["inputs"][0]["dtype"] = "float16"  # floatx float16 makes a float Input float16
    finding = next(f for f in diagnose_document(doc).to_dict()["findings"] if f["id"] == "integer_ids_rounded")
    said = finding["evidence"][0]
    assert "the input itself is float16" in said and "2,049 becomes 2,048:" in said  # 5,000 itself is exact


def test_a_16_bit_run_that_failed_on_its_rounded_ids_is_said_from_float32s_record() -> None:
    """mixed_float16 rounded id 19,999 to 20,000, past its embedding table, and failed before it described its model:
    float32's run recorded the float input carrying whole numbers into an autocasting layer, which the mixed policy
    makes float16; the finding names mixed_float16 with that reading, and the failure reads as rounded ids."""
    from fp16doctor.engines.failures import script_cause

    doc = _doc()
    doc["runs"][1] = {"stack": "host", "precision": "mixed_float16", "variant": "original", "device": "cpu",
                      "status": "failed", "error": "InvalidArgumentError: Graph execution error"}
    finding = next(f for f in diagnose_document(doc).to_dict()["findings"] if f["id"] == "integer_ids_rounded")
    assert [r["precision"] for r in finding["runs"]] == ["mixed_float16"]
    said = finding["evidence"][0]
    assert "as float32's run recorded them; this run failed" in said
    assert "casts it to float16" in said and "19,999 becomes 20,000" in said
    cause = script_cause("InvalidArgumentError: indices[28,101] = 20000 is not in [0, 20000)\n\t [[{{node "
                         "functional_1/token_and_position_embedding_1/embedding_2/GatherV2}}]]", "mixed_float16")
    assert cause is not None and cause.kind == "ids_out_of_range"
    assert "id 20000 looked up a table of 20000 rows" in cause.reason and 'dtype="int32"' in cause.fix
    assert script_cause("indices[3] = 7 is not in [0, 5)", "float32") is None  # a float32 fault is the script's


def test_no_configuration_that_rounds_the_ids_is_offered_as_untested() -> None:
    """Ids past 2,048 round in float16 and in bfloat16 alike: no 16-bit idea is listed untested beside the finding
    (a switch beside the precision changes nothing of what it computes); ids past 256 only rule out bfloat16."""
    from fp16doctor.analysis.rules.numerics import drop_rounding_untested, rounding_precisions

    finding = {"id": "integer_ids_rounded",
               "runs": [{"machine": "host", "stack": "host", "precision": "mixed_float16", "variant": "original"}]}
    assert rounding_precisions(finding)[("host", "host")] == {"float16", "mixed_float16", "bfloat16",
                                                             "mixed_bfloat16"}
    only_bf16 = {**finding, "runs": [{**finding["runs"][0], "precision": "mixed_bfloat16"}]}
    assert rounding_precisions(only_bf16)[("host", "host")] == {"bfloat16", "mixed_bfloat16"}
    prescription: dict[str, Any] = {"machine": "host", "stack": "host", "untested": [
        {"precision": "mixed_float16", "variant": "xla"}, {"precision": "float32", "variant": "xla"}]}
    drop_rounding_untested([finding], [prescription])
    assert prescription["untested"] == [{"precision": "float32", "variant": "xla"}]


@pytest.mark.parametrize(("autocast", "said"), [(True, True), (False, False)])
def test_a_failed_floatx_run_is_read_only_through_a_layer_that_casts(autocast: bool, said: bool) -> None:
    """A failed floatx float16 run read from float32's record: float32's record cannot tell whether the Input had a
    dtype of its own, so only an autocasting layer is said to round the ids; an Embedding (no autocast) is not."""
    doc = _doc(autocast=autocast)
    doc["runs"][1] = {"stack": "host", "precision": "float16", "variant": "original", "device": "cpu",
                      "status": "failed", "error": "InvalidArgumentError: Graph execution error"}
    found = [f for f in diagnose_document(doc).to_dict()["findings"] if f["id"] == "integer_ids_rounded"]
    assert bool(found) is said
    if said:
        assert "casts it to float16" in found[0]["evidence"][0] and "input itself" not in found[0]["evidence"][0]
