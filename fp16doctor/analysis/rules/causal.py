"""Kernel and bfloat16 rules: what the measured ops say ran, and bfloat16's place on this device.

The accounting that turns these into time (explains_ms) is analysis/causes.py; the thresholds live here.
"""

from __future__ import annotations

from fp16doctor.analysis.context import BF16, Context, OpItem, Pair, RunView
from fp16doctor.analysis.rules.common import Finding, make_finding, where_of
from fp16doctor.analysis.rules.hardware import matrix_units_favour
from fp16doctor.analysis.values import fmt_ms
from fp16doctor.knowledge.cpu import CPU_SOURCES
from fp16doctor.knowledge.gpu_families import SOURCES as GPU_FAMILY_SOURCES
from fp16doctor.knowledge.kernels import is_reference_impl
from fp16doctor.workload.protocol import BF16 as BF16_FAMILY
from fp16doctor.workload.protocol import FP16, is_mixed

# A slow kernel is named the cause only when it accounts for at least this share of the difference it is
# measured in; smaller ones stay evidence.
SLOW_KERNEL_MIN_SHARE = 0.05
# framework_setting: a switch must move the step by at least this much (and beyond both runs' spread).
SETTING_MIN_CHANGE = 0.10
# bf16_preferred: mixed_bfloat16 at least this much faster than the float16 runs (and than float32's spread).
BF16_PREFERRED_MIN_GAIN = 0.10

CONV_MATMUL_KINDS = ("conv", "matmul")
# The dtypes an op record names for 16-bit arithmetic (oneDNN's f16/bf16, TensorFlow's half/float16/bfloat16), by
# their 16-bit family.
OP_DTYPE_FAMILIES = {"float16": FP16, "half": FP16, "f16": FP16, "bfloat16": BF16_FAMILY, "bf16": BF16_FAMILY}
SIXTEEN_BIT_DTYPES = frozenset(OP_DTYPE_FAMILIES)


def slow_kernel_item(item: OpItem, run: RunView, ctx: Context) -> bool:
    """A 16-bit op that ran a slow kernel where a fast one exists: a reference implementation, or a
    non-Tensor-Core conv/matmul kernel on a Tensor Core GPU (known only when the kernel name says so). The dtype
    first: a float32 op (a mixed run's float32 part, an optimizer update) that ran `ref:any` is no 16-bit kernel,
    nor is an op whose dtype nobody recorded."""
    dtype = (item.dtype or "").lower()
    if dtype not in SIXTEEN_BIT_DTYPES:
        return False
    if is_reference_impl(item.impl):
        return True
    gpu = ctx.gpu_for(run)
    if item.tensor_cores is not False or item.key[2] not in CONV_MATMUL_KINDS or gpu is None or not gpu.tensor_cores:
        return False
    if OP_DTYPE_FAMILIES.get(dtype) == BF16_FAMILY:
        return gpu.tf32 is True  # bfloat16 Tensor Core math arrived with 8.0, as TF32 did
    return OP_DTYPE_FAMILIES.get(dtype) == FP16



def _bf16_pairs(ctx: Context) -> list[Pair]:
    return [p for p in ctx.pairs if p.reduced.precision in BF16]


def rule_bf16_unsupported(ctx: Context) -> Finding | None:
    """bfloat16 asked for on a device without bfloat16 arithmetic: judged by the flags / compute capability,
    with the measured step times as the evidence of what it cost."""
    evidence: list[str] = []
    runs: list[RunView] = []
    for run in ctx.runs:
        if run.precision not in BF16:
            continue
        if run.on_gpu:
            gpu = ctx.gpu_for(run)
            if gpu is None or gpu.bfloat16 is not False:
                continue
            what = (f"{gpu.label}: compute capability {gpu.compute_capability} has no bfloat16 arithmetic "
                    "(it arrived with 8.0, Ampere; CUDA C Programming Guide)" if gpu.nvidia else
                    f"{gpu.label}: no bfloat16 arithmetic in this family ({GPU_FAMILY_SOURCES[gpu.family.source]})"
                    if gpu.family is not None else f"{gpu.label}: no bfloat16 arithmetic")
        else:
            cpu = ctx.cpu_for(run)
            if cpu.native_bf16 is not False:
                continue
            table = cpu.table
            what = (f"{cpu.model or 'this CPU'}: no avx512_bf16 / amx_bf16 (x86) or bf16 (Arm) among its flags"
                    if cpu.flags is not None or table is None else
                    f"{cpu.model}: {table.name}, a generation without bfloat16 instructions "
                    f"({CPU_SOURCES[table.source]})")
        pair = next((p for p in ctx.pairs if p.reduced is run), None)
        line = what + ("; " + pair.describe() if pair else "")
        if line not in evidence:
            evidence.append(line)
        runs.append(run)
    if not evidence:
        return None
    pairs = [p for p in ctx.pairs if p.reduced in runs]
    if pairs and all(p.faster for p in pairs):
        # Stored in 16 bits and computed in float32, it still moved half the bytes: memory, not arithmetic, won.
        return make_finding(
            "bf16_unsupported", "bfloat16 has no arithmetic units on this device", "info", 0.85, evidence,
            "bfloat16 is computed in float32 here, yet measured faster: half the bytes to move (weights, "
            "activations) is what it saves on this device. Keep it where the run is memory-bound.",
            stacks=sorted({r.stack for r in runs}))
    return make_finding(
        "bf16_unsupported",
        "bfloat16 has no arithmetic units on this device",
        "warning",
        0.85,
        evidence,
        "bfloat16 is emulated here (converted to float32 for each operation).",
        stacks=sorted({r.stack for r in runs}),
        where=where_of(runs),
    )


