"""Hardware rules: what the device can and cannot do in 16 bits (fp16 units, Tensor Cores, TF32)."""

from __future__ import annotations

from fp16doctor.analysis.advice import (
    upgrade_target,
)
from fp16doctor.analysis.context import BF16, Context, Pair, RunView, Software
from fp16doctor.analysis.roofline import tensor_core_eligible, tf32_active
from fp16doctor.analysis.rules.common import (
    Finding,
    at,
    first_software,
    make_finding,
    roofline_estimates,
    roofline_lines,
    stacks_of,
    stated_causes,
    where_of,
)
from fp16doctor.analysis.values import fmt_flops, fmt_ms
from fp16doctor.knowledge.cpu import AMX_MIN_LINUX, CPU_MATRIX_FLAGS, CPU_SOURCES, cpu_matrix_16bit, linux_kernel
from fp16doctor.knowledge.cuda import (
    CUDNN_AUTO_CONVERSION,
    CUDNN_RELAXED_CHANNELS,
    TENSOR_CORE_CHANNEL_MULTIPLE,
    version_at_least,
)
from fp16doctor.knowledge.frameworks import (
    TF_FP16_FP32_COMPUTE_ENV,
)
from fp16doctor.knowledge.kernels import is_reference_impl
from fp16doctor.knowledge.stated import NOT_APPLIED_SIZE_SHARE

# A layer below this share of the model's arithmetic is not listed among those kept off Tensor Cores: a thousandth of
# the work cannot move the step.
TINY_LAYER_SHARE = 0.001
# Off-Tensor-Core layers holding a tenth of the arithmetic are a warning: at the Tensor Cores' ~8x over fp32 (V100:
# 125 vs 15.7 TFLOPS, volta whitepaper) such layers take about half of an otherwise Tensor-Core step.
NOT_ELIGIBLE_WARNING_SHARE = 0.1
# TF32 Tensor Cores run at half the fp16 Tensor Core rate (A100: 156 vs 312 TFLOPS, ga100 whitepaper); below 1.5x
# plain fp32 (GeForce Ampere/Ada/Blackwell) TF32 makes float32 no faster and is no baseline worth naming.
TF32_RATE_OF_FP16 = 0.5
TF32_MIN_GAIN = 1.5


def rule_no_fast_fp16_hardware(ctx: Context) -> Finding | None:
    reduced = ctx.reduced_runs()
    evidence: list[str] = []
    confidence = 0.0
    runs: list[RunView] = []
    recs: list[str] = []
    ideas: list[dict[str, str]] = []
    cpu_machines: dict[str, list[RunView]] = {}
    for run in reduced:
        if run.device == "cpu":
            cpu_machines.setdefault(run.machine, []).append(run)
    for cpu_runs in cpu_machines.values():
        cpu = ctx.cpu_for(cpu_runs[0])
        if cpu.native_fp16 is True:
            # fp16 instructions exist; whether the framework used them fast is for the measured ops to say.
            continue
        model = cpu.model or "this CPU"
        table = cpu.table
        if cpu.flags is None and table is not None:
            evidence.append(
                f"{model}: {table.name}, a generation without fp16 arithmetic ({CPU_SOURCES[table.source]}); "
                "frameworks convert fp16 to fp32 for each operation"
                + (" (bfloat16 is its fast 16-bit type)" if table.native_bf16 else "")
            )
            confidence = max(confidence, 0.85)
        elif cpu.flags is None:
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
        # What to train in here is the measured table's (the phraser's); bfloat16 units are an idea to measure.
        if cpu.native_bf16:
            units = ", ".join(f.upper() for f in cpu.bf16_flags) or (cpu.table.name if cpu.table else "BF16")
            ideas.append({"precision": "mixed_bfloat16", "machine": cpu_runs[0].machine,
                          "why": f"this CPU has {units}"})
    gpu_seen: set[str] = set()
    for run in reduced:
        gpu = ctx.gpu_for(run)
        if gpu is None or not gpu.known or gpu.label in gpu_seen or gpu.fp16_slow is not True:
            continue
        ratio = gpu.fp16_ratio
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
            f"On the {gpu.reported_name or 'GPU'} fp16 can only save memory and bandwidth. fp16 speed needs "
            "Tensor Cores: compute capability 7.0 or later (V100, T4, RTX 20xx and newer, A100, H100)."
        )
    if not evidence:
        return None
    pairs = [p for p in ctx.fp16_pairs() if p.reduced in runs]
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
        remedy_ideas=ideas,
        stacks=stacks_of(runs),
        where=where_of(runs),
    )


