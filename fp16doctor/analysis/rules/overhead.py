"""Overhead rules: casts, launch overhead and warm-up that eat or distort a 16-bit gain."""

from __future__ import annotations

from typing import Any

from fp16doctor.analysis.context import SIXTEEN_BIT, Context, Pair, RunView, noise_band
from fp16doctor.analysis.rules.common import (
    SEED_STEPS_PER_EPOCH,
    STATED_CONFIDENCE,
    Finding,
    at,
    first_software,
    make_finding,
    roofline_estimates,
    stacks_of,
    stated_causes,
    where_of,
)
from fp16doctor.analysis.values import fmt_ms
from fp16doctor.knowledge.frameworks import CASTS_FOR_MISSING_CPU_KERNELS
from fp16doctor.knowledge.gpus import FAST_FP16_RATIO
from fp16doctor.knowledge.stated import NOT_APPLIED_SIZE_SHARE
from fp16doctor.workload.protocol import FP16, SEED_WORKLOAD, is_mixed, is_pure

# Mixed precision against pure float16: at least this much slower (and beyond both runs' spread) before the casts
# are named; the default noise band is 5 % (analysis/intervals.py), and a cost must clear twice that.
CAST_MIN_COST = 0.1
# Mixed against pure float16 of the same machine: step times of two runs, no op named.
CAST_MEASURED_CONFIDENCE = 0.6


def measured_casts_ms(mixed: RunView, pure: RunView) -> float | None:
    """What the mixed run's cast and layout ops took per step beyond the pure float16 run's, where both profiled
    windows were after their timing (comparable steps); None where either run has no such window."""
    def casts(run: RunView) -> float | None:
        if run.ops is None or run.ops.window_kind != "after_timing":
            return None
        return sum(i.ms_per_step for i in run.ops.items if i.pass_ in ("cast", "layout") and not i.host_time)

    mine, theirs = casts(mixed), casts(pure)
    return mine - theirs if mine is not None and theirs is not None else None


