"""Numerics rules: how 16-bit precision was switched on and whether training stayed finite."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from fp16doctor.analysis.advice import (
    mixed_precision_code,
)
from fp16doctor.analysis.context import Context, RunView
from fp16doctor.analysis.rules.common import (
    Finding,
    first_software,
    make_finding,
    stacks_of,
    where_of,
)
from fp16doctor.analysis.values import as_list, as_mapping, as_str
from fp16doctor.workload.protocol import BF16, FP16, PRECISIONS, SEED_WORKLOAD, family, is_mixed, is_pure

FP16_SMALLEST_NORMAL = 6.103515625e-05  # 2**-14


KERAS_FRAMEWORKS = ("keras2", "tf.keras", "keras3")


def _code_lines(text: str) -> str:
    """The code of a how-to (its indented lines), without the prose around it: the phraser says what to use."""
    return "\n".join(line for line in text.splitlines() if line.startswith("    "))


def rule_pure_float16_floatx(ctx: Context) -> Finding | None:
    # floatx is Keras' switch; elsewhere a float16 run may be inference (no weights to update), so only a
    # run that trains (a loss was recorded) is called pure fp16 training; a document that says inference never is.
    runs = [r for r in ctx.runs if is_pure(r.precision, FP16) and not r.inference and (
        r.software.framework in KERAS_FRAMEWORKS or r.workload_name == SEED_WORKLOAD or r.loss_first is not None)]
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
    places = sorted({r.place for r in runs if r.place})
    evidence = [
        f"{', '.join(places) + ': ' if places else ''}{how}: weight updates smaller than 1/2048 of a weight round "
        f"away{epsilon}"
    ]
    pairs = [p for p in ctx.fp16_pairs() if p.reduced in runs]
    evidence += [p.describe() for p in pairs]
    unstable = [r for r in runs if r.loss_nan]
    if unstable:
        evidence.append(f"loss became NaN/inf in {', '.join(r.label for r in unstable)}")
    mixed = [p for p in ctx.fp16_pairs() if is_mixed(p.reduced.precision, FP16)]
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
        "Pure float16 keeps weights and optimizer state in fp16; mixed precision keeps float32 weights and scales "
        "the loss.",
        remedy_code=_code_lines(mixed_precision_code(sw)),
        stacks=stacks_of(runs),
        where=where_of(runs),
    )


# A loss "stops improving" only when float32 improved by more than this many times the step-to-step
# spread of either curve over the same number of steps, and the 16-bit run did not improve at all. Both
# are read as the change between the medians of each curve's halves, not between two single steps.
PLATEAU_SPREAD_MULTIPLE = 3.0
# ... and only over at least this many steps of both curves. A quick run's 5-14 steps of a loss that barely
# moves (the quick size's 2-class images) cannot tell a stall from a noisy start: read as one, it flipped the
# prescription between two diagnoses of one machine minutes apart.
MIN_STALL_STEPS = 20
# A dynamic loss scale that fell by this factor or more collapsed (each overflow halves it).
LOSS_SCALE_COLLAPSE = 2.0 ** 10
# A failed 16-bit run whose error says its numbers went non-finite (not "maintenance" or "stack overflow").
NON_FINITE_ERROR = re.compile(r"\b(nan|inf|infinity|non-finite|not finite)\b|overflow encountered|loss scale", re.I)


def _step_spread(losses: tuple[float, ...]) -> float:
    """The typical step-to-step change of a loss curve (median absolute difference)."""
    diffs = sorted(abs(b - a) for a, b in zip(losses, losses[1:], strict=False))
    return diffs[len(diffs) // 2] if diffs else 0.0


def _half_gain(losses: tuple[float, ...]) -> float:
    """How far a loss curve fell: its first half's median less its second half's."""
    half = len(losses) // 2
    first, second = sorted(losses[:half]), sorted(losses[len(losses) - half:])
    return first[len(first) // 2] - second[len(second) // 2]


def rule_numerics_unstable(ctx: Context) -> Finding | None:
    """Only evidence that noise cannot give: a non-finite loss, a collapsing loss scale, or a loss that stops
    improving over as many steps as float32 improved over, beyond float32's own step-to-step spread."""
    evidence: list[str] = []
    runs: list[RunView] = []
    severity = "info"
    confidence = 0.0
    for pair in ctx.pairs:
        r, f = pair.reduced, pair.fp32
        if r.loss_nan and not f.loss_nan:
            evidence.append(f"{r.label}: loss became NaN/inf; float32 stayed finite")
            severity, confidence = "critical", max(confidence, 0.95)
            runs.append(r)
            continue
        first_scale, last_scale = r.loss_scale_first, r.loss_scale_last
        collapsed = last_scale == 0 or (first_scale and last_scale and first_scale / last_scale >= LOSS_SCALE_COLLAPSE)
        if first_scale and last_scale is not None and collapsed:
            evidence.append(f"{r.label}: the dynamic loss scale fell from {first_scale:g} to "
                            f"{last_scale:g} (gradients kept overflowing)")
            if last_scale < 1:
                severity = "critical"
            elif severity == "info":
                severity = "warning"
            confidence = max(confidence, 0.8)
            runs.append(r)
            continue
        n = min(len(r.step_losses), len(f.step_losses))
        if n >= MIN_STALL_STEPS:
            ours, theirs = r.step_losses[:n], f.step_losses[:n]
            # A noisy 16-bit curve cannot show a stall that float32's gain would be lost in.
            spread = max(_step_spread(theirs), _step_spread(ours))
            gained = _half_gain(theirs)
            if spread > 0 and gained > PLATEAU_SPREAD_MULTIPLE * spread and _half_gain(ours) <= 0:
                evidence.append(
                    f"{r.label}: loss {ours[0]:.4g} -> {ours[-1]:.4g} over {n} steps while float32 went "
                    f"{theirs[0]:.4g} -> {theirs[-1]:.4g} (its halves' medians {gained:.3g} apart, "
                    f"{gained / spread:.1f}x the larger step-to-step spread)"
                )
                severity = "warning" if severity == "info" else severity
                confidence = max(confidence, 0.7)
                runs.append(r)
    for run in ctx.runs:
        if (
            run.precision != "float32"
            and run.status == "failed"
            and run.error
            and NON_FINITE_ERROR.search(run.error)
        ):
            evidence.append(f"{run.label} failed: {run.error[:160]}")
            severity, confidence = "critical", max(confidence, 0.8)
            runs.append(run)
    if not evidence:
        return None
    sw = first_software(runs)
    return make_finding(
        "numerics_unstable",
        "16-bit training is numerically unstable here",
        severity,
        confidence,
        evidence,
        "Mixed precision with loss scaling keeps training stable where pure fp16 is not; keep the output layer in "
        "float32.",
        remedy_code=_code_lines(mixed_precision_code(sw)),
        stacks=stacks_of(runs),
        where=where_of(runs),
        runs=[{"machine": r.machine, "stack": r.stack, "precision": r.precision, "variant": r.variant} for r in runs],
    )




