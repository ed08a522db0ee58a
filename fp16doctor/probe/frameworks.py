"""Which frameworks the target Python has, asked in subprocesses so fp16doctor itself never imports them.

Each framework is described by its own child process (`framework_script.py`, valid Python 3.5) with its own
timeout, all started at once: a TensorFlow that hangs on a broken driver or a torch that fails to import
cannot hide the others. The Keras configuration is read here, from the same files and variables Keras reads.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fp16doctor.errors import DoctorError
from fp16doctor.workload.protocol import KERAS3_BACKENDS

# Pillow and SciPy too: the workload cannot run without them (see diagnose's check before any run).
FRAMEWORKS = ("numpy", "tensorflow", "keras", "tf_keras", "jax", "torch", "pillow", "scipy")
MARKER = "@@fp16doctor-probe "
SCRIPT_PATH = Path(__file__).with_name("framework_script.py")
DEFAULT_TIMEOUT_S = 60.0

# Keras' defaults when keras.json is absent or silent on a key (keras/src/backend/config.py in Keras 3;
# keras/backend/__init__.py in Keras 2.1.5 carries the same values).
KERAS_DEFAULTS = {
    "backend": "tensorflow",
    "floatx": "float32",
    "epsilon": 1e-07,
    "image_data_format": "channels_last",
}


def framework_script_source() -> str:
    """The probe script's text, for `python -c` in another interpreter or a container."""
    return SCRIPT_PATH.read_text(encoding="utf-8")


