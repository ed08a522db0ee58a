"""One rule per finding id of CONTRACT.md: a pure function from the read document to at most one finding."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fp16doctor.analysis.advice import (
    is_old_keras_generator,
    keras_floatx_note,
    mixed_precision_code,
    upgrade_target,
    upgraded,
)
from fp16doctor.analysis.context import Context, RunView, Software, noise_band
from fp16doctor.analysis.roofline import RooflineEstimate, estimate_context, tensor_core_eligible, tf32_active
from fp16doctor.analysis.values import fmt_flops, fmt_ms
from fp16doctor.knowledge.cuda import (
    CUDNN_AUTO_CONVERSION,
    CUDNN_RELAXED_CHANNELS,
    min_driver_for,
    toolkit,
    version_at_least,
    version_tuple,
)
from fp16doctor.knowledge.frameworks import (
    KERAS_USES_KERAS_PREPROCESSING_SINCE,
    NUMPY_FP16_ISSUES,
    SEED_HOST_BATCH_MS,
    TF_BUILDS,
    TF_FP16_FP32_COMPUTE_ENV,
    TfBuild,
    has_feature,
)
from fp16doctor.knowledge.gpus import GpuFacts, cc_tuple

Finding = dict[str, Any]
FP16_SMALLEST_NORMAL = 6.103515625e-05  # 2**-14
SEED_STEPS_PER_EPOCH = 4  # the script: nb_train_samples 512 / batch_size 128


def make_finding(
    fid: str,
    title: str,
    severity: str,
    confidence: float,
    evidence: list[str],
    recommendation: str,
    **extra: Any,
) -> Finding:
    return {
        "id": fid,
        "title": title,
        "severity": severity,
        "confidence": round(max(0.05, min(confidence, 0.99)), 2),
        "evidence": evidence,
        "recommendation": recommendation,
        **extra,
    }


_ms = fmt_ms


def _stacks(runs: list[RunView]) -> list[str]:
    return sorted({r.stack for r in runs})


def _first_software(runs: list[RunView]) -> Software:
    for run in runs:
        if run.software.known:
            return run.software
    return runs[0].software if runs else Software(*([None] * 10))


def _estimates(ctx: Context) -> list[RooflineEstimate]:
    return estimate_context(ctx)


def _roofline_lines(ctx: Context, runs: list[RunView]) -> list[str]:
    """'at most 2.6x from fp16 here; measured 0.62x' for the runs' stacks, where the GPU is in the table."""
    stacks = {r.stack for r in runs}
    lines = []
    for e in _estimates(ctx):
        if e.stack in stacks and e.predicted_speedup is not None:
            measured = f"; measured {e.measured_speedup:.2f}x" if e.measured_speedup else ""
            lines.append(f"best case for this model on the {e.gpu_name}: at most "
                         f"{e.predicted_speedup:.1f}x from "
                         f"{e.precision} ({_ms(e.fp32_ms)} -> {_ms(e.fp16_ms)} per step, {e.bound}-bound)"
                         f"{measured}")
    return lines


# --- fp16_faster ---


def rule_fp16_faster(ctx: Context) -> Finding | None:
    faster = [p for p in ctx.pairs if p.faster]
    if not faster:
        return None
    best = max(faster, key=lambda p: p.speedup)
    evidence = [p.describe() for p in sorted(faster, key=lambda p: -p.speedup)]
    for est in _estimates(ctx):
        if (
            est.predicted_speedup
            and est.measured_speedup
            and est.stack == best.reduced.stack
            and est.precision == best.reduced.precision
        ):
            evidence.append(f"best case on this GPU: {est.predicted_speedup:.1f}x ({est.note})")
    spread_known = any(r.p10_ms and r.p90_ms for p in faster for r in (p.fp32, p.reduced))
    recommendation = (
        f"Keep {best.reduced.precision} on {best.reduced.stack}: it is {best.speedup:.2f}x faster here."
    )
    if best.reduced.precision == "float16":
        recommendation += (
            " Pure float16 (floatx) risks the numerics of training; mixed_float16 keeps the speed "
            "with float32 weights. " + mixed_precision_code(best.reduced.software)
        )
    return make_finding(
        "fp16_faster",
        f"{best.reduced.precision} is {best.speedup:.2f}x faster than float32",
        "info",
        0.9 if spread_known else 0.8,
        evidence,
        recommendation,
        speedup=round(best.speedup, 3),
        precision=best.reduced.precision,
        stacks=_stacks([p.reduced for p in faster]),
    )


# --- hardware ---


