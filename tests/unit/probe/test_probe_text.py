"""What `fp16doctor probe` prints for given host objects."""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console

from fp16doctor.textout.probe import probe_text


def render(host: dict[str, Any]) -> str:
    console = Console(record=True, width=140, color_system=None)
    console.print(probe_text(host))
    return console.export_text()


CPU = {
    "model": "AMD EPYC", "vendor": "AuthenticAMD", "cores": 2, "physical_cores": 2, "cores_usable": 2,
    "flags": ["f16c", "avx512_bf16"], "fp16_native": False, "bf16_native": True,
    "note": "no native float16 arithmetic (F16C only converts)",
}
NO_DRIVER = "NVML library (libnvidia-ml) not found: no NVIDIA driver is installed"
KERAS = {
    "backend": "tensorflow", "backend_source": "keras.json", "floatx": "float32", "epsilon": 1e-07,
    "image_data_format": "channels_last", "config_path": "/home/u/.keras/keras.json",
    "config_source": "keras.json", "keras_home_source": "home directory", "error": None,
}


def test_cpu_only_host_says_no_gpu_and_why() -> None:
    text = render({
        "os": "Debian GNU/Linux 12 (bookworm), Linux 6.1.0, x86_64",
        "cpu": CPU,
        "gpus": [],
        "nvml": {"available": False, "error": NO_DRIVER},
        "python": {"version": "3.11.7", "executable": "/usr/bin/python3"},
        "frameworks": {
            "numpy": {"version": "2.4.6"},
            "tensorflow": {
                "version": "2.21.0", "built_with_cuda": False, "cuda_version": None, "cudnn_version": None,
                "gpus_visible": 0,
            },
            "keras": {"version": "3.15.1", **KERAS},
            "tf_keras": None, "jax": None, "torch": None,
        },
        "keras_config": KERAS,
    })
    assert f"No NVIDIA GPU: {NO_DRIVER}." in text
    assert "f16c avx512_bf16" in text
    assert "2 logical, 2 physical" in text
    assert "2.21.0  (CPU-only build; sees 0 GPU(s))" in text
    assert "tf_keras" in text and "not installed" in text
    assert "/home/u/.keras/keras.json  [keras.json]" in text


def test_gpu_host_shows_each_gpu() -> None:
    gpu = {
        "index": 0, "name": "TITAN V", "uuid": "GPU-5ad0", "compute_capability": "7.0",
        "compute_capability_source": "nvml", "driver_version": "390.77", "cuda_driver_version": "9.1",
        "cuda_driver_version_source": "driver table", "memory_total_mib": 12066,
        "clocks": {"sm_max_mhz": 1912, "mem_max_mhz": None}, "power_limit_w": 250.0,
        "pcie": {"gen": 3, "width": 16, "gen_current": 1, "width_current": 16},
    }
    nvml = {"available": True, "error": None}
    text = render({"cpu": CPU, "gpus": [gpu], "nvml": nvml, "keras_config": KERAS})
    assert "TITAN V" in text
    assert re.search(r"compute capability\s+7\.0\s*$", text, re.MULTILINE)
    assert "9.1  (driver table)" in text  # a value not from NVML says where it came from
    assert "12066 MiB" in text
    assert "SM 1912 MHz, memory –" in text
    assert "gen 3 x16 (now gen 1 x16)" in text
    assert "No NVIDIA GPU" not in text


def test_container_cpu_limit_is_shown() -> None:
    text = render({"cpu": {**CPU, "cores": 16, "cores_usable": 16, "cpu_limit_cores": 1.5}})
    assert "16 logical, 2 physical, container limited to 1.5 CPUs" in text


def test_float16_floatx_is_called_out() -> None:
    text = render({"keras_config": {**KERAS, "floatx": "float16"}})
    assert "floatx is float16" in text
    assert "mixed_float16 is the supported route" in text


def test_broken_framework_is_shown_with_its_error() -> None:
    broken = {"version": "1.7.0", "error": "ImportError: libcudart.so.9.0"}
    text = render({"frameworks": {"tensorflow": broken}})
    assert "1.7.0 broken: ImportError: libcudart.so.9.0" in text


def test_empty_host_renders_without_crashing() -> None:
    text = render({})
    assert "No NVIDIA GPU: NVML reports none." in text
    for heading in ("CPU", "GPUs", "Frameworks", "Keras config"):
        assert heading in text
