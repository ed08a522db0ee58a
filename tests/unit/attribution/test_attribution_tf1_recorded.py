"""TensorFlow 1.7's own RunMetadata step stats (the tf1.7-cpu stack, recorded by the workload on Python 2.7), read the
way the engine reads a run's profile (engines/artifacts.attach_ops): ops by layer and pass, Keras 2.1.5's layer
names, the window covered, float16 kernels named by their dtype."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from attribution_data import RECORDINGS

from fp16doctor.engines.artifacts import WindowCapture, attach_ops

TF17 = RECORDINGS / "cpu-epyc-avx2-tf1.7-py2.7"
CONVS = ("conv2d_1", "conv2d_2", "conv2d_3", "conv2d_4")


def ops_of(precision: str, tmp_path: Path) -> dict[str, Any]:
    recorded = json.loads((TF17 / "runs.json").read_text())[precision]
    profile = dict(recorded["profile"])
    # The container's profile folder, as copied out of it: the engine relocates the file's path into it.
    local = tmp_path / precision
    (local / "after_timing").mkdir(parents=True)
    with gzip.open(TF17 / f"{precision}.tf1_step_stats.json.gz", "rb") as packed:
        (local / "after_timing" / "tf1_step_stats.json").write_bytes(packed.read())
    record: dict[str, Any] = {"profile": profile, "device": "cpu", "model": {"layers": recorded["model_layers"]}}
    attach_ops(record, WindowCapture(), local)
    assert "ops" in record, record.get("ops_error")
    return record["ops"]


@pytest.mark.parametrize("precision", ["float32", "float16"])
def test_tf1_7_step_stats_give_every_conv_layers_passes_in_its_dtype(precision: str, tmp_path: Path) -> None:
    ops = ops_of(precision, tmp_path)
    assert ops["source"] == "tf1_run_metadata" and ops["window"]["kind"] == "after_timing"
    # float32's 72 ms window is half Session.run's own overhead at this small size (0.97 at the quick size); the
    # 3 s float16 step is nearly all ops.
    assert ops["coverage"] > (0.4 if precision == "float32" else 0.9), ops.get("coverage_note")
    items = ops["items"]
    # Keras 2.1.5 numbers from 1; the first Conv2D has no input gradient to compute.
    for layer in CONVS:
        passes = {i["pass"] for i in items if i["layer"] == layer}
        assert {"forward", "backward_weights"} <= passes, (layer, passes)
        (weights,) = [i for i in items if i["layer"] == layer and i["op_type"] == "Conv2DBackpropFilter"]
        assert weights["pass"] == "backward_weights" and weights["dtype"] == precision
    assert not [i for i in items if i["layer"] == "conv2d_1" and i["op_type"] == "Conv2DBackpropInput"]
    assert any(i["layer"] == "conv2d_2" and i["op_type"] == "Conv2DBackpropInput" for i in items)
    assert any(i["layer"] == "dense_1" and i["pass"] == "backward_weights" for i in items)
    assert any(i["pass"] == "optimizer" for i in items)


def test_tf1_7_float16_time_is_in_the_convolutions_backward_passes(tmp_path: Path) -> None:
    def backward_ms(ops: dict[str, Any]) -> float:
        return sum(i["ms_per_step"] for i in ops["items"]
                   if i["layer"] in CONVS and i["pass"] in ("backward_data", "backward_weights"))

    float32, float16 = ops_of("float32", tmp_path), ops_of("float16", tmp_path)
    # Recorded: TF 1.7's CPU float16 convolution gradients (Eigen, no F16C vectorisation) took most of the step.
    assert backward_ms(float16) > 0.5 * float16["window"]["wall_ms"]
    assert backward_ms(float16) > 10 * backward_ms(float32)
