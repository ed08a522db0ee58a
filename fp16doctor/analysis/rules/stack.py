"""Stack rules: framework / CUDA / driver versions (old_stack, stack_incompatible_gpu)."""

from __future__ import annotations

from fp16doctor.analysis.advice import (
    mixed_precision_code,
    upgrade_target,
    upgraded,
)
from fp16doctor.analysis.context import Context, Pair, RunView, Software
from fp16doctor.analysis.rules.common import (
    Finding,
    at,
    first_software,
    make_finding,
    roofline_estimates,
    roofline_lines,
    stacks_of,
    where_of,
)
from fp16doctor.analysis.values import as_list, as_mapping, as_str, fmt_ms, fmt_times
from fp16doctor.knowledge.cuda import (
    CUDNN_AUTO_CONVERSION,
    CUDNN_RELAXED_CHANNELS,
    min_driver_for,
    toolkit,
    version_at_least,
    version_tuple,
)
from fp16doctor.knowledge.frameworks import (
    TF_BUILDS,
    TfBuild,
    has_feature,
)
from fp16doctor.knowledge.gpus import FAST_FP16_RATIO, GpuFacts, cc_tuple
from fp16doctor.workload.protocol import SEED_WORKLOAD, family, is_mixed


def _old_reasons(sw: Software, gpu: GpuFacts | None, mixed_measured: bool = False,
                 inference: bool = False) -> list[str]:
    """What the tables say this stack lacks; `mixed_measured`: the document ran a mixed precision policy on this
    stack, so no table says it has none (a Keras whose TensorFlow it does not state is not known to be
    multi-backend); `inference`: the runs there are inference in plain 16 bits, where a missing mixed precision API
    (torch.cuda.amp) cannot have made a 16-bit model slower."""
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
    if sw.framework == "keras2" and not mixed_measured:
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
    if sw.torch and has_feature("torch_amp", sw.torch) is False and not (inference and not mixed_measured):
        reasons.append(f"PyTorch {sw.torch} predates native mixed precision (torch.cuda.amp, 1.6)")
    return reasons


# Another stack of the same machine running a 16-bit type at least this much faster against its own float32 (both
# ratios' intervals apart): the slower stack's release is what holds it back, where one of its libraries is older
# (the public case: mixed_float16 1.03x on a cuDNN 8.0.5 build of PyTorch, 3.06x with cuDNN 8.2,
# tests/data/cases/ampere-rtx3090-pytorch-conv3d-amp-cudnn805.json).
STACK_GAIN_GAP = 1.5
# The libraries whose release changes a 16-bit path, compared one by one.
_LIBRARIES = ("cudnn", "cuda", "torch", "tensorflow", "jax", "keras")


def _older_libraries(slow: RunView, fast: RunView) -> list[str]:
    """"cudnn 8.0.5 < 8.2.0.53": each library the slow run's stack has in an older release than the fast one's."""
    older = []
    for name in _LIBRARIES:
        mine, theirs = getattr(slow.software, name), getattr(fast.software, name)
        if mine and theirs and version_at_least(mine, theirs) is False:
            older.append(f"{name} {mine} < {theirs}")
    return older


def _measured_newer_stacks(ctx: Context) -> tuple[list[str], list[RunView], list[str]]:
    """Stacks of one machine whose 16-bit ratio to float32 another stack beats by STACK_GAIN_GAP, that other stack's
    libraries being newer: measured evidence that the release holds the gain back."""
    evidence: list[str] = []
    runs: list[RunView] = []
    upgrades: list[str] = []
    by_cell: dict[tuple[str, str, str], list[Pair]] = {}
    for pair in ctx.pairs:
        r = pair.reduced
        if r.variant == "original" and not r.experiment and not pair.interval.is_bound:
            by_cell.setdefault((r.machine, r.device, r.precision), []).append(pair)
    for pairs in by_cell.values():
        for slow in pairs:
            for fast in pairs:
                if fast.reduced.stack == slow.reduced.stack or fast.interval.low < STACK_GAIN_GAP * slow.interval.high:
                    continue
                older = _older_libraries(slow.reduced, fast.reduced)
                if not older or slow.reduced in runs:
                    continue
                evidence.append(f"{slow.reduced.stack}: {slow.describe()}; on the same machine {fast.reduced.stack} "
                                f"ran it {fast.shown.figure()} than its float32 ({', '.join(older)}): measured")
                runs.append(slow.reduced)
                upgrades.append(f"Upgrade to what {fast.reduced.stack} runs "
                                f"({', '.join(older)}): it measured {slow.reduced.precision} {fast.shown.figure()} "
                                "than float32 on this machine.")
    _same_type_across_stacks(ctx, evidence, runs, upgrades)
    return evidence, runs, upgrades