def _child_env(keras_home: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if keras_home is not None:
        # Importing TensorFlow imports Keras, which writes keras.json into its home when there is none;
        # a throwaway home keeps the probe from changing the configuration it reports.
        env["KERAS_HOME"] = keras_home
    # TensorFlow's C++ start-up chatter is noise here; errors still arrive as the script's JSON.
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("PYTHONWARNINGS", "ignore")
    return env


def run_describer(
    python: str, name: str, timeout_s: float = DEFAULT_TIMEOUT_S, keras_home: str | None = None
) -> dict[str, Any] | None:
    """One framework in one child process: None when absent, a dict (maybe with "error") otherwise."""
    try:
        done = subprocess.run(
            [python, "-c", framework_script_source(), name],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            env=_child_env(keras_home),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"version": None, "error": f"describing {name} took over {timeout_s:g} s (import hangs?)"}
    except OSError as exc:
        return {"version": None, "error": f"could not start {python}: {exc}"}
    found, value = parse_probe_output(done.stdout)
    if found:
        return value
    reason = f"{name} probe {_exit_reason(done.returncode)}: {_last_line(done.stderr)}"
    return {"version": None, "error": reason}


def parse_probe_output(stdout: str) -> tuple[bool, dict[str, Any] | None]:
    """(whether the script answered, its answer) from the script's stdout, wherever it ran."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                value = json.loads(line[len(MARKER) :])
            except ValueError:
                return False, None
            return True, value if isinstance(value, dict) else None
    return False, None


def _exit_reason(returncode: int) -> str:
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    # TensorFlow wheels built for AVX die this way on CPUs without it.
    hint = " (the CPU lacks an instruction this build needs)" if name == "SIGILL" else ""
    return f"was killed by {name}{hint}"


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no output"


def describe_python(python: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """Version and executable of the target Python; DoctorError when it cannot be run at all."""
    if python == sys.executable:
        return {
            "version": "{}.{}.{}".format(*sys.version_info[:3]),
            "executable": sys.executable,
            "implementation": sys.implementation.name,
        }
    info = run_describer(python, "python", timeout_s)
    if info is None or "error" in info:
        reason = (info or {}).get("error", "no answer")
        raise DoctorError(
            f"cannot run the Python at {python}: {reason}",
            hint="pass the path of a working Python interpreter (python3 --version must work)",
        )
    return info


def probe_frameworks(
    python: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> tuple[dict[str, Any], dict[str, Any | None]]:
    """(python info, {framework: description or None}) for the target Python, default this one."""
    target = python or sys.executable
    with (
        tempfile.TemporaryDirectory(prefix="fp16doctor-keras-home-") as keras_home,
        ThreadPoolExecutor(max_workers=len(FRAMEWORKS) + 1) as pool,
    ):
        python_future = pool.submit(describe_python, target, timeout_s)
        futures = {
            name: pool.submit(run_describer, target, name, timeout_s, keras_home) for name in FRAMEWORKS
        }
        descriptions = {name: future.result() for name, future in futures.items()}
        return python_future.result(), descriptions


def _keras_dir(env: Mapping[str, str], home: str) -> tuple[str, str]:
    """Where Keras looks for keras.json and why: KERAS_HOME, else ~/.keras, else /tmp/.keras
    when the home directory is not writable (keras/src/backend/config.py)."""
    if "KERAS_HOME" in env:
        return env["KERAS_HOME"], "KERAS_HOME"
    if not os.access(home, os.W_OK):
        return os.path.join("/tmp", ".keras"), "/tmp (home directory not writable)"
    return os.path.join(home, ".keras"), "home directory"


def read_keras_config(env: Mapping[str, str] | None = None, home: str | None = None) -> dict[str, Any]:
    """The Keras settings a Keras import would pick up here, whether or not Keras is installed.

    Keras 3 and Keras 2 both read keras.json from $KERAS_HOME (default ~/.keras), then let a non-empty
    KERAS_BACKEND override the file's backend.
    """
    env = os.environ if env is None else env
    home = os.path.expanduser("~") if home is None else home
    keras_dir, dir_source = _keras_dir(env, home)
    config_path = os.path.expanduser(os.path.join(keras_dir, "keras.json"))
    config: dict[str, Any] = {}
    error: str | None = None
    if os.path.exists(config_path):
        try:
            with open(config_path, encoding="utf-8") as handle:
                loaded = json.load(handle)
        except (OSError, ValueError) as exc:
            error = f"cannot read {config_path}: {exc}"
            config_source = "unreadable"
        else:
            if isinstance(loaded, dict):
                config = loaded
                config_source = "keras.json"
            else:
                error = f"{config_path} does not hold a JSON object"
                config_source = "unreadable"
    else:
        config_source = "defaults (no keras.json)"

    settings = {key: config.get(key, default) for key, default in KERAS_DEFAULTS.items()}
    backend_source = "keras.json" if "backend" in config else "default"
    if env.get("KERAS_BACKEND"):
        settings["backend"] = env["KERAS_BACKEND"]
        backend_source = "KERAS_BACKEND"
    return {
        **settings,
        "backend_source": backend_source,
        "config_path": config_path,
        "config_source": config_source,
        "keras_home_source": dir_source,
        "error": error,
    }



def framework_works(info: Any) -> bool:
    """Whether the probe found a framework importable: a version and no error (a broken or hung install comes back as
    {"version": ..., "error": ...})."""
    return isinstance(info, Mapping) and bool(info.get("version")) and not info.get("error")


def _sees_gpu(name: str, info: Mapping[str, Any]) -> bool:
    """Whether a framework's own answer says it has a GPU: TensorFlow's visible devices, JAX's default platform
    (`jax.default_backend()`: "gpu" for CUDA and ROCm), torch's `cuda.is_available()`."""
    if name == "tensorflow":
        return bool(info.get("gpus_visible"))
    if name == "jax":
        return str(info.get("backend") or "") in ("gpu", "cuda", "rocm")
    return bool(info.get("cuda_available"))


def keras_backends(frameworks: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each Keras 3 backend this Python has, whether it imports, whether it sees a GPU, and whether Keras is
    configured to use it; empty without Keras 3 (Keras 2 and tf_keras run on TensorFlow alone)."""
    keras = frameworks.get("keras") or {}
    version = str(keras.get("version") or "")
    if not version.split(".")[0].isdigit() or int(version.split(".")[0]) < 3 or keras.get("error"):
        return []
    found = []
    for name in KERAS3_BACKENDS:
        info = frameworks.get(name)
        if not isinstance(info, Mapping):
            continue
        works = framework_works(info)
        found.append({"name": name, "version": info.get("version"), "works": works,
                      "gpu": works and _sees_gpu(name, info), "configured": keras.get("backend") == name,
                      **({"error": info["error"]} if info.get("error") else {})})
    return found
