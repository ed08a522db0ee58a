"""Best-case (roofline) time of the workload in float32 and float16 on the run's GPU.

Per layer: FLOPs and bytes moved, whether the layer can use Tensor Cores, and from the GPU's table entry
the time bound by arithmetic or by memory bandwidth. The predicted speedup is the upper limit fp16 can
reach on that GPU; set beside the measured one it tells whether a slow fp16 is the hardware's limit.

Assumptions (stated so a reader can disagree): a training step costs three forward passes of arithmetic and
of memory traffic (forward, gradient w.r.t. inputs, gradient w.r.t. weights); every layer reads its input
and weights and writes its output once per pass; fp16 data that cannot use fast fp16 arithmetic is computed
at the fp32 rate (cuDNN's pseudo-half configuration), so fp16 never predicts slower than fp32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from fp16doctor.analysis.context import REDUCED, Context, Pair, RunView, build_context
from fp16doctor.analysis.model import Layer, ModelInfo
from fp16doctor.analysis.values import ShownRatio, fmt_ms
from fp16doctor.knowledge.cuda import CUDNN_RELAXED_CHANNELS, TENSOR_CORE_CHANNEL_MULTIPLE, version_at_least
from fp16doctor.knowledge.gpus import GpuFacts, GpuModel
from fp16doctor.results import HOST_MACHINE

TRAINING_PASSES = 3.0


# Measured kernels under this share of their roofline time: many small kernels, launch gaps between them.
SMALL_KERNELS_BELOW = 0.5


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
    machine: str = HOST_MACHINE  # the run's machine: estimates pair with runs of one machine only
    measured_shown: ShownRatio | None = None  # the measured pair's ratio as every output prints it
    # float32's measured kernels per step (its device time less its copies), where a trace measured them
    fp32_kernels_ms: float | None = None

    def kernels_words(self) -> str | None:
        """"float32's kernels measured 21 ms a step: they run at about 13% of this best case (small kernels and
        launch gaps)": the best case beside the device time it bounds, never beside a step many times longer."""
        if not self.fp32_kernels_ms or not self.fp32_ms:
            return None
        share = self.fp32_ms / self.fp32_kernels_ms
        text = f"float32's kernels measured {fmt_ms(self.fp32_kernels_ms)} a step: they run at about {share:.0%} of it"
        return text + (" (a sign of small kernels and launch gaps)" if share < SMALL_KERNELS_BELOW else "")

    def key(self) -> tuple[Any, ...]:
        """One best case per machine, stack, device and precision with the same figures (variants share it)."""
        return (self.machine, self.stack, self.gpu_name, self.precision, self.fp32_ms, self.fp16_ms)

    def predicted_times(self) -> str | None:
        """'2.60x': the best case as every output prints it (ShownRatio, no interval: two decimals under 10x)."""
        shown = ShownRatio.of(self.predicted_speedup)
        return shown.times() if shown is not None else None

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("gpu")

    def missing_words(self) -> str:
        """"tf2.16-cuda12 / float16 on NVIDIA X: no best case (GPU not in the table of peak figures; ...)": why a
        GPU's run has no best case, as the detail and the report's speedup chart say it; "" where it has one, or
        where the run is a CPU's (no roofline is drawn for CPUs)."""
        if self.predicted_speedup is not None or not self.on_gpu:
            return ""
        return f"{self.stack} / {self.precision} on {self.gpu_name or self.device}: no best case ({self.note})"

    def measured_words(self) -> str | None:
        """'1.60x slower': the measured ratio as the verdict prints it; a bare step ratio where no pair made one."""
        shown = self.measured_shown or ShownRatio.of(self.measured_speedup)
        return shown.figure() if shown is not None else None


@dataclass(frozen=True)
class LayerTime:
    layer: Layer
    tensor_core: bool
    ms: float
    bound: str


