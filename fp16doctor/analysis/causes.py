"""Causal accounting: how much of each 16-bit run's step-time difference against its float32 partner each cause
explains (`explains_ms`), and the verdict that names the biggest.

The rule for a user to check against the report: a pair's difference (16-bit step minus float32 step, same
machine, stack and variant) is split over causes in the order measured ops > experiment > estimate; each
op's difference counts for one cause only, and the total explained is capped at the difference. The verdict's
cause is the speed cause that explains the most; below half explained, the verdict says how much nothing
explains. A difference inside the two runs' p10-p90 spread has no cause.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fp16doctor.analysis.context import BF16, REDUCED, Context, OpItem, Pair, RunView
from fp16doctor.analysis.registry import SPEED_CAUSES
from fp16doctor.analysis.rules.causal import (
    SETTING_MIN_CHANGE,
    SLOW_KERNEL_MIN_SHARE,
    slow_kernel_item,
)
from fp16doctor.analysis.values import fmt_ms
from fp16doctor.knowledge.frameworks import HOST_FP16_BATCH_ESTIMATE

HALF = 0.5  # below this share explained, the verdict says what is unexplained
# A measured op group smaller than this share of the difference names no cause of its own (a 0.1 ms input op
# in a 700 ms difference is noise, not host-side float16 work).
MIN_MEASURED_SHARE = 0.02


@dataclass
class Share:
    """One cause's part of one pair's difference."""

    cause: str
    ms: float  # positive: time this cause costs (slower) or saves (faster), in the direction of the difference
    basis: str
    evidence: list[str] = field(default_factory=list)
    ops: list[dict[str, Any]] = field(default_factory=list)
    confirmed_by: str | None = None


@dataclass
class Accounting:
    pair: Pair
    difference_ms: float  # 16-bit step - float32 step; negative when 16 bits saved time
    significant: bool
    shares: list[Share] = field(default_factory=list)

    @property
    def magnitude_ms(self) -> float:
        return abs(self.difference_ms)

    def claimed_ms(self) -> float:
        return sum(s.ms for s in self.shares)

    def remaining_ms(self) -> float:
        return max(0.0, self.magnitude_ms - self.claimed_ms())

    def add(self, share: Share) -> None:
        """Adds a share, never beyond the difference: what is already claimed stays claimed. A share too small
        to matter (under MIN_MEASURED_SHARE of the difference) names no cause: its finding stays evidence."""
        share.ms = min(share.ms, self.remaining_ms())
        if share.ms <= 0 or share.ms < MIN_MEASURED_SHARE * self.magnitude_ms:
            return
        existing = next((s for s in self.shares if s.cause == share.cause), None)
        if existing is None:
            self.shares.append(share)
        else:
            existing.ms += share.ms
            existing.evidence += [e for e in share.evidence if e not in existing.evidence]
            existing.ops += share.ops


# ---------------------------------------------------------------------------------------- measured ops


def _by_key(items: Sequence[OpItem]) -> dict[tuple[str, str, str], list[OpItem]]:
    grouped: dict[tuple[str, str, str], list[OpItem]] = {}
    for item in items:
        grouped.setdefault(item.key, []).append(item)
    return grouped


def _op_cause(items: Sequence[OpItem], run: RunView, ctx: Context, slower: bool) -> str | None:
    """Which cause an op group's difference belongs to, judged by what ran (never by flags alone)."""
    key = items[0].key
    layer, pass_, kind = key
    if not slower:
        return "fast_16bit_kernels" if pass_ not in ("cast", "layout", "input") else None
    if any(slow_kernel_item(i, run, ctx) for i in items):
        return "slow_fp16_kernels"
    if pass_ in ("cast", "layout") or kind in ("cast", "reorder", "transpose"):
        return "cast_overhead"
    if pass_ == "input":
        return "host_fp16_emulation" if run.precision == "float16" else "input_pipeline_bound"
    # Compute that ran a regular kernel and still took longer: the device's 16-bit arithmetic, where its
    # facts say it has none; otherwise nothing here names a cause and the time stays unexplained.
    if run.precision in BF16:
        return "bf16_unsupported" if _lacks_bf16(run, ctx) else None
    if run.on_gpu:
        gpu = ctx.gpu_for(run)
        if gpu is not None and gpu.fp16_ratio is not None and gpu.fp16_ratio < 1:
            return "no_fast_fp16_hardware"
        if gpu is not None and gpu.tensor_cores is False:
            return "no_tensor_cores"
        return None
    return "no_fast_fp16_hardware" if ctx.cpu_for(run).native_fp16 is False else None


