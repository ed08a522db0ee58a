"""What PyPI would show: the licence text the metadata declares, classifiers and keywords, and a `gpu` extra that
installs TensorFlow with its CUDA libraries where TensorFlow ships them (checked as metadata: nothing installs it
here). CI builds the wheel and runs it from a fresh venv (.ci/run)."""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project's own fallback (pyproject's tomli dependency)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_declared_licence_ships_as_its_full_text() -> None:
    assert PROJECT["license"] == "Apache-2.0" and PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_classifiers_and_keywords_say_what_it_is_without_a_second_licence_statement() -> None:
    classifiers = PROJECT["classifiers"]
    assert all(" :: " in c for c in classifiers)
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639: the SPDX expression says it
    assert "Environment :: GPU :: NVIDIA CUDA" in classifiers
    minimum = PROJECT["requires-python"].removeprefix(">=")
    assert f"Programming Language :: Python :: {minimum}" in classifiers
    assert {"float16", "mixed precision", "keras", "tensorflow"} <= set(PROJECT["keywords"])


def test_the_gpu_extra_installs_tensorflow_with_cuda_on_linux_and_plain_tensorflow_elsewhere() -> None:
    requirements = [Requirement(r) for r in PROJECT["optional-dependencies"]["gpu"]]
    tensorflow = [r for r in requirements if r.name == "tensorflow"]
    on_linux = [r for r in tensorflow if r.marker is None or r.marker.evaluate({"sys_platform": "linux"})]
    on_windows = [r for r in tensorflow if r.marker is None or r.marker.evaluate({"sys_platform": "win32"})]
    assert [r.extras for r in on_linux] == [{"and-cuda"}]
    assert [r.extras for r in on_windows] == [set()]
    # What ImageDataGenerator needs comes with it, as with the other framework extras.
    assert {"pillow", "scipy"} <= {r.name for r in requirements}


def test_the_console_script_is_the_cli_entry_point() -> None:
    assert PROJECT["scripts"] == {"fp16doctor": "fp16doctor.cli:main"}
