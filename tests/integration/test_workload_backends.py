"""The seed workload on every Keras this host can offer: Keras 3 on TensorFlow, JAX and PyTorch, and tf_keras."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fp16doctor.engines.base import RunSpec, WorkloadSize
from fp16doctor.engines.host import HostEngine

TINY = WorkloadSize("tiny", 32, 48, 8, warmup_steps=1, min_steps=3, max_steps=5, max_measure_s=3.0,
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