def rule_no_fast_fp16_hardware(ctx: Context) -> Finding | None:
    reduced = ctx.reduced_runs()
    evidence: list[str] = []
    confidence = 0.0
    runs: list[RunView] = []
    recs: list[str] = []
    cpu_runs = [r for r in reduced if r.device == "cpu"]
    if cpu_runs and ctx.cpu.native_fp16 is not True:
        cpu = ctx.cpu
        model = cpu.model or "this CPU"
        if cpu.flags is None:
            evidence.append(
                f"{model}: CPU flags not reported; most x86 CPUs lack AVX512-FP16/AMX-FP16, so "
                "frameworks convert fp16 to fp32 for each operation"
            )
            confidence = max(confidence, 0.6)
        else:
            bf16 = cpu.bf16_flags
            evidence.append(
                f"{model}: no avx512_fp16 / amx_fp16 among its flags"
                + (f" (it has {', '.join(bf16)}: bfloat16 is its fast 16-bit type)" if bf16 else "")
                + "; every fp16 operation is converted to fp32 and back"
            )
            confidence = max(confidence, 0.9)
        runs += cpu_runs
        rec = "On this CPU train in float32."
        if cpu.bf16_flags:
            rec += (
                " Its bfloat16 support may pay off instead (Keras 3 / tf.keras >= 2.4; measure it):\n"
                "    keras.mixed_precision.set_dtype_policy('mixed_bfloat16')\n"
            )
        recs.append(rec)
    gpu_seen: set[str] = set()
    for run in reduced:
        gpu = ctx.gpu_for(run)
        if gpu is None or not gpu.known or gpu.label in gpu_seen:
            continue
        ratio = gpu.fp16_ratio
        if ratio is not None and ratio >= 1:
            continue
        gpu_seen.add(gpu.label)
        if ratio is None:
            evidence.append(
                f"{gpu.label}: no native fp16 arithmetic below compute capability 5.3 (CUDA C "
                "Programming Guide, arithmetic instruction throughput: N/A); fp16 is a storage format "
                "here and every operation runs in fp32"
            )
        else:
            m = gpu.model
            peaks = f" ({m.fp16_tflops} vs {m.fp32_tflops} TFLOPS)" if m and m.fp16_tflops else ""
            evidence.append(
                f"{gpu.label}: fp16 arithmetic runs at 1/{round(1 / ratio)} of fp32{peaks} (CUDA C "
                "Programming Guide); libraries fall back to fp32 math on fp16 data"
            )
        confidence = max(confidence, 0.92 if gpu.model else 0.85)
        runs += [r for r in reduced if ctx.gpu_for(r) is gpu]
        recs.append(
            f"On the {gpu.reported_name or 'GPU'} train in float32: fp16 can only save memory and bandwidth "
            "here. fp16 speed needs Tensor Cores: compute capability 7.0 or later (V100, T4, RTX 20xx and "
            "newer, A100, H100)."
        )
    if not evidence:
        return None
    pairs = [p for p in ctx.pairs if p.reduced in runs]
    evidence += [p.describe() for p in pairs]
    severity = (
        "critical" if any(p.slower for p in pairs) else "info" if any(p.faster for p in pairs) else "warning"
    )
    return make_finding(
        "no_fast_fp16_hardware",
        "This device computes fp16 no faster than fp32",
        severity,
        confidence,
        evidence,
        " ".join(recs),
        stacks=_stacks(runs),
    )