def _lacks_bf16(run: RunView, ctx: Context) -> bool:
    if run.on_gpu:
        gpu = ctx.gpu_for(run)
        return gpu is not None and gpu.tf32 is False  # TF32 and bfloat16 arrived together with 8.0
    cpu = ctx.cpu_for(run)
    return cpu.flags is not None and not cpu.bf16_flags


def _account_ops(acc: Accounting, ctx: Context) -> None:
    fp32, reduced = acc.pair.fp32, acc.pair.reduced
    if fp32.ops is None or reduced.ops is None:
        return
    slower = acc.difference_ms > 0
    ours, theirs = _by_key(reduced.ops.items), _by_key(fp32.ops.items)
    per_cause: dict[str, Share] = {}
    for key, items in ours.items():
        ms16 = sum(i.ms_per_step for i in items)
        ms32 = sum(i.ms_per_step for i in theirs.get(key, []))
        delta = ms16 - ms32
        if (delta > 0) != slower or delta == 0:
            continue
        cause = _op_cause(items, reduced, ctx, slower)
        if cause is None:
            continue
        share = per_cause.setdefault(cause, Share(cause, 0.0, "measured_ops"))
        share.ms += abs(delta)
        top = max(items, key=lambda i: i.ms_per_step)
        share.ops.append({"layer": key[0] or None, "pass": key[1], "impl": top.impl, "dtype": top.dtype,
                          "name": top.name, "ms_per_step": round(ms16, 3), "float32_ms_per_step": round(ms32, 3),
                          "difference_ms": round(delta, 3)})
    if not per_cause:
        return
    # Ops of a window can overlap (TensorFlow runs independent ops at once): scale so the measured shares
    # never claim more than the difference.
    total = sum(s.ms for s in per_cause.values())
    scale = min(1.0, acc.magnitude_ms / total) if total else 1.0
    for share in sorted(per_cause.values(), key=lambda s: -s.ms):
        share.ops.sort(key=lambda o: -abs(o["difference_ms"]))
        share.ms *= scale
        if share.ms < MIN_MEASURED_SHARE * acc.magnitude_ms:
            continue
        if share.cause == "slow_fp16_kernels" and share.ms < SLOW_KERNEL_MIN_SHARE * acc.magnitude_ms:
            continue
        share.evidence = _ops_evidence(share, reduced, fp32)
        acc.add(share)


def _ops_evidence(share: Share, reduced: RunView, fp32: RunView) -> list[str]:
    lines = []
    for op in share.ops[:4]:
        impl = f" ran {op['impl']}" if op.get("impl") else ""
        where = op.get("layer") or op.get("name")
        lines.append(f"{where} {str(op['pass']).replace('_', ' ')}{impl}: {fmt_ms(op['ms_per_step'])} per step in "
                     f"{reduced.precision} vs {fmt_ms(op['float32_ms_per_step'])} in float32")
    if len(share.ops) > 4:
        rest = sum(abs(o["difference_ms"]) for o in share.ops[4:])
        lines.append(f"and {len(share.ops) - 4} more ops ({fmt_ms(rest)} of difference)")
    source = reduced.ops.source if reduced.ops else None
    if source:
        lines.append(f"measured with {source}" + (f", coverage {reduced.ops.coverage:.0%}"
                                                   if reduced.ops and reduced.ops.coverage is not None else ""))
    return lines


# ---------------------------------------------------------------------------------------- experiments


