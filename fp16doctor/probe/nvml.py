"""Every NVIDIA GPU through NVML (the nvidia-ml-py `pynvml` module). The only module that imports pynvml.

Every NVML call goes through `_query`, which turns an NVMLError (not supported on this board, function
missing from this driver's library, ...) into a default, so one missing metric never hides the others.
Start-up failures (no NVML library, no driver) are not errors either: they become `available: false`
with the reason, which is what a CPU-only machine must report.
"""

from __future__ import annotations

import statistics
import threading
import types
from collections.abc import Callable
from typing import Any

MIB = 1024 * 1024


def _load_pynvml() -> types.ModuleType:
    """Import pynvml. Tests replace `sys.modules["pynvml"]` with a recorded fake."""
    import pynvml

    return pynvml


def _text(value: Any) -> Any:
    # pynvml before 11.x returned bytes for strings.
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class _Nvml:
    """A started NVML library: `query` never raises for a metric the board or driver lacks."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module

    def query(self, name: str, *args: Any, default: Any = None) -> Any:
        func: Callable[..., Any] | None = getattr(self.module, name, None)
        if func is None:
            return default
        try:
            return _text(func(*args))
        except self.module.NVMLError:
            return default

    def constant(self, name: str) -> Any:
        return getattr(self.module, name, None)


def _start_reason(module: types.ModuleType, exc: BaseException) -> str:
    """One line a user understands, for the NVMLError that nvmlInit raised."""
    reasons = (
        ("NVMLError_LibraryNotFound", "NVML library (libnvidia-ml) not found: no NVIDIA driver is installed"),
        ("NVMLError_DriverNotLoaded", "the NVIDIA kernel driver is not loaded"),
        ("NVMLError_NoPermission", "no permission to talk to the NVIDIA driver"),
        (
            "NVMLError_LibRmVersionMismatch",
            "NVML library and kernel driver versions differ (reboot after a driver update)",
        ),
    )
    for class_name, reason in reasons:
        cls = getattr(module, class_name, None)
        if isinstance(cls, type) and isinstance(exc, cls):
            return reason
    return f"NVML failed to start: {exc}"


def _start() -> tuple[_Nvml | None, str | None]:
    try:
        module = _load_pynvml()
    except ImportError as exc:
        return None, f"nvidia-ml-py (pynvml) is not installed: {exc}"
    try:
        module.nvmlInit()
    except module.NVMLError as exc:
        return None, _start_reason(module, exc)
    except OSError as exc:  # a broken libnvidia-ml that the loader rejects
        return None, f"NVML library could not be loaded: {exc}"
    return _Nvml(module), None


def _stop(nvml: _Nvml) -> None:
    nvml.query("nvmlShutdown")


def _cuda_version_text(encoded: Any) -> str | None:
    # NVML encodes the CUDA driver API version as 1000 * major + 10 * minor (nvmlSystemGetCudaDriverVersion).
    if not isinstance(encoded, int) or encoded <= 0:
        return None
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def _gpu(nvml: _Nvml, index: int, driver: str | None, cuda: str | None) -> dict[str, Any] | None:
    handle = nvml.query("nvmlDeviceGetHandleByIndex", index)
    if handle is None:
        return None
    capability = nvml.query("nvmlDeviceGetCudaComputeCapability", handle)
    memory = nvml.query("nvmlDeviceGetMemoryInfo", handle)
    # Power limits are reported in milliwatts; the enforced limit is the one in force when the
    # management limit cannot be read.
    power_mw = nvml.query("nvmlDeviceGetPowerManagementLimit", handle)
    if power_mw is None:
        power_mw = nvml.query("nvmlDeviceGetEnforcedPowerLimit", handle)
    clock_sm, clock_mem = nvml.constant("NVML_CLOCK_SM"), nvml.constant("NVML_CLOCK_MEM")
    return {
        "index": index,
        "name": nvml.query("nvmlDeviceGetName", handle),
        "uuid": nvml.query("nvmlDeviceGetUUID", handle),
        "compute_capability": f"{capability[0]}.{capability[1]}" if capability else None,
        "driver_version": driver,
        "cuda_driver_version": cuda,
        "memory_total_mib": int(memory.total // MIB) if memory is not None else None,
        "clocks": {
            "sm_max_mhz": nvml.query("nvmlDeviceGetMaxClockInfo", handle, clock_sm),
            "mem_max_mhz": nvml.query("nvmlDeviceGetMaxClockInfo", handle, clock_mem),
        },
        "power_limit_w": round(power_mw / 1000.0, 1) if isinstance(power_mw, int | float) else None,
        # gen/width: the fastest link the GPU and slot can train to; *_current drops at idle to save power.
        "pcie": {
            "gen": nvml.query("nvmlDeviceGetMaxPcieLinkGeneration", handle),
            "width": nvml.query("nvmlDeviceGetMaxPcieLinkWidth", handle),
            "gen_current": nvml.query("nvmlDeviceGetCurrPcieLinkGeneration", handle),
            "width_current": nvml.query("nvmlDeviceGetCurrPcieLinkWidth", handle),
        },
    }


def probe_gpus() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every NVIDIA GPU NVML sees, and NVML's own state: ({...} per GPU, {"available", "error"})."""
    nvml, reason = _start()
    if nvml is None:
        return [], {"available": False, "error": reason}
    try:
        driver = nvml.query("nvmlSystemGetDriverVersion")
        cuda_encoded = nvml.query("nvmlSystemGetCudaDriverVersion_v2")
        if cuda_encoded is None:
            cuda_encoded = nvml.query("nvmlSystemGetCudaDriverVersion")
        cuda = _cuda_version_text(cuda_encoded)
        count = nvml.query("nvmlDeviceGetCount", default=0)
        gpus = [g for g in (_gpu(nvml, i, driver, cuda) for i in range(count)) if g is not None]
        status: dict[str, Any] = {"available": True, "error": None, "driver_version": driver}
        if not gpus:
            status["error"] = "NVML started but reports no GPU"
        return gpus, status
    finally:
        _stop(nvml)


