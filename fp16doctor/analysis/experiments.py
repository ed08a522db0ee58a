"""Which short experiments confirm or refute the causes found so far: each changes one thing of one run.

Pure: the results document in, a plan out; diagnose runs the plan like any other runs (variant + experiment),
and the accounting (causes.py) reads their step times back as evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.causes import (
    SETTING_EXPERIMENTS,
    account,
    describe_changes,
    experiment_results,
    last_change,
    no_test,
)
from fp16doctor.analysis.context import Context, RunView, build_context
from fp16doctor.analysis.ledger import ledgers
from fp16doctor.analysis.next_bound import COMPILED_IN_MEMORY, compiled_applies, in_memory_idle
from fp16doctor.analysis.registry import rules
from fp16doctor.analysis.rules.common import make_finding
from fp16doctor.analysis.rules.host_input import CONTROL_MIN_FACTOR
from fp16doctor.knowledge.gpus import cc_tuple
from fp16doctor.knowledge.kernels import is_reference_impl
from fp16doctor.results import VARIANT_CHANGES
from fp16doctor.workload.protocol import FP16, SEED_WORKLOAD, is_pure

# An experiment whose expected effect is below this share of the step is not worth its run.
MIN_EXPECTED_SHARE = 0.05
# The input control (synthetic_input: the same model on batches already in memory) shows an input cost only where
# the step read from images exceeds CONTROL_MIN_FACTOR times its own (rules/host_input.py): the input then takes more
# than this share of the step. A run whose measured batch time is below it cannot show one, and gets no control.
INPUT_CONTROL_MIN_SHARE = 1 - 1 / CONTROL_MIN_FACTOR
# Without measured ops, a CPU float16 run this many times slower than float32 on TensorFlow still points at
# oneDNN's kernels (TensorFlow hands float16 to oneDNN only on CPUs with fp16 instructions).
ONEDNN_SUSPECT_RATIO = 3.0


@dataclass(frozen=True)
class Experiment:
    """One variant of one run: what it changes, and which finding it tests."""

    variant: str
    changes: Mapping[str, Any]
    tests: str
    precision: str  # the precision of the run it changes (tf32_off changes float32)


ONEDNN_OFF = Experiment("onednn_off", VARIANT_CHANGES["onednn_off"], "slow_fp16_kernels", "")
FLOAT32_BATCHES = Experiment("float32_batches", VARIANT_CHANGES["float32_batches"], "host_fp16_emulation", "")
CHANNELS_PADDED = Experiment("channels_padded", VARIANT_CHANGES["channels_padded"], "tensor_cores_not_eligible", "")
TF32_OFF = Experiment("tf32_off", VARIANT_CHANGES["tf32_off"], "tf32_baseline", "float32")
XLA = Experiment("xla", VARIANT_CHANGES["xla"], "small_model_overhead", "")
# The same switch on float32 with batches in memory, where the in-memory step leaves the GPU idle (next_bound.py): it
# is measured where the idle time is seen, against float32 with batches in memory, and tests no finding.
COMPILED = Experiment(COMPILED_IN_MEMORY, VARIANT_CHANGES["xla"], "", "float32")
EXPERIMENTS = (ONEDNN_OFF, FLOAT32_BATCHES, CHANNELS_PADDED, TF32_OFF, XLA)
EXPERIMENT_VARIANTS = tuple(e.variant for e in EXPERIMENTS)


def _item(run: RunView, exp: Experiment, reason: str, skip: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "machine": run.machine,
        "stack": run.stack,
        "precision": exp.precision or run.precision,
        "variant": exp.variant,
        "experiment": {"changes": dict(exp.changes), "tests": exp.tests or None},
        "reason": reason,
    }
    if skip:
        item["skip_reason"] = skip
    return item


def _tensorflow(run: RunView) -> bool:
    return bool(run.software.tensorflow) and (run.software.keras_backend in (None, "tensorflow"))


def _onednn_not_in_play(run: RunView) -> str | None:
    """Why switching oneDNN off cannot change this run, when its trace says so: TensorFlow names the ops it
    hands to oneDNN _Mkl* (_MklNativeConv2D ...); a profiler trace with none of them ran TensorFlow's own
    kernels (on CPUs without AVX512-FP16 / AMX it keeps 16-bit types off oneDNN)."""
    ops = run.ops
    if ops is None or ops.source != "tf_profiler" or not ops.items:
        return None
    if any((item.op_type or "").startswith("_Mkl") for item in ops.items):
        return None
    return "TensorFlow's profiler shows no oneDNN op (_Mkl*) in this run: it ran TensorFlow's own kernels"


def _onednn_ms(run: RunView) -> float:
    """The time per step a TensorFlow profile gives to oneDNN's ops (TensorFlow names them _Mkl*), 0 without one."""
    ops = run.ops
    if ops is None or ops.source != "tf_profiler":
        return 0.0
    return sum(i.wall_ms_per_step if i.wall_ms_per_step is not None else i.ms_per_step
               for i in ops.items if (i.op_type or "").startswith("_Mkl"))


