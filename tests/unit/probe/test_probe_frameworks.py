"""Keras configuration as Keras itself would read it, and the framework script run in a child process."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from fp16doctor.probe.frameworks import (
    framework_script_source,
    parse_probe_output,
    read_keras_config,
    run_describer,
)


def write_config(directory: Path, config: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "keras.json"
    path.write_text(json.dumps(config))
    return path


def test_user_float16_config_from_home(tmp_path: Path) -> None:
    # The SEED user's keras.json, in ~/.keras.
    seed_config = {
        "backend": "tensorflow", "floatx": "float16", "image_data_format": "channels_last", "epsilon": 1e-07,
    }
    write_config(tmp_path / ".keras", seed_config)
    config = read_keras_config(env={}, home=str(tmp_path))
    assert config["floatx"] == "float16"
    assert config["epsilon"] == 1e-07
    assert config["config_path"] == str(tmp_path / ".keras" / "keras.json")
    assert config["config_source"] == "keras.json"
    assert (config["backend"], config["backend_source"]) == ("tensorflow", "keras.json")
    assert config["keras_home_source"] == "home directory"


def test_keras_home_wins_over_home(tmp_path: Path) -> None:
    write_config(tmp_path / ".keras", {"floatx": "float16"})
    path = write_config(tmp_path / "elsewhere", {"floatx": "float32", "backend": "jax"})
    config = read_keras_config(env={"KERAS_HOME": str(tmp_path / "elsewhere")}, home=str(tmp_path))
    assert config["config_path"] == str(path)
    assert config["floatx"] == "float32"
    assert config["backend"] == "jax"
    assert config["keras_home_source"] == "KERAS_HOME"


def test_keras_backend_variable_wins_over_the_file(tmp_path: Path) -> None:
    write_config(tmp_path / ".keras", {"backend": "tensorflow"})
    config = read_keras_config(env={"KERAS_BACKEND": "torch"}, home=str(tmp_path))
    assert (config["backend"], config["backend_source"]) == ("torch", "KERAS_BACKEND")


def test_empty_keras_backend_is_ignored_as_keras_does(tmp_path: Path) -> None:
    write_config(tmp_path / ".keras", {"backend": "jax"})
    config = read_keras_config(env={"KERAS_BACKEND": ""}, home=str(tmp_path))
    assert (config["backend"], config["backend_source"]) == ("jax", "keras.json")


def test_no_config_file_gives_keras_defaults(tmp_path: Path) -> None:
    config = read_keras_config(env={}, home=str(tmp_path))
    assert config["config_source"] == "defaults (no keras.json)"
    assert (config["backend"], config["floatx"], config["epsilon"]) == ("tensorflow", "float32", 1e-07)
    assert config["backend_source"] == "default"
    assert config["error"] is None


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_broken_config_is_reported_with_defaults(tmp_path: Path, text: str) -> None:
    (tmp_path / ".keras").mkdir()
    (tmp_path / ".keras" / "keras.json").write_text(text)
    config = read_keras_config(env={}, home=str(tmp_path))
    assert config["config_source"] == "unreadable"
    assert config["floatx"] == "float32"
    assert "keras.json" in config["error"]


def test_unwritable_home_means_tmp_keras(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fp16doctor.probe.frameworks as frameworks

    monkeypatch.setattr(frameworks.os, "access", lambda path, mode: False)
    config = read_keras_config(env={}, home=str(tmp_path))
    assert config["config_path"] == "/tmp/.keras/keras.json"
    assert config["keras_home_source"] == "/tmp (home directory not writable)"


def test_framework_script_is_python_35_syntax() -> None:
    # The same script must run inside a 2018 stack's Python 3.5.
    ast.parse(framework_script_source(), feature_version=(3, 5))


def test_probe_output_is_found_among_framework_chatter() -> None:
    stdout = "Using TensorFlow backend.\n@@fp16doctor-probe {\"version\": \"1.7.0\"}\n"
    assert parse_probe_output(stdout) == (True, {"version": "1.7.0"})
    assert parse_probe_output("@@fp16doctor-probe null\n") == (True, None)  # not installed
    assert parse_probe_output("Segmentation fault\n") == (False, None)
    assert parse_probe_output("@@fp16doctor-probe {truncated\n") == (False, None)


def test_a_child_killed_by_sigill_says_so(tmp_path: Path) -> None:
    # What a TensorFlow wheel built for AVX does on a CPU without AVX.
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nkill -ILL $$\n")
    python.chmod(0o755)
    answer = run_describer(str(python), "tensorflow", timeout_s=10)
    assert answer is not None
    assert "killed by SIGILL (the CPU lacks an instruction this build needs)" in answer["error"]


def test_keras_backends_lists_each_keras3_backend_with_whether_it_works_and_sees_a_gpu() -> None:
    from fp16doctor.probe.frameworks import keras_backends

    frameworks = {"keras": {"version": "3.15.1", "backend": "torch"},
                  "tensorflow": {"version": "2.21.0", "gpus_visible": 0},
                  "jax": {"version": "0.10.2", "backend": "gpu", "devices": ["cuda:0"]},
                  "torch": {"version": "2.11.0", "cuda_available": True}}
    found = {b["name"]: b for b in keras_backends(frameworks)}
    assert (found["tensorflow"]["gpu"], found["jax"]["gpu"], found["torch"]["gpu"]) == (False, True, True)
    assert [n for n, b in found.items() if b["configured"]] == ["torch"]
    frameworks["jax"] = {"version": None, "error": "jaxlib is missing"}
    broken = next(b for b in keras_backends(frameworks) if b["name"] == "jax")
    assert broken["works"] is False and broken["gpu"] is False and "jaxlib" in broken["error"]
    # Keras 2 and tf_keras run on TensorFlow alone: no backends to choose from.
    assert keras_backends({**frameworks, "keras": {"version": "2.2.4"}}) == []
