"""The question's 2018 frameworks for real: TensorFlow 1.7.0 and Keras 2.1.5 (the tf1.7-cpu stack, their CPU builds on
Python 2.7.18) run the seed workload in float32 and in float16 set as the user set it (keras.json floatx), on a real
Docker engine. One stack, two precisions, the quick size: what holds on any x86-64 CPU, not how fast it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from docker_env import ca_bundle, require_engine

from fp16doctor.engines.docker import sdk
from fp16doctor.stacks import get_stack
from fp16doctor.workload.protocol import SEED_WORKLOAD

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TWIN = "tf1.7-cpu"


def test_tensorflow_1_7_and_keras_2_1_5_train_in_float32_and_float16_on_python_2_7(tmp_path: Path) -> None:
    require_engine()
    command = [sys.executable, "-m", "fp16doctor", "diagnose", "--quick", "--stack", TWIN, "--no-host",
               "--precision", "float32", "--precision", "float16", "--no-experiments", "--out", str(tmp_path)]
    ca = ca_bundle()
    if ca is not None:  # pip inside the build goes through this machine's TLS proxy
        command += ["--ca-bundle", str(ca)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "results.json").read_text())
    runs = {r["precision"]: r for r in doc["runs"] if r["variant"] == "original"}
    assert sorted(runs) == ["float16", "float32"]
    float32 = runs["float32"]
    assert float32["status"] == "ok", float32.get("error")
    for precision, run in runs.items():
        if run["status"] != "ok":
            # float16 may not train here; then the run says why, in its own words, never silently.
            assert run["status"] in ("skipped", "failed") and run.get("error"), (precision, run)
            continue
        # The twin's own software, as the workload saw it inside the image.
        software = run["software"]
        assert (software["tensorflow"], software["keras"]) == ("1.7.0", "2.1.5"), software
        assert software["python"].startswith("2.7."), software
        assert run["workload"]["name"] == SEED_WORKLOAD and run["workload"]["api"] == "fit_generator"
        assert run["keras_config"]["floatx"] == precision
        assert run["step_time_ms"]["median"] > 0
        # TensorFlow 1.7 from PyPI is no oneDNN build: its ops come from RunMetadata step stats, layers named the
        # Keras 2.1.5 way (the first Conv2D is conv2d_1).
        ops = run["ops"]
        assert ops["source"] == "tf1_run_metadata", ops
        layers = {item["layer"] for item in ops["items"]}
        assert "conv2d_1" in layers, sorted(layers)
        assert any(i["pass"] == "backward_weights" and i["op_type"] == "Conv2DBackpropFilter" for i in ops["items"])
        engine = run["engine"]
        assert engine["kind"] == "docker" and engine["image"].startswith(f"fp16doctor/{TWIN}:")
        assert engine["stack_description"] == get_stack(TWIN).description
    assert sdk.leftover_containers(None) == []
