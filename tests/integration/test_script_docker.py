"""`diagnose --script --stack cpu` on a real Docker engine: the container sees the script's folder
(read-only) and its scratch directory, and nothing else of this machine."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from docker_env import ca_bundle, require_engine

from fp16doctor.engines.docker import sdk
from fp16doctor.workload.dataset import ensure_dataset

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

PROBE_SCRIPT = """
    import os
    import sys
    import numpy as np
    import keras

    here = os.path.dirname(os.path.abspath(__file__))
    print("sibling visible:", os.path.exists(os.path.join(here, "data.txt")))
    print("other host folder visible:", os.path.exists(sys.argv[1]))
    try:
        open(os.path.join(here, "written.txt"), "w").close()
        print("own folder writable: True")
    except OSError:
        print("own folder writable: False")
    open("checkpoint.txt", "w").close()
    print("cwd writable: True")
    x = np.random.rand(256, 8).astype("float32")
    y = (x.sum(axis=1) > 4).astype("float32")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model.compile(loss="mse", optimizer="sgd")
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
"""


def test_a_script_runs_in_a_stack_seeing_only_its_folder(tmp_path: Path) -> None:
    require_engine()
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(textwrap.dedent(PROBE_SCRIPT))
    (project / "data.txt").write_text("x\n")
    secret = tmp_path / "secret"
    secret.mkdir()
    command = [sys.executable, "-m", "fp16doctor", "diagnose", "--script", str(project / "train.py"),
               "--script-arg", str(secret), "--stack", "cpu", "--no-host", "--precision", "float32",
               "--steps", "5", "--out", str(tmp_path / "out")]
    ca = ca_bundle()
    if ca is not None:
        command += ["--ca-bundle", str(ca)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=3600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads((tmp_path / "out" / "results.json").read_text())["runs"][0]
    assert run["status"] == "ok" and run["engine"]["kind"] == "docker", run.get("error")
    assert run["workload"]["name"] == "script" and run["step_time_ms"]["n"] == 5
    # What ran was measured in the container too, and the log keeps the script's output alone.
    ops = run.get("ops")
    assert ops is not None, run.get("ops_error")
    assert {"dense", "dense_1"} <= {item["layer"] for item in ops["items"]}
    assert isinstance(run["engine"]["cpu"]["flags"], list)  # the engine machine's CPU, as the container saw it
    log = (tmp_path / "out" / run["script_log"]).read_text()  # relative to the results' folder
    assert "onednn_verbose" not in log and "fp16doctor-window" not in log
    assert "sibling visible: True" in log and "other host folder visible: False" in log
    assert "own folder writable: False" in log and "cwd writable: True" in log
    assert not (project / "written.txt").exists() and sorted(p.name for p in project.iterdir()) == ["data.txt",
                                                                                                   "train.py"]
    assert sdk.leftover_containers(None) == []


def test_the_questions_script_runs_unchanged_where_keras_takes_its_optimizer_arguments(tmp_path: Path) -> None:
    """The question's script, as posted, in tf2.10-cpu: Keras 2.10's RMSprop takes lr= and decay=, its
    fit_generator runs, and the run is measured per step with what ran. float32 only: a float16 step of its
    128 images at 224x336 takes minutes on a small CPU (docs/examples/cpu-epyc-avx2-tf2.10-seed-script)."""
    require_engine()
    if sdk.image_id(None, "debian:bullseye-slim") is None:
        pytest.fail("debian:bullseye-slim is missing: run `bash .ci/docker-up.sh`")
    data = tmp_path / "data"
    # The built-in workload's image folders (two classes; the script resizes them): 512 training images
    # for the script's 4 steps per epoch of 128; validation reads one short batch.
    train, test = ensure_dataset(str(data), 28, 42, 256), ensure_dataset(str(data), 28, 42, 4)
    script = ROOT / "tests" / "data" / "scripts" / "seed_question.py"
    command = [sys.executable, "-m", "fp16doctor", "diagnose", "--script", str(script),
               "--script-arg", str(train), "--script-arg", str(test), "--data", str(data),
               "--stack", "tf2.10-cpu", "--no-host", "--precision", "float32", "--steps", "3",
               "--out", str(tmp_path / "out")]
    ca = ca_bundle()
    if ca is not None:
        command += ["--ca-bundle", str(ca)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=3600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = json.loads((tmp_path / "out" / "results.json").read_text())["runs"]
    assert run["status"] == "ok", run.get("error")
    assert run["software"]["keras"] == "2.10.0" and run["workload"]["per_step"] is True
    assert run["step_time_ms"]["n"] == 3 and run["step_time_ms"]["median"] > 0
    ops = run.get("ops")
    assert ops is not None, run.get("ops_error")
    assert {"conv2d", "conv2d_1", "conv2d_2", "conv2d_3", "dense"} <= {item["layer"] for item in ops["items"]}
    log = (tmp_path / "out" / run["script_log"]).read_text()  # relative to the results' folder
    assert "Found 512 images belonging to 2 classes." in log and "Epoch 1/32" in log
    assert sdk.leftover_containers(None) == []
