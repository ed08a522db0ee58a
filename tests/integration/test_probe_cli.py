"""`fp16doctor probe` end to end: the real entry point, this machine's CPU and TensorFlow, other Pythons."""

from __future__ import annotations

import glob
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fp16doctor.knowledge.cpu import ARM_LOW_PRECISION_FLAGS, X86_LOW_PRECISION_FLAGS
from fp16doctor.probe import probe_host
from fp16doctor.probe.frameworks import probe_frameworks

FP16DOCTOR = str(Path(sys.executable).parent / "fp16doctor")


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FP16DOCTOR, *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def cpuinfo_flags() -> set[str]:
    text = Path("/proc/cpuinfo").read_text()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return set(value.split())
    return set()


def installed_version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@pytest.fixture(scope="module")
def probe_json(tmp_path_factory: pytest.TempPathFactory) -> dict:
    # An empty HOME: the probe must read the Keras config without creating one.
    home = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_HOME", "KERAS_BACKEND")}
    env["HOME"] = str(home)
    done = run_cli("probe", "--json", env=env)
    assert done.returncode == 0, done.stderr
    host = json.loads(done.stdout)
    host["_home"] = str(home)
    return host


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="reads /proc/cpuinfo to compare")
def test_probe_json_reports_this_cpu(probe_json: dict) -> None:
    interesting = set(X86_LOW_PRECISION_FLAGS) | set(ARM_LOW_PRECISION_FLAGS)
    assert set(probe_json["cpu"]["flags"]) == cpuinfo_flags() & interesting
    assert probe_json["cpu"]["cores"] == os.cpu_count()
    flags = cpuinfo_flags()
    expected_fp16 = bool({"avx512_fp16", "amx_fp16"} & flags) or {"fphp", "asimdhp"} <= flags
    assert probe_json["cpu"]["fp16_native"] is expected_fp16


def test_probe_json_without_gpu_says_why(probe_json: dict) -> None:
    if probe_json["nvml"]["available"] and probe_json["gpus"]:
        pytest.skip("this machine has an NVIDIA GPU")
    assert probe_json["gpus"] == []
    assert probe_json["nvml"]["error"]


def test_probe_json_reports_installed_tensorflow_and_keras(probe_json: dict) -> None:
    tf_version = installed_version("tensorflow", "tensorflow-cpu")
    if tf_version is None:
        pytest.skip("TensorFlow is not installed in this environment")
    tf = probe_json["frameworks"]["tensorflow"]
    assert tf["version"] == tf_version
    assert tf["built_with_cuda"] in (True, False)
    assert tf["gpus_visible"] == len(probe_json["gpus"])
    keras = probe_json["frameworks"]["keras"]
    assert keras["version"] == installed_version("keras")
    assert keras["floatx"] == "float32" and keras["config_source"] == "defaults (no keras.json)"
    assert not (Path(probe_json["_home"]) / ".keras").exists(), "probe created a Keras config"


def test_probe_text_names_the_sections() -> None:
    done = run_cli("probe")
    assert done.returncode == 0, done.stderr
    for heading in ("CPU", "GPUs", "Frameworks", "Keras config", "floatx"):
        assert heading in done.stdout
    assert "No NVIDIA GPU" in done.stdout or "compute capability" in done.stdout


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    venv = tmp_path_factory.mktemp("bare-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return str(venv / "bin" / "python")


def test_probe_of_a_python_without_frameworks(bare_python: str) -> None:
    host = probe_host(python=bare_python)
    assert host["python"]["executable"] == bare_python
    assert host["python"]["version"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert host["frameworks"] == {
        "numpy": None, "tensorflow": None, "keras": None, "tf_keras": None, "jax": None, "torch": None,
        "pillow": None, "scipy": None,
    }
    assert host["keras_config"]["floatx"] in ("float32", "float16", "float64")  # reported without Keras


def test_one_broken_framework_does_not_hide_the_others(
    bare_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes = tmp_path / "site"
    (fakes / "tensorflow").mkdir(parents=True)
    (fakes / "tensorflow" / "__init__.py").write_text("raise ImportError('libcudart.so.9.0: cannot open')\n")
    (fakes / "jax").mkdir()
    (fakes / "jax" / "__init__.py").write_text("import time\ntime.sleep(60)\n")
    (fakes / "numpy").mkdir()
    (fakes / "numpy" / "__init__.py").write_text("__version__ = '1.14.2'\n")
    (fakes / "keras").mkdir()
    (fakes / "keras" / "__init__.py").write_text("raise ImportError('Keras requires TensorFlow 2.2')\n")
    monkeypatch.setenv("PYTHONPATH", str(fakes))
    frameworks = probe_host(python=bare_python, timeout_s=5)["frameworks"]
    assert frameworks["tensorflow"] is not None
    assert "libcudart.so.9.0" in frameworks["tensorflow"]["error"]
    assert "took over 5 s" in frameworks["jax"]["error"]
    assert frameworks["numpy"] == {"version": "1.14.2"}
    assert frameworks["torch"] is None
    # A broken Keras is reported as broken, next to the settings it would have read.
    assert "requires TensorFlow 2.2" in frameworks["keras"]["error"]
    assert frameworks["keras"]["floatx"] in ("float16", "float32", "float64")


OLD_PYTHONS = sorted(
    glob.glob(os.path.expanduser("~/.pyenv/versions/3.[5-7]*/bin/python"))
    + glob.glob("/usr/bin/python3.[5-7]")
)


@pytest.mark.skipif(not OLD_PYTHONS, reason="no Python 3.5-3.7 interpreter on this machine")
def test_probe_runs_inside_an_old_python() -> None:
    python, frameworks = probe_frameworks(OLD_PYTHONS[0], timeout_s=30)
    assert python["version"].startswith("3.")
    assert all(value is None or "error" not in value for value in frameworks.values())


def test_unrunnable_python_is_a_doctor_error(tmp_path: Path) -> None:
    from fp16doctor.errors import DoctorError

    with pytest.raises(DoctorError, match="cannot run the Python"):
        probe_host(python=str(tmp_path / "no-such-python"))