def tensor_core_eligible(layer: Layer, cudnn: str | None) -> tuple[bool, float]:
    """(can use Tensor Cores, FLOP inflation from channel padding) for one layer."""
    if not layer.is_matmul or layer.in_channels is None or layer.out_channels is None:
        return False, 1.0
    if layer.channel_multiple_of_8:
        return True, 1.0
    if version_at_least(cudnn, CUDNN_RELAXED_CHANNELS) and layer.type.lower().startswith("conv"):
        m = TENSOR_CORE_CHANNEL_MULTIPLE

        def pad(c: int) -> int:
            return math.ceil(c / m) * m

        return True, pad(layer.in_channels) * pad(layer.out_channels) / (
            layer.in_channels * layer.out_channels
        )
    return False, 1.0


def _layer_time(
    layer: Layer,
    batch: int,
    peak_tflops: float,
    bandwidth_gbs: float,
    bytes_per_value: int,
    inflation: float = 1.0,
) -> tuple[float, str]:
    flops = TRAINING_PASSES * layer.flops_per_example * batch * inflation
    values = TRAINING_PASSES * ((layer.input_elements + layer.output_elements) * batch + layer.params)
    compute_ms = flops / (peak_tflops * 1e12) * 1e3
    memory_ms = values * bytes_per_value / (bandwidth_gbs * 1e9) * 1e3
    return (compute_ms, "compute") if compute_ms >= memory_ms else (memory_ms, "memory")


def step_times(
    model: ModelInfo, batch: int, gpu: GpuModel, precision: str, cudnn: str | None, tf32: bool
) -> list[LayerTime]:
    """Best-case per-layer times for one training step."""
    out = []
    for layer in model.layers:
        if precision == "float32":
            peak = gpu.fp32_tflops
            on_tc = False
            if tf32 and gpu.tensor_tflops and layer.is_matmul:
                peak = max(peak, gpu.tensor_tflops / 2)  # TF32 Tensor Core rate is half the FP16 rate
                on_tc = peak > gpu.fp32_tflops
            ms, bound = _layer_time(layer, batch, peak, gpu.memory_bandwidth_gbs, 4)
        else:
            eligible, inflation = tensor_core_eligible(layer, cudnn)
            on_tc = bool(eligible and gpu.tensor_cores and gpu.tensor_tflops)
            if on_tc and gpu.tensor_tflops:
                peak = gpu.tensor_tflops
            else:
                peak = max(gpu.fp16_tflops or 0.0, gpu.fp32_tflops)  # pseudo-half: fp16 data, fp32 math
                inflation = 1.0
            ms, bound = _layer_time(layer, batch, peak, gpu.memory_bandwidth_gbs, 2, inflation)
        out.append(LayerTime(layer, on_tc, ms, bound))
    return out


def _dominant_bound(times: list[LayerTime]) -> str:
    compute = sum(t.ms for t in times if t.bound == "compute")
    memory = sum(t.ms for t in times if t.bound == "memory")
    if compute == memory == 0:
        return "unknown"
    return "compute" if compute >= memory else "memory"


def tf32_active(run: RunView, gpu: GpuFacts | None) -> bool:
    """Does this run's float32 already use TF32 Tensor Cores by default?"""
    if gpu is None or not gpu.tf32:
        return False
    sw = run.software
    if sw.framework == "torch":
        # torch >= 1.7: cudnn.allow_tf32 on (convolutions); matmul.allow_tf32 only in 1.7-1.11 (TORCH_TF32).
        if version_at_least(sw.torch, "1.7") is False:
            return False
        if version_at_least(sw.torch, "1.12") and run.model is not None:
            return any(layer.type.lower().startswith("conv") for layer in run.model.layers)
        return True
    if sw.framework == "jax" or (sw.framework == "keras3" and sw.keras_backend == "jax"):
        return True
    if sw.tensorflow:
        return bool(version_at_least(sw.tensorflow, "2.4"))
    return True  # every current framework defaults to TF32 for convolutions