def rule_no_tensor_cores(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    seen: set[str] = set()
    tf_fp32_compute_noted = False
    for run in ctx.reduced_runs():
        gpu = ctx.gpu_for(run)
        # Tensor Cores are NVIDIA's: another vendor's GPU without matrix units is judged by its own family.
        if gpu is None or gpu.label in seen or gpu.tensor_cores is not False or not gpu.nvidia:
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
    pairs = [p for p in ctx.fp16_pairs() if p.reduced in runs]
    evidence += [p.describe() for p in pairs]
    best = [e for e in roofline_estimates(ctx)
            if e.predicted_speedup and any((e.machine, e.stack) == (r.machine, r.stack) for r in runs)]
    gain = ""
    if best:
        top = max(best, key=lambda e: e.predicted_speedup or 0)
        evidence.append(f"best case for this model here: {top.predicted_times()} ({top.bound}-bound)")
        gain = f" Expect at most {top.predicted_times()} from fp16 on this card."
    severity = "critical" if any(p.slower for p in pairs) else "warning"
    # No variant sets TensorFlow's fp32-compute switches: an untested idea without a command (docs/architecture.md).
    ideas = [{"precision": "mixed_float16", "setting": " ".join(v + "=0" for v in TF_FP16_FP32_COMPUTE_ENV),
              "why": "TensorFlow computes fp16 convolutions and matmuls in fp32 by default, so this card's 2x fp16 "
                     "rate goes unused",
              "no_command": "no fp16doctor variant sets these variables"}] if tf_fp32_compute_noted else []
    return make_finding(
        "no_tensor_cores",
        "Fast fp16 arithmetic, but no Tensor Cores",
        severity,
        confidence,
        evidence,
        "Without Tensor Cores fp16 gains stay bandwidth-bound (at most about 2x, often less after casts), so 16 "
        "bits mostly save memory here; Tensor Cores come with RTX 20xx and newer, T4, V100, A100." + gain,
        remedy_ideas=ideas,
        stacks=stacks_of(runs),
        where=where_of(runs),
    )


def _channel_fix(sw: Software, in_channels: int | None, share: float) -> tuple[str, str]:
    """Pad the input channels to a multiple of 8: the words, and the code in the stack's own API (shown only where
    the padded configuration did not measure slower than the prescription)."""
    text = (f"Layers whose channel counts are not multiples of 8 hold {share:.0%} of the model's arithmetic. "
            "Give Conv/Dense layers unit counts in multiples of 8")
    if not in_channels or in_channels % TENSOR_CORE_CHANNEL_MULTIPLE == 0:
        return text + ".", ""
    extra = -in_channels % TENSOR_CORE_CHANNEL_MULTIPLE
    text += (f", and zero-pad the {in_channels}-channel input to {in_channels + extra} channels (zeros change no "
             "result).")
    if sw.framework == "torch":
        return text, f"    x = torch.nn.functional.pad(x, (0, 0, 0, 0, 0, {extra}))  # NCHW"
    return text, f"    x = keras.layers.Lambda(lambda t: tf.pad(t, [[0, 0], [0, 0], [0, 0], [0, {extra}]]))(inputs)"


# A layer whose measured ops take under this share of every profiled step can change the step by at most that much:
# said in one line, never as a headline cause.
SMALL_CAUSE_SHARE = 0.05


def ran_on_tensor_cores(runs: list[RunView], layer: str) -> bool:
    """Whether a profile shows the layer's 16-bit kernels on Tensor Cores (a row of it with `tensor_cores: true`):
    then its shape kept it off nothing, whatever its channel count."""
    return any(i.layer == layer and i.tensor_cores is True for run in runs if run.ops is not None
               for i in run.ops.items)


def _measured_small(runs: list[RunView]) -> str | None:
    """"the layers kept off Tensor Cores (conv2d) took at most 2.0 ms of a 68 ms profiled step (3%) ..." where
    every run's profile measured the ineligible layers' ops at under SMALL_CAUSE_SHARE of its window; else None."""
    worst: tuple[float, float, float, RunView, list[str]] | None = None
    for run in runs:
        if run.model is None or run.ops is None or not run.ops.window_ms:
            continue  # not profiled (an experiment timed in the rounds): the others speak for the layers
        names = [la.name for la in run.model.layers if la.is_matmul and la.channel_multiple_of_8 is False and la.name
                 and not ran_on_tensor_cores(runs, la.name)]
        if not names:
            return None
        ms = sum(i.ms_per_step for i in run.ops.items if i.layer in names and not i.host_time)
        share = ms / run.ops.window_ms
        if share >= SMALL_CAUSE_SHARE:
            return None
        if worst is None or share > worst[1]:
            worst = (ms, share, run.ops.window_ms, run, names)
    if worst is None:
        return None
    ms, share, window_ms, run, names = worst
    return (f"{at(run)}the layers kept off Tensor Cores ({', '.join(names)}) took {fmt_ms(ms)} of the "
            f"{fmt_ms(window_ms)} profiled step ({share:.0%}; under {SMALL_CAUSE_SHARE:.0%} in every profiled "
            "16-bit run): padding them can change the step by at most that")


def rule_tensor_cores_not_eligible(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    hard = False
    share_max = 0.0
    first_bad_in: int | None = None
    seen: set[tuple[str, str, str | None]] = set()
    for run in ctx.reduced_runs():
        gpu = ctx.gpu_for(run)
        if gpu is None or gpu.tensor_cores is not True or run.model is None:
            continue
        key = (run.machine, run.stack, run.software.cudnn)
        if key in seen:
            runs.append(run)
            continue
        seen.add(key)
        cudnn = run.software.cudnn
        strict = version_at_least(cudnn, CUDNN_RELAXED_CHANNELS) is False
        bad = [la for la in run.model.layers if la.is_matmul and la.channel_multiple_of_8 is False]
        profiled = [r for r in ctx.reduced_runs() if r.machine == run.machine and r.stack == run.stack]
        on_tensor_cores = [la.name for la in bad if la.name and ran_on_tensor_cores(profiled, la.name)]
        bad = [la for la in bad if la.name not in on_tensor_cores]
        if on_tensor_cores:
            evidence.append(f"{at(run)}{', '.join(on_tensor_cores)} ran on Tensor Cores in the profile (its 16-bit "
                            "kernels' names say so) although its channels are not multiples of 8")
        if not bad:
            continue
        total = run.model.flops_per_example or 1.0
        runs.append(run)
        share = 0.0
        for layer in bad:
            eligible, inflation = tensor_core_eligible(layer, cudnn)
            frac = layer.flops_per_example / total
            share += frac
            if frac < TINY_LAYER_SHARE and len(bad) > 1:
                continue
            how = (
                f"cuDNN {cudnn} needs multiples of 8 for Tensor Cores (relaxed in {CUDNN_RELAXED_CHANNELS})"
                if strict
                else f"padded to multiples of 8 ({inflation:.1f}x the arithmetic)"
                if eligible
                else "channels not multiples of 8 keep it off the fast Tensor Core kernels"
            )
            evidence.append(
                f"{at(run)}{layer.type} {layer.in_channels}->{layer.out_channels} channels: "
                f"{fmt_flops(layer.flops_per_example)} per example, {frac:.1%} of the model; {how}"
            )
        share_max = max(share_max, share)
        hard = hard or strict
        first_bad_in = first_bad_in or next(
            (la.in_channels for la in bad if la.type.lower().startswith("conv") and la.in_channels), None)
        confidence = max(
            confidence, (0.85 if run.model.source == "run" else 0.8) - (0.1 if cudnn is None else 0)
        )
    if not evidence or confidence == 0.0:
        return None  # none, or every such layer ran on Tensor Cores in the profile: no shape kept one off
    small = _measured_small(runs)
    if small is not None and not hard:
        # Measured: the layers it is about are a sliver of every profiled step; one line says so.
        evidence = [small]
    else:
        evidence += roofline_lines(ctx, runs)
    severity = "warning" if (hard or share_max >= NOT_ELIGIBLE_WARNING_SHARE) and small is None else "info"
    sw = first_software(runs)
    fix, code = _channel_fix(sw, first_bad_in, share_max)
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
        remedy_code=code,
        stacks=stacks_of(runs),
        where=where_of(runs),
        ineligible_flops_share=round(share_max, 3),
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
        if m and m.tensor_tflops and m.tensor_tflops * TF32_RATE_OF_FP16 < TF32_MIN_GAIN * m.fp32_tflops:
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
    evidence += [p.describe() for p in ctx.fp16_pairs() if p.fp32 in runs]
    sw = first_software(runs)
    if sw.framework == "torch" or sw.keras_backend == "torch":
        code = "torch.backends.cuda.matmul.allow_tf32 = False; torch.backends.cudnn.allow_tf32 = False"
    elif sw.framework == "jax" or sw.keras_backend == "jax":
        code = "jax.config.update('jax_default_matmul_precision', 'highest')"
    else:
        code = "tf.config.experimental.enable_tensor_float_32_execution(False)"
    recommendation = ("fp16 is compared with a fast baseline here: on Tensor Cores fp16 is only about 2x TF32, and "
                      "memory-bound layers gain nothing from TF32. To see the gain over true fp32, disable TF32 for "
                      f"the float32 run:\n    {code}\n")
    measured = _tf32_off_measured(ctx, runs)
    if measured is not None:
        recommendation = measured  # the run it would ask for was measured: what it showed, not the request again
    return make_finding(
        "tf32_baseline",
        "float32 already uses Tensor Cores (TF32)",
        "info",
        confidence,
        evidence,
        recommendation,
        stacks=stacks_of(runs),
        where=where_of(runs),
    )




def _tf32_off_measured(ctx: Context, runs: list[RunView]) -> str | None:
    """Where float32 was measured with TF32 off too (the tf32_off experiment): what it did, and to keep TF32 unless it
    made float32 faster."""
    for base in runs:
        off = next((r for r in ctx.ok_runs() if r.precision == "float32" and r.variant == "tf32_off"
                    and r.machine == base.machine and r.stack == base.stack and base.variant == "original"), None)
        if off is None or off.step_ms is None or base.step_ms is None:
            continue
        interval = Pair(base, off).interval
        outcome = "not compared" if interval.refused else interval.outcome.replace("_", " ")
        # The two steps the comparison weighed (where it ran apart, float32's own process's), as its note says them.
        text = (f"Measured: float32 with TF32 off took {fmt_ms(interval.other_ms)} a step against "
                f"{fmt_ms(interval.fp32_ms)} with TF32 ({outcome}).")
        if interval.outcome == "slower" and not interval.refused:
            return text + " TF32 is no faster here; turning it off costs nothing measured."
        return text + " Keep TF32 on (the default): turning it off bought nothing measured, and a 16-bit run is " \
                      "compared with the float32 a user runs."
    return None


# ---------------------------------------------------------------------------------------- 16-bit paths
# A 16-bit run at least this many times slower than float32 where the device computes that type natively: more
# than the casts and loss scaling of mixed precision cost (the seed's mixed_float16 against float16 on one CPU:
# 12 %; TF 2.2 mixed_float16 on an RTX 2080 Ti: 1.33x, tests/data/cases), so the framework's kernel or layout
# path for that type (a naive, reference or fallback kernel) is the likely cause, not the hardware.
FRAMEWORK_PATH_MIN_SLOWDOWN = 2.0
# Two 16-bit types both native on a device (Ampere's Tensor Cores run float16 and bfloat16 at one dense rate, NVIDIA
# A100 datasheet: 312 TFLOPS each): a slowdown of one against the other beyond this, and beyond the interval, is the
# framework's path for that type (public cases: 1.15x for Triton's bfloat16 matmul, 1.40x for XLA's bfloat16
# batched matmul, tests/data/cases/ampere-a100-*).
PEER_PATH_MIN_SLOWDOWN = 1.1
# Where the tables do not list the device, the sibling's speed alone speaks for the hardware: less sure than a table.
UNLISTED_CONFIDENCE = 0.45
FRAMEWORK_PATH_CONFIDENCE = 0.6
# A 16-bit run that kept the GPU busy less than half as much as float32 did: the work left the GPU (ops placed on
# the host, a fallback path), which the device's arithmetic cannot explain.
UTIL_COLLAPSE_SHARE = 0.5


def _family(precision: str) -> str:
    return "bfloat16" if precision in BF16 else "float16"


def native_16bit(ctx: Context, run: RunView) -> bool | None:
    """Whether the run's device computes its 16-bit type natively, at least at float32's rate, by the tables
    (GPU architecture or family, CPU flags or model); None where they cannot say."""
    family = _family(run.precision)
    if run.on_gpu:
        gpu = ctx.gpu_for(run)
        return None if gpu is None else gpu.native_16bit[family]
    if run.device != "cpu":
        return None
    cpu = ctx.cpu_for(run)
    return cpu.native_bf16 if run.precision in BF16 else cpu.native_fp16


def matrix_units_favour(ctx: Context, run: RunView, other: RunView) -> str | None:
    """Where the device's matrix units take the other run's 16-bit type and not this run's (a CPU with AMX-BF16 and no
    AMX-FP16), the hardware itself runs the two at different rates: the words that say so; else None."""
    if run.device != "cpu" or other.device != "cpu":
        return None
    cpu = ctx.cpu_for(run)
    matrix = cpu_matrix_16bit(cpu.flags, cpu.table)
    mine, theirs = _family(run.precision), _family(other.precision)
    if matrix.get(mine) is not False or matrix.get(theirs) is not True:
        return None
    return (f"{_device_words(ctx, run)} has {CPU_MATRIX_FLAGS[theirs].upper()} and no "
            f"{CPU_MATRIX_FLAGS[mine].upper()}: its matrix tiles take {theirs} and {mine} runs on the vector units "
            f"({CPU_SOURCES['intel_amx']})")


def _device_words(ctx: Context, run: RunView) -> str:
    if run.on_gpu:
        gpu = ctx.gpu_for(run)
        return gpu.label if gpu is not None else "this GPU"
    cpu = ctx.cpu_for(run)
    table = cpu.table
    name = cpu.model or "this CPU"
    return f"{name} ({table.name})" if cpu.flags is None and table is not None else name


def _device_not_slower(pair: Pair) -> bool:
    """Both runs' device time was measured and the 16-bit run's is no larger than float32's: the framework's 16-bit
    path on the device is not what made the step slower."""
    reduced, fp32 = pair.reduced.device_time, pair.fp32.device_time
    return reduced is not None and fp32 is not None and reduced.busy_ms <= fp32.busy_ms


def _beyond_sibling(pair: Pair, siblings: list[Pair]) -> bool:
    """Whether the 16-bit run's step is at least PEER_PATH_MIN_SLOWDOWN times a sibling type's step on the same
    device and stack (that sibling no slower than float32)."""
    step = pair.step_ms
    if not step:
        return False
    return any(p.step_ms and step >= PEER_PATH_MIN_SLOWDOWN * p.step_ms for p in siblings)


def _sibling_words(ctx: Context, run: RunView, siblings: list[Pair]) -> str:
    other = min(siblings, key=lambda p: p.step_ms or 0.0)
    return (f"on the same device and stack {other.reduced.precision} is "
            f"{'faster' if other.faster else 'no slower'} than float32 ({fmt_ms(other.step_ms)} vs "
            f"{fmt_ms(other.fp32_step_ms)}), so {_device_words(ctx, run)} computes 16 bits at least that fast and the "
            f"framework's {run.precision} path is what is slow")


def _measured_slow_kernel(run: RunView) -> bool:
    """The run's ops name a reference kernel: slow_fp16_kernels says what was measured, no path is guessed."""
    return run.ops is not None and any(is_reference_impl(i.impl) for i in run.ops.items)


def rule_framework_16bit_path(ctx: Context) -> Finding | None:
    """A 16-bit run far slower than float32 on a device that computes that type natively, or while another 16-bit
    type on the same device and stack is not slower: the framework's path for that type, not the hardware."""
    evidence: list[str] = []
    runs: list[RunView] = []
    cells: dict[tuple[str, str, str, str], list[Pair]] = {}
    for pair in ctx.pairs:
        r = pair.reduced
        cells.setdefault((r.machine, r.stack, r.device, r.variant), []).append(pair)
    for pairs in cells.values():
        for pair in pairs:
            if not pair.slower or pair.ratio < FRAMEWORK_PATH_MIN_SLOWDOWN:
                continue
            run = pair.reduced
            if _device_not_slower(pair):
                continue  # measured: the device did no more work in 16 bits; the time went elsewhere (the host)
            if _measured_slow_kernel(run):
                continue  # measured: the ops name the slow kernel (slow_fp16_kernels), no "probably" of the path
            family = _family(run.precision)
            native = native_16bit(ctx, run)
            others = [p for p in pairs if _family(p.reduced.precision) != family and not p.slower]
            busy, busy32 = run.gpu_util_pct, pair.fp32.gpu_util_pct
            collapsed = busy is not None and busy32 is not None and busy < UTIL_COLLAPSE_SHARE * busy32
            if native is False or (native is not True and not others and not collapsed):
                continue
            line = f"{pair.describe()}"
            if collapsed:
                line += (f"; the GPU was busy {busy:.0f}% of the {run.precision} steps against {busy32:.0f}% in "
                         "float32: the work left the GPU (ops on the host, or a fallback path)")
            if native:
                line += (f"; {_device_words(ctx, run)} computes {family} natively, so the hardware does not "
                         f"make it {pair.ratio:.1f}x slower")
            for other in others:
                line += (f"; on the same device and stack {other.reduced.precision} is "
                         f"{'faster' if other.faster else 'no slower'} ({fmt_ms(other.step_ms)} vs "
                         f"float32 {fmt_ms(other.fp32_step_ms)})")
            evidence.append(line)
            runs.append(run)
        for pair in pairs:
            # Below FRAMEWORK_PATH_MIN_SLOWDOWN against float32, yet behind the other 16-bit type of the same device
            # and stack: the sibling rule, whatever the tables know of the device.
            run = pair.reduced
            if run in runs or not pair.slower or native_16bit(ctx, run) is False or _device_not_slower(pair) \
                    or _measured_slow_kernel(run):
                continue
            ahead = [p for p in pairs if _family(p.reduced.precision) != _family(run.precision) and not p.slower]
            if not _beyond_sibling(pair, ahead):
                continue
            evidence.append(f"{pair.describe()}; {_sibling_words(ctx, run, ahead)}")
            runs.append(run)
    confidence = 0.0
    unlisted = 0  # lines that rest on the sibling's speed alone, the tables silent on the device
    for pair in ctx.peer_pairs:
        # No float32 run: one 16-bit type slower than its sibling on the same device and stack. Where the tables
        # know the device computes both natively, the hardware is ruled out; where they do not list it, the
        # sibling's own speed shows the device computes 16 bits at least that fast.
        run, base = pair.reduced, pair.fp32
        if not pair.slower or pair.ratio < PEER_PATH_MIN_SLOWDOWN or _family(run.precision) == _family(base.precision):
            continue
        mine, theirs = native_16bit(ctx, run), native_16bit(ctx, base)
        if mine is False:
            continue  # the device lacks the slower type: bf16_unsupported / no_fast_fp16_hardware say so
        if matrix_units_favour(ctx, run, base):
            continue  # the hardware's matrix units take only the faster type: bf16_preferred says so
        if mine is True and theirs is True:
            evidence.append(f"{pair.describe()}; {_device_words(ctx, run)} computes both {_family(run.precision)} "
                            f"and {_family(base.precision)} natively, so the hardware does not make one "
                            f"{pair.ratio:.2f}x slower than the other")
        else:
            unlisted += 1
            evidence.append(f"{pair.describe()}; the device tables do not say whether {_device_words(ctx, run)} "
                            f"computes {_family(run.precision)} natively, but on the same device and stack "
                            f"{base.precision} ran {pair.ratio:.2f}x faster: the framework's {run.precision} path "
                            "(its kernels, conversions or a fallback) is what is slow")
        runs.append(run)
    if evidence:
        confidence = max(confidence, UNLISTED_CONFIDENCE if unlisted == len(evidence) else FRAMEWORK_PATH_CONFIDENCE)
    for pair, line, stated in stated_causes(ctx, "cpu_fallback"):
        # The document says ops of the 16-bit run fell back to the CPU: the framework's path, whatever the device.
        if pair.reduced not in runs:
            evidence.append(line)
            runs.append(pair.reduced)
            confidence = max(confidence, stated)
    if not evidence:
        return None
    precisions = sorted({r.precision for r in runs})
    return make_finding(
        "framework_16bit_path",
        f"The framework's {' / '.join(precisions)} path is slow here, not the hardware",
        "warning",
        confidence,
        evidence,
        "Not measured: the step times and the device tables point at the framework's kernels or layout for this "
        "16-bit type (a naive or fallback kernel, a layout transpose, a missing fast path in this release). "
        "`fp16doctor diagnose` on that machine records the ops and names the kernel; meanwhile use the 16-bit "
        "type or float32 that measured fastest here, and try a newer framework release.",
        stacks=stacks_of(runs),
        precisions=precisions,
    )


def rule_kernel_too_old(ctx: Context) -> Finding | None:
    """bfloat16 on a CPU with AMX under a Linux kernel older than AMX_MIN_LINUX: the tiles stay off."""
    evidence: list[str] = []
    runs: list[RunView] = []
    for run in ctx.runs:
        if run.device != "cpu" or run.precision not in BF16:
            continue
        cpu = ctx.cpu_for(run)
        table = cpu.table
        amx = (cpu.flags is not None and "amx_bf16" in cpu.flags) or (table is not None and table.amx)
        kernel = linux_kernel(run.software.os) or linux_kernel(ctx.machine_of(run).os)
        if not amx or version_at_least(kernel, AMX_MIN_LINUX) is not False:
            continue
        pair = next((p for p in ctx.pairs if p.reduced is run), None)
        line = (f"{cpu.model or 'this CPU'} has AMX-BF16, but Linux {kernel} predates AMX support (Linux "
                f">= {AMX_MIN_LINUX}: a process must ask the kernel for the tile state), so bfloat16 falls back to "
                "AVX-512" + (f"; {pair.describe()}" if pair else ""))
        if line not in evidence:
            evidence.append(line)
        runs.append(run)
    if not evidence:
        return None
    slower = any(p.slower for p in ctx.pairs if p.reduced in runs)
    return make_finding(
        "kernel_too_old",
        f"The OS kernel is too old for AMX (Linux >= {AMX_MIN_LINUX})",
        "critical" if slower else "warning",
        0.85,
        evidence,
        f"Run on Linux {AMX_MIN_LINUX} or newer (a current distribution kernel) and measure bfloat16 again: "
        "fp16doctor diagnose --precision float32 --precision mixed_bfloat16",
        stacks=stacks_of(runs),
    )


NOT_APPLIED_CONFIDENCE = 0.7


def rule_precision_not_applied(ctx: Context) -> Finding | None:
    """The 16-bit run's model, as its builder or setting made it, is float32's size: the type did not take, so the
    comparison timed float32 twice. A builder flag that allows 16 bits without forcing them, or a setting the
    framework ignored, is the place to look; the measurement that settles it is the build's per-layer precision."""
    evidence: list[str] = []
    runs: list[RunView] = []
    for pair in [*ctx.pairs, *ctx.peer_pairs]:
        run, base = pair.reduced, pair.fp32
        if base.precision != "float32":
            continue
        mine, theirs = run.stated.model_mib, base.stated.model_mib
        if mine is None or theirs is None or mine < NOT_APPLIED_SIZE_SHARE * theirs:
            continue
        evidence.append(f"{at(run)}the {run.precision} build is {mine:g} MiB against float32's {theirs:g} MiB "
                        f"({mine / theirs:.0%}; 16-bit weights take half the bytes); {pair.describe()}")
        runs.append(run)
    if not evidence:
        return None
    return make_finding(
        "precision_not_applied",
        "The 16-bit type did not apply: the build is float32's size",
        "warning",
        NOT_APPLIED_CONFIDENCE,
        evidence,
        "Probably the builder or setting left the layers in float32 (an inference engine's fp16 flag allows 16 bits "
        "without forcing them; a framework switch the release ignores). Rebuild and list each layer's precision "
        "(TensorRT: trtexec --fp16 --dumpLayerInfo --profilingVerbosity=detailed) before comparing speeds again.",
        stacks=stacks_of(runs),
        where=where_of(runs),
    )