def _percentile(ordered: list[float], fraction: float) -> float:
    """Linear interpolation between closest ranks, as numpy.percentile's default does."""
    if len(ordered) == 1:
        return ordered[0]
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class UtilizationSampler:
    """Samples one GPU's utilisation % and memory used while a run goes, on a background thread.

    `gpu_index` is NVML's index (nvidia-smi's order). Memory used is the whole device's, all processes.

        with UtilizationSampler(0) as sampler:
            run()
        sampler.summary()  # None where NVML or the GPU is unavailable
    """

    def __init__(self, gpu_index: int, interval_s: float = 0.2) -> None:
        self.gpu_index = gpu_index
        self.interval_s = interval_s
        self.error: str | None = None
        self._nvml: _Nvml | None = None
        self._handle: Any = None
        self._utilization_pct: list[float] = []
        self._memory_used_mib: list[float] = []
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> UtilizationSampler:
        self._nvml, self.error = _start()
        if self._nvml is not None:
            self._handle = self._nvml.query("nvmlDeviceGetHandleByIndex", self.gpu_index)
            if self._handle is None:
                self.error = f"NVML has no GPU with index {self.gpu_index}"
                _stop(self._nvml)
                self._nvml = None
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._run, name="fp16doctor-nvml-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 10 * self.interval_s))
        if self._nvml is not None:
            _stop(self._nvml)

    def _sample(self) -> None:
        assert self._nvml is not None
        rates = self._nvml.query("nvmlDeviceGetUtilizationRates", self._handle)
        if rates is not None:
            self._utilization_pct.append(float(rates.gpu))
        memory = self._nvml.query("nvmlDeviceGetMemoryInfo", self._handle)
        if memory is not None:
            self._memory_used_mib.append(memory.used / MIB)

    def _run(self) -> None:
        self._sample()
        while not self._stop_event.wait(self.interval_s):
            self._sample()

    def clear(self) -> None:
        """Forget the samples so far, e.g. when the warm-up steps end and steady state begins."""
        self._utilization_pct = []
        self._memory_used_mib = []

    def summary(self) -> dict[str, Any] | None:
        """{"gpu_utilization_pct": {median, p10, p90, n}, "gpu_memory_used_mib": {max}}, or None."""
        if self._handle is None or not (self._utilization_pct or self._memory_used_mib):
            return None
        result: dict[str, Any] = {"gpu_utilization_pct": None, "gpu_memory_used_mib": None}
        if self._utilization_pct:
            ordered = sorted(self._utilization_pct)
            result["gpu_utilization_pct"] = {
                "median": statistics.median(ordered),
                "p10": round(_percentile(ordered, 0.10), 1),
                "p90": round(_percentile(ordered, 0.90), 1),
                "n": len(ordered),
            }
        if self._memory_used_mib:
            result["gpu_memory_used_mib"] = {"max": round(max(self._memory_used_mib), 1)}
        return result
