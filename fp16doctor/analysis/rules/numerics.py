"""Numerics rules: how 16-bit precision was switched on and whether training stayed finite."""

from __future__ import annotations

from fp16doctor.analysis.advice import (
    keras_floatx_note,
    mixed_precision_code,
)
from fp16doctor.analysis.context import Context, RunView
from fp16doctor.analysis.rules.common import (
    Finding,
    first_software,
    make_finding,
    stacks_of,
)

FP16_SMALLEST_NORMAL = 6.103515625e-05  # 2**-14


KERAS_FRAMEWORKS = ("keras2", "tf.keras", "keras3")


def rule_pure_float16_floatx(ctx: Context) -> Finding | None:
    # floatx is Keras' switch; elsewhere a float16 run may be inference (no weights to update), so only a
    # run that trains (a loss was recorded) is called pure fp16 training.
    runs = [r for r in ctx.runs if r.precision == "float16" and (
        r.software.framework in KERAS_FRAMEWORKS or r.workload_name == "seed_cnn" or r.loss_first is not None)]
    if not runs:
        return None
    sw = first_software(runs)
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
        f"{', '.join(stacks_of(runs))}: {how}: weight updates smaller than 1/2048 of a weight round "
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
        stacks=stacks_of(runs),
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
    sw = first_software(runs)
    return make_finding(
        "numerics_unstable",
        "fp16 training is numerically unstable here",
        "critical",
        confidence,
        evidence,
        "Use mixed precision with loss scaling rather than pure fp16, and keep the output layer in float32. "
        + mixed_precision_code(sw),
        stacks=stacks_of(runs),
    )