def _totals_estimate(reduced: RunView, model: ModelInfo, batch: int, gpu: GpuModel, tf32: bool,
                     measured: float | None, gpu_name: str | None) -> RooflineEstimate:
    """A model known by its FLOPs alone: the step's arithmetic at the device's peak rates (Tensor Cores for 16 bits
    where it has them), a compute-bound best case that counts no memory traffic, so the least a step can take."""
    passes = 1 if reduced.inference else TRAINING_PASSES
    flops = passes * model.flops_per_example * batch
    peak32 = max(gpu.fp32_tflops, gpu.tensor_tflops / 2) if (tf32 and gpu.tensor_tflops) else gpu.fp32_tflops
    peak16 = gpu.tensor_tflops if (gpu.tensor_cores and gpu.tensor_tflops) else max(gpu.fp16_tflops or 0.0,
                                                                                      gpu.fp32_tflops)
    fp32_ms, fp16_ms = flops / (peak32 * 1e12) * 1e3, flops / (peak16 * 1e12) * 1e3
    note = (f"the model's {model.flops_per_example / 1e9:.3g} GFLOPs per example alone, batch {batch}: a "
            "compute-bound best case (no layers, so no memory traffic is counted)")
    return RooflineEstimate(reduced.stack, gpu_name, reduced.device, reduced.precision, fp32_ms / fp16_ms, measured,
                            "compute", fp32_ms, fp16_ms, note, reduced.machine)


def _estimate(ctx: Context, reduced: RunView, fp32: RunView | None, pair: Pair | None = None) -> RooflineEstimate:
    gpu = ctx.gpu_for(reduced)
    measured = (fp32.step_ms / reduced.step_ms) if (fp32 and fp32.step_ms and reduced.step_ms) else None
    if pair is not None:
        measured = pair.speedup
    gpu_name = gpu.reported_name if gpu else None

    def unknown(note: str) -> RooflineEstimate:
        return RooflineEstimate(
            reduced.stack,
            gpu_name,
            reduced.device,
            reduced.precision,
            None,
            measured,
            "unknown",
            None,
            None,
            note,
            reduced.machine,
        )

    if not reduced.on_gpu:
        return unknown(
            "no roofline for CPUs: fp16 on a CPU without AVX512-FP16/AMX-FP16 is converted to fp32 "
            "per operation, so it cannot beat fp32"
        )
    if gpu is None or gpu.model is None:
        return unknown("GPU not in the table of peak figures; no best-case time")
    model = reduced.model
    batch = reduced.batch_size
    if model is None or not batch:
        return unknown("the run names no model layers or batch size; no per-layer estimate")
    tf32 = tf32_active(fp32 or reduced, gpu)
    if not model.layers:
        return _totals_estimate(reduced, model, batch, gpu.model, tf32, measured, gpu_name)
    t32 = step_times(model, batch, gpu.model, "float32", reduced.software.cudnn, tf32)
    t16 = step_times(model, batch, gpu.model, reduced.precision, reduced.software.cudnn, tf32)
    fp32_ms = sum(t.ms for t in t32)
    fp16_ms = sum(t.ms for t in t16)
    predicted = fp32_ms / fp16_ms if fp16_ms > 0 else None
    on_tc = sum(t.layer.flops_per_example for t in t16 if t.tensor_core)
    share = on_tc / model.flops_per_example if model.flops_per_example else 0.0
    note = f"{model.source} layers, batch {batch}: {share:.0%} of the FLOPs can use Tensor Cores in fp16" + (
        "; float32 already runs as TF32 on Tensor Cores" if tf32 else ""
    )
    return RooflineEstimate(
        reduced.stack,
        gpu_name,
        reduced.device,
        reduced.precision,
        predicted,
        measured,
        _dominant_bound(t16),
        fp32_ms,
        fp16_ms,
        note,
        reduced.machine,
    )


def estimate_context(ctx: Context) -> list[RooflineEstimate]:
    out = []
    seen = set()
    for pair in ctx.fp16_pairs():
        kernels = pair.fp32.device_time.compute_ms if pair.fp32.device_time is not None else None
        out.append(replace(_estimate(ctx, pair.reduced, pair.fp32, pair), measured_shown=pair.shown,
                           fp32_kernels_ms=kernels or None))
        seen.add(pair.reduced.index)
    for run in ctx.ok_runs():
        if run.precision in REDUCED and run.index not in seen:
            out.append(_estimate(ctx, run, None))
    return out


def estimate(doc: dict[str, Any]) -> list[RooflineEstimate]:
    """One estimate per successful float16 / mixed_float16 run, paired with its float32 run when there
    is one."""
    return estimate_context(build_context(doc))
