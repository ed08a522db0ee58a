"""Host input rules: batches built on the host (input_pipeline_bound, host_fp16_emulation)."""

from __future__ import annotations

from fp16doctor.analysis.advice import input_pipeline_code, is_old_keras_generator
from fp16doctor.analysis.context import Context, RunView, Software
from fp16doctor.analysis.device import WINDOW_APART
from fp16doctor.analysis.rules.common import (
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
from fp16doctor.knowledge.cuda import (
    version_at_least,
)
from fp16doctor.knowledge.frameworks import (
    HOST_FP16_BATCH_ESTIMATE,
    KERAS_USES_KERAS_PREPROCESSING_SINCE,
    NUMPY_FP16_ISSUES,
    has_feature,
)
from fp16doctor.workload.protocol import FP16, SEED_WORKLOAD, is_pure

# The thresholds, relative to the step or to float32's own figure where the physics allows:
# the host producing half of a step's time is where precision can no longer help (the TF Profiler's input pipeline
# analysis already calls a step highly input-bound from 20 %: kHighlyInfeedBoundThresholdInPercent, and moderately
# from 5 %: kModeratelyInfeedBoundThresholdInPercent, the share HOST_MAJOR_SHARE below takes);
INPUT_BOUND_SHARE = 0.5
# the GPU's best case under a quarter of the seed's float32 step: the rest goes to the host's batch building;
SEED_ARITHMETIC_SHARE = 0.25
# reading images at least 30 % and 5 ms slower than the in-memory control (beyond run-to-run noise of a few %);
CONTROL_MIN_FACTOR = 1.3
CONTROL_MIN_EXTRA_MS = 5.0
# float16 batches at least 30 % slower to build than float32's (10 % where their p10-p90 spreads do not overlap)
# and 1 ms: numpy's software float16 is slower (numpy issues 7571, 11590; Keras 2.1.5 on the tf1.7-cpu stack:
# 102 vs 61 ms a batch);
HOST_MIN_FACTOR = 1.3
HOST_APART_MIN_FACTOR = 1.1
HOST_MIN_EXTRA_MS = 1.0
# and a 5 % share of the step is a major cost.
HOST_MAJOR_SHARE = 0.05


def _inferred_input_bound(ctx: Context) -> tuple[list[str], list[RunView]]:
    """Without input timings: the seed script reads and augments every batch from disk on one worker
    (fit_generator's default); if the GPU's best case is a small part of the float32 step, that is where
    the rest of the step most likely goes."""
    estimates = {(e.machine, e.stack, e.device): e for e in roofline_estimates(ctx)}
    for pair in ctx.fp16_pairs():
        f = pair.fp32
        e = estimates.get((f.machine, f.stack, f.device))
        if (f.workload_name == SEED_WORKLOAD and f.variant == "original" and f.on_gpu and f.input_ms is None
                and e and e.fp32_ms and f.step_ms and e.fp32_ms < SEED_ARITHMETIC_SHARE * f.step_ms):
            return [f"{at(f)}the GPU's best case for the float32 step is {fmt_ms(e.fp32_ms)} of the measured "
                    f"{fmt_ms(f.step_ms)}; the script decodes, resizes and flips every batch of "
                    f"{f.batch_size or 128} images on the host, on one worker by default (host input time "
                    "not measured)"], [f, pair.reduced]
    return [], []


def _busy_words(run: RunView) -> str:
    """"; the GPU was busy 36 ms of the 295 ms profiled step (12%)" where the run carries device time."""
    dt = run.device_time
    if dt is None or dt.busy_share is None:
        return ""
    util = f"; NVML's utilisation samples read a median of {run.gpu_util_pct:.0f}%" \
        if run.gpu_util_pct is not None else ""
    timed = (f", the profiler's window; the timed step is {fmt_ms(run.step_ms)}"
             if run.step_ms and dt.step_ms and abs(dt.step_ms - run.step_ms) > WINDOW_APART * run.step_ms else "")
    return (f"; the GPU was busy {fmt_ms(dt.busy_ms)} of the {fmt_ms(dt.step_ms)} profiled step "
            f"({dt.busy_share:.0%}{timed}){util}")


def rule_input_pipeline_bound(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    for run in ctx.ok_runs():
        if run.input_ms is None or run.step_ms is None:
            continue
        share = run.input_ms / run.step_ms
        if share >= INPUT_BOUND_SHARE:
            evidence.append(
                f"{run.label}: the host needs {fmt_ms(run.input_ms)} to produce a batch, "
                f"{share:.0%} of the {fmt_ms(run.step_ms)} step{_busy_words(run)}"
            )
            runs.append(run)
            confidence = max(confidence, 0.85)
    # A run and its in-memory control compare on one machine only: another machine's step is no control.
    by_key = {(r.machine, r.stack, r.precision, r.device, r.variant): r for r in ctx.ok_runs()}
    for (machine, stack, precision, device, variant), run in by_key.items():
        if variant != "original":
            continue
        synthetic = by_key.get((machine, stack, precision, device, "synthetic_input"))
        if synthetic is None or run.step_ms is None or synthetic.step_ms is None:
            continue
        if (run.step_ms > CONTROL_MIN_FACTOR * synthetic.step_ms
                and run.step_ms - synthetic.step_ms > CONTROL_MIN_EXTRA_MS):
            extra = run.step_ms - synthetic.step_ms
            evidence.append(
                f"{run.label}: {fmt_ms(run.step_ms)} per step reading images vs "
                f"{fmt_ms(synthetic.step_ms)} with synthetic in-memory input: {fmt_ms(extra)} "
                f"({extra / run.step_ms:.0%}) of the step is producing batches"
                f"{'' if run in runs else _busy_words(run)}"
            )
            runs.append(run)
            confidence = max(confidence, 0.9)
    if not evidence:
        evidence, runs = _inferred_input_bound(ctx)
        confidence = 0.5 if evidence else 0.0
    copies = False
    for pair, line, stated in stated_causes(ctx, "transfer"):
        # The document says the 16-bit run copies between host and device every step: host-side work per step
        # that the precision cannot shorten (and a 16-bit batch converted on the host adds to it).
        if pair.reduced not in runs:
            evidence.append(line)
            runs.append(pair.reduced)
            confidence = max(confidence, stated)
            copies = True
    if not evidence:
        return None
    sw = first_software(runs)
    gains = {r.precision: r.step_ms - s.step_ms for r in runs for s in ctx.ok_runs()
             if s.variant == "synthetic_input" and r.variant == "original"
             and (s.machine, s.stack, s.precision, s.device) == (r.machine, r.stack, r.precision, r.device)
             and r.step_ms and s.step_ms}
    advice = input_pipeline_code(sw) + "\n"
    # The gain of the configuration a user keeps by default: float32's (another precision's is its own, and the
    # prescription says which precision to run).
    kept = "float32" if "float32" in gains else next(iter(gains), None)
    if kept is not None:
        advice += f"Expected gain: {fmt_ms(gains[kept])} per step in {kept} (measured against in-memory input)."
    if copies:
        advice += (" A copy between host and device every step waits for the device and the bus: keep tensors on "
                   "the device between steps, read results back only when needed, and copy inputs from pinned "
                   "memory.")
    return make_finding(
        "input_pipeline_bound",
        "Producing batches on the host takes a large share of the step",
        "warning",
        confidence,
        evidence,
        "Precision cannot speed up this part. " + advice,
        stacks=stacks_of(runs),
        where=where_of(runs),
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
    for pair in ctx.fp16_pairs():
        if pair.reduced in runs and pair.reduced.input_ms and pair.fp32.input_ms:
            return (f"the host's float16 batches took {fmt_ms(pair.reduced.input_ms - pair.fp32.input_ms)} longer "
                    "to build than float32's")
    return None


def rule_host_fp16_emulation(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    confidence = 0.0
    measured_no = False
    major = False
    for pair in ctx.fp16_pairs():
        r, f = pair.reduced, pair.fp32
        if r.input_ms is None or f.input_ms is None:
            continue
        apart = bool(r.input_p10_ms and f.input_p90_ms and r.input_p10_ms > f.input_p90_ms)
        if r.input_ms - f.input_ms > HOST_MIN_EXTRA_MS and (r.input_ms > HOST_MIN_FACTOR * f.input_ms or (
                apart and r.input_ms > HOST_APART_MIN_FACTOR * f.input_ms)):
            excess = r.input_ms - f.input_ms
            line = (f"{at(r)}the host spends {fmt_ms(r.input_ms)} per batch building {r.precision} "
                    f"images vs {fmt_ms(f.input_ms)} in float32")
            if r.step_ms:
                line += f"; the {fmt_ms(excess)} excess is {excess / r.step_ms:.1%} of the {fmt_ms(r.step_ms)} step"
                major = major or excess >= HOST_MAJOR_SHARE * r.step_ms
            evidence.append(line)
            runs.append(r)
            confidence = max(confidence, 0.9 if r.input_ms > HOST_MIN_FACTOR * f.input_ms else 0.75)
        elif is_pure(r.precision, FP16):
            measured_no = True
    if not evidence and not measured_no:
        for run in ctx.reduced_runs():
            if (
                not is_pure(run.precision, FP16)
                or not run.on_gpu
                or run.variant != "original"
                or run.workload_name != SEED_WORKLOAD
                or run.input_ms is not None
            ):
                continue
            in_floatx, why = _generator_in_floatx(run.software)
            if not in_floatx:
                continue
            est = HOST_FP16_BATCH_ESTIMATE
            line = (
                f"{at(run)}{why}; numpy has no fast float16 arithmetic on x86 ({NUMPY_FP16_ISSUES[0]}). "
                f"Estimate (no input time was measured): {est.source} took {est.float16_ms:.1f} ms per batch of "
                f"{est.batch_size} images of {est.image_height}x{est.image_width} in float16 vs "
                f"{est.float32_ms:.1f} ms in float32 (decode included"
            )
            # This run's batch and images, as measured where it does not record them; a scaled figure is said to
            # be one, not passed off as measured.
            batch, size = run.batch_size or est.batch_size, run.image_size or est.image_size
            if (batch, size) != (est.batch_size, est.image_size):
                scale = est.scale(batch, size)
                at_size = "" if size == est.image_size else f" at {size[0]}x{size[1]}"
                line += (f"; about {est.float16_ms * scale:.0f} vs {est.float32_ms * scale:.0f} ms scaled to this "
                         f"run's batch of {batch}{at_size}")
            line += ")"
            grown = next((p for p in ctx.fp16_pairs() if p.reduced is run), None)
            major = True
            if grown and grown.slower and grown.fp32.step_ms and run.step_ms:
                line += f"; the measured step grew by {fmt_ms(run.step_ms - grown.fp32.step_ms)}"
            evidence.append(line)
            runs.append(run)
            confidence = max(confidence, 0.65)
            for e in roofline_estimates(ctx):
                if (e.machine, e.stack) == (run.machine, run.stack) and e.fp32_ms and grown and grown.fp32.step_ms:
                    evidence.append(f"the GPU's best case for the float32 step is {fmt_ms(e.fp32_ms)} of the "
                                    f"measured "
                                    f"{fmt_ms(grown.fp32.step_ms)}: most of the step is spent outside GPU "
                                    f"arithmetic")
                    break
    if not evidence:
        return None
    sw = first_software(runs)
    fw = sw.framework
    gain = _host_gain(ctx, runs)
    code = ""
    if fw == "keras2" and is_old_keras_generator(sw):
        rec = (
            f"Keras {sw.keras}'s ImageDataGenerator has no dtype argument: its batches follow floatx. Build "
            "batches in parallel whatever the precision:\n"
            "    model.fit_generator(train_generator, ..., workers=4, use_multiprocessing=True)\n"
        )
    elif fw in ("keras3", "tf.keras"):
        # keras/src/legacy/preprocessing/image.py and tf_keras/src/preprocessing/image.py: each image is
        # image_utils.img_to_array(img, data_format=...), whose dtype None means floatx, then standardize's
        # `x *= self.rescale` runs on it; the iterator's dtype applies only to the batch it is copied into.
        rec = ("This Keras' ImageDataGenerator builds each image's array in floatx and rescales it there; its dtype "
               "argument sets only the batch the images are copied into, so dtype='float32' alone leaves the host's "
               "float16 arithmetic. Keep floatx float32 (a mixed precision policy computes in 16 bits on the "
               "device) or build batches outside ImageDataGenerator.")
    elif fw == "keras2":
        rec = "Batches built in float32 whatever floatx says are cast by the model on the device."
        code = ("    datagen = ImageDataGenerator(rescale=1./255, horizontal_flip=True, vertical_flip=True,\n"
                "                                 dtype='float32')")
    else:
        rec = "Host-side preprocessing in float32 (or uint8), cast to float16 on the device, avoids the emulation."
    if gain:
        rec += f" Measured: {gain}."
    return make_finding(
        "host_fp16_emulation",
        "Host-side preprocessing runs in float16, slower than in float32",
        "warning" if major else "info",
        confidence,
        evidence,
        rec,
        remedy_code=code,
        stacks=stacks_of(runs),
        where=where_of(runs),
    )




# A batch copied from pageable host memory is worth saying from 1 ms and 5 % of the run's step: the driver stages it
# through a pinned buffer, so it cannot overlap the step and runs below the link's rate (CUDA C++ Best Practices
# Guide, "Pinned Memory": page-locked memory gives the highest host-device bandwidth and lets copies overlap).
PAGEABLE_MIN_MS = 1.0
PAGEABLE_MIN_SHARE = 0.05
_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "uint8": 1}


def _batch_bytes(run: RunView) -> int | None:
    size = run.image_size
    width = _BYTES.get(run.batch_dtype or "")
    if not (size and run.batch_size and width):
        return None
    return run.batch_size * size[0] * size[1] * (run.channels or 3) * width


def _pinned_code(sw: Software) -> str:
    if sw.keras_backend == "torch" or (sw.framework == "torch"):
        # Keras 3 on torch wraps arrays in a DataLoader without pin_memory (keras/src/trainers/data_adapters/
        # array_data_adapter.py) and takes a torch DataLoader as it is (data_adapters/__init__.py).
        return ("loader = torch.utils.data.DataLoader(dataset, batch_size=128, shuffle=True,\n"
                "                                     num_workers=4, pin_memory=True)\n"
                "model.fit(loader, epochs=nb_epoch)  # uint8 images, keras.layers.Rescaling(1/255) in the model")
    return ""


def rule_pageable_copies(ctx: Context) -> Finding | None:
    evidence: list[str] = []
    runs: list[RunView] = []
    for run in ctx.ok_runs():
        if run.experiment:
            continue  # a change to one thing says nothing more about the copies
        dt = run.device_time
        h2d = dt.copies_ms.get("h2d", 0.0) if dt is not None else 0.0
        if dt is None or not dt.h2d_pageable or h2d < PAGEABLE_MIN_MS:
            continue
        step = dt.step_ms or run.step_ms
        if not step or h2d < PAGEABLE_MIN_SHARE * step:
            continue
        line = (f"{run.label}: host-to-device copies from pageable memory take {fmt_ms(h2d)} per step "
                f"({h2d / step:.0%} of the {fmt_ms(step)} profiled step)")
        size = _batch_bytes(run)
        if size is not None:
            rate = size / (h2d / 1000.0) / 1e9
            uint8 = h2d / _BYTES[str(run.batch_dtype)]  # one byte a value, at the same rate
            line += (f"; a {run.batch_dtype} batch of {size / 1e6:.0f} MB at about {rate:.1f} GB/s; the same images "
                     f"as uint8 would move in about {fmt_ms(uint8)} at that rate (an estimate)")
        evidence.append(line)
        runs.append(run)
    if not evidence:
        return None
    code = _pinned_code(first_software(runs))
    return make_finding(
        "pageable_copies",
        "Batches are copied to the GPU from pageable host memory",
        "info",
        0.9,
        evidence,
        "Copy from pinned (page-locked) host memory so the copy runs at the link's rate and can overlap the step, "
        "and send images as uint8 with the rescaling inside the model: a quarter of float32's bytes.",
        **({"fix_code": code} if code else {}),
        stacks=stacks_of(runs),
        where=where_of(runs),
    )