@dataclass(frozen=True)
class ExperimentResult:
    """A variant that changed one thing, against the 16-bit run it changed."""

    run: RunView
    base: RunView
    tests: str
    changes: Mapping[str, Any]

    @property
    def run_ms(self) -> float:
        """The experiment's step, like for like: a base cut short by its first step is compared with the
        experiment's first step (tracing and autotuning included on both sides); one cut short by a later warm-up
        step, with the experiment's steps."""
        assert self.run.step_ms is not None
        if self.base.bound_on_first_step and not self.run.bound and self.run.first_step_ms:
            return self.run.first_step_ms
        return self.run.step_ms

    @property
    def delta_ms(self) -> float:
        assert self.base.step_ms is not None
        return self.base.step_ms - self.run_ms  # positive: the change made the step faster

    def significant(self) -> bool:
        base = self.base.step_ms or 0.0
        if abs(self.delta_ms) < SETTING_MIN_CHANGE * base:
            return False
        if self.base.bound or self.run.bound:
            return True  # one step each: no spread to compare with, and the 10 % floor already holds
        return Pair(self.base, self.run).slower or Pair(self.base, self.run).faster

    def describe(self) -> str:
        first = " first" if self.base.bound_on_first_step and not self.run.bound else ""
        return (f"with {describe_changes(self.changes)} the {self.base.precision}{first} step went from "
                f"{'>= ' if self.base.bound else ''}{fmt_ms(self.base.step_ms)} to {fmt_ms(self.run_ms)}")


def describe_changes(changes: Mapping[str, Any]) -> str:
    env = changes.get("env")
    parts = [f"`{k}={v}`" for k, v in env.items()] if isinstance(env, Mapping) else []
    parts += [f"{k}={v}" for k, v in changes.items() if k != "env"]
    return ", ".join(parts) or "the change"


SETTING_EXPERIMENTS = ("onednn_off", "tf32_off", "xla")  # variants that flip a framework switch


def experiment_results(ctx: Context) -> list[ExperimentResult]:
    """Every finished experiment run, against the original run of its machine, stack and precision."""
    found = []
    for run in ctx.ok_runs():
        if not run.experiment:
            continue
        base = next((r for r in ctx.ok_runs() if r.machine == run.machine and r.stack == run.stack
                     and r.precision == run.precision and r.variant == "original" and not r.experiment), None)
        if base is None:
            continue
        changes = run.experiment.get("changes")
        found.append(ExperimentResult(run, base, str(run.experiment.get("tests") or ""),
                                      changes if isinstance(changes, Mapping) else {}))
    return found


def _account_experiments(acc: Accounting, ctx: Context) -> None:
    """An experiment that made a slower 16-bit step faster confirms the cause it tests and accounts for what it
    removed; each experiment's delta is credited to one cause only."""
    if acc.difference_ms <= 0:
        return  # experiments test causes of slowness; a change that slows a faster run explains nothing here
    for exp in (e for e in experiment_results(ctx) if e.base is acc.pair.reduced):
        if not exp.significant() or exp.delta_ms <= 0:
            continue
        cause = exp.tests if exp.tests in SPEED_CAUSES else (
            "framework_setting" if exp.run.variant in SETTING_EXPERIMENTS else None)
        if cause is None:
            continue
        existing = next((s for s in acc.shares if s.cause == cause), None)
        if existing is not None:
            existing.confirmed_by = exp.run.variant
            existing.evidence.append(f"confirmed: {exp.describe()}")
            # What the switch removed beyond what the ops measured is this cause's too.
            existing.ms += min(max(0.0, exp.delta_ms - existing.ms), acc.remaining_ms())
            continue
        acc.add(Share(cause, exp.delta_ms, "experiment", [exp.describe()], confirmed_by=exp.run.variant))


# ---------------------------------------------------------------------------------------- estimates


def _applies(finding: Mapping[str, Any] | None, run: RunView) -> bool:
    """A document-wide rule's finding speaks for this run's stack (where it names its stacks)."""
    if finding is None:
        return False
    stacks = finding.get("stacks")
    return not isinstance(stacks, list) or not stacks or run.stack in stacks


