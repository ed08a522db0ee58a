"""Changes to a user's code beyond a precision (`prescriptions[].user_changes`): what a control or an experiment
measured (batches in memory against the input pipeline as written, another Keras backend, compiled execution), and
what goes at the bound that is left (next_bound.py)."""

from __future__ import annotations

from typing import Any

from fp16doctor.analysis.advice import input_pipeline_code
from fp16doctor.analysis.context import Context, Pair, RunView
from fp16doctor.analysis.next_bound import next_bound_changes
from fp16doctor.analysis.untested import command_of
from fp16doctor.analysis.values import round_ratio
from fp16doctor.workload.protocol import SEED_WORKLOAD

# The in-memory control beside the pipeline as written is what fixing the input pipeline is worth, said first where
# float32 with batches in memory measured faster beyond the comparison's interval and by at least this much (the
# input_pipeline_bound rule's own control threshold, host_input.CONTROL_MIN_FACTOR).
INPUT_CHANGE_MIN_SPEEDUP = 1.3


def _in_memory(ctx: Context, fp32: RunView) -> list[dict[str, Any]]:
    """Each 16-bit precision measured with batches in memory on float32's machine and stack: its ratio there, and
    how much of its difference was the device's work (where both runs carry device time)."""
    found = []
    for pair in ctx.pairs:
        r = pair.reduced
        if (r.machine, r.stack, r.device, r.variant) != (fp32.machine, fp32.stack, fp32.device, "synthetic_input"):
            continue
        entry: dict[str, Any] = {"precision": r.precision, "step_ms": pair.step_ms, "fp32_step_ms": pair.fp32_step_ms,
                                 "outcome": pair.interval.outcome, "figure": pair.shown.figure()}
        if r.device_time is not None and pair.fp32.device_time is not None:
            entry["device_difference_ms"] = round(r.device_time.busy_ms - pair.fp32.device_time.busy_ms, 3)
        found.append(entry)
    return found


def _input_change(ctx: Context, fp32: RunView) -> list[dict[str, Any]]:
    """What batches in memory are worth against the pipeline as written (the synthetic_input control)."""
    control = next((r for r in ctx.ok_runs() if (r.machine, r.stack, r.device) == (fp32.machine, fp32.stack,
                                                                                  fp32.device)
                    and r.precision == "float32" and r.variant == "synthetic_input" and not r.experiment), None)
    if control is None:
        return []
    pair = Pair(fp32, control)
    iv = pair.interval
    if iv.outcome != "faster" or iv.speedup < INPUT_CHANGE_MIN_SPEEDUP:
        return []
    height, width = fp32.image_size or (None, None)
    # Its worth as each configuration's own process measured it too (a user's fit()), where the rounds timed both:
    # said beside the rounds' figure as a range, never the flattering end alone.
    before, after = fp32.own_process_ms, control.own_process_ms
    return [{"kind": "input_pipeline", "measured_by": "synthetic_input", "precision": "float32",
             "step_ms": pair.fp32_step_ms, "changed_step_ms": pair.step_ms, "speedup": round_ratio(iv.speedup),
             "speedup_interval": [round_ratio(iv.low), round_ratio(iv.high)], "figure": pair.shown.figure(),
             **({"own_process_speedup": round_ratio(before / after),
                 "own_process_ms": [round(before, 3), round(after, 3)]} if before and after else {}),
             # The program is the seed's (its model as posted); a user's own script gets the words.
             "how": input_pipeline_code(fp32.software, height, width, fp32.batch_size,
                                        program=fp32.workload_name == SEED_WORKLOAD),
             "in_memory": _in_memory(ctx, fp32)}]


# Another Keras backend is prescribed only where its float32 step measured at least this much faster, at the
# interval's lower end: a backend is a dependency and a behaviour change, worth it only for a large gain.
BACKEND_MIN_SPEEDUP = 1.5
# What switching backends costs a user, said with every backend change.
BACKEND_COST = ("a backend is a dependency to install and a behaviour change: code that calls TensorFlow, torch or "
                "JAX directly (tf.data, custom ops, callbacks) must be ported, and numerics can differ; run your "
                "tests on it first")


def _backend_runs(ctx: Context, fp32: RunView) -> list[tuple[RunView, RunView]]:
    """Float32 on each other Keras backend of this machine and device (the same Keras, another backend: a host
    stack such as `host-jax`), each with this stack's float32 of the same variant: batches in memory where both
    stacks measured them (the device-side answer), else the workload as written."""
    mine = fp32.software
    if not (mine.keras and mine.keras_backend):
        return []
    found: list[tuple[RunView, RunView]] = []
    for variant in ("synthetic_input", "original"):
        base = next((r for r in ctx.ok_runs() if (r.machine, r.stack, r.device, r.precision, r.variant) == (
            fp32.machine, fp32.stack, fp32.device, "float32", variant) and not r.experiment), None)
        if base is None:
            continue
        for other in ctx.ok_runs():
            sw = other.software
            if (other.machine, other.device, other.precision, other.variant) != (
                    fp32.machine, fp32.device, "float32", variant) or other.stack == fp32.stack or other.experiment:
                continue
            if sw.keras == mine.keras and sw.keras_backend and sw.keras_backend != mine.keras_backend and all(
                    o.stack != other.stack for _, o in found):
                found.append((base, other))
    return found


def _backend_changes(ctx: Context, fp32: RunView) -> list[dict[str, Any]]:
    """Each other Keras backend that measured float32 at least BACKEND_MIN_SPEEDUP faster than this stack's, with
    what its 16-bit types did against its own float32, and how to switch."""
    changes = []
    for base, other in _backend_runs(ctx, fp32):
        pair = Pair(base, other)
        iv = pair.interval
        if iv.outcome != "faster" or iv.low < BACKEND_MIN_SPEEDUP:
            continue
        name = str(other.software.keras_backend)
        changes.append({
            "kind": "backend", "backend": name, "measured_by": other.stack, "precision": "float32",
            "variant": other.variant, "step_ms": pair.fp32_step_ms, "changed_step_ms": pair.step_ms,
            "speedup": round_ratio(iv.speedup), "speedup_interval": [round_ratio(iv.low), round_ratio(iv.high)],
            "figure": pair.shown.figure(),
            "how": f'KERAS_BACKEND={name} in the environment, or "backend": "{name}" in keras.json',
            "from_backend": fp32.software.keras_backend, "cost": BACKEND_COST,
            "in_memory": _in_memory(ctx, other) if other.variant == "synthetic_input" else []})
    return changes


def user_changes(ctx: Context, fp32: RunView) -> list[dict[str, Any]]:
    """Changes to the user's code beyond a precision on this machine (`prescriptions[].user_changes`): those a
    control or an experiment measured (batches in memory; another Keras backend; compiled execution), largest
    first; then, where batches in memory still leave the GPU idle most of the step, what goes at that bound and
    nobody measured, in the order it is worth trying (compiled execution with the command that measures it; uint8
    batches from pinned memory, an estimate): next_bound.py."""
    following = next_bound_changes(ctx, fp32, command_of(ctx))
    measured = _input_change(ctx, fp32) + _backend_changes(ctx, fp32) + [
        c for c in following if c["basis"] == "measured"]
    return sorted(measured, key=lambda c: -float(c["speedup"])) + [c for c in following if c["basis"] != "measured"]
