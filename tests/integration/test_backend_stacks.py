"""`fp16doctor diagnose --backend ...`: each Keras 3 backend this Python has is a host stack of its own (`host` for the
configured one, `host-jax`, `host-torch`), measured in processes of its own and compared as pinned stacks are."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BACKENDS = ("tensorflow", "jax", "torch")
FP16DOCTOR = [sys.executable, "-m", "fp16doctor"]


@pytest.fixture(scope="module")
def three_backends(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    missing = [b for b in BACKENDS if importlib.util.find_spec(b) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed in this Python")
    out = tmp_path_factory.mktemp("diagnose-backends")
    # float32 and one 16-bit precision, no experiments: what is checked is how each backend is named and compared, not
    # the matrix (the default one, four precisions on three backends, took 2.5 min on a 2-core Xeon). mixed_bfloat16
    # rather than float16, whose steps take seconds on some CPUs (oneDNN's reference kernels on a Xeon with
    # AVX512-FP16) until the slow-step bound cuts them.
    argv = ["diagnose", "--size", "smoke", "--precision", "float32", "--precision", "mixed_bfloat16",
            "--no-experiments", "--out", str(out)]
    for backend in BACKENDS:
        argv += ["--backend", backend]
    # The configured backend is TensorFlow here, whatever this machine's keras.json says.
    env = {**os.environ, "KERAS_BACKEND": "tensorflow"}
    proc = subprocess.run([*FP16DOCTOR, *argv], capture_output=True, text=True, timeout=900, env=env)
    return proc, out


@pytest.mark.slow
def test_each_backend_is_a_host_stack_named_in_its_runs_comparisons_report_and_explain(three_backends) -> None:
    proc, out = three_backends
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    stacks = {"host": "tensorflow", "host-jax": "jax", "host-torch": "torch"}
    assert doc["invocation"]["stacks"] == list(stacks)
    for run in doc["runs"]:
        assert run["software"]["keras_backend"] == stacks[run["stack"]], run["stack"]
        assert run["machine"] == "host"
    for stack in stacks:
        assert any(r["stack"] == stack and r["precision"] == "float32" and r["status"] == "ok" for r in doc["runs"])
    # Every pair of backends is compared for each 16-bit precision, the configured backend first.
    pairs = {(c["from"], c["to"]) for c in doc["stack_comparisons"]}
    assert {("host", "host-jax"), ("host", "host-torch"), ("host-jax", "host-torch")} <= pairs
    assert any("backend jax" in c["software_to"] for c in doc["stack_comparisons"])
    # A configuration on another backend is measured again with the option that selects it.
    jax_run = next(r for r in doc["runs"] if r["stack"] == "host-jax")
    assert jax_run["engine"]["rerun"] == ["--backend", "jax"]
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "host-jax" in report and "host-torch" in report
    explained = subprocess.run([*FP16DOCTOR, "explain", str(out / "results.json")], capture_output=True, text=True,
                               timeout=120)
    assert explained.returncode == 0, explained.stderr
    assert "host-jax" in explained.stdout and "Between stacks" in explained.stdout