def _same_type_across_stacks(ctx: Context, evidence: list[str], runs: list[RunView], upgrades: list[str]) -> None:
    """Where a stack has no float32 run to compare with, one 16-bit type measured on two stacks of one machine: the
    newer stack STACK_GAIN_GAP faster than the older one, its libraries newer, is the release holding it back
    (measured)."""
    with_fp32 = {(p.reduced.machine, p.reduced.stack) for p in ctx.pairs}
    by_cell: dict[tuple[str, str, str], list[RunView]] = {}
    for run in ctx.ok_runs():
        if run.variant == "original" and not run.experiment and run.step_ms and run.precision != "float32" \
                and (run.machine, run.stack) not in with_fp32:
            by_cell.setdefault((run.machine, run.device, run.precision), []).append(run)
    for cell in by_cell.values():
        for slow in cell:
            for fast in cell:
                if fast.stack == slow.stack or slow in runs:
                    continue
                interval = Pair(fast, slow).interval  # the slow stack's step against the fast one's
                if interval.refused or interval.high * STACK_GAIN_GAP > 1.0:
                    continue
                older = _older_libraries(slow, fast)
                if not older:
                    continue
                figure = fmt_times(1 / interval.speedup)
                evidence.append(f"{slow.stack}: {slow.precision} step {fmt_ms(slow.step_ms)}; on the same machine "
                                f"{fast.stack} ran it in {fmt_ms(fast.step_ms)}, {figure} faster "
                                f"({', '.join(older)}): measured")
                runs.append(slow)
                upgrades.append(f"Upgrade to what {fast.stack} runs ({', '.join(older)}): it measured "
                                f"{slow.precision} {figure} faster on this machine.")