def _account_estimates(acc: Accounting, ctx: Context, found: Mapping[str, Mapping[str, Any]]) -> None:
    """Table-based causes for what measured ops and experiments left unclaimed (hand-written or older files)."""
    reduced, fp32 = acc.pair.reduced, acc.pair.fp32
    measured = reduced.ops is not None and fp32.ops is not None
    if acc.difference_ms <= 0:
        if "fp16_faster" in found and not measured:
            gpu = ctx.gpu_for(reduced)
            if gpu is not None and gpu.tensor_cores:
                acc.add(Share("fast_16bit_kernels", acc.remaining_ms(), "estimate",
                              [f"{gpu.label} has Tensor Cores; no ops were measured to say which kernels saved "
                               "the time"]))
        return
    if _applies(found.get("host_fp16_emulation"), reduced) and reduced.precision == "float16":
        if reduced.input_ms is not None and fp32.input_ms is not None:
            excess = reduced.input_ms - fp32.input_ms
            if excess > 0:
                acc.add(Share("host_fp16_emulation", excess, "estimate",
                              [f"measured host batch time {fmt_ms(reduced.input_ms)} in float16 vs "
                               f"{fmt_ms(fp32.input_ms)} in float32 (fit_generator's one worker waits for it)"]))
        elif reduced.workload_name == "seed_cnn":
            est = HOST_FP16_BATCH_ESTIMATE
            excess = est.scaled_excess_ms(reduced.batch_size, reduced.image_pixels)
            acc.add(Share("host_fp16_emulation", excess, "estimate",
                          [f"estimated {fmt_ms(excess)} per batch from {est.source} "
                           f"({fmt_ms(est.float16_ms)} vs {fmt_ms(est.float32_ms)} per {est.batch_size} images), "
                           "scaled to this run's batch and image size"]))
    if measured:
        return  # with ops on both sides, what they do not attribute stays unexplained: flags are no measurement
    hardware = [c for c in ("no_fast_fp16_hardware", "no_tensor_cores", "bf16_unsupported") if c in found]
    for cause in hardware:
        if cause == "bf16_unsupported" and (reduced.precision not in BF16 or not _lacks_bf16(reduced, ctx)):
            continue
        if cause != "bf16_unsupported" and reduced.precision not in REDUCED:
            continue
        if cause == "no_fast_fp16_hardware" and not _slow_fp16_device(reduced, ctx):
            continue
        gpu = ctx.gpu_for(reduced)
        if cause == "no_tensor_cores" and not (gpu is not None and gpu.tensor_cores is False):
            continue
        acc.add(Share(cause, acc.remaining_ms(), "estimate",
                      ["not measured: no ops were recorded, so the rest of the difference is put down to the "
                       "device's 16-bit arithmetic from its facts (an upper bound, not a measurement)"]))


def _slow_fp16_device(run: RunView, ctx: Context) -> bool:
    if run.on_gpu:
        gpu = ctx.gpu_for(run)
        return gpu is not None and gpu.fp16_ratio is not None and gpu.fp16_ratio < 1
    return ctx.cpu_for(run).native_fp16 is False


# ---------------------------------------------------------------------------------------- the whole


def account(ctx: Context, found: Mapping[str, Mapping[str, Any]]) -> list[Accounting]:
    """Every 16-bit run with a float32 partner on its machine, its difference split over causes."""
    result = []
    for pair in ctx.pairs:
        if pair.reduced.experiment:
            continue  # an experiment is evidence for its base run, not a verdict of its own
        assert pair.reduced.step_ms is not None and pair.fp32.step_ms is not None
        diff = pair.interval.difference_ms  # the medians' difference, or the rounds' mean paired difference
        acc = Accounting(pair, diff, pair.slower or pair.faster)
        if acc.significant:
            _account_ops(acc, ctx)
            _account_experiments(acc, ctx)
            _account_estimates(acc, ctx, found)
            acc.shares.sort(key=lambda s: -s.ms)
        result.append(acc)
    return result

