"""The workload describes a model's inputs as a real Keras builds them: which layer takes each input, whether it
autocasts it, and what the batch's values are, so the analysis can tell ids a 16-bit cast would round."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WORKLOAD = Path(__file__).resolve().parents[2] / "fp16doctor" / "workload"

SCRIPT = textwrap.dedent("""
    import json, os, sys
    os.environ["KERAS_BACKEND"] = "tensorflow"
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import keras
    from model import describe_inputs, describe_model

    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")

    class TokenEmbedding(keras.layers.Layer):  # a custom layer around an Embedding, as Keras' examples write it
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.embed = keras.layers.Embedding(20000, 8)

        def call(self, x):
            return self.embed(x)

    ids = keras.Input(shape=(4,))  # no dtype: float32
    hidden = TokenEmbedding(name="token_embedding")(ids)
    model = keras.Model(ids, keras.layers.Dense(1)(keras.layers.Flatten()(hidden)))
    model.compile(optimizer="adam", loss="mse")
    x = np.random.RandomState(0).randint(0, 20000, size=(64, 4)).astype("float32")
    x[0, 0] = 19999
    print(json.dumps({"inputs": describe_inputs(model, x), "model": describe_model(model)}))
""")


@pytest.mark.slow
def test_a_real_keras_model_names_the_layer_that_autocasts_its_ids(tmp_path: Path) -> None:
    pytest.importorskip("keras")
    pytest.importorskip("tensorflow")
    script = tmp_path / "describe.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), str(WORKLOAD)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    (model_input,) = out["inputs"]
    assert model_input["dtype"] == "float32" and model_input["consumers"] == ["token_embedding"]
    assert model_input["values"]["integer"] is True and model_input["values"]["max_abs"] == 19999.0
    layer = next(entry for entry in out["model"]["layers"] if entry["name"] == "token_embedding")
    assert layer["autocast"] is True and layer["compute_dtype"] == "bfloat16"