def rule_bf16_preferred(ctx: Context) -> Finding | None:
    """mixed_bfloat16 measured faster than float32 and than the float16 runs on the same machine and stack; in
    inference, plain bfloat16 too (no weight is updated, so pure 16 bits is how a model is run there), where float16
    was measured beside it: bfloat16 is then the fast 16-bit type, not merely a smaller one to move."""
    evidence: list[str] = []
    best: Pair | None = None
    for pair in _bf16_pairs(ctx):
        fp16 = [p for p in ctx.fp16_pairs() if p.fp32 is pair.fp32]
        plain_inference = pair.reduced.inference and bool(fp16)
        if not (is_mixed(pair.reduced.precision, BF16_FAMILY) or plain_inference) or not pair.faster:
            continue
        step = pair.step_ms  # the steps the verdicts quote
        assert step is not None
        beaten = [p for p in fp16 if p.step_ms and p.step_ms > step * (1 + BF16_PREFERRED_MIN_GAIN)]
        if fp16 and len(beaten) < len(fp16):
            continue
        line = pair.describe()
        if beaten:
            line += "; " + ", ".join(f"{p.reduced.precision} {fmt_ms(p.step_ms)}" for p in beaten)
        evidence.append(line)
        if best is None or pair.speedup > best.speedup:
            best = pair
    if best is None:
        return _bf16_preferred_by_matrix_units(ctx)
    return make_finding(
        "bf16_preferred",
        f"bfloat16 is this device's fast 16-bit type: {best.reduced.precision} is {best.shown.figure('than float32')}",
        "info",
        0.9,
        evidence,
        # Loss scaling is training's (knowledge/modes.py): an inference run has no gradient to scale.
        "bfloat16 has float32's range, so its mixed precision needs no loss scaling."
        if best.reduced.advice_applies("loss_scaling") else "",
        precision=best.reduced.precision,
        machine=best.reduced.machine,
        stack=best.reduced.stack,
        speedup=round(best.speedup, 3),
    )


def _bf16_preferred_by_matrix_units(ctx: Context) -> Finding | None:
    """No float32 run: bfloat16 measured faster than float16 on the same device and stack, on a device whose matrix
    units take bfloat16 and not float16 (a CPU with AMX-BF16 and no AMX-FP16): the hardware's fast 16-bit type."""
    for pair in ctx.peer_pairs:
        runs = (pair.reduced, pair.fp32)
        fp16 = next((r for r in runs if r.precision not in BF16), None)
        bf16 = next((r for r in runs if r.precision in BF16), None)
        if fp16 is None or bf16 is None or not fp16.step_ms or not bf16.step_ms \
                or fp16.step_ms < bf16.step_ms * (1 + BF16_PREFERRED_MIN_GAIN):
            continue
        favour = matrix_units_favour(ctx, fp16, bf16)
        if favour is None or not (pair.slower if pair.reduced is fp16 else pair.faster):
            continue
        speedup = fp16.step_ms / bf16.step_ms
        return make_finding(
            "bf16_preferred",
            f"bfloat16 is this device's fast 16-bit type: {bf16.precision} is {speedup:.2f}x faster than "
            f"{fp16.precision}",
            "info",
            0.85,
            [f"{pair.describe()}; {favour}"],
            f"Use {bf16.precision} here: this CPU's matrix units take bfloat16."
            + (" bfloat16 has float32's range, so its mixed precision needs no loss scaling."
               if bf16.advice_applies("loss_scaling") else ""),
            precision=bf16.precision,
            machine=bf16.machine,
            stack=bf16.stack,
            speedup=round(speedup, 3),
        )
    return None