def rule_cast_overhead(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    # mixed against pure float16 of the same machine: another machine's float16 step says nothing of these casts.
    by_cell = {
        (p.reduced.machine, p.reduced.stack, p.reduced.device, p.reduced.variant, p.reduced.precision): p
        for p in ctx.fp16_pairs()
    }
    worse_than_fp32 = False
    for (machine, stack, device, variant, precision), pair in by_cell.items():
        if not is_mixed(precision, FP16):
            continue
        pure = by_cell.get((machine, stack, device, variant, "float16"))
        mixed = pair.reduced
        if pure is None or mixed.step_ms is None or pure.reduced.step_ms is None:
            continue
        # The steps each verdict quotes (its ratio's own), so this sentence and the verdicts agree.
        mixed_ms, pure_ms = pair.step_ms, pure.step_ms
        if not mixed_ms or not pure_ms:
            continue
        # At least 10 %, and beyond the two runs' measured spread: noise is not a cost of the casts.
        band = max(CAST_MIN_COST, noise_band((mixed.step_ms, mixed.p10_ms, mixed.p90_ms),
                                   (pure.reduced.step_ms, pure.reduced.p10_ms, pure.reduced.p90_ms)))
        if mixed_ms > (1 + band) * pure_ms:
            casts = measured_casts_ms(mixed, pure.reduced)
            if casts is not None and casts < band * pure_ms:
                continue  # the profiles measured the casts themselves, and they are not what differs
            scaling = " and the loss scaling" if mixed.advice_applies("loss_scaling") else ""
            line = (f"{at(mixed)}mixed_float16 step {fmt_ms(mixed_ms)} vs float16 {fmt_ms(pure_ms)}: the "
                    f"float32->float16 casts of weights and activations{scaling} cost "
                    f"{fmt_ms(mixed_ms - pure_ms)} per step")
            if casts is not None:
                line += f" (the cast and layout ops measured {fmt_ms(casts)} more per step than float16's)"
            evidence.append(line)
            runs.append(mixed)
            gpu = ctx.gpu_for(mixed)
            # Where fp16 arithmetic can win (FAST_FP16_RATIO), casts eat a gain rather than add to a loss.
            fast = gpu is not None and (gpu.tensor_cores or (gpu.fp16_ratio or 0) >= FAST_FP16_RATIO)
            # Only where fp16 could win do the casts eat a gain; elsewhere they only add to a loss.
            worse_than_fp32 = worse_than_fp32 or (pair.slower and fast)
    confidence = CAST_MEASURED_CONFIDENCE if evidence else 0.0
    # The precisions whose casts are how a device fact costs the time (the document's own word, a library's way):
    # named as the likely cause before that fact (verdicts.likely_cause reads `mechanism_for`).
    mechanisms: list[str] = []
    for pair, line, stated in stated_causes(ctx, "casts"):
        # The document says the 16-bit run casts (a count, or its notes' words): a cause of its own, not measured.
        if pair.reduced not in runs:
            evidence.append(line)
            runs.append(pair.reduced)
            mechanisms.append(pair.reduced.precision)
            confidence = max(confidence, stated)
            worse_than_fp32 = worse_than_fp32 or pair.slower
    for line, run in _cast_count_twins(ctx):
        if run not in runs:
            evidence.append(line)
            runs.append(run)
            confidence = max(confidence, STATED_CONFIDENCE)
    for pair in [*ctx.pairs, *ctx.peer_pairs]:
        # A library that runs float16 on a CPU lacking float16 arithmetic by casting around each op: the casts are
        # how that device's lack costs the time (named before the device fact, as its mechanism).
        run = pair.reduced
        library = next((n for n in run.software.names if n in CASTS_FOR_MISSING_CPU_KERNELS), None)
        if (run in runs or library is None or pair.faster or run.device != "cpu"
                or not is_pure(run.precision, FP16) or ctx.cpu_for(run).native_fp16 is True):
            continue
        evidence.append(f"{at(run)}{library} runs a float16 model on a CPU without float16 arithmetic by casting "
                        "to float32 before, and back after, every op that has no float16 kernel there "
                        f"({CASTS_FOR_MISSING_CPU_KERNELS[library]}); {pair.describe()} (from the library's "
                        "documented behaviour, not measured)")
        runs.append(run)
        mechanisms.append(run.precision)
        confidence = max(confidence, LIBRARY_CASTS_CONFIDENCE)
    for pair in ctx.pairs:
        # Mixed precision in training casts every float32 weight to 16 bits each step, whatever the batch: on a
        # step of a few milliseconds those casts are a share of the step that no 16-bit arithmetic wins back.
        # Within OVERHEAD_MAX_MOVE of float32 the launches both precisions pay say as much (small_model_overhead);
        # beyond it, only work the 16-bit run adds does.
        run, f = pair.reduced, pair.fp32
        if (run in runs or not pair.slower or pair.ratio <= OVERHEAD_MAX_MOVE or not is_mixed(run.precision)
                or run.inference or not run.on_gpu or f.step_ms is None or f.step_ms >= TINY_STEP_MS):
            continue
        evidence.append(f"{at(run)}{run.precision} in training on a {fmt_ms(f.step_ms)} float32 step: mixed "
                        "precision casts every float32 weight to 16 bits each step, a cost per weight whatever the "
                        f"batch, which a step this short cannot absorb; {pair.describe()} (estimated from the step "
                        "times, not measured)")
        runs.append(run)
        confidence = max(confidence, MIXED_TINY_STEP_CONFIDENCE)
        worse_than_fp32 = True
    if not evidence:
        return None
    return make_finding(
        "cast_overhead",
        "Casts inserted by mixed precision eat the gain" if all(is_mixed(r.precision, FP16) for r in runs)
        else "Casts inserted by the 16-bit type eat the gain",
        "warning" if worse_than_fp32 else "info",
        confidence,
        evidence,
        "Casts cost the same whatever the layer size; a compiler can fuse them into their neighbours.",
        **_fusion_remedy(runs, "casts cost the same per step whatever the batch"),
        stacks=stacks_of(runs),
        precisions=sorted({r.precision for r in runs}),
        **({"mechanism_for": sorted(set(mechanisms))} if mechanisms else {}),
        where=where_of(runs),
    )


# A library's own way with float16 on a CPU (knowledge/frameworks.py), no cast counted: an estimate.
LIBRARY_CASTS_CONFIDENCE = 0.5
# Two runs of one workload and precision on one machine, on two stacks, that state their cast ops per step: one
# stating at least this many times the other's casts and slower beyond CAST_MIN_COST: its extra casts cost it
# (public case: Paddle's old AMP pass, 541 casts and 320 ms a ResNet-50 step against 114 and 210 ms after the
# rewrite, tests/data/cases/gpu-paddle-amp-cast-count-old-vs-new.json).
CAST_COUNT_FACTOR = 1.5
# Mixed precision judged from a tiny float32 step alone (no cast measured or stated): an estimate.
MIXED_TINY_STEP_CONFIDENCE = 0.45


def _cast_count_twins(ctx: Context) -> list[tuple[str, RunView]]:
    """(evidence, run) for each 16-bit run that states CAST_COUNT_FACTOR times the cast ops of the same workload
    and precision on another stack of its machine and device, and is slower than it beyond CAST_MIN_COST."""
    found: list[tuple[str, RunView]] = []
    stated = [r for r in ctx.ok_runs() if r.stated.cast_ops and r.precision in SIXTEEN_BIT and r.step_ms]
    for run in stated:
        for twin in stated:
            if (twin.stack == run.stack or (twin.machine, twin.device, twin.precision, twin.workload_name, twin.variant)
                    != (run.machine, run.device, run.precision, run.workload_name, run.variant)):
                continue
            mine, theirs = run.stated.cast_ops or 0, twin.stated.cast_ops or 0
            step, other = run.step_ms or 0.0, twin.step_ms or 0.0
            if mine >= CAST_COUNT_FACTOR * theirs and step > (1 + CAST_MIN_COST) * other:
                found.append((f"{at(run)}the document states {mine} cast ops per step in {run.precision} "
                              f"against {theirs} on {twin.stack} for the same workload, and its step is "
                              f"{fmt_ms(run.step_ms)} against {fmt_ms(twin.step_ms)}: the {mine - theirs} extra "
                              "casts cost it (stated, not measured)", run))
                break
    return found


# A larger batch changes the training itself (its learning rate, its convergence), so no variant measures it.
LARGER_BATCH_NO_COMMAND = "a larger batch changes the training itself (learning rate, convergence): no variant sets it"
# In inference a larger batch changes no result, only how long each request waits for its batch.
LARGER_BATCH_INFERENCE = ("no fp16doctor variant changes a document's batch; a larger batch serves more requests per "
                          "pass, each waiting for its batch")


def _fusion_remedy(runs: list[RunView], batch_why: str) -> dict[str, Any]:
    """How to fuse small ops (casts, launches) on this stack: the code of the xla variant where it measures it
    (Keras on TensorFlow), else the stack's own compiler as an idea no variant measures (docs/architecture.md). Each
    idea carries its advice id (knowledge/modes.py), so inference gets none of training's and an inference-only
    library none of a framework's."""
    sw = first_software(runs)
    inference = bool(runs) and all(r.inference for r in runs)
    batch: dict[str, Any] = (
        {"precision": runs[0].precision, "setting": "a larger batch", "why": batch_why,
         "no_command": LARGER_BATCH_INFERENCE} if inference else
        {"precision": "mixed_float16", "setting": "a larger batch", "why": batch_why,
         "no_command": LARGER_BATCH_NO_COMMAND, "advice": "batch_changes_training"})
    ideas: list[dict[str, Any]] = [batch]
    code = ""
    if sw.framework == "torch":
        ideas.append({"precision": "mixed_float16", "setting": "model = torch.compile(model)",
                      "why": "fuses casts and small ops (PyTorch >= 2.0)", "advice": "framework_compiler",
                      "no_command": "no fp16doctor variant compiles a PyTorch model"})
    elif sw.framework in ("tf.keras", "keras3") and sw.keras_backend in (None, "tensorflow"):
        code = "    model.compile(optimizer, loss, jit_compile=True)"
    elif sw.framework in ("keras2", "tensorflow"):
        ideas.append({"precision": "float16", "setting": "TF_XLA_FLAGS=--tf_xla_auto_jit=2",
                      "why": "XLA auto-clustering fuses casts and small ops in TensorFlow 1.x graphs",
                      "advice": "framework_compiler",
                      "no_command": "the xla variant is Keras' jit_compile, which TensorFlow 1.x's Keras lacks"})
    return {"remedy_ideas": ideas, "remedy_code": code}


# Launch and framework overhead cost the same in every precision: it can hide a 16-bit gain, not make 16 bits this
# much faster or slower. A 16-bit step beyond this factor of float32's moved for another reason (the public cases:
# 1.18x and 1.21x slower small steps are overhead, tests/data/cases/turing-rtx2070-pytorch-batch1-half.json and
# pascal-p100-tf14-mnist-fp16.json; a 1.9x faster 3 ms inference pass is not, amd-navi31-migraphx-resnet50-...).
OVERHEAD_MAX_MOVE = 1.5

# Where the host builds at least half of each float32 step's batches, the host, not launch overhead, fills the step.
INPUT_FILLS_STEP = 0.5
# The GPU's best-case arithmetic (roofline.py) under a fifth of the measured float32 step: the rest is overhead.
ARITHMETIC_SHARE_OF_STEP = 0.2
# Absolute step lengths where no roofline says how much arithmetic a step holds: a few hundred kernel launches of
# ~5-10 us each (NVIDIA's CUDA Best Practices Guide, kernel launch overhead) fill 10 ms; 50 ms bounds a step whose
# GPU sat idle most of the time. They are times, so a document in ms per image reads differently: stated, not hidden.
TINY_STEP_MS = 10.0
SMALL_STEP_MS = 50.0
# NVML utilisation below this while float32 steps are short: the GPU waits for the host between kernels.
LOW_GPU_UTIL_PCT = 40.0


# The same model and stack timed at a batch at least this many times larger, where 16 bits were faster: the small
# batch's step is overhead (launches), not arithmetic (public case: a T4 decoder 1.49x slower in float16 at batch 1,
# 1.26x faster at 256, tests/data/cases/turing-t4-tensorflow-fastertransformer-decoder-batch1-fp16.json).
LARGER_BATCH_FACTOR = 4


# A batch of this many examples or fewer on a GPU of at least BIG_GPU_TFLOPS (or with matrix units): each kernel
# holds too little work to fill the GPU's SMs, so the step is kernel launches and framework overhead whatever the
# precision (NVIDIA's Deep Learning Performance Guide: small batches underutilise the GPU; the public cases: a T4
# decoder at batch 1, tests/data/cases/turing-t4-tensorflow-fastertransformer-decoder-batch1-fp16.json, a 2080 Ti
# ResNet-50 at batch 2). Said from the document's facts alone, at lower confidence than a measured larger batch.
SMALL_BATCH_MAX = 2
BIG_GPU_TFLOPS = 4.0
# What would confirm it: the same model at a batch this large, in both precisions.
CONFIRM_BATCH = 32


def _big_gpu(ctx: Context, run: RunView) -> bool:
    """A GPU whose arithmetic a batch of one or two cannot fill: at least BIG_GPU_TFLOPS of float32 by the table, or
    with matrix units (Tensor Cores, MFMA, XMX) where the table has no peak."""
    gpu = ctx.gpu_for(run)
    if gpu is None:
        return False
    if gpu.model is not None:
        return gpu.model.fp32_tflops >= BIG_GPU_TFLOPS
    return gpu.tensor_cores is True


def _small_batch(ctx: Context, pair: Pair) -> bool:
    """Both runs at a batch of SMALL_BATCH_MAX or fewer on a big GPU, the 16-bit run no faster."""
    f, r = pair.fp32, pair.reduced
    return (not pair.faster and f.batch_size is not None and r.batch_size is not None
            and max(f.batch_size, r.batch_size) <= SMALL_BATCH_MAX and _big_gpu(ctx, r))


def _faster_at_larger_batch(ctx: Context, pair: Pair) -> Pair | None:
    """A pair of the same machine, stack, device and precision with a batch LARGER_BATCH_FACTOR times larger, where
    the 16-bit run was faster; None where none was measured or this pair is itself faster."""
    r = pair.reduced
    if pair.faster or not r.batch_size:
        return None
    return next((p for p in ctx.fp16_pairs() if p.faster and p.reduced.batch_size
                 and p.reduced.batch_size >= LARGER_BATCH_FACTOR * r.batch_size
                 and (p.reduced.machine, p.reduced.stack, p.reduced.device, p.reduced.precision)
                 == (r.machine, r.stack, r.device, r.precision)), None)


def _premise_contradicted(ctx: Context, pair: Pair) -> bool:
    """Whether the document's own numbers deny that too little work kept 16 bits from mattering here: the 16-bit
    build is float32's size (the type did not apply: hardware.rule_precision_not_applied), or on the same machine the
    same workload at the same batch measured the 16-bit type more than OVERHEAD_MAX_MOVE faster (another build)."""
    run, base = pair.reduced, pair.fp32
    mine, theirs = run.stated.model_mib, base.stated.model_mib
    if mine is not None and theirs is not None and mine >= NOT_APPLIED_SIZE_SHARE * theirs:
        return True
    return any(other is not pair and other.reduced.machine == run.machine and other.reduced.device == run.device
               and other.reduced.workload_name == run.workload_name and other.reduced.batch_size == run.batch_size
               and other.speedup > OVERHEAD_MAX_MOVE for other in ctx.fp16_pairs())


def rule_small_model_overhead(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    estimates = {(e.machine, e.stack, e.device, e.precision): e for e in roofline_estimates(ctx)}
    for pair in ctx.fp16_pairs():
        f = pair.fp32
        if not f.on_gpu or f.step_ms is None or f.variant != "original" and f.variant != "synthetic_input":
            continue
        if max(pair.ratio, pair.speedup) > OVERHEAD_MAX_MOVE:
            continue  # the 16-bit step moved too far for overhead, which both precisions pay alike
        if _premise_contradicted(ctx, pair):
            continue
        if f.input_ms is not None and f.input_ms >= INPUT_FILLS_STEP * f.step_ms:
            continue  # the host, not launch overhead, fills the step
        est = estimates.get((pair.reduced.machine, pair.reduced.stack, pair.reduced.device, pair.reduced.precision))
        bigger = _faster_at_larger_batch(ctx, pair)
        if bigger is not None:
            evidence.append(
                f"{at(f)}at batch {f.batch_size} {pair.describe()}; at batch {bigger.reduced.batch_size} "
                f"{bigger.describe()}: the same model gains from 16 bits once a step holds more work, so at batch "
                f"{f.batch_size} launches and framework overhead fill the step (measured)")
            confidence = max(confidence, 0.85)
            runs.append(pair.reduced)
        elif (est and est.fp32_ms is not None and est.fp32_ms < ARITHMETIC_SHARE_OF_STEP * f.step_ms
                and f.step_ms < SMALL_STEP_MS):
            evidence.append(
                f"{at(f)}float32 step {fmt_ms(f.step_ms)} where the GPU's best case is "
                f"{fmt_ms(est.fp32_ms)} (fp16 best case {fmt_ms(est.fp16_ms)}): launch and framework "
                "overhead fill the step, not arithmetic"
            )
            confidence = max(confidence, 0.8)
            runs.append(pair.reduced)
        elif (est is None or est.fp32_ms is None) and f.step_ms < TINY_STEP_MS:
            params = f.model.params if f.model else None
            evidence.append(
                f"{at(f)}a float32 step takes only {fmt_ms(f.step_ms)} on the GPU"
                + (f" for {params:,} parameters" if params else "")
                + ": too little work per step for fp16 arithmetic to matter"
            )
            confidence = max(confidence, 0.6)
            runs.append(pair.reduced)
        elif f.gpu_util_pct is not None and f.gpu_util_pct < LOW_GPU_UTIL_PCT and f.step_ms < SMALL_STEP_MS:
            evidence.append(
                f"{at(f)}GPU busy only {f.gpu_util_pct:.0f}% of a {fmt_ms(f.step_ms)} float32 step"
            )
            confidence = max(confidence, 0.6)
            runs.append(pair.reduced)
        elif _small_batch(ctx, pair):
            gpu = ctx.gpu_for(f)
            mode = "inference" if pair.reduced.inference else "training"
            evidence.append(
                f"{at(f)}{mode} at batch {f.batch_size} on the {gpu.label if gpu else 'GPU'}: each kernel holds "
                "too little work to fill the GPU, so kernel launches and framework overhead fill the step in both "
                f"precisions, and 16-bit arithmetic can shorten little of it ({pair.describe()}; from the "
                "document's batch and device, not measured)")
            confidence = max(confidence, 0.5)
            runs.append(pair.reduced)
    if not evidence:
        return None
    evidence += [p.describe() for p in ctx.fp16_pairs() if p.reduced in runs]
    return make_finding(
        "small_model_overhead",
        "Too little work per step: launch and framework overhead dominate",
        "warning",
        confidence,
        evidence,
        "fp16 speeds up arithmetic, and this step has almost none: judge fp16 on a step with more work (a larger "
        "batch or model), and cut per-op launches.",
        **_fusion_remedy(runs, "launch overhead is paid per step whatever the batch"),
        confirm=(f"time the same model at a batch of {CONFIRM_BATCH} or more in both precisions: a 16-bit gain "
                 "there, where it loses at this batch, confirms it"),
        stacks=stacks_of(runs),
        where=where_of(runs),
    )


# A first step three times the median and 200 ms longer: graph tracing, autotuning or compilation (TF's and XLA's
# first call); smaller first-step excesses are within what a per-epoch timing averages away.
WARMUP_MIN_FACTOR = 3.0
WARMUP_MIN_EXTRA_MS = 200.0


def rule_measurement_warmup(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    for run in ctx.ok_runs():
        if run.first_step_ms is None or run.step_ms is None:
            continue
        if (run.first_step_ms >= WARMUP_MIN_FACTOR * run.step_ms
                and run.first_step_ms - run.step_ms >= WARMUP_MIN_EXTRA_MS):
            line = (
                f"{run.label}: first step {fmt_ms(run.first_step_ms)} vs {fmt_ms(run.step_ms)} steady "
                f"({run.first_step_ms / run.step_ms:.1f}x: graph building, autotuning, compilation)"
            )
            steps = (run.images // run.batch_size if run.images and run.batch_size
                     else SEED_STEPS_PER_EPOCH if run.workload_name == SEED_WORKLOAD else None)
            if steps and steps > 1:
                per_epoch = (run.first_step_ms + (steps - 1) * run.step_ms) / steps
                line += (
                    f"; with {steps} steps per epoch the first epoch reads {fmt_ms(per_epoch)} per step, "
                    f"{per_epoch / run.step_ms:.1f}x the steady state"
                )
            evidence.append(line)
            runs.append(run)
    if not evidence:
        return None
    return make_finding(
        "measurement_warmup",
        "The first steps are much slower than the rest",
        "info",
        0.8,
        evidence,
        "Compare precisions on steady-state steps: skip the first epoch (or the first steps) and time many "
        "steps; fp16doctor's step_time_ms already does. With Keras, a callback such as:\n"
        "    class StepTimer(keras.callbacks.Callback):\n"
        "        def on_train_batch_begin(self, batch, logs=None): self.t = time.perf_counter()\n"
        "        def on_train_batch_end(self, batch, logs=None): times.append(time.perf_counter() - self.t)\n"
        "and report the median of times[5:].",
        stacks=stacks_of(runs),
        where=where_of(runs),
    )