def rule_no_tensor_cores(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    seen: set[str] = set()
    tf_fp32_compute_noted = False
    for run in ctx.reduced_runs():
        gpu = ctx.gpu_for(run)
        if gpu is None or gpu.label in seen or gpu.tensor_cores is not False:
            continue
        ratio = gpu.fp16_ratio
        if ratio is None or ratio < 1:
            continue  # that is no_fast_fp16_hardware
        seen.add(gpu.label)
        m = gpu.model
        detail = (
            f"fp16 {m.fp16_tflops} TFLOPS vs fp32 {m.fp32_tflops} TFLOPS, {m.memory_bandwidth_gbs:.0f} GB/s"
            if m and m.fp16_tflops
            else f"fp16 at {ratio:.0f}x fp32"
        )
        line = f"{gpu.label}: fast fp16 arithmetic but no Tensor Cores ({detail})"
        if gpu.compute_capability and gpu.compute_capability.startswith("7.5"):
            line += (
                "; TensorFlow's mixed precision check only warns below compute capability 7.0, so it does "
                "not flag this card"
            )
        evidence.append(line)
        confidence = max(confidence, 0.9 if m else 0.8)
        runs += [r for r in ctx.reduced_runs() if ctx.gpu_for(r) is gpu]
        if any(r.software.tensorflow for r in runs) and not tf_fp32_compute_noted:
            tf_fp32_compute_noted = True
            evidence.append(
                "TensorFlow computes fp16 convolutions and matmuls with fp32 arithmetic unless "
                f"{' / '.join(v + '=0' for v in TF_FP16_FP32_COMPUTE_ENV)} are set, so this card's 2x fp16 "
                "rate goes unused by default"
            )
    if not evidence:
        return None
    pairs = [p for p in ctx.pairs if p.reduced in runs]
    evidence += [p.describe() for p in pairs]
    best = [e for e in _estimates(ctx) if e.predicted_speedup and any(e.stack == r.stack for r in runs)]
    gain = ""
    if best:
        top = max(best, key=lambda e: e.predicted_speedup or 0)
        evidence.append(f"best case for this model here: {top.predicted_speedup:.2f}x ({top.bound}-bound)")
        gain = f" Expect at most {top.predicted_speedup:.1f}x from fp16 on this card."
    severity = "critical" if any(p.slower for p in pairs) else "warning"
    return make_finding(
        "no_tensor_cores",
        "Fast fp16 arithmetic, but no Tensor Cores",
        severity,
        confidence,
        evidence,
        "Without Tensor Cores fp16 gains stay bandwidth-bound (at most about 2x, often less after casts); "
        "keep float32 unless memory is the limit, or move to a GPU with Tensor Cores (RTX 20xx and newer, "
        "T4, V100, A100)." + gain + (
            " On TensorFlow, let fp16 math run at the fp16 rate before measuring again:\n"
            f"    export {' '.join(v + '=0' for v in TF_FP16_FP32_COMPUTE_ENV)}\n"
            if tf_fp32_compute_noted else ""),
        stacks=_stacks(runs),
    )


def _channel_fix(sw: Software, in_channels: int | None, share: float) -> str:
    """Pad the input channels to a multiple of 8, in the stack's own code."""
    text = (f"Layers whose channel counts are not multiples of 8 hold {share:.0%} of the model's arithmetic. "
            "Give Conv/Dense layers unit counts in multiples of 8")
    if not in_channels or in_channels % 8 == 0:
        return text + "."
    extra = -in_channels % 8
    text += f", and zero-pad the {in_channels}-channel input to {in_channels + extra} channels (zeros change "
    if sw.framework == "torch":
        return text + "no result):\n" + f"    x = torch.nn.functional.pad(x, (0, 0, 0, 0, 0, {extra}))  # NCHW\n"
    return (text + "no result), before the first convolution:\n"
            f"    x = keras.layers.Lambda(lambda t: tf.pad(t, [[0, 0], [0, 0], [0, 0], [0, {extra}]]))(inputs)\n")


def rule_tensor_cores_not_eligible(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    hard = False
    share_max = 0.0
    first_bad_in: int | None = None
    seen: set[tuple[str, str | None]] = set()
    for run in ctx.reduced_runs():
        gpu = ctx.gpu_for(run)
        if gpu is None or gpu.tensor_cores is not True or run.model is None:
            continue
        key = (run.stack, run.software.cudnn)
        if key in seen:
            runs.append(run)
            continue
        seen.add(key)
        cudnn = run.software.cudnn
        strict = version_at_least(cudnn, CUDNN_RELAXED_CHANNELS) is False
        bad = [la for la in run.model.layers if la.is_matmul and la.channel_multiple_of_8 is False]
        if not bad:
            continue
        total = run.model.flops_per_example or 1.0
        runs.append(run)
        share = 0.0
        for layer in bad:
            eligible, inflation = tensor_core_eligible(layer, cudnn)
            frac = layer.flops_per_example / total
            share += frac
            if frac < 0.001 and len(bad) > 1:
                continue
            how = (
                f"cuDNN {cudnn} needs multiples of 8 for Tensor Cores (relaxed in {CUDNN_RELAXED_CHANNELS})"
                if strict
                else f"padded to multiples of 8 ({inflation:.1f}x the arithmetic)"
                if eligible
                else "channels not multiples of 8 keep it off the fast Tensor Core kernels"
            )
            evidence.append(
                f"{run.stack}: {layer.type} {layer.in_channels}->{layer.out_channels} channels: "
                f"{fmt_flops(layer.flops_per_example)} per example, {frac:.1%} of the model; {how}"
            )
        share_max = max(share_max, share)
        hard = hard or strict
        first_bad_in = first_bad_in or next(
            (la.in_channels for la in bad if la.type.lower().startswith("conv") and la.in_channels), None)
        confidence = max(
            confidence, (0.85 if run.model.source == "run" else 0.8) - (0.1 if cudnn is None else 0)
        )
    if not evidence:
        return None
    evidence += _roofline_lines(ctx, runs)
    severity = "warning" if hard or share_max >= 0.1 else "info"
    sw = _first_software(runs)
    fix = _channel_fix(sw, first_bad_in, share_max)
    if version_at_least(sw.cudnn, CUDNN_RELAXED_CHANNELS) is False:
        fix += (
            f" cuDNN {sw.cudnn} is the bigger limit: cuDNN >= {CUDNN_RELAXED_CHANNELS} pads automatically "
            f"(and >= {CUDNN_AUTO_CONVERSION} converts fp32 data) - that comes with {upgrade_target(sw)}."
        )
    return make_finding(
        "tensor_cores_not_eligible",
        "Layers whose shapes keep them off Tensor Cores",
        severity,
        confidence,
        evidence,
        fix,
        stacks=_stacks(runs),
        ineligible_flops_share=round(share_max, 3),
    )


# --- host side ---


def _input_advice(sw: Software) -> str:
    fw = sw.framework
    if fw == "keras2":
        return (
            f"Produce batches in parallel (Keras {sw.keras or '2.x'}):\n"
            "    model.fit_generator(train_generator, steps_per_epoch=..., epochs=...,\n"
            "                        workers=4, use_multiprocessing=True, max_queue_size=20)\n"
        )
    if fw in ("tf.keras", "tensorflow", "keras3"):
        return (
            "Use a parallel, prefetching tf.data pipeline instead of ImageDataGenerator:\n"
            "    ds = keras.utils.image_dataset_from_directory(train_dir, image_size=(h, w), batch_size=b)\n"
            "    ds = ds.map(lambda x, y: (x / 255.0, y), num_parallel_calls=tf.data.AUTOTUNE)\n"
            "    ds = ds.prefetch(tf.data.AUTOTUNE)\n"
        )
    if fw == "torch":
        return (
            "Load batches in worker processes:\n"
            "    loader = DataLoader(dataset, batch_size=b, num_workers=4, pin_memory=True,\n"
            "                        persistent_workers=True)\n"
        )
    return "Produce batches in parallel and ahead of the training step (several workers, prefetching)."


def _inferred_input_bound(ctx: Context) -> tuple[list[str], list[RunView]]:
    """Without input timings: the seed script reads and augments every batch from disk on one worker
    (fit_generator's default); if the GPU's best case is a small part of the float32 step, that is where
    the rest of the step most likely goes."""
    estimates = {(e.stack, e.device): e for e in _estimates(ctx)}
    for pair in ctx.pairs:
        f = pair.fp32
        e = estimates.get((f.stack, f.device))
        if (f.workload_name == "seed_cnn" and f.variant == "original" and f.on_gpu and f.input_ms is None
                and e and e.fp32_ms and f.step_ms and e.fp32_ms < 0.25 * f.step_ms):
            return [f"{f.stack}: the GPU's best case for the float32 step is {_ms(e.fp32_ms)} of the measured "
                    f"{_ms(f.step_ms)}; the script decodes, resizes and flips every batch of "
                    f"{f.batch_size or 128} images on the host, on one worker by default (host input time "
                    "not measured)"], [f, pair.reduced]
    return [], []


def rule_input_pipeline_bound(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    for run in ctx.ok_runs():
        if run.input_ms is None or run.step_ms is None:
            continue
        share = run.input_ms / run.step_ms
        if share >= 0.5:
            evidence.append(
                f"{run.label}: the host needs {_ms(run.input_ms)} to produce a batch, "
                f"{share:.0%} of the {_ms(run.step_ms)} step"
            )
            runs.append(run)
            confidence = max(confidence, 0.85)
    by_key = {(r.stack, r.precision, r.device, r.variant): r for r in ctx.ok_runs()}
    for (stack, precision, device, variant), run in by_key.items():
        if variant != "original":
            continue
        synthetic = by_key.get((stack, precision, device, "synthetic_input"))
        if synthetic is None or run.step_ms is None or synthetic.step_ms is None:
            continue
        if run.step_ms > 1.3 * synthetic.step_ms and run.step_ms - synthetic.step_ms > 5:
            evidence.append(
                f"{stack} / {precision}: {_ms(run.step_ms)} per step reading images vs "
                f"{_ms(synthetic.step_ms)} with synthetic in-memory input"
            )
            runs.append(run)
            confidence = max(confidence, 0.9)
    if not evidence:
        evidence, runs = _inferred_input_bound(ctx)
        confidence = 0.5
    if not evidence:
        return None
    sw = _first_software(runs)
    gains = [r.step_ms - s.step_ms for r in runs for s in ctx.ok_runs()
             if s.variant == "synthetic_input" and r.variant == "original" and (s.stack, s.precision, s.device)
             == (r.stack, r.precision, r.device) and r.step_ms and s.step_ms]
    advice = _input_advice(sw)
    if gains:
        advice += f"Expected gain: up to {_ms(max(gains))} per step (measured against in-memory input)."
    return make_finding(
        "input_pipeline_bound",
        "Producing batches on the host dominates the step",
        "warning",
        confidence,
        evidence,
        "Precision cannot speed up this part. " + advice,
        stacks=_stacks(runs),
    )


def _generator_in_floatx(sw: Software) -> tuple[bool | None, str]:
    """Does the seed script's ImageDataGenerator build float16 batches when floatx is float16?"""
    old = is_old_keras_generator(sw)
    if old:
        return True, (
            f"Keras {sw.keras}'s ImageDataGenerator builds each batch in K.floatx() = float16 and "
            "rescales it in place (x *= rescale)"
        )
    if sw.framework == "keras3":
        return True, (
            f"Keras {sw.keras or '3'}'s legacy ImageDataGenerator yields batches in floatx = float16"
        )
    if sw.framework == "tf.keras" and sw.keras_api == "tf_keras":
        return True, "tf_keras's ImageDataGenerator defaults its dtype to floatx = float16"
    if sw.keras_preprocessing:
        fixed = has_feature("kp_ignores_dtype", sw.keras_preprocessing)
        if fixed is False and version_at_least(sw.keras_preprocessing, "1.1.1"):
            return (
                True,
                f"keras_preprocessing {sw.keras_preprocessing} builds batches in the requested float16",
            )
        if fixed:
            return False, f"keras_preprocessing {sw.keras_preprocessing} ignores the dtype and yields float32"
    if sw.framework == "keras2" and version_at_least(sw.keras, KERAS_USES_KERAS_PREPROCESSING_SINCE):
        return (
            False,
            f"Keras {sw.keras} delegates to keras_preprocessing, which yielded float32 batches until 1.1.1",
        )
    return None, ""


def _host_gain(ctx: Context, runs: list[RunView]) -> str | None:
    """The measured host time float16 batches add per step, if both input times are known."""
    for pair in ctx.pairs:
        if pair.reduced in runs and pair.reduced.input_ms and pair.fp32.input_ms:
            return f"up to {_ms(pair.reduced.input_ms - pair.fp32.input_ms)} per step (the host's float16 excess)"
    return None


def rule_host_fp16_emulation(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    measured_no = False
    major = False
    for pair in ctx.pairs:
        r, f = pair.reduced, pair.fp32
        if r.input_ms is None or f.input_ms is None:
            continue
        apart = bool(r.input_p10_ms and f.input_p90_ms and r.input_p10_ms > f.input_p90_ms)
        if r.input_ms - f.input_ms > 1 and (r.input_ms > 1.3 * f.input_ms or (apart and r.input_ms > 1.1 * f.input_ms)):
            excess = r.input_ms - f.input_ms
            line = (f"{r.stack}: the host spends {_ms(r.input_ms)} per batch building {r.precision} "
                    f"images vs {_ms(f.input_ms)} in float32")
            if r.step_ms:
                line += f"; the {_ms(excess)} excess is {excess / r.step_ms:.1%} of the {_ms(r.step_ms)} step"
                major = major or excess >= 0.05 * r.step_ms
            evidence.append(line)
            runs.append(r)
            confidence = max(confidence, 0.9 if r.input_ms > 1.3 * f.input_ms else 0.75)
        elif r.precision == "float16":
            measured_no = True
    if not evidence and not measured_no:
        for run in ctx.reduced_runs():
            if (
                run.precision != "float16"
                or not run.on_gpu
                or run.variant != "original"
                or run.workload_name != "seed_cnn"
                or run.input_ms is not None
            ):
                continue
            in_floatx, why = _generator_in_floatx(run.software)
            if not in_floatx:
                continue
            measured_batch = int(SEED_HOST_BATCH_MS["batch_size"])
            line = (
                f"{run.stack}: {why}; numpy has no fast float16 arithmetic on x86 ({NUMPY_FP16_ISSUES[0]}). "
                f"For this script a 2-core x86 host was measured at about {SEED_HOST_BATCH_MS['float16']:.0f} ms "
                f"per batch of {measured_batch} in float16 vs {SEED_HOST_BATCH_MS['float32']:.0f} ms in float32 "
                "(decode excluded"
            )
            batch = run.batch_size or measured_batch
            if batch != measured_batch:  # a scaled figure is said to be one, not passed off as measured
                scale = batch / measured_batch
                line += (f"; about {SEED_HOST_BATCH_MS['float16'] * scale:.0f} vs "
                         f"{SEED_HOST_BATCH_MS['float32'] * scale:.0f} ms scaled to this run's batch of {batch}")
            line += ")"
            grown = next((p for p in ctx.pairs if p.reduced is run), None)
            major = True
            if grown and grown.slower and grown.fp32.step_ms and run.step_ms:
                line += f"; the measured step grew by {_ms(run.step_ms - grown.fp32.step_ms)}"
            evidence.append(line)
            runs.append(run)
            confidence = max(confidence, 0.65)
            for e in _estimates(ctx):
                if e.stack == run.stack and e.fp32_ms and grown and grown.fp32.step_ms:
                    evidence.append(f"the GPU's best case for the float32 step is {_ms(e.fp32_ms)} of the "
                                    f"measured "
                                    f"{_ms(grown.fp32.step_ms)}: most of the step is spent outside GPU "
                                    f"arithmetic")
                    break
    if not evidence:
        return None
    sw = _first_software(runs)
    fw = sw.framework
    gain = _host_gain(ctx, runs)
    if fw == "keras2" and is_old_keras_generator(sw):
        rec = (
            f"Keras {sw.keras}'s ImageDataGenerator has no dtype argument, so keep floatx float32 (the batches "
            "then stay float32) and get fp16 speed from mixed precision on a newer stack instead; meanwhile "
            "build batches in parallel:\n"
            "    model.fit_generator(train_generator, ..., workers=4, use_multiprocessing=True)\n"
        )
    elif fw in ("keras3", "tf.keras", "keras2"):
        rec = (
            "Build batches in float32 whatever floatx says, and let the model cast on the device "
            "(better still: floatx float32 and the mixed_float16 policy):\n"
            "    datagen = ImageDataGenerator(rescale=1./255, horizontal_flip=True, vertical_flip=True,\n"
            "                                 dtype='float32')\n"
        )
    else:
        rec = "Keep host-side preprocessing in float32 (or uint8) and cast to float16 on the device."
    if gain:
        rec += f"Expected gain: {gain}."
    return make_finding(
        "host_fp16_emulation",
        "Host-side preprocessing runs in float16, slower than in float32",
        "warning" if major else "info",
        confidence,
        evidence,
        rec,
        stacks=_stacks(runs),
    )


# --- precision mechanics ---


def rule_cast_overhead(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    by_cell = {
        (p.reduced.stack, p.reduced.device, p.reduced.variant, p.reduced.precision): p for p in ctx.pairs
    }
    worse_than_fp32 = False
    for (stack, device, variant, precision), pair in by_cell.items():
        if precision != "mixed_float16":
            continue
        pure = by_cell.get((stack, device, variant, "float16"))
        mixed = pair.reduced
        if pure is None or mixed.step_ms is None or pure.reduced.step_ms is None:
            continue
        # At least 10 %, and beyond the two runs' measured spread: noise is not a cost of the casts.
        band = max(0.1, noise_band((mixed.step_ms, mixed.p10_ms, mixed.p90_ms),
                                   (pure.reduced.step_ms, pure.reduced.p10_ms, pure.reduced.p90_ms)))
        if mixed.step_ms > (1 + band) * pure.reduced.step_ms:
            evidence.append(
                f"{stack}: mixed_float16 step {_ms(mixed.step_ms)} vs float16 "
                f"{_ms(pure.reduced.step_ms)}: the float32->float16 casts of weights and activations "
                f"and the loss scaling cost {_ms(mixed.step_ms - pure.reduced.step_ms)} per step"
            )
            runs.append(mixed)
            gpu = ctx.gpu_for(mixed)
            fast = gpu is not None and (gpu.tensor_cores or (gpu.fp16_ratio or 0) >= 2)
            # Only where fp16 could win do the casts eat a gain; elsewhere they only add to a loss.
            worse_than_fp32 = worse_than_fp32 or (pair.slower and fast)
    if not evidence:
        return None
    return make_finding(
        "cast_overhead",
        "Casts inserted by mixed precision eat the gain",
        "warning" if worse_than_fp32 else "info",
        0.6,
        evidence,
        "Casts cost the same whatever the layer size, so give each step more work (a larger batch) and let a "
        "compiler fuse the casts into their neighbours:\n" + _fusion_code(_first_software(runs)),
        stacks=_stacks(runs),
    )


def _fusion_code(sw: Software) -> str:
    """How to fuse small ops (casts, launches) on this stack, as indented code lines."""
    if sw.framework == "torch":
        if version_at_least(sw.torch, "2.0") is False:
            return "    # PyTorch < 2.0: capture the step in a CUDA graph (torch.cuda.graphs), or upgrade for:\n" \
                   "    model = torch.compile(model)\n"
        return "    model = torch.compile(model)\n"
    if sw.framework in ("tf.keras", "keras3"):
        return "    model.compile(optimizer, loss, jit_compile=True, steps_per_execution=32)\n"
    if sw.framework == "jax":
        return "    train_step = jax.jit(train_step)  # one fused program per step\n"
    return "    # TF 1.x: enable XLA auto-clustering\n    os.environ['TF_XLA_FLAGS'] = '--tf_xla_auto_jit=2'\n"


def rule_small_model_overhead(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    estimates = {(e.stack, e.device, e.precision): e for e in _estimates(ctx)}
    for pair in ctx.pairs:
        f = pair.fp32
        if not f.on_gpu or f.step_ms is None or f.variant != "original" and f.variant != "synthetic_input":
            continue
        if f.input_ms is not None and f.input_ms >= 0.5 * f.step_ms:
            continue  # the host, not launch overhead, fills the step
        est = estimates.get((pair.reduced.stack, pair.reduced.device, pair.reduced.precision))
        if est and est.fp32_ms is not None and est.fp32_ms < 0.2 * f.step_ms and f.step_ms < 50:
            evidence.append(
                f"{f.stack}: float32 step {_ms(f.step_ms)} where the GPU's best case is "
                f"{_ms(est.fp32_ms)} (fp16 best case {_ms(est.fp16_ms)}): launch and framework "
                "overhead fill the step, not arithmetic"
            )
            confidence = max(confidence, 0.8)
            runs.append(pair.reduced)
        elif (est is None or est.fp32_ms is None) and f.step_ms < 10:
            params = f.model.params if f.model else None
            evidence.append(
                f"{f.stack}: a float32 step takes only {_ms(f.step_ms)} on the GPU"
                + (f" for {params:,} parameters" if params else "")
                + ": too little work per step for fp16 arithmetic to matter"
            )
            confidence = max(confidence, 0.6)
            runs.append(pair.reduced)
        elif f.gpu_util_pct is not None and f.gpu_util_pct < 40 and f.step_ms < 50:
            evidence.append(
                f"{f.stack}: GPU busy only {f.gpu_util_pct:.0f}% of a {_ms(f.step_ms)} float32 step"
            )
            confidence = max(confidence, 0.6)
            runs.append(pair.reduced)
    if not evidence:
        return None
    evidence += [p.describe() for p in ctx.pairs if p.reduced in runs]
    return make_finding(
        "small_model_overhead",
        "Too little work per step: launch and framework overhead dominate",
        "warning",
        confidence,
        evidence,
        "fp16 speeds up arithmetic, and this step has almost none: raise the work per step (a larger batch or "
        "model) before judging fp16, and cut per-op launches:\n" + _fusion_code(_first_software(runs)),
        stacks=_stacks(runs),
    )


def _old_reasons(sw: Software, gpu: GpuFacts | None) -> list[str]:
    reasons = []
    if sw.tensorflow and version_at_least(sw.tensorflow, "1.14") is False:
        reasons.append(
            f"TensorFlow {sw.tensorflow} predates 1.14: no automatic mixed precision"
            + (" and no fp16 NHWC Tensor Core path (channels_last fp16 convolutions are transposed to NCHW "
               "and back)" if gpu and gpu.tensor_cores else "")
        )
    elif sw.tensorflow and version_at_least(sw.tensorflow, "2.1") is False and sw.framework != "keras3":
        reasons.append(
            f"TensorFlow {sw.tensorflow} has only the graph rewrite, no Keras mixed precision policy (TF 2.1)"
        )
    if sw.framework == "keras2":
        reasons.append(
            f"multi-backend Keras {sw.keras} has no mixed precision API: floatx=float16 is its only "
            "fp16 switch"
        )
    if sw.cudnn and gpu and gpu.tensor_cores:
        if version_at_least(sw.cudnn, CUDNN_AUTO_CONVERSION) is False:
            reasons.append(
                f"cuDNN {sw.cudnn} uses Tensor Cores only for fp16 data with channel counts in multiples "
                f"of 8 and no automatic conversion ({CUDNN_AUTO_CONVERSION}) or padding "
                f"({CUDNN_RELAXED_CHANNELS})"
            )
        elif version_at_least(sw.cudnn, CUDNN_RELAXED_CHANNELS) is False:
            reasons.append(
                f"cuDNN {sw.cudnn} still needs channel counts in multiples of 8 ({CUDNN_RELAXED_CHANNELS} "
                "relaxed it)"
            )
    if sw.cuda and gpu and gpu.tensor_cores and version_at_least(sw.cuda, "9.0") is False:
        reasons.append(f"CUDA {sw.cuda} predates Tensor Cores (CUDA 9.0)")
    if sw.torch and has_feature("torch_amp", sw.torch) is False:
        reasons.append(f"PyTorch {sw.torch} predates native mixed precision (torch.cuda.amp, 1.6)")
    return reasons


def rule_old_stack(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    seen: set[str] = set()
    confidence = 0.0
    for run in ctx.runs:
        gpu = ctx.gpu_for(run)
        if not run.on_gpu or gpu is None:
            continue
        if not gpu.tensor_cores and not (gpu.fp16_ratio and gpu.fp16_ratio >= 2):
            continue  # an upgrade cannot make this GPU fast in fp16
        label = run.software.label()
        if label in seen:
            runs.append(run)
            continue
        reasons = _old_reasons(run.software, gpu)
        if not reasons:
            continue
        seen.add(label)
        runs.append(run)
        evidence.append(f"{run.stack} ({label}): " + "; ".join(reasons))
        confidence = max(confidence, 0.85 if gpu.known else 0.6)
    if not evidence:
        return None
    roofline = _roofline_lines(ctx, runs)
    evidence += roofline
    if any(r.workload_name == "seed_cnn" and version_at_least(r.software.tensorflow, "1.13") is False
           for r in runs):
        evidence.append(
            "on a Titan V the same script trained slightly faster in float16 than float32 after an "
            "upgrade to CUDA 10.0, cuDNN 7.4.1, TensorFlow 1.13.1 and Keras 2.2.4 (public report of "
            "this question)"
        )
    sw = _first_software(runs)
    pairs = [p for p in ctx.pairs if p.reduced in runs]
    already_faster = bool(pairs) and all(p.faster for p in pairs)
    gain = ""
    best = [e for e in _estimates(ctx) if e.predicted_speedup and e.stack in {r.stack for r in runs}]
    if best:
        top = max(best, key=lambda e: e.predicted_speedup or 0)
        gain = (f"\nExpected gain: up to {top.predicted_speedup:.1f}x over float32 for this model on this GPU "
                "(roofline best case)")
        if top.measured_speedup:
            gain += f", against {top.measured_speedup:.2f}x measured now"
        gain += "."
    return make_finding(
        "old_stack",
        "This software stack lacks the fast fp16 paths",
        "info" if already_faster else "warning",
        confidence,
        evidence,
        f"Upgrade to {upgrade_target(sw)}. Then: {mixed_precision_code(upgraded(sw))}{gain}",
        stacks=_stacks(runs),
    )


KERAS_FRAMEWORKS = ("keras2", "tf.keras", "keras3")


def rule_pure_float16_floatx(ctx: Context) -> Finding | None:
    # floatx is Keras' switch; elsewhere a float16 run may be inference (no weights to update), so only a
    # run that trains (a loss was recorded) is called pure fp16 training.
    runs = [r for r in ctx.runs if r.precision == "float16" and (
        r.software.framework in KERAS_FRAMEWORKS or r.workload_name == "seed_cnn" or r.loss_first is not None)]
    if not runs:
        return None
    sw = _first_software(runs)
    fw = sw.framework
    if fw == "torch":
        how = "float16 in PyTorch (model.half()) keeps weights, gradients and optimizer state in fp16"
    elif fw == "jax":
        how = "float16 arrays in JAX keep parameters, gradients and optimizer state in fp16"
    elif fw in ("keras2", "tf.keras", "keras3"):
        how = "precision float16 sets Keras floatx, so weights, gradients and optimizer state are all fp16"
    else:
        how = "pure float16 keeps weights, gradients and optimizer state in fp16"
    epsilon = (f"; Keras' default epsilon 1e-07 is below fp16's smallest normal number "
               f"{FP16_SMALLEST_NORMAL:.1e}"
               if fw in ("keras2", "tf.keras", "keras3") else "")
    evidence = [
        f"{', '.join(_stacks(runs))}: {how}: weight updates smaller than 1/2048 of a weight round "
        f"away{epsilon}"
    ]
    pairs = [p for p in ctx.pairs if p.reduced in runs]
    evidence += [p.describe() for p in pairs]
    unstable = [r for r in runs if r.loss_nan]
    if unstable:
        evidence.append(f"loss became NaN/inf in {', '.join(r.label for r in unstable)}")
    mixed = [p for p in ctx.pairs if p.reduced.precision == "mixed_float16"]
    if mixed:
        evidence += [p.describe() for p in mixed]
    faster_only = bool(pairs) and all(p.faster for p in pairs)
    severity = "critical" if unstable else "info" if faster_only else "warning"
    return make_finding(
        "pure_float16_floatx",
        "floatx=float16 is pure fp16, not mixed precision" if fw in KERAS_FRAMEWORKS
        else "float16 training here is pure fp16, not mixed precision",
        severity,
        0.95,
        evidence,
        f"{keras_floatx_note(sw)} {mixed_precision_code(sw)}",
        stacks=_stacks(runs),
    )


def rule_numerics_unstable(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    for pair in ctx.pairs:
        r, f = pair.reduced, pair.fp32
        if r.loss_nan and not f.loss_nan:
            evidence.append(f"{r.label}: loss became NaN/inf; float32 stayed finite")
            confidence = max(confidence, 0.95)
            runs.append(r)
        elif (
            r.loss_first is not None
            and r.loss_last is not None
            and f.loss_first is not None
            and f.loss_last is not None
            and f.loss_last < 0.98 * f.loss_first
            and r.loss_last >= 0.995 * r.loss_first
        ):
            evidence.append(
                f"{r.label}: loss {r.loss_first:.4g} -> {r.loss_last:.4g} (not improving) while "
                f"float32 went {f.loss_first:.4g} -> {f.loss_last:.4g}"
            )
            confidence = max(confidence, 0.6)
            runs.append(r)
    for run in ctx.reduced_runs():
        if (
            run.status == "failed"
            and run.error
            and any(w in run.error.lower() for w in ("nan", "inf", "overflow"))
        ):
            evidence.append(f"{run.label} failed: {run.error[:160]}")
            confidence = max(confidence, 0.8)
            runs.append(run)
    if not evidence:
        return None
    sw = _first_software(runs)
    return make_finding(
        "numerics_unstable",
        "fp16 training is numerically unstable here",
        "critical",
        confidence,
        evidence,
        "Use mixed precision with loss scaling rather than pure fp16, and keep the output layer in float32. "
        + mixed_precision_code(sw),
        stacks=_stacks(runs),
    )


def rule_measurement_warmup(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    for run in ctx.ok_runs():
        if run.first_step_ms is None or run.step_ms is None:
            continue
        if run.first_step_ms >= 3 * run.step_ms and run.first_step_ms - run.step_ms >= 200:
            line = (
                f"{run.label}: first step {_ms(run.first_step_ms)} vs median {_ms(run.step_ms)} "
                f"({run.first_step_ms / run.step_ms:.1f}x: graph building, autotuning, compilation)"
            )
            steps = (run.images // run.batch_size if run.images and run.batch_size
                     else SEED_STEPS_PER_EPOCH if run.workload_name == "seed_cnn" else None)
            if steps and steps > 1:
                per_epoch = (run.first_step_ms + (steps - 1) * run.step_ms) / steps
                line += (
                    f"; with {steps} steps per epoch the first epoch reads {_ms(per_epoch)} per step, "
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
        stacks=_stacks(runs),
    )


def rule_tf32_baseline(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    seen: set[str] = set()
    for run in ctx.ok_runs():
        if run.precision != "float32":
            continue
        gpu = ctx.gpu_for(run)
        if gpu is None or not gpu.tf32 or not tf32_active(run, gpu):
            continue
        m = gpu.model
        if m and m.tensor_tflops and m.tensor_tflops / 2 < 1.5 * m.fp32_tflops:
            continue  # GeForce Ampere/Ada/Blackwell: TF32 Tensor Cores run no faster than the fp32 cores
        runs.append(run)
        if run.stack in seen:
            continue
        seen.add(run.stack)
        peaks = (
            f": TF32 Tensor Cores ~{m.tensor_tflops / 2:.0f} TFLOPS vs {m.fp32_tflops} plain fp32, fp16 "
            f"{m.tensor_tflops} TFLOPS"
            if m and m.tensor_tflops
            else ""
        )
        who = run.software.label() if run.software.known else "the framework (software not reported)"
        evidence.append(f"{gpu.label}, {who}: float32 convolutions and matmuls run as TF32 by default{peaks}")
        confidence = max(confidence, (0.85 if run.software.known else 0.6) - (0 if m else 0.15))
    if not evidence:
        return None
    evidence += [p.describe() for p in ctx.pairs if p.fp32 in runs]
    sw = _first_software(runs)
    if sw.framework == "torch":
        code = "torch.backends.cuda.matmul.allow_tf32 = False; torch.backends.cudnn.allow_tf32 = False"
    elif sw.framework == "jax" or sw.keras_backend == "jax":
        code = "jax.config.update('jax_default_matmul_precision', 'highest')"
    else:
        code = "tf.config.experimental.enable_tensor_float_32_execution(False)"
    return make_finding(
        "tf32_baseline",
        "float32 already uses Tensor Cores (TF32)",
        "info",
        confidence,
        evidence,
        "fp16 is compared with a fast baseline here: on Tensor Cores fp16 is only about 2x TF32, and memory-bound "
        "layers gain nothing from TF32. To see the gain over true fp32, disable TF32 for the float32 run:\n"
        f"    {code}\n",
        stacks=_stacks(runs),
    )


def _first_tf_build_for(compute_capability: str | None) -> TfBuild | None:
    """The oldest TensorFlow release whose CUDA has machine code for this GPU's architecture."""
    cc = cc_tuple(compute_capability)
    if cc is None:
        return None
    for build in TF_BUILDS.values():
        kit = toolkit(build.cuda)
        if kit is None:
            continue
        low, top = cc_tuple(kit.min_compute_capability), cc_tuple(kit.max_compute_capability)
        if low and top and low <= cc and top[0] >= cc[0]:
            return build
    return None


INCOMPATIBLE_ERRORS = (
    "no kernel image",
    "no_binary_for_gpu",
    "driver version is insufficient",
    "unsupported gpu architecture",
    "compute capability",
    "cuda_error_unsupported_ptx_version",
)


def rule_stack_incompatible_gpu(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    seen: set[tuple[str, str]] = set()
    for run in ctx.runs:
        gpu = ctx.gpu_for(run)
        if run.status == "failed" and run.error and any(e in run.error.lower() for e in INCOMPATIBLE_ERRORS):
            evidence.append(f"{run.label} failed: {run.error[:200]}")
            confidence = max(confidence, 0.95)
            runs.append(run)
            continue
        if gpu is None or not run.on_gpu or not run.software.cuda:
            continue
        key = (run.stack, run.software.cuda)
        if key in seen:
            continue
        seen.add(key)
        kit = toolkit(run.software.cuda)
        cc = cc_tuple(gpu.compute_capability)
        if kit and cc:
            top = cc_tuple(kit.max_compute_capability)
            low = cc_tuple(kit.min_compute_capability)
            if top and cc[0] > top[0]:
                evidence.append(
                    f"{run.stack}: CUDA {run.software.cuda} has machine code up to compute capability "
                    f"{kit.max_compute_capability}; the {gpu.label} needs a toolkit that knows it "
                    "(PTX JIT at best: minutes of start-up, missing library kernels)"
                )
                confidence = max(confidence, 0.85)
                runs.append(run)
            elif low and cc < low:
                evidence.append(
                    f"{run.stack}: CUDA {run.software.cuda} no longer supports compute capability "
                    f"{gpu.compute_capability} (minimum {kit.min_compute_capability})"
                )
                confidence = max(confidence, 0.9)
                runs.append(run)
        need = version_tuple(min_driver_for(run.software.cuda))
        have = version_tuple(ctx.driver_for(run))
        if need and have and not ctx.windows and have < need:
            evidence.append(
                f"{run.stack}: CUDA {run.software.cuda} needs Linux driver >= "
                f"{min_driver_for(run.software.cuda)}; this host has {ctx.driver_for(run)}"
            )
            confidence = max(confidence, 0.9)
            runs.append(run)
    if not evidence:
        return None
    gpu = next((ctx.gpu_for(r) for r in runs if ctx.gpu_for(r)), None)
    rec = "Use a stack built for this GPU and driver."
    build = _first_tf_build_for(gpu.compute_capability if gpu else None)
    if gpu and build:
        rec += (
            f" TensorFlow {build.version} or later (CUDA {build.cuda}) targets compute capability "
            f"{gpu.compute_capability}; update the NVIDIA driver to what that CUDA needs."
        )
    return make_finding(
        "stack_incompatible_gpu",
        "The stack cannot run properly on this GPU or driver",
        "critical",
        confidence,
        evidence,
        rec,
        stacks=_stacks(runs),
    )


RULES: dict[str, Callable[[Context], Finding | None]] = {
    "no_fast_fp16_hardware": rule_no_fast_fp16_hardware,
    "no_tensor_cores": rule_no_tensor_cores,
    "tensor_cores_not_eligible": rule_tensor_cores_not_eligible,
    "input_pipeline_bound": rule_input_pipeline_bound,
    "host_fp16_emulation": rule_host_fp16_emulation,
    "cast_overhead": rule_cast_overhead,
    "small_model_overhead": rule_small_model_overhead,
    "old_stack": rule_old_stack,
    "pure_float16_floatx": rule_pure_float16_floatx,
    "numerics_unstable": rule_numerics_unstable,
    "measurement_warmup": rule_measurement_warmup,
    "tf32_baseline": rule_tf32_baseline,
    "stack_incompatible_gpu": rule_stack_incompatible_gpu,
    "fp16_faster": rule_fp16_faster,
}