# The largest whole number each 16-bit type holds with every smaller one (its significand's bits: 11 for float16, 8
# for bfloat16; IEEE 754 binary16, and bfloat16 as float32's upper half): an id above it may be rounded to another.
EXACT_INTEGERS = {FP16: 2048, BF16: 256}
SIGNIFICAND_BITS = {FP16: 11, BF16: 8}
SIXTEEN_BIT_DTYPES = ("float16", "bfloat16")
TYPE_NAMES = {FP16: "float16", BF16: "bfloat16"}


def rounded_to(value: float, bits: int) -> float:
    """`value` rounded to `bits` significant bits, to nearest, ties to even: what a cast to that type makes of it."""
    if value == 0:
        return 0.0
    mantissa, exponent = math.frexp(value)
    scale = 2 ** bits
    return round(mantissa * scale) / scale * 2.0 ** exponent


def rule_integer_ids_rounded(ctx: Context) -> Finding | None:
    """A 16-bit configuration that changes what the model computes: an input whose batch holds whole numbers (ids,
    indices, counts) above what the 16-bit type holds exactly, cast to that type, at the input itself (floatx
    float16 makes a float Input float16) or by a layer that autocasts a floating input to its 16-bit compute dtype
    (a custom layer around an Embedding; Embedding itself takes its input as it is)."""
    evidence: list[str] = []
    runs: list[RunView] = []
    for run in ctx.runs:
        kind = family(run.precision)
        # A 16-bit run that failed before it described its model is read from float32's, as this precision would
        # have applied to it (the rounded ids may be what failed it: an id rounded past its table's end).
        model, said = run.model, ""
        if kind is not None and (model is None or not model.inputs) and run.status == "failed":
            base = next((r for r in ctx.runs if r.precision == "float32" and r.model is not None and r.model.inputs
                         and (r.machine, r.stack, r.variant) == (run.machine, run.stack, run.variant)), None)
            model, said = (base.model, " (as float32's run recorded them; this run failed)") if base else (None, "")
        if kind is None or model is None or not model.inputs:
            continue
        limit, bits = EXACT_INTEGERS[kind], SIGNIFICAND_BITS[kind]
        sixteen = TYPE_NAMES[kind]
        layers = {layer.name: layer for layer in model.layers if layer.name}
        for model_input in model.inputs:
            if not model_input.integer or model_input.max_abs is None or model_input.max_abs <= limit:
                continue
            dtype = (model_input.dtype or "").lower()
            # Read from float32's run: under any 16-bit precision (a mixed policy, or floatx) a layer that autocasts
            # computes in that type and casts a floating input to it; whether the input itself would have been 16-bit
            # (an Input with no dtype under floatx) float32's record cannot tell, so only the layer is said.
            casts = [c for c in model_input.consumers if (layer := layers.get(c)) is not None
                     and layer.autocast is True and (
                         (layer.compute_dtype or "").lower() in SIXTEEN_BIT_DTYPES or bool(said))]
            if dtype in SIXTEEN_BIT_DTYPES:
                where = f"the input itself is {dtype}"
            elif dtype.startswith("float") and casts:
                compute = sixteen if said else layers[casts[0]].compute_dtype
                where = (f"layer '{casts[0]}' casts it to {compute} (Keras casts a floating input to a layer's "
                         "compute dtype)")
            else:
                continue
            largest, first = model_input.max_abs, limit + 1
            rounded = rounded_to(largest, bits)
            examples = f"{first:,} becomes {rounded_to(first, bits):,.0f}" + (
                f" and {largest:,.0f} becomes {rounded:,.0f}" if rounded != largest else "")
            evidence.append(
                f"{run.label}: input '{model_input.name}' carries whole numbers up to {largest:,.0f}{said} and "
                f"{where}: {sixteen} holds every whole number only up to {limit:,}, so {examples}: ids become one "
                "another and this configuration computes another model")
            runs.append(run)
    if not evidence:
        return None
    return make_finding(
        "integer_ids_rounded",
        "A 16-bit configuration rounds the model's integer inputs",
        "critical",
        0.9,
        evidence,
        "Declare the ids as integers, which Keras never casts: keras.Input(shape=..., dtype=\"int32\"); or keep the "
        "layer that takes them in float32 (dtype=\"float32\" on that layer). Until then fp16doctor prescribes no "
        "configuration that rounds them.",
        stacks=stacks_of(runs),
        where=where_of(runs),
        runs=[{"machine": r.machine, "stack": r.stack, "precision": r.precision, "variant": r.variant} for r in runs],
    )


