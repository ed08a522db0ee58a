"""A stand-in `pynvml` module that replays NVML answers for a few boards.

Each board is a dict of NVML function name -> answer; an answer that is an NVMLError subclass is raised,
as real NVML does for a metric the board lacks (NotSupported) or a call the driver's library lacks
(FunctionNotFound). A function absent from the dict raises FunctionNotFound, as pynvml does on old drivers.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Callable, Iterator
from typing import Any

MIB = 1024 * 1024
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2


class NVMLError(Exception):
    value = 999

    def __str__(self) -> str:
        return type(self).__name__.removeprefix("NVMLError_")


class NVMLError_NotSupported(NVMLError):
    value = 3


class NVMLError_LibraryNotFound(NVMLError):
    value = 12


class NVMLError_FunctionNotFound(NVMLError):
    value = 13


class NVMLError_DriverNotLoaded(NVMLError):
    value = 9


class Memory:
    def __init__(self, total_mib: float, used_mib: float = 0.0) -> None:
        self.total = int(total_mib * MIB)
        self.used = int(used_mib * MIB)
        self.free = self.total - self.used


class Utilization:
    def __init__(self, gpu: int, memory: int) -> None:
        self.gpu = gpu
        self.memory = memory


NotSupported = NVMLError_NotSupported
FunctionNotFound = NVMLError_FunctionNotFound

# NVIDIA TITAN V on driver 390.77 (CUDA 9.1): pynvml of that era returned bytes; this driver's NVML is
# modelled without the CUDA driver version call.
TITAN_V_390: dict[str, Any] = {
    "system": {
        "nvmlSystemGetDriverVersion": b"390.77",
        "nvmlSystemGetCudaDriverVersion": FunctionNotFound,
        "nvmlSystemGetCudaDriverVersion_v2": FunctionNotFound,
    },
    "devices": [
        {
            "nvmlDeviceGetName": b"TITAN V",
            "nvmlDeviceGetUUID": b"GPU-5ad0d1a6-1bf4-c94c-ffc4-0d0d5b3d3f1a",
            "nvmlDeviceGetCudaComputeCapability": (7, 0),
            "nvmlDeviceGetMemoryInfo": Memory(12066.9, 434.0),
            "nvmlDeviceGetMaxClockInfo": {NVML_CLOCK_SM: 1912, NVML_CLOCK_MEM: 850},
            "nvmlDeviceGetPowerManagementLimit": 250000,
            "nvmlDeviceGetMaxPcieLinkGeneration": 3,
            "nvmlDeviceGetMaxPcieLinkWidth": 16,
            "nvmlDeviceGetCurrPcieLinkGeneration": 1,
            "nvmlDeviceGetCurrPcieLinkWidth": 16,
        }
    ],
}

# NVIDIA H200 (SXM, 141 GB HBM3e) on driver 560.35.03, CUDA 12.6.
H200_560: dict[str, Any] = {
    "system": {
        "nvmlSystemGetDriverVersion": "560.35.03",
        "nvmlSystemGetCudaDriverVersion_v2": 12060,
        "nvmlSystemGetCudaDriverVersion": 12060,
    },
    "devices": [
        {
            "nvmlDeviceGetName": "NVIDIA H200",
            "nvmlDeviceGetUUID": "GPU-8f3c2b61-7d0e-4a51-9c1e-2f6d1b0a9e77",
            "nvmlDeviceGetCudaComputeCapability": (9, 0),
            "nvmlDeviceGetMemoryInfo": Memory(143771.0, 1.0),
            "nvmlDeviceGetMaxClockInfo": {NVML_CLOCK_SM: 1980, NVML_CLOCK_MEM: 3201},
            "nvmlDeviceGetPowerManagementLimit": 700000,
            "nvmlDeviceGetMaxPcieLinkGeneration": 5,
            "nvmlDeviceGetMaxPcieLinkWidth": 16,
            "nvmlDeviceGetCurrPcieLinkGeneration": 5,
            "nvmlDeviceGetCurrPcieLinkWidth": 16,
            "nvmlDeviceGetUtilizationRates": [Utilization(0, 0), Utilization(97, 40), Utilization(99, 45)],
        }
    ],
}

# GeForce GTX 1660 Ti (TU116, 6 GB) on driver 535.183.01, CUDA 12.2: a consumer board on which some
# queries answer NotSupported.
GTX_1660_TI_535: dict[str, Any] = {
    "system": {
        "nvmlSystemGetDriverVersion": "535.183.01",
        "nvmlSystemGetCudaDriverVersion_v2": 12020,
    },
    "devices": [
        {
            "nvmlDeviceGetName": "NVIDIA GeForce GTX 1660 Ti",
            "nvmlDeviceGetUUID": "GPU-0c6a4e55-3b7f-11ee-be56-0242ac120002",
            "nvmlDeviceGetCudaComputeCapability": (7, 5),
            "nvmlDeviceGetMemoryInfo": Memory(6144.0, 310.0),
            "nvmlDeviceGetMaxClockInfo": {NVML_CLOCK_SM: 2100, NVML_CLOCK_MEM: NotSupported},
            "nvmlDeviceGetPowerManagementLimit": NotSupported,
            "nvmlDeviceGetEnforcedPowerLimit": 120000,
            "nvmlDeviceGetMaxPcieLinkGeneration": NotSupported,
            "nvmlDeviceGetMaxPcieLinkWidth": NotSupported,
            "nvmlDeviceGetCurrPcieLinkGeneration": 3,
            "nvmlDeviceGetCurrPcieLinkWidth": 16,
            "nvmlDeviceGetUtilizationRates": NotSupported,
        }
    ],
}


SYSTEM_CALLS = (
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
)

# Every per-device call pynvml offers that the probe uses; a board's recording answers a subset.
DEVICE_CALLS = (
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetUtilizationRates",
)


def _answer(value: Any) -> Any:
    if isinstance(value, type) and issubclass(value, NVMLError):
        raise value()
    return value


def make_pynvml(
    recording: dict[str, Any] | None, init_error: type[NVMLError] | None = None
) -> types.ModuleType:
    """A module with pynvml's names that replays `recording`; `init_error` makes nvmlInit fail."""
    module = types.ModuleType("pynvml")
    state = {"init": 0, "shutdown": 0}  # and, per device call, how often it was made
    module.state = state  # type: ignore[attr-defined]
    for name, value in globals().items():
        if name.startswith(("NVMLError", "NVML_CLOCK")):
            setattr(module, name, value)
    recording = recording or {"system": {}, "devices": []}
    devices = recording["devices"]
    cycles: dict[tuple[int, str], Iterator[Any]] = {}

    def nvml_init() -> None:
        if init_error is not None:
            raise init_error()
        state["init"] += 1

    def nvml_shutdown() -> None:
        state["shutdown"] += 1

    def system_call(name: str) -> Callable[[], Any]:
        return lambda: _answer(recording["system"].get(name, FunctionNotFound))

    def device_call(name: str) -> Callable[..., Any]:
        def call(handle: int, *args: Any) -> Any:
            state[name] = state.get(name, 0) + 1
            value = devices[handle].get(name, FunctionNotFound)
            if isinstance(value, dict):
                value = value[args[0]]
            if isinstance(value, list):  # a series of samples, replayed in a loop
                value = next(cycles.setdefault((handle, name), itertools.cycle(value)))
            return _answer(value)

        return call

    def handle_by_index(index: int) -> int:
        if not 0 <= index < len(devices):
            raise NVMLError()  # NVML answers INVALID_ARGUMENT
        return index

    module.nvmlInit = nvml_init  # type: ignore[attr-defined]
    module.nvmlShutdown = nvml_shutdown  # type: ignore[attr-defined]
    module.nvmlDeviceGetCount = lambda: len(devices)  # type: ignore[attr-defined]
    module.nvmlDeviceGetHandleByIndex = handle_by_index  # type: ignore[attr-defined]
    for name in SYSTEM_CALLS:
        setattr(module, name, system_call(name))
    for name in DEVICE_CALLS:
        setattr(module, name, device_call(name))
    return module
