"""frameworks.apply_precision: the one place the workload puts a Keras in a precision, for a run of its own, the
interleaved rounds and a user's script alike."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

WORKLOAD_DIR = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"
sys.path.insert(0, str(WORKLOAD_DIR))  # the workload's modules import each other from beside themselves
import frameworks  # noqa: E402
from events import NotApplied, Skip  # noqa: E402


def _keras(version: str, floatx: str = "float32", policy_api: bool = True, config: bool = True) -> Any:
    state = {"floatx": floatx, "policy": None}
    keras = SimpleNamespace(__version__=version, state=state,
                            backend=SimpleNamespace(floatx=lambda: state["floatx"],
                                                    set_floatx=lambda v: state.update(floatx=v)))
    if policy_api:
        def set_dtype_policy(name: str) -> None:
            state["policy"] = name
        keras.mixed_precision = SimpleNamespace(set_dtype_policy=set_dtype_policy)
    if config:
        keras.config = SimpleNamespace(set_floatx=lambda v: state.update(floatx=v))
    return keras


def _api(keras: Any, name: str = "keras3-legacy") -> Any:
    return frameworks.KerasAPI(name, keras, None, None, "tensorflow")


def test_a_mixed_precision_is_a_dtype_policy_and_says_which_call_set_it() -> None:
    keras = _keras("3.15.0")
    note = frameworks.apply_precision(_api(keras), "mixed_bfloat16")
    assert keras.state == {"floatx": "float32", "policy": "mixed_bfloat16"}
    assert note["policy"] == "mixed_bfloat16" and note["call"] == "mixed_precision.set_dtype_policy"


def test_pure_bfloat16_is_set_after_import_where_keras_3_takes_it_and_skipped_elsewhere() -> None:
    keras = _keras("3.15.0")
    note = frameworks.apply_precision(_api(keras), "bfloat16")
    assert keras.state["floatx"] == "bfloat16" and note["floatx"] == "bfloat16" and "after import" in note["how"]
    with pytest.raises(Skip, match="tf_keras 2.21.0 refuses floatx bfloat16"):
        frameworks.apply_precision(_api(_keras("2.21.0"), "tf_keras"), "bfloat16")


def test_a_policy_on_a_keras_without_one_is_skipped() -> None:
    with pytest.raises(Skip, match="Keras 2.1.5 has no mixed_float16 policy"):
        frameworks.apply_precision(_api(_keras("2.1.5", policy_api=False, config=False), "keras2"), "mixed_float16")


def test_float16_comes_from_keras_json_and_a_floatx_that_did_not_take_fails() -> None:
    note = frameworks.apply_precision(_api(_keras("2.1.5", floatx="float16", policy_api=False)), "float16")
    assert note == {"how": "keras.json floatx", "floatx": "float16"}
    with pytest.raises(NotApplied, match="floatx float16 was not picked up"):
        frameworks.apply_precision(_api(_keras("2.1.5", policy_api=False)), "float16")


def test_in_the_rounds_each_precision_sets_both_globals_and_float32_returns_to_the_process_own() -> None:
    keras = _keras("3.15.0")
    api = _api(keras)
    defaults = ("float32", "float32")
    seen = []
    for precision in ("float16", "mixed_float16", "bfloat16", "float32"):
        frameworks.apply_precision(api, precision, defaults)
        seen.append((keras.state["floatx"], keras.state["policy"]))
    assert seen == [("float16", "float16"), ("float32", "mixed_float16"), ("bfloat16", "bfloat16"),
                    ("float32", "float32")]
