"""The seed workload on every Keras this host can offer: Keras 3 on TensorFlow, JAX and PyTorch, and tf_keras."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fp16doctor.engines.host import HostEngine
from fp16doctor.engines.spec import RunSpec, WorkloadSize

TINY = WorkloadSize("tiny", 32, 48, 8, warmup_steps=1, min_steps=3, max_steps=5, max_measure_s=3.0, profile_steps=2,
                    input_batches=2)

CASES = [
    # (backend, forced Keras API, module that must be importable)
    ("tensorflow", None, "tensorflow"),
    ("jax", None, "jax"),
    ("torch", None, "torch"),
    ("tensorflow", "tf_keras", "tf_keras"),
]


def _run(tmp_path: Path, backend: str, api: str | None, precision: str) -> dict:
    env = {"FP16DOCTOR_KERAS_API": api} if api else {}
    spec = RunSpec("host", precision, "original", TINY, extra_env=env)
    return HostEngine(backend=backend, cache_dir=tmp_path, timeout_s=600).run(spec, lambda e: None)


@pytest.mark.slow
@pytest.mark.parametrize("backend,api,module", CASES, ids=[f"{b}-{a or 'keras3'}" for b, a, _ in CASES])
def test_float16_is_floatx_and_mixed_is_a_policy_on_every_backend(tmp_path, backend, api, module) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed in this Python")
    f16 = _run(tmp_path, backend, api, "float16")
    assert f16["status"] == "ok", f16.get("error")
    assert f16["software"]["keras_backend"] == backend
    assert f16["software"]["keras_api"] == (api or "keras3-legacy")
    # As the user did it: keras.json floatx=float16 makes the batches and the weights float16.
    assert f16["batch_dtype"] == "float16"
    assert f16["model"]["layers"][0]["variable_dtype"] == "float16"
    assert f16["keras_config"]["floatx"] == "float16"

    mixed = _run(tmp_path, backend, api, "mixed_float16")
    assert mixed["status"] == "ok", mixed.get("error")
    assert mixed["batch_dtype"] == "float32"
    conv = mixed["model"]["layers"][0]
    assert conv["variable_dtype"] == "float32" and conv["compute_dtype"] == "float16"
    assert mixed["model"]["layers"][-1]["compute_dtype"] == "float32"  # the sigmoid stays float32
    assert "LossScaleOptimizer" in mixed["model"]["optimizer"]


# What each backend's profiled window leaves for the attribution.
PROFILE_ARTIFACT = {"tensorflow": "xplane", "jax": "xplane", "torch": "torch_events_path"}


def _run_raw(tmp_path: Path, backend: str, api: str | None, precision: str, variant: str = "original") -> dict:
    """The workload's own result event, before the engine folds the profile into ops."""
    env = {"FP16DOCTOR_KERAS_API": api} if api else {}
    spec = RunSpec("host", precision, variant, TINY, extra_env=env)
    engine = HostEngine(backend=backend, cache_dir=tmp_path, timeout_s=600, keep_profiles=tmp_path / "kept")
    return engine.run(spec, lambda e: None)


@pytest.mark.slow
@pytest.mark.parametrize("backend,api,module", CASES, ids=[f"{b}-{a or 'keras3'}" for b, a, _ in CASES])
def test_bfloat16_is_floatx_on_keras3_and_a_policy_everywhere(tmp_path, backend, api, module) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed in this Python")
    pure = _run_raw(tmp_path, backend, api, "bfloat16")
    if api == "tf_keras":
        # tf_keras checks floatx against float16/32/64: skipped, with the reason, not failed.
        assert pure["status"] == "skipped" and "refuses floatx bfloat16" in pure["error"]
    else:
        assert pure["status"] == "ok", pure.get("error")
        assert pure["keras_config"]["floatx"] == "bfloat16" and pure["batch_dtype"] == "bfloat16"
        assert pure["model"]["layers"][0]["variable_dtype"] == "bfloat16"

    mixed = _run_raw(tmp_path, backend, api, "mixed_bfloat16")
    assert mixed["status"] == "ok", mixed.get("error")
    conv = mixed["model"]["layers"][0]
    assert conv["variable_dtype"] == "float32" and conv["compute_dtype"] == "bfloat16"
    assert mixed["batch_dtype"] == "float32"
    # Every ok run records its profiled window, after the timed steps, apart from them.
    assert mixed["profile"]["window"]["kind"] == "after_timing"
    assert mixed["profile"]["window"]["steps"] == TINY.profile_steps == len(mixed["window_step_ms"])
    assert PROFILE_ARTIFACT[backend] in mixed["profile"]["artifacts"]
    assert mixed["step_time_ms"]["n"] == mixed["workload"]["steps_measured"] >= 3
    # ... and what ran in it: ops with their layers, on every backend.
    ops = mixed.get("ops")
    assert ops is not None, mixed.get("ops_error")
    assert {"conv2d", "dense"} <= {item["layer"] for item in ops["items"]}
    assert ops["coverage"] > 0 and (ops["coverage"] >= 0.7 or "coverage_note" in ops)


@pytest.mark.slow
def test_experiment_variants_change_one_thing_on_tensorflow(tmp_path) -> None:
    batches = _run_raw(tmp_path, "tensorflow", None, "float16", "float32_batches")
    assert batches["status"] == "ok", batches.get("error")
    # The generator builds float32 batches; the model still computes in float16.
    assert batches["batch_dtype"] == "float32" and batches["model"]["layers"][0]["variable_dtype"] == "float16"
    assert batches["variant_applied"]["host_arrays"] == "float32"  # each image too, not only the batch
    assert batches["input_time_ms"]["median"] > 0

    padded = _run_raw(tmp_path, "tensorflow", None, "mixed_float16", "channels_padded")
    assert padded["status"] == "ok", padded.get("error")
    first_conv = next(layer for layer in padded["model"]["layers"] if layer["type"] == "Conv2D")
    assert first_conv["in_channels"] == 8 and padded["workload"]["channels"] == 3

    xla = _run_raw(tmp_path, "tensorflow", None, "float32", "xla")
    assert xla["status"] == "ok", xla.get("error")
    assert xla["workload"]["jit_compile"] is True

    off = _run_raw(tmp_path, "tensorflow", None, "float32", "onednn_off")
    assert off["status"] == "ok" and off["variant_applied"] == {"env TF_ENABLE_ONEDNN_OPTS": "0"}

    if off["device"] == "cpu":  # TF32 is a GPU's: on the CPU the experiment is skipped, with the reason
        tf32 = _run_raw(tmp_path, "tensorflow", None, "float32", "tf32_off")
        assert tf32["status"] == "skipped" and "GPU" in tf32["error"]