def rule_old_stack(ctx: Context) -> Finding | None:
    evidence, runs, upgrades = _measured_newer_stacks(ctx)
    seen: set[str] = set()
    confidence = 0.9 if evidence else 0.0
    for run in ctx.runs:
        gpu = ctx.gpu_for(run)
        if not run.on_gpu or gpu is None:
            continue
        if not gpu.tensor_cores and not (gpu.fp16_ratio and gpu.fp16_ratio >= FAST_FP16_RATIO):
            continue  # an upgrade cannot make this GPU fast in fp16
        label = run.software.label()
        if label in seen:
            runs.append(run)
            continue
        mixed = any(r.ok and r.precision.startswith("mixed_") and (r.machine, r.stack) == (run.machine, run.stack)
                    for r in ctx.runs)
        reasons = _old_reasons(run.software, gpu, mixed, inference=run.inference)
        if not reasons:
            continue
        seen.add(label)
        runs.append(run)
        evidence.append(f"{run.stack} ({label}): " + "; ".join(reasons))
        confidence = max(confidence, 0.85 if gpu.known else 0.6)
    if not evidence:
        return None
    roofline = roofline_lines(ctx, runs)
    evidence += roofline
    if any(r.workload_name == SEED_WORKLOAD and version_at_least(r.software.tensorflow, "1.13") is False
           for r in runs):
        evidence.append(
            "on a Titan V the same script trained slightly faster in float16 than float32 after an "
            "upgrade to CUDA 10.0, cuDNN 7.4.1, TensorFlow 1.13.1 and Keras 2.2.4 (public report of "
            "this question)"
        )
    sw = first_software(runs)
    pairs = [p for p in ctx.fp16_pairs() if p.reduced in runs]
    already_faster = bool(pairs) and all(p.faster for p in pairs)
    gain = ""
    best = [e for e in roofline_estimates(ctx)
            if e.predicted_speedup and (e.machine, e.stack) in {(r.machine, r.stack) for r in runs}]
    if best:
        top = max(best, key=lambda e: e.predicted_speedup or 0)
        gain = (f"\nExpected gain: up to {top.predicted_times()} over float32 for this model on this GPU "
                "(roofline best case)")
        if top.measured_speedup:
            gain += f", against {top.measured_words()} measured now"
        gain += "."
    # Mixed precision measured slower than float32 on this stack: the upgrade is what to do, and mixed precision is
    # measured again on it, never handed over as code here (no advice contradicts the machine's measured table).
    judged = {(r.machine, r.stack) for r in runs}
    lost = [p for p in ctx.pairs if (p.reduced.machine, p.reduced.stack) in judged
            and is_mixed(p.reduced.precision) and p.slower]
    measured = ", ".join(f"{p.reduced.precision} measured {p.shown.figure()}" for p in lost[:2])
    then = (f"measure mixed precision again there ({measured} on this stack)" if lost
            else mixed_precision_code(upgraded(sw)))
    advice = " ".join(upgrades) if upgrades and len(upgrades) == len(evidence) else (
        f"Upgrade to {upgrade_target(sw)}. Then: {then}{gain}")
    families = {f for r in runs if (f := family(r.precision)) is not None}  # "fp16", "bf16": what it lacks
    return make_finding(
        "old_stack",
        f"This software stack lacks the fast {families.pop() if len(families) == 1 else '16-bit'} paths",
        "info" if already_faster else "warning",
        confidence,
        evidence,
        advice,
        stacks=stacks_of(runs),
        where=where_of(runs),
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


def _preflight(ctx: Context) -> tuple[list[str], list[str], list[str], bool]:
    """What diagnose's pre-flight found before any run (`preflight` in the document: a stack this GPU or driver
    cannot run), kept as data so that every later analysis of the document says it again: the reasons, the stacks
    refused, the alternatives that can run, and whether it was forced."""
    reasons: list[str] = []
    stacks: list[str] = []
    alternatives: list[str] = []
    forced = False
    for raw in as_list(ctx.doc.get("preflight")):
        check = as_mapping(raw)
        if check.get("ok") is not False or not as_str(check.get("stack")):
            continue
        stacks.append(str(check["stack"]))
        reasons += [str(r) for r in as_list(check.get("reasons")) if str(r) not in reasons]
        alternatives += [str(a) for a in as_list(check.get("alternatives")) if str(a) not in alternatives]
        forced = forced or check.get("forced") is True
    return reasons, stacks, alternatives, forced


def rule_stack_incompatible_gpu(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    seen: set[tuple[str, str, str]] = set()
    refused_reasons, refused, alternatives, forced = _preflight(ctx)
    if refused:
        evidence += [f"pre-flight: {r}" for r in refused_reasons]
        confidence = 0.9
    for run in ctx.runs:
        gpu = ctx.gpu_for(run)
        if run.status == "failed" and run.error and any(e in run.error.lower() for e in INCOMPATIBLE_ERRORS):
            evidence.append(f"{run.label} failed: {run.error[:200]}")
            confidence = max(confidence, 0.95)
            runs.append(run)
            continue
        if gpu is None or not run.on_gpu or not run.software.cuda:
            continue
        key = (run.machine, run.stack, run.software.cuda)  # one GPU per machine: each is judged
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
                    f"{at(run)}CUDA {run.software.cuda} has machine code up to compute capability "
                    f"{kit.max_compute_capability}; the {gpu.label} needs a toolkit that knows it "
                    "(PTX JIT at best: minutes of start-up, missing library kernels)"
                )
                confidence = max(confidence, 0.85)
                runs.append(run)
            elif low and cc < low:
                evidence.append(
                    f"{at(run)}CUDA {run.software.cuda} no longer supports compute capability "
                    f"{gpu.compute_capability} (minimum {kit.min_compute_capability})"
                )
                confidence = max(confidence, 0.9)
                runs.append(run)
        need = version_tuple(min_driver_for(run.software.cuda))
        have = version_tuple(ctx.driver_for(run))
        if need and have and not ctx.windows and have < need:
            evidence.append(
                f"{at(run)}CUDA {run.software.cuda} needs Linux driver >= "
                f"{min_driver_for(run.software.cuda)}; this host has {ctx.driver_for(run)}"
            )
            confidence = max(confidence, 0.9)
            runs.append(run)
    if not evidence:
        return None
    gpu = next((ctx.gpu_for(r) for r in runs if ctx.gpu_for(r)), None)
    rec = "Use a stack built for this GPU and driver."
    if refused:
        rec += (f" Run the {', '.join(alternatives)} stack{'s' if len(alternatives) > 1 else ''} on this host"
                if alternatives else " Run this stack on an older GPU or driver, or use the cpu stack here")
        rec += " (forced: the run was attempted anyway)." if forced else "; --force tries anyway."
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
        stacks=sorted({*stacks_of(runs), *refused}),
        where=where_of(runs),
    )


