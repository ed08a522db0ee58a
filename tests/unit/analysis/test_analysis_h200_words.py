"""On a real GPU the words follow the numbers: the seed script on an NVIDIA H200 (Keras 3 on PyTorch, no TensorFlow),
its results.json as recorded (docs/examples/gpu-h200-keras-torch-full), re-analysed by this release."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest


@pytest.fixture(scope="module")
def words(h200) -> str:
    """Everything the analysis says, as `explain --json` prints it."""
    return json.dumps({"findings": h200.to_dict()["findings"], "verdicts": h200.to_dict()["verdicts"],
                       "prescriptions": h200.to_dict()["prescriptions"]}, ensure_ascii=False)


def _verdict(h200, precision: str, variant: str = "original") -> dict[str, Any]:
    return next(v for v in h200.to_dict()["verdicts"] if (v["precision"], v["variant"]) == (precision, variant))


def test_float16s_measured_cause_is_the_hosts_float16_batches(h200):
    verdict = _verdict(h200, "float16")
    assert verdict["cause"] == "host_fp16_emulation" and verdict["basis"] == "measured_ops"
    assert verdict["explained_share"] >= 0.8
    assert verdict["likely_cause"] is None
    path = [f for f in h200.to_dict()["findings"] if f["id"] == "framework_16bit_path"]
    assert not path  # the GPU did less work in float16: its 16-bit path is not what was slow


def test_no_headline_says_nothing_explains_what_a_finding_measured(h200, words):
    assert not any("no measured cause explains" in v["headline"] for v in h200.to_dict()["verdicts"]
                   if v["outcome"] == "slower")
    assert "on that machine measures it" not in words


def test_no_fix_forbids_a_setting_and_promises_its_gain(h200):
    for finding in h200.to_dict()["findings"]:
        text = str(finding.get("recommendation") or "")
        assert not ("Do not set" in text and "Expected gain" in text), finding["id"]


def test_nothing_measured_is_called_untested(h200_doc, h200):
    ran = {(r["precision"], r.get("variant") or "original") for r in h200_doc["runs"] if r["status"] == "ok"}
    for prescription in h200.to_dict()["prescriptions"]:
        for idea in prescription["untested"]:
            assert (idea["precision"], idea.get("variant") or "original") not in ran, idea


def test_the_prescription_leads_with_the_input_pipeline_it_measured(h200):
    (prescription,) = h200.to_dict()["prescriptions"]
    change, *following = prescription["user_changes"]
    # After it, what batches in memory leave: compiled execution (untested here) and the batch's bytes (an estimate).
    assert [c["kind"] for c in following] == ["compiled", "batch_bytes"]
    assert change["kind"] == "input_pipeline" and change["measured_by"] == "synthetic_input"
    assert change["step_ms"] == pytest.approx(303, abs=3) and change["changed_step_ms"] == pytest.approx(82, abs=2)
    assert change["speedup"] > 3
    headline = prescription["headline"]
    assert len(headline) < 300 and "input pipeline" in headline
    assert "82 ms" in headline and "303 ms" in headline
    assert prescription["recommended"]["variant"] == "original"  # adoptable, as ever
    in_memory = {m["precision"]: m for m in change["in_memory"]}
    assert in_memory["float16"]["figure"] == "1.8x faster"
    assert in_memory["float16"]["device_difference_ms"] < 0


def test_advice_is_in_the_framework_that_ran(h200_doc, words):
    assert h200_doc["host"]["frameworks"]["tensorflow"] is None
    assert not re.search(r"tf\.data|tf\.config|image_dataset_from_directory", words)


def test_the_mixed_verdicts_name_the_input_pipelines_noise_and_the_device_side_change(h200):
    for precision in ("mixed_float16", "mixed_bfloat16"):
        headline = _verdict(h200, precision)["headline"]
        assert "load average" not in headline and "this machine now" not in headline
        assert "input pipeline" in headline
        assert re.search(r"the profile measured what it changed on the device: \u2212\d", headline)


def test_small_causes_stay_small(h200):
    found = {f["id"]: f for f in h200.to_dict()["findings"]}
    cast = found.get("cast_overhead")
    assert cast is None or all(float(m) < 2.0 for line in cast["evidence"]
                               for m in re.findall(r"casts .*?cost (\d+(?:\.\d+)?) ms", line))
    # conv2d's and dense's 16-bit kernels ran on Tensor Cores in the profile: no shape kept them off.
    assert "tensor_cores_not_eligible" not in found
