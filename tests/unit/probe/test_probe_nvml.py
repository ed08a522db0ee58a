"""NVML probe and sampler against replayed NVML answers: what `fp16doctor probe` shows per GPU."""

from __future__ import annotations

import sys
import time

import probe_fake_nvml as fake
import pytest

from fp16doctor.probe import describe_gpus
from fp16doctor.probe.nvml import UtilizationSampler, probe_gpus


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch):
    """Install a replayed pynvml; returns a function taking the recording (and an nvmlInit failure)."""

    def install(recording, init_error=None):
        module = fake.make_pynvml(recording, init_error)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return install


def test_titan_v_on_driver_390(nvml) -> None:
    module = nvml(fake.TITAN_V_390)
    gpus, status = probe_gpus()
    assert status == {"available": True, "error": None, "driver_version": "390.77"}
    (gpu,) = gpus
    assert gpu["name"] == "TITAN V"  # bytes from old pynvml decoded
    assert gpu["uuid"].startswith("GPU-")
    assert gpu["compute_capability"] == "7.0"
    assert gpu["driver_version"] == "390.77"
    assert gpu["cuda_driver_version"] is None  # this NVML lacks the call: None, not a crash
    assert gpu["memory_total_mib"] == 12066
    assert gpu["clocks"] == {"sm_max_mhz": 1912, "mem_max_mhz": 850}
    assert gpu["power_limit_w"] == 250.0
    assert gpu["pcie"] == {"gen": 3, "width": 16, "gen_current": 1, "width_current": 16}
    assert module.state["init"] == module.state["shutdown"] == 1


def test_old_driver_gaps_are_filled_from_the_tables(nvml) -> None:
    recording = {
        "system": dict(fake.TITAN_V_390["system"]),
        "devices": [
            dict(fake.TITAN_V_390["devices"][0], nvmlDeviceGetCudaComputeCapability=fake.FunctionNotFound)
        ],
    }
    nvml(recording)
    (gpu,), _ = describe_gpus()
    # The contract example: a TITAN V on 390.77 is compute capability 7.0 with a CUDA 9.1 driver.
    assert (gpu["compute_capability"], gpu["compute_capability_source"]) == ("7.0", "GPU table (by name)")
    assert (gpu["cuda_driver_version"], gpu["cuda_driver_version_source"]) == ("9.1", "driver table")


def test_h200_on_driver_560(nvml) -> None:
    nvml(fake.H200_560)
    (gpu,), status = describe_gpus()
    assert status["available"] is True
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["compute_capability"] == "9.0" and gpu["compute_capability_source"] == "nvml"
    assert gpu["cuda_driver_version"] == "12.6" and gpu["cuda_driver_version_source"] == "nvml"
    assert gpu["memory_total_mib"] == 143771
    assert gpu["power_limit_w"] == 700.0
    assert gpu["pcie"]["gen"] == 5


def test_gtx_1660_ti_not_supported_metrics_become_none(nvml) -> None:
    nvml(fake.GTX_1660_TI_535)
    (gpu,), status = probe_gpus()
    assert gpu["compute_capability"] == "7.5"
    assert gpu["cuda_driver_version"] == "12.2"
    assert gpu["clocks"] == {"sm_max_mhz": 2100, "mem_max_mhz": None}
    assert gpu["power_limit_w"] == 120.0  # the enforced limit stands in for the unsupported one
    assert gpu["pcie"] == {"gen": None, "width": None, "gen_current": 3, "width_current": 16}
    assert gpu["memory_total_mib"] == 6144


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (fake.NVMLError_LibraryNotFound, "no NVIDIA driver is installed"),
        (fake.NVMLError_DriverNotLoaded, "driver is not loaded"),
        (fake.NVMLError_NotSupported, "NVML failed to start: NotSupported"),
    ],
)
def test_nvml_start_failure_is_reported_not_raised(nvml, error, reason) -> None:
    nvml(None, init_error=error)
    gpus, status = probe_gpus()
    assert gpus == []
    assert status["available"] is False
    assert reason in status["error"]


def test_pynvml_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    gpus, status = probe_gpus()
    assert gpus == [] and status["available"] is False
    assert "nvidia-ml-py" in status["error"]


def test_nvml_with_zero_gpus(nvml) -> None:
    nvml({"system": {"nvmlSystemGetDriverVersion": "550.54.14"}, "devices": []})
    gpus, status = probe_gpus()
    assert gpus == []
    assert status["available"] is True and status["error"] == "NVML started but reports no GPU"


def _sample_for(sampler: UtilizationSampler, seconds: float) -> None:
    with sampler:
        time.sleep(seconds)


def test_sampler_summarises_utilisation_and_memory(nvml) -> None:
    module = nvml(fake.H200_560)
    sampler = UtilizationSampler(0, interval_s=0.005)
    _sample_for(sampler, 0.2)
    summary = sampler.summary()
    assert summary is not None
    util = summary["gpu_utilization_pct"]
    assert util["n"] >= 5
    assert util["median"] in (0.0, 97.0, 99.0)
    assert 0.0 <= util["p10"] <= util["median"] <= util["p90"] <= 99.0
    assert summary["gpu_memory_used_mib"] == {"max": 1.0}
    assert module.state["init"] == module.state["shutdown"] == 1


def test_sampler_clear_drops_the_warm_up_samples(nvml) -> None:
    module = nvml(fake.H200_560)
    with UtilizationSampler(0, interval_s=0.005) as sampler:
        time.sleep(0.05)
        sampler.clear()
        time.sleep(0.05)
    summary = sampler.summary()
    assert summary is not None
    taken = module.state["nvmlDeviceGetUtilizationRates"]
    assert 0 < summary["gpu_utilization_pct"]["n"] < taken


def test_sampler_without_utilisation_keeps_memory(nvml) -> None:
    nvml(fake.GTX_1660_TI_535)
    sampler = UtilizationSampler(0, interval_s=0.005)
    _sample_for(sampler, 0.05)
    summary = sampler.summary()
    assert summary == {"gpu_utilization_pct": None, "gpu_memory_used_mib": {"max": 310.0}}


def test_sampler_is_none_without_nvml(nvml) -> None:
    nvml(None, init_error=fake.NVMLError_LibraryNotFound)
    sampler = UtilizationSampler(0)
    _sample_for(sampler, 0.01)
    assert sampler.summary() is None
    assert "no NVIDIA driver" in (sampler.error or "")


def test_sampler_for_a_gpu_that_is_not_there(nvml) -> None:
    module = nvml(fake.H200_560)
    sampler = UtilizationSampler(3)
    _sample_for(sampler, 0.01)
    assert sampler.summary() is None
    assert sampler.error == "NVML has no GPU with index 3"
    assert module.state["init"] == module.state["shutdown"]