def plan(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every experiment the evidence points at, run or skipped (`skip_reason` says why it is not worth it)."""
    ctx = build_context(doc)
    found = {fid: f for fid, rule in rules() if (f := rule(ctx)) is not None}
    planned: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    done = {(r.machine, r.stack, r.precision, r.variant) for r in ctx.runs}

    def add(run: RunView, exp: Experiment, reason: str, expected_ms: float | None, skip: str | None = None) -> None:
        key = (run.machine, run.stack, exp.precision or run.precision, exp.variant)
        if key in done or key in planned:
            return
        step = run.step_ms or 0.0
        if skip is None and expected_ms is not None and step and expected_ms < MIN_EXPECTED_SHARE * step:
            skip = (f"its expected effect ({expected_ms:.0f} ms) is under {MIN_EXPECTED_SHARE:.0%} of the "
                    f"{step:.0f} ms step")
        planned[key] = _item(run, exp, reason, skip)

    for acc in account(ctx, found, ledgers(ctx)):
        if not acc.significant or acc.pair.reduced.variant != "original":
            continue
        reduced, fp32 = acc.pair.reduced, acc.pair.fp32
        slower = acc.difference_ms > 0
        ref_ms = sum(i.ms_per_step for i in (reduced.ops.items if reduced.ops else ()) if is_reference_impl(i.impl))
        # oneDNN's own ops (_Mkl*) that took more of the 16-bit step than of float32's: switching oneDNN off can
        # change them, whatever implementation names they recorded (an _MklNativeConv2DBackpropFilter holding 8 s
        # of a 10 s step with a few reference kernels of 0.3 ms beside it).
        onednn_ms = _onednn_ms(reduced) - _onednn_ms(fp32)
        if slower and not reduced.on_gpu and _tensorflow(reduced):
            if ref_ms or onednn_ms > 0:
                why = ("oneDNN ran reference kernels for 16-bit ops" if ref_ms >= onednn_ms else
                       f"oneDNN's ops (_Mkl*) took {onednn_ms:.0f} ms more of the {reduced.precision} step than of "
                       "float32's")
                add(reduced, ONEDNN_OFF, why, max(ref_ms, onednn_ms))
            elif acc.pair.ratio >= ONEDNN_SUSPECT_RATIO and not any(
                    i.impl for i in (reduced.ops.items if reduced.ops else ())):
                add(reduced, ONEDNN_OFF, f"{reduced.precision} is {acc.pair.shown.figure()} on the CPU and no "
                    "oneDNN implementation names were recorded to say which kernels ran", None,
                    skip=_onednn_not_in_play(reduced))
        if slower and is_pure(reduced.precision, FP16) and "host_fp16_emulation" in found \
                and reduced.workload_name == SEED_WORKLOAD:
            excess = (reduced.input_ms - fp32.input_ms) if reduced.input_ms and fp32.input_ms else None
            add(reduced, FLOAT32_BATCHES, "the host builds float16 batches", excess)
        if reduced.on_gpu and "tensor_cores_not_eligible" in found and reduced.workload_name == SEED_WORKLOAD:
            add(reduced, CHANNELS_PADDED, "a layer's channel count keeps it off Tensor Cores", None)
        if "small_model_overhead" in found and _tensorflow(reduced) and (reduced.software.keras or "").startswith("3"):
            add(reduced, XLA, "launch and framework overhead dominate the step", None)
    # A switch is recommended only end to end (the best configuration with it against the best without it,
    # configs.best_config): where it is tried on a 16-bit run, float32 gets it too, so float32-with-the-switch competes.
    for item in list(planned.values()):
        if item["variant"] not in SETTING_EXPERIMENTS or item["precision"] == "float32" or "skip_reason" in item:
            continue
        base32 = next((r for r in ctx.ok_runs() if r.machine == item["machine"] and r.stack == item["stack"]
                     and r.precision == "float32" and r.variant == "original" and not r.experiment), None)
        exp = next(e for e in EXPERIMENTS if e.variant == item["variant"])
        if base32 is not None:
            add(base32, Experiment(exp.variant, exp.changes, exp.tests, "float32"),
                f"float32 with the same switch, so the switch is judged end to end ({item['reason']})", None)
    for run in ctx.ok_runs():
        reason = _input_control_reason(run)
        key = (run.machine, run.stack, run.precision, "synthetic_input")
        if reason is not None and key not in done and key not in planned:
            planned[key] = {"machine": run.machine, "stack": run.stack, "precision": run.precision,
                            "variant": "synthetic_input", "control": True, "reason": reason}
    for run in ctx.ok_runs():
        # With batches in memory the GPU idles most of the step (next_bound.py): compiled execution goes at the
        # dispatch and launch gaps; measured with batches in memory, beside the in-memory run it changes.
        in_memory = (run.machine, run.stack, "float32", COMPILED_IN_MEMORY) in done  # measured where it is seen
        if run.precision == "float32" and run.variant == "original" and not run.experiment and not in_memory and (
                idle := in_memory_idle(ctx, run)) is not None and compiled_applies(ctx, run):
            add(run, COMPILED, f"with batches in memory the GPU idled {idle.share:.0%} of the step", None)
    for run in ctx.ok_runs():
        # Where float32 may already run on Tensor Cores (TF32), fp16 can look no better: measure float32 without.
        gpu = ctx.gpu_for(run)
        cc = cc_tuple(gpu.compute_capability) if gpu is not None else None
        if run.precision == "float32" and run.variant == "original" and cc is not None and cc >= (8, 0):
            add(run, TF32_OFF, "float32 may already run on Tensor Cores as TF32", None)
    return list(planned.values())


def _input_control_reason(run: RunView) -> str | None:
    """Why this original run of the built-in workload gets its in-memory input control (the full size's matrix has
    one for every precision already): its batches took at least INPUT_CONTROL_MIN_SHARE of its step, or, for
    float32, nothing says how long they took. None: the control could not show an input cost here."""
    if (run.variant != "original" or run.experiment or run.bound or run.workload_name != SEED_WORKLOAD
            or not run.step_ms):
        return None
    if run.input_ms is None:
        return ("nothing measured how long the host takes to produce a batch" if run.precision == "float32"
                else None)
    share = run.input_ms / run.step_ms
    if share < INPUT_CONTROL_MIN_SHARE:
        return None
    return (f"producing a batch took {share:.0%} of the step: the in-memory control measures what the input "
            "costs")


def plan_experiments(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The experiments worth running (what diagnose runs after the main matrix)."""
    return [item for item in plan(doc) if "skip_reason" not in item]



def experiment_evidence(ctx: Context) -> dict[str, list[str]]:
    """finding id -> "with X the step went from A to B" lines, from every experiment run that finished."""
    lines: dict[str, list[str]] = {}
    for result in experiment_results(ctx):
        verdict = "changed the result" if result.significant() else "made no significant difference"
        why_not = no_test(result.run)
        if why_not is not None:
            verdict = f"left out of the evidence, {why_not}"
        lines.setdefault(result.tests, []).append(f"experiment: {result.describe()}: {verdict}")
    return lines


def setting_findings(ctx: Context) -> list[dict[str, Any]]:
    """framework_setting: one switch measured to change a step by >= 10 % and beyond both runs' spread, with
    the step times with and without it (the cause it tested carries the time it explains)."""
    found = []
    for result in experiment_results(ctx):
        run = result.run
        if last_change(run.variant) not in SETTING_EXPERIMENTS or not result.significant():
            continue
        faster = result.delta_ms > 0
        found.append(make_finding(
            "framework_setting",
            f"{run.variant}: {'faster' if faster else 'slower'} {run.precision} step with one switch changed",
            "warning" if faster else "info",
            0.9,
            [result.describe()],
            (f"Set {describe_changes(result.changes)} for this workload on this machine: measured "
             f"{abs(result.delta_ms) / result.base_ms:.0%} {'less' if faster else 'more'} time per step."
             if faster else f"Leave {describe_changes(result.changes)} unset here: it made the step slower."),
            machine=run.machine, stack=run.stack, precision=run.precision, variant=run.variant,
            switch=dict(result.changes), step_ms_with=round(result.run_ms, 3), step_ms_without=result.base_ms,
            explains_ms=None, basis="experiment",
        ))
    return found