def rounding_precisions(finding: Mapping[str, Any]) -> dict[tuple[str, str], set[str]]:
    """Per machine and stack, the 16-bit precisions an integer_ids_rounded finding rules out: those of a type that
    holds no more whole numbers than one it names (ids past float16's 2,048 are past bfloat16's 256 too)."""
    out: dict[tuple[str, str], set[str]] = {}
    for run in as_list(finding.get("runs")):
        entry = as_mapping(run)
        kind = family(as_str(entry.get("precision")))
        if kind is None:
            continue
        types = [k for k, limit in EXACT_INTEGERS.items() if limit <= EXACT_INTEGERS[kind]]
        place = (str(entry.get("machine")), str(entry.get("stack")))
        out.setdefault(place, set()).update(p for p in PRECISIONS if family(p) in types)
    return out


def drop_rounding_untested(findings: Sequence[Mapping[str, Any]],
                           prescriptions: Sequence[MutableMapping[str, Any]]) -> None:
    """No prescription offers as untested a configuration that would round the model's integer inputs
    (integer_ids_rounded): it computes another model, whatever a switch beside it changes."""
    finding = next((f for f in findings if f.get("id") == "integer_ids_rounded"), None)
    if finding is None:
        return
    ruled_out = rounding_precisions(finding)
    for p in prescriptions:
        out = ruled_out.get((str(p.get("machine")), str(p.get("stack"))), set())
        untested = p.get("untested")
        if out and isinstance(untested, list):
            p["untested"] = [u for u in untested if not (isinstance(u, Mapping) and u.get("precision") in out)]
