"""The seed model's layers and the roofline estimate the report shows beside the measured speedup."""

from __future__ import annotations

import dataclasses

import pytest

from fp16doctor.analysis.model import layer_from_record, seed_layers
from fp16doctor.analysis.roofline import RooflineEstimate, estimate

SEED_RUN = {"name": "seed_cnn", "image_height": 224, "image_width": 336, "channels": 3, "batch_size": 128}


def _doc(gpu: dict[str, str] | None, device: str = "gpu:0", **software: str) -> dict[str, object]:
    runs = [
        {"stack": "user", "precision": p, "device": device, "status": "ok", "software": dict(software),
         "workload": SEED_RUN, "step_time_ms": {"median": ms}}
        for p, ms in (("float32", 500.0), ("float16", 800.0))
    ]
    return {"schema_version": 1, "host": {"gpus": [gpu] if gpu else []}, "runs": runs}


def test_seed_layers_at_the_scripts_size() -> None:
    layers = seed_layers(224, 336)
    convs = [la for la in layers if la.type == "Conv2D"]
    assert [(c.in_channels, c.out_channels) for c in convs] == [(3, 32), (32, 32), (32, 64), (64, 64)]
    assert convs[0].flops_per_example == 2 * 224 * 336 * 3 * 32 * 9
    assert convs[3].output_elements == 28 * 42 * 64
    dense = layers[-2]
    assert dense.type == "Dense" and dense.in_channels == 7 * 10 * 64 and dense.out_channels == 1
    assert sum(la.params for la in layers) == 70049  # what Keras' model.summary() counts for the script


def test_seed_layers_at_the_quick_size() -> None:
    layers = seed_layers(112, 168)
    assert layers[-2].in_channels == 3 * 5 * 64  # 112 -> 56 -> 28 -> 14 -> 7 -> 3; 168 -> ... -> 10 -> 5


def test_estimate_for_the_titan_v_question() -> None:
    (est,) = estimate(_doc({"name": "NVIDIA TITAN V", "compute_capability": "7.0"}, cudnn="7.0"))
    assert isinstance(est, RooflineEstimate)
    assert est.stack == "user" and est.gpu_name == "NVIDIA TITAN V" and est.device == "gpu:0"
    assert est.precision == "float16" and est.measured_speedup == pytest.approx(0.625)
    assert est.predicted_speedup is not None and 1.5 < est.predicted_speedup < 8
    assert est.fp32_ms is not None and est.fp16_ms is not None and est.fp16_ms < est.fp32_ms < 500
    assert est.bound in ("compute", "memory")
    assert "seed layers, batch 128" in est.note


def test_estimate_is_frozen() -> None:
    (est,) = estimate(_doc({"name": "NVIDIA TITAN V", "compute_capability": "7.0"}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.bound = "compute"  # type: ignore[misc]


def test_pascal_consumer_gains_only_bandwidth() -> None:
    (est,) = estimate(_doc({"name": "GeForce GTX 1080", "compute_capability": "6.1"}))
    volta = estimate(_doc({"name": "NVIDIA TITAN V", "compute_capability": "7.0"}))[0]
    assert est.predicted_speedup is not None and volta.predicted_speedup is not None
    assert 1.0 <= est.predicted_speedup < volta.predicted_speedup


def test_cpu_and_unknown_gpus_have_no_prediction() -> None:
    (cpu,) = estimate(_doc(None, device="cpu"))
    assert cpu.predicted_speedup is None and cpu.bound == "unknown" and cpu.measured_speedup == pytest.approx(0.625)
    (unknown,) = estimate(_doc({"name": "Mystery GPU", "compute_capability": "7.0"}))
    assert unknown.predicted_speedup is None and "not in the table" in unknown.note


def test_estimate_without_runs_or_model() -> None:
    assert estimate({"schema_version": 1, "host": {"gpus": []}, "runs": []}) == []
    doc = _doc({"name": "NVIDIA TITAN V", "compute_capability": "7.0"})
    for r in doc["runs"]:  # type: ignore[attr-defined]
        r.pop("workload")
    (est,) = estimate(doc)
    assert est.predicted_speedup is None and est.fp32_ms is None


def test_dense_layers_as_the_workload_records_them_keep_their_sizes() -> None:
    # The workload writes Dense layers with in_features/out_features; they must not lose their sizes.
    record = {"type": "Dense", "name": "dense", "output_shape": [1], "in_features": 4480, "out_features": 1,
              "flops_per_example": 8960.0}
    layer = layer_from_record(record)
    assert layer is not None
    assert (layer.in_channels, layer.out_channels) == (4480, 1)
    assert layer.channel_multiple_of_8 is False  # so the eligibility rule can name it
    assert layer.input_elements == 4480  # the roofline reads its input, too
