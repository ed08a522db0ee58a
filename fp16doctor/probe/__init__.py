"""Describe the host: CPU, NVIDIA GPUs (NVML), OS, the target Python, its frameworks and the Keras config.

`probe_host()` returns the contract's `host` object plus extras. It never imports a framework itself
(frameworks are asked in child processes of the target Python) and never raises for a missing GPU,
driver or framework: those are facts about the host, reported as such.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fp16doctor.probe.cpu import probe_cpu
from fp16doctor.probe.frameworks import DEFAULT_TIMEOUT_S, keras_backends, probe_frameworks, read_keras_config
from fp16doctor.probe.nvml import UtilizationSampler, probe_gpus

__all__ = ["UtilizationSampler", "describe_gpus", "describe_os", "probe_host"]


def describe_os() -> str:
    """One line: distribution, kernel, machine: 'Debian GNU/Linux 12 (bookworm), Linux 6.1.0, x86_64'."""
    system = platform.system() or sys.platform
    release, machine = platform.release(), platform.machine()
    if system == "Linux":
        try:
            pretty = platform.freedesktop_os_release().get("PRETTY_NAME")
        except OSError:
            pretty = None
        wsl = " under WSL" if "microsoft" in release.lower() else ""
        return f"{pretty or 'Linux'}, Linux {release}{wsl}, {machine}"
    if system == "Darwin":
        return f"macOS {platform.mac_ver()[0] or release} ({machine})"
    if system == "Windows":
        return f"Windows {platform.version()} ({machine})"
    return f"{system} {release} ({machine})"


def probe_host(python: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """The host as results.json's `host` wants it, for the target Python (default: this one).

    Keys: cpu, gpus, nvml, os, python, frameworks, keras_config, keras_backends, env, probe_seconds.
    Raises DoctorError only when `python` names an interpreter that cannot be run.
    """
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The framework children take seconds (importing TensorFlow); CPU and NVML are read meanwhile.
        frameworks_future = pool.submit(probe_frameworks, python, timeout_s)
        cpu = probe_cpu()
        gpus, nvml_status = describe_gpus()
        python_info, frameworks = frameworks_future.result()
    keras_config = read_keras_config()
    keras = frameworks.get("keras")
    if keras is not None:
        # The installed Keras plus the settings it will run with; its own "error" (a broken install) wins.
        settings = {key: value for key, value in keras_config.items() if key != "error"}
        frameworks["keras"] = {"version": keras.get("version"), **settings, **keras}
    return {
        "cpu": cpu,
        "gpus": gpus,
        "nvml": nvml_status,
        "os": describe_os(),
        "python": python_info,
        "frameworks": frameworks,
        "keras_config": keras_config,
        "keras_backends": keras_backends(frameworks),
        "env": {name: os.environ[name] for name in _REPORTED_ENV if name in os.environ},
        "probe_seconds": round(time.perf_counter() - started, 2),
    }


def describe_gpus() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """NVML's GPUs, with what an old driver's NVML cannot say filled in from the knowledge tables."""
    gpus, status = probe_gpus()
    _fill_from_tables(gpus)
    return gpus, status


def _fill_from_tables(gpus: list[dict[str, Any]]) -> None:
    """Older drivers' NVML lacks the compute-capability and CUDA-version calls; fill them from the
    knowledge tables (GPU name -> compute capability; driver -> newest CUDA it runs), saying so."""
    from fp16doctor.knowledge.cuda import CUDA_TOOLKITS, version_at_least
    from fp16doctor.knowledge.gpus import match_gpu

    for gpu in gpus:
        gpu["compute_capability_source"] = "nvml"
        if gpu.get("compute_capability") is None:
            model = match_gpu(gpu.get("name"))
            gpu["compute_capability"] = model.compute_capability if model else None
            gpu["compute_capability_source"] = "GPU table (by name)" if model else None
        gpu["cuda_driver_version_source"] = "nvml"
        if gpu.get("cuda_driver_version") is None:
            driver = gpu.get("driver_version")
            # The newest toolkit whose minimum Linux driver this driver meets (CUDA release notes, table 3).
            runnable = [kit.version for kit in CUDA_TOOLKITS.values()
                         if version_at_least(driver, kit.min_linux_driver)]
            gpu["cuda_driver_version"] = runnable[-1] if runnable else None
            gpu["cuda_driver_version_source"] = "driver table" if runnable else None


# Variables that change what a Keras float16 run does, reported as set (none hold secrets).
_REPORTED_ENV = (
    "KERAS_BACKEND",
    "KERAS_HOME",
    "TF_USE_LEGACY_KERAS",
    "CUDA_VISIBLE_DEVICES",
    "TF_FP16_CONV_USE_FP32_COMPUTE",
    "TF_FP16_MATMUL_USE_FP32_COMPUTE",
    "TF_ENABLE_AUTO_MIXED_PRECISION",
    "TF_ENABLE_ONEDNN_OPTS",
    "NVIDIA_TF32_OVERRIDE",
)
