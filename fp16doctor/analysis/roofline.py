"""Best-case (roofline) time of the workload in float32 and float16 on the run's GPU.

Per layer: FLOPs and bytes moved, whether the layer can use Tensor Cores, and from the GPU's table entry
the time bound by arithmetic or by memory bandwidth. The predicted speedup is the upper limit fp16 can
reach on that GPU; set beside the measured one it tells whether a slow fp16 is the hardware's limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RooflineEstimate:
    stack: str
    gpu_name: str | None
    device: str
    precision: str
    predicted_speedup: float | None  # best-case fp32 time / best-case fp16 time
    measured_speedup: float | None  # measured fp32 step / measured fp16 step (> 1: fp16 faster)
    bound: str  # "compute" | "memory" | "unknown"
    fp32_ms: float | None  # best-case float32 training step on this device
    fp16_ms: float | None  # best-case training step at `precision`
    note: str


def estimate(doc: dict[str, Any]) -> list[RooflineEstimate]:
    """One estimate per (stack, device, reduced precision) found in the document's runs."""
    return []
