"""The input-pipeline program the prescription emits (analysis/pipeline_code.py) runs as given: for each Keras flavour
it is emitted for and this Python has, the program trains the seed model on a tiny directory of PNG and JPEG images
in a process of its own, on the CPU, at 32 x 48 pixels (the smallest the seed's five poolings take)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fp16doctor.analysis.context import Software
from fp16doctor.analysis.pipeline_code import input_pipeline_program


def _sw(**versions: str) -> Software:
    return Software.from_run({"software": versions})

pytestmark = pytest.mark.slow

HEIGHT, WIDTH, BATCH = 32, 48, 4

CASES = [
    # (the stack's software as a run records it, the environment that selects that Keras, modules it needs)
    (_sw(keras="3.15.1", keras_backend="tensorflow", keras_api="keras3-legacy", tensorflow="2.21.0"),
     {"KERAS_BACKEND": "tensorflow"}, ("keras", "tensorflow")),
    (_sw(keras="3.15.1", keras_backend="jax", keras_api="keras3-legacy", jax="0.10.2"),
     {"KERAS_BACKEND": "jax"}, ("keras", "jax")),
    (_sw(keras="3.15.1", keras_backend="torch", keras_api="keras3-legacy", torch="2.11.0"),
     {"KERAS_BACKEND": "torch"}, ("keras", "torch")),
    (_sw(keras="2.21.0", keras_backend="tensorflow", keras_api="tf_keras", tensorflow="2.21.0"),
     {"TF_USE_LEGACY_KERAS": "1"}, ("tf_keras", "tensorflow")),
]


def _images(folder: Path) -> None:
    """Two classes of six images each, PNG and JPEG, of another size than the program's (it resizes them)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for label in ("cats", "dogs"):
        (folder / label).mkdir(parents=True)
        for i in range(6):
            pixels = rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / label / f"{i}.{'png' if i % 2 else 'jpg'}")
    (folder / "dogs" / "notes.txt").write_text("not an image", encoding="utf-8")  # flow_from_directory skips it


@pytest.mark.parametrize("software,env,modules", CASES,
                         ids=["keras3-tensorflow", "keras3-jax", "keras3-torch", "tf_keras"])
def test_the_emitted_input_pipeline_trains_the_seed_model(tmp_path: Path, software: Software, env: dict[str, str],
                                                          modules: tuple[str, ...]) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed in this Python")
    program = input_pipeline_program(software, HEIGHT, WIDTH, BATCH, train_dir=str(tmp_path / "train"), epochs=1)
    assert program is not None
    assert "Rescaling(1. / 255)" in program and "RandomFlip('horizontal_and_vertical')" in program
    assert "np.uint8" in program and "flow_from_directory(" not in program
    assert ("tf.data.Dataset" in program) == (env.get("KERAS_BACKEND", "tensorflow") == "tensorflow")
    _images(tmp_path / "train")
    script = tmp_path / "train.py"
    # The program as emitted, then what it trained: the check reads the model the program built.
    script.write_text(program + "\nprint('fp16doctor-check', x_train.dtype, x_train.shape, len(model.layers))\n",
                      encoding="utf-8")
    run_env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3", **env}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=run_env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    check = next(line for line in done.stdout.splitlines() if line.startswith("fp16doctor-check"))
    assert check.split(maxsplit=1)[1].startswith(f"uint8 (12, {HEIGHT}, {WIDTH}, 3)")


def test_an_old_keras_gets_no_program() -> None:
    # Keras 2.1.5 on TensorFlow 1.7 (the seed's stack) has no preprocessing layers to put in the model.
    assert input_pipeline_program(_sw(keras="2.1.5", tensorflow="1.7.0", keras_api="keras2")) is None
    # TensorFlow 2.3-2.5 has them under layers.experimental.preprocessing, and tf.data.experimental.AUTOTUNE.
    old = input_pipeline_program(_sw(keras="2.4.0", tensorflow="2.3.0", keras_api="tf_keras"))
    assert old is not None and "preprocessing.Rescaling" in old and "experimental.AUTOTUNE" in old
