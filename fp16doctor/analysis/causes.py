"""Causal accounting: how much of each 16-bit run's step-time difference against its float32 partner each cause
explains (`explains_ms`), and the verdict that names the biggest.

The rule for a user to check against the report: a pair's difference (16-bit step minus float32 step, same machine,
stack and variant) is split over causes in the order measured ops > experiment > estimate; each op's difference
counts for one cause only, and the total explained is capped at the difference. Op differences are taken on the ops'
overlap-true wall shares where both runs have them; otherwise every op group's difference in the step's direction,
named or not, is scaled together to the step's difference, so a cause claims only its own part. A device fact (no
fast fp16, no Tensor Cores, no bfloat16 units) is a finding, never a measured share: a slower 16-bit op is the
framework's kernel until an experiment shows otherwise. No estimate fills what is left by construction: a figure
from a table (the host batch measured elsewhere) is never a share (verdicts.likely_cause may name its finding), and
a best case larger than what is left is not trimmed to fill it. Where both runs' ledgers split the step on a device
(ledger.py), a measured cause whose time is one part of it (the host's batch, the batch's copy, the kernels), and
the only cause the pair names there, takes that part's change as its figure: the words quote the part beside the
step, as the parts line says them ("host batch +477 ms of the +362 ms step"), with the parts that moved against it
where it moved more than the step; its share (`explains_ms`) stays capped like any other. The verdict's cause is
the speed cause that explains the most; below half explained, the verdict says how much nothing explains. A
difference inside the two runs' p10-p90 spread has no cause.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from fp16doctor.analysis.context import Context, OpItem, Pair, RunView
from fp16doctor.analysis.intervals import ALWAYS_MEASURABLE, SwitchEffect, switch_effect
from fp16doctor.analysis.ledger import COPIES, HOST_BATCH, KERNELS, PART_WORDS, Ledger, part_change
from fp16doctor.analysis.registry import SPEED_CAUSES
from fp16doctor.analysis.roofline import estimate_context
from fp16doctor.analysis.rules.causal import (
    SETTING_MIN_CHANGE,
    SIXTEEN_BIT_DTYPES,  # an op ran in 16 bits when its item says so; unknown dtype is no evidence of it
    SLOW_KERNEL_MIN_SHARE,
    slow_kernel_item,
)
from fp16doctor.analysis.values import fmt_interval, fmt_ms, fmt_signed_ms, fmt_times, pass_words, variant_words
from fp16doctor.attribution.device_time import copy_direction
from fp16doctor.workload.protocol import FP16, is_pure, variant_base, variant_parts

HALF = 0.5  # below this share explained, the verdict says what is unexplained
# A measured op group smaller than this share of the difference names no cause of its own (a 0.1 ms input op
# in a 700 ms difference is noise, not host-side float16 work).
MIN_MEASURED_SHARE = 0.02
# Causes that are facts about the device: reported as findings, charged only to ops that ran in 16 bits.
HARDWARE_CAUSES = ("no_fast_fp16_hardware", "no_tensor_cores", "bf16_unsupported")
BASIS_ORDER = ("measured_ops", "experiment", "estimate")  # most to least certain


@dataclass
class Share:
    """One cause's part of one pair's difference."""

    cause: str
    ms: float  # positive: time this cause costs (slower) or saves (faster), in the direction of the difference
    basis: str
    evidence: list[str] = field(default_factory=list)
    ops: list[dict[str, Any]] = field(default_factory=list)
    confirmed_by: str | None = None
    # The ledger part whose change this share's figure is (ledger.PRIORITY), where the pair's ledgers have one
    part: str | None = None
    # What the experiment that confirmed it (or showed it holding back a gain) measured, as ExperimentResult.describe
    # says it: the change, and the step before and after it
    experiment: str | None = None

    def title(self, precision: str) -> str | None:
        """What this share names more exactly than its registry title: the slow kernel that ran, where it ran
        ('conv2d backward weights ran ref:any in float16'); None where the registry's title says it."""
        if self.cause != "slow_fp16_kernels" or not self.ops:
            return None
        op = self.ops[0]
        return (f"{op.get('layer') or op.get('name')} {pass_words(op.get('pass'))} ran "
                f"{op.get('impl') or 'a slow kernel'} in {precision}")


@dataclass
class Accounting:
    pair: Pair
    difference_ms: float  # 16-bit step - float32 step; negative when 16 bits saved time
    significant: bool
    shares: list[Share] = field(default_factory=list)
    # Causes whose ops moved against the difference (casts that added time to a faster step), with their time.
    against: list[Share] = field(default_factory=list)
    # (float32's ledger, the 16-bit run's) where both split the step on a device (ledger.py), else None
    ledgers: tuple[Ledger, Ledger] | None = None

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
        charged = sum(op["ms"] for op in share.ops)
        if charged > share.ms:  # trimmed: each op keeps its part of what is left
            for op in share.ops:
                op["ms"] = round(op["ms"] * share.ms / charged, 3)
        existing = next((s for s in self.shares if s.cause == share.cause), None)
        if existing is None:
            self.shares.append(share)
        else:
            existing.ms += share.ms
            # Time of two kinds under one cause is labelled with the less certain.
            existing.basis = max(existing.basis, share.basis, key=BASIS_ORDER.index)
            existing.evidence += [e for e in share.evidence if e not in existing.evidence]
            existing.ops += share.ops


# ---------------------------------------------------------------------------------------- measured ops


def _by_key(items: Sequence[OpItem]) -> dict[tuple[str, str, str], list[OpItem]]:
    grouped: dict[tuple[str, str, str], list[OpItem]] = {}
    for item in items:
        grouped.setdefault(item.key, []).append(item)
    return grouped


def ran_in_16_bits(item: OpItem) -> bool:
    return (item.dtype or "").lower() in SIXTEEN_BIT_DTYPES


def _op_cause(items: Sequence[OpItem], run: RunView, ctx: Context, slower: bool) -> str | None:
    """Which cause an op group's difference belongs to, judged by what ran (never by flags alone), so a cause's ops
    that moved either way net out in it; only a regular 16-bit kernel is judged by its direction (`slower`)."""
    key = items[0].key
    layer, pass_, kind = key
    # On a GPU trace every kernel of a pure 16-bit run is a 16-bit one (its rows may name no dtype).
    gpu_sixteen = (run.ops is not None and run.ops.on_gpu and is_pure(run.precision)
                   and not any(i.host_time or copy_direction(i.impl or i.name) for i in items))
    sixteen = gpu_sixteen or any(ran_in_16_bits(i) for i in items)
    if any(slow_kernel_item(i, run, ctx) for i in items):
        return "slow_fp16_kernels"
    if kind == "reorder" and _waited_behind_slow_kernels(items, run, ctx):
        return "slow_fp16_kernels"  # its time is the reference kernels' (switching oneDNN off removes both)
    # A pure 16-bit GPU run's layout kernel that shrank moved half the bytes: its kernels' gain, not a cast's cost.
    if (pass_ in ("cast", "layout") or kind in ("cast", "reorder", "transpose")) and (slower or not gpu_sixteen):
        return "cast_overhead"
    if pass_ == "input" and not slower and run.ops is not None and run.ops.on_gpu:
        # A GPU step's batch row (the host's batch, its copy) that shrank: a 16-bit batch is half the bytes; the same
        # float32 batch copied in both runs names no cause (its change is the link's noise).
        return "smaller_16bit_batches" if (run.batch_dtype or "") in SIXTEEN_BIT_DTYPES else None
    if pass_ == "input":
        return "host_fp16_emulation" if is_pure(run.precision, FP16) else "input_pipeline_bound"
    # A regular kernel that ran in 16 bits and still took longer: on the same silicon one framework's 16-bit
    # step is 2.2x float32's, another's 5.1x and a third's 1.0x (AVX2 EPYC), so the kernel, not the device, is
    # what was measured. float32 parts of a mixed run, or ops of unknown dtype, name no cause.
    if not sixteen:
        return None
    return "slow_16bit_compute" if slower else "fast_16bit_kernels"


# A reorder moves its tensor once: even at REORDER_FLOOR_GBPS (far below any CPU's memory bandwidth; 4 bytes an
# element read and written) a 64x64x3x3 weight takes 0.29 ms. One that took WAITED_FACTOR times that, in a run whose
# reference kernels held the cores, waited for them (on two cores, 3.0 s for that weight beside ref:any gradients):
# its time is part of the slow kernels' cause, not a cast's cost.
REORDER_FLOOR_GBPS = 1.0
WAITED_FACTOR = 100.0


def _waited_behind_slow_kernels(items: Sequence[OpItem], run: RunView, ctx: Context) -> bool:
    if run.ops is None or not any(slow_kernel_item(i, run, ctx) for i in run.ops.items):
        return False
    for item in items:
        shape = re.search(r"(\d+(?:x\d+)+)", item.name)
        if shape is None:
            continue
        elements = math.prod(int(d) for d in shape.group(1).split("x"))
        floor_ms = elements * 4 * 2 / (REORDER_FLOOR_GBPS * 1e9) * 1e3
        if item.ms_per_step > WAITED_FACTOR * floor_ms:
            return True
    return False


# Causes that make a 16-bit step faster; every other op cause makes it slower. A cause whose ops netted out the
# other way than it can act (a reference kernel that came out faster) explains nothing.
FASTER_CAUSES = frozenset({"fast_16bit_kernels", "smaller_16bit_batches"})


def _group_ms(items: Sequence[OpItem], wall: bool) -> float:
    """The group's time: wall shares where the pair has them; an op its source gave no interval (a tf.data
    bookkeeping op) keeps its own time, the most it can have added."""
    return sum(i.wall_ms_per_step if wall and i.wall_ms_per_step is not None else i.ms_per_step for i in items)


def _account_ops(acc: Accounting, ctx: Context) -> None:
    """Each cause is charged on the net change of its ops (an op of its own that moved back counts against it);
    a cause whose ops moved against the step's difference (casts that added time to a faster 16-bit step) is named
    with its time in `acc.against`, never dropped."""
    fp32, reduced = acc.pair.fp32, acc.pair.reduced
    if fp32.ops is None or reduced.ops is None:
        return
    slower = acc.difference_ms > 0
    sign = 1.0 if slower else -1.0  # an op's change in the step's direction: positive explains, negative opposes
    ours, theirs = _by_key(reduced.ops.items), _by_key(fp32.ops.items)
    # Wall shares where both windows have them: self times overlap, and a cause is what its ops added to the step.
    wall = any(i.wall_ms_per_step is not None for i in reduced.ops.items) and \
        any(i.wall_ms_per_step is not None for i in fp32.ops.items)
    by_cause: dict[str | None, list[tuple[tuple[str, str, str], list[OpItem], float, float]]] = {}
    for key in [*ours, *(k for k in theirs if k not in ours)]:
        mine, base = ours.get(key, []), theirs.get(key, [])
        ms16, ms32 = _group_ms(mine, wall), _group_ms(base, wall)
        if ms16 == ms32:
            continue
        # Each group is judged in its own direction: a cast that grew is cast overhead in any verdict.
        cause = _op_cause(mine, reduced, ctx, ms16 > ms32) if mine else None
        by_cause.setdefault(cause, []).append((key, mine, ms16, ms32))
    net = {cause: sign * sum(ms16 - ms32 for _, _, ms16, ms32 in groups) for cause, groups in by_cause.items()}
    # Every cause's net change in the step's direction counts, named or not: a cause claims its part of the
    # difference, never what ops with no cause added too.
    total = sum(v for v in net.values() if v > 0)
    scale = min(1.0, acc.magnitude_ms / total) if total else 1.0
    for cause, groups in sorted(by_cause.items(), key=lambda kv: -abs(net[kv[0]])):
        made_slower = (net[cause] > 0) == slower  # what the cause's ops did to the 16-bit step
        if cause is None or made_slower == (cause in FASTER_CAUSES):
            continue  # no cause, or one that cannot act in the direction its ops moved
        along = net[cause] > 0
        share = Share(cause, net[cause] * scale if along else -net[cause], "measured_ops")
        for key, mine, ms16, ms32 in groups:
            top = max(mine, key=lambda i: i.ms_per_step)
            moved = sign * (ms16 - ms32)
            entry: dict[str, Any] = {
                "layer": key[0] or None, "pass": key[1], "impl": top.impl, "dtype": top.dtype, "name": top.name,
                "ms_per_step": round(sum(i.ms_per_step for i in mine), 3),
                "float32_ms_per_step": round(sum(i.ms_per_step for i in theirs.get(key, [])), 3),
                "difference_ms": round(ms16 - ms32, 3), "ms": round(moved * scale if along else -moved, 3)}
            if wall:
                entry.update(wall_ms_per_step=round(ms16, 3), float32_wall_ms_per_step=round(ms32, 3))
            if any(i.in_flight for i in mine):
                entry["in_flight"] = True
            share.ops.append(entry)
        share.ops.sort(key=lambda o: -o["ms"])
        if share.ms < MIN_MEASURED_SHARE * acc.magnitude_ms:
            continue
        if not along:
            share.evidence = _ops_evidence(share, reduced, 1.0, wall, against=True, base=fp32.precision)
            acc.against.append(share)
            continue
        if share.cause == "slow_fp16_kernels" and share.ms < SLOW_KERNEL_MIN_SHARE * acc.magnitude_ms:
            continue
        share.evidence = _ops_evidence(share, reduced, scale, wall, base=fp32.precision)
        acc.add(share)


def _in_base(ms: float | None, base: str) -> str:
    """An op's time in the run it is compared with: "42 ms in float32", or "none in float32" for an op that ran only
    in the 16-bit run (a cast), never "0 ms"."""
    return f"{fmt_ms(ms)} in {base}" if ms else f"none in {base}"


def _ops_evidence(share: Share, reduced: RunView, scale: float, wall: bool, against: bool = False,
                  base: str = "float32") -> list[str]:
    """`base`: what the 16-bit run is compared with (float32, or another 16-bit type where no float32 ran)."""
    lines = []
    what = "against the difference" if against else "of the difference"
    for op in share.ops[:4]:
        impl = f" ran {op['impl']}" if op.get("impl") else ""
        where = op.get("layer") or op.get("name")
        part = f"{fmt_ms(op['ms'])} {what}" if op["ms"] >= 0 else f"{fmt_ms(-op['ms'])} back, netted out"
        if "wall_ms_per_step" in op:
            # The difference is taken on wall shares: quote them, so the reader can subtract the two figures.
            scaled = f" x {scale:.2f}" if scale < 1 and op["ms"] >= 0 and not against else ""
            own = (f" ({fmt_ms(op['ms_per_step'])} own)"
                   if fmt_ms(op["ms_per_step"]) != fmt_ms(op["wall_ms_per_step"]) else "")
            lines.append(f"{where} {pass_words(op['pass'])}{impl}: {fmt_ms(op['wall_ms_per_step'])} wall"
                         f"{own} in {reduced.precision} vs {_in_base(op['float32_wall_ms_per_step'], base)}: "
                         + (f"{fmt_ms(abs(op['difference_ms']))}{scaled} = {part}" if scaled else part))
            continue
        lines.append(f"{where} {pass_words(op['pass'])}{impl}: {fmt_ms(op['ms_per_step'])} per step in "
                     f"{reduced.precision} vs {_in_base(op['float32_ms_per_step'], base)}; {part}")
    if len(share.ops) > 4:
        rest = sum(o["ms"] for o in share.ops[4:])
        lines.append(f"and {len(share.ops) - 4} more ops ({fmt_ms(rest)} {what})")
    source = reduced.ops.source if reduced.ops else None
    if source:
        lines.append(f"measured with {source}" + (f", coverage {reduced.ops.coverage:.0%}"
                                                   if reduced.ops and reduced.ops.coverage is not None else ""))
    if wall:
        lines.append("each op's difference is taken on its wall-clock share of the step (\"wall\": ops that ran at "
                     "once share their time; \"own\": the op's own time, on several cores at once)")
    if scale < 1:
        lines.append(f"the causes' net op changes in the step's direction add up to more than the step's difference, "
                     f"so each op's is scaled by {scale:.2f}, its share of the total")
    return lines


# ---------------------------------------------------------------------------------------- experiments


@dataclass(frozen=True)
class ExperimentResult:
    """A variant that changed one thing, against the 16-bit run it changed."""

    run: RunView
    base: RunView
    tests: str
    changes: Mapping[str, Any]
    # float32 as written and float32 with the same switch, where both were timed (a process-wide switch)
    fp32_pair: tuple[RunView, RunView] | None = None

    @cached_property
    def pair(self) -> Pair:
        """The experiment against the run it changed (the run in float32's place): its interval, computed once."""
        return Pair(self.base, self.run)

    def within_settings(self) -> SwitchEffect | None:
        """The switch's effect on this precision against float32: float16/float32 with it against float16/float32
        without it, each a log ratio inside its own setting, so what the switch did to both alike cancels. None
        where float32 was not timed both ways, or a run was cut short."""
        if self.fp32_pair is None or self.one_step or any(r.bound for r in self.fp32_pair):
            return None
        without, with_switch = self.fp32_pair
        return switch_effect(Pair(without, self.base).interval, Pair(with_switch, self.run).interval)

    def confirms(self) -> bool:
        """Whether the change confirms a cause of the 16-bit run's difference against float32: significant, and,
        where float32 was timed with the switch too, beyond what it did to float32 as well."""
        effect = self.within_settings()
        return self.significant() and (effect is None or effect.significant)

    @property
    def one_step(self) -> bool:
        """Either run was cut short by the slow-step bound: one step stands against one step (or a median)."""
        return self.base.bound or self.run.bound

    @property
    def first_steps(self) -> bool:
        """A cut base is compared on first steps, like for like: tracing and autotuning included on both sides (a
        cut record that names no first step was cut on it: its step is its first)."""
        return self.base.bound and bool(self.run.first_step_ms) and (
            bool(self.base.first_step_ms) or self.base.bound_on_first_step)

    @property
    def base_ms(self) -> float:
        """The changed run's step as its comparison with the experiment weighs it: the paired rounds' figure where
        both were timed side by side (the one every other line quotes for that run), a cut run's first step."""
        assert self.base.step_ms is not None
        if self.first_steps:
            return self.base.first_step_ms or self.base.step_ms
        return self.pair.fp32_step_ms or self.base.step_ms

    @property
    def run_ms(self) -> float:
        """The experiment's step, like for like with base_ms."""
        assert self.run.step_ms is not None
        if self.first_steps:
            return self.run.first_step_ms or self.run.step_ms
        return self.pair.step_ms or self.run.step_ms

    @property
    def delta_ms(self) -> float:
        return self.base_ms - self.run_ms  # positive: the change made the step faster

    def significant(self) -> bool:
        """At least SETTING_MIN_CHANGE and beyond what the two runs' comparison allows (their spread, and the
        variation between two processes the document measured, intervals.py). One step confirms nothing by
        itself: where a run was cut short, only a change of ALWAYS_MEASURABLE or more counts (one cut run's two
        steps differed by 8-39 % on a Xeon, recordings/cpu-xeon-quick-diagnose)."""
        base = self.base_ms
        if abs(self.delta_ms) < SETTING_MIN_CHANGE * base:
            return False
        if self.one_step:
            return max(base / self.run_ms, self.run_ms / base) >= ALWAYS_MEASURABLE
        return self.pair.interval.outcome != "no_significant_difference"

    def describe(self) -> str:
        first = " first" if self.first_steps else ""
        cut = "; cut short: one step against one step" if self.one_step else ""
        effect = self.within_settings()
        against = ""
        if effect is not None:
            against = (f"; against float32 in each setting, {fmt_times(effect.ratio)} "
                       f"({fmt_interval(effect.low, effect.high)}"
                       f"{')' if effect.significant else '), not beyond both comparisons'}")
        where = f" ({variant_words(self.base.variant)})" if self.base.variant != "original" else ""
        return (f"with {describe_changes(self.changes)} the {self.base.precision}{where}{first} step went from "
                f"{fmt_ms(self.base_ms)} to {fmt_ms(self.run_ms)} ({fmt_signed_ms(self.run_ms - self.base_ms)}{cut})"
                f"{against}")


def describe_changes(changes: Mapping[str, Any]) -> str:
    env = changes.get("env")
    parts = [f"`{k}={v}`" for k, v in env.items()] if isinstance(env, Mapping) else []
    parts += [f"{k}={v}" for k, v in changes.items() if k != "env"]
    return ", ".join(parts) or "the change"


SETTING_EXPERIMENTS = ("onednn_off", "tf32_off", "xla")  # variants that flip a framework switch


def last_change(variant: str) -> str:
    """The change a variant makes against the configuration it is compared with (protocol.variant_base): "xla" of
    "synthetic_input+xla", the variant itself where it makes one."""
    parts = variant_parts(variant)
    return parts[-1] if parts else variant
# Causes an experiment confirms by changing which kernels ran (oneDNN off): measured 16-bit compute turns out theirs.
KERNEL_SWITCH_CAUSES = ("slow_fp16_kernels",)


# The host arrays a float32_batches run's images were built in (`variant_applied.host_arrays`): "float32" where the
# workload had each image built in the batch's dtype, so the host's arithmetic changed too.
HOST_ARRAYS_FLOAT32 = "float32"


def no_test(run: RunView) -> str | None:
    """Why an experiment run does not test the cause it names (it is then left out of the evidence), or None. A
    float32_batches run tests the host's float16 arithmetic only where each image was built in float32: Keras 3's
    and tf_keras's generators build each image in floatx and rescale it there whatever the batch's dtype. A record
    without `host_arrays` (older releases) tested it on Keras 2.x only, where the image module's floatx itself was
    redirected."""
    if run.variant != "float32_batches":
        return None
    arrays = (run.variant_applied or {}).get("host_arrays")
    if arrays == HOST_ARRAYS_FLOAT32 or (arrays is None and run.software.framework == "keras2"):
        return None
    return ("no test of the host's float16 arithmetic: this Keras built each image's array and rescaled it in floatx "
            "before the batch's dtype applied")


def experiment_results(ctx: Context) -> list[ExperimentResult]:
    """Every finished experiment run, against the original run of its machine, stack and precision."""
    found = []
    for run in ctx.ok_runs():
        if not run.experiment:
            continue
        # A combined variant (synthetic_input+xla) is compared with the configuration that lacks its last change.
        against = variant_base(run.variant)
        base = next((r for r in ctx.ok_runs() if r.machine == run.machine and r.stack == run.stack
                     and r.precision == run.precision and r.variant == against
                     and (not r.experiment or against != "original")), None)
        if base is None:
            continue
        changes = run.experiment.get("changes")
        fp32 = {r.variant: r for r in ctx.ok_runs() if r.machine == run.machine and r.stack == run.stack
                and r.precision == "float32" and r.variant in (against, run.variant)}
        pair = (fp32[against], fp32[run.variant]) if (
            run.precision != "float32" and last_change(run.variant) in SETTING_EXPERIMENTS and len(fp32) == 2) else None
        found.append(ExperimentResult(run, base, str(run.experiment.get("tests") or ""),
                                      changes if isinstance(changes, Mapping) else {}, pair))
    return found


def _account_experiments(acc: Accounting, ctx: Context) -> None:
    """An experiment that made a slower 16-bit step faster confirms the cause it tests and accounts for what it
    removed; each experiment's delta is credited to one cause only."""
    if acc.difference_ms <= 0:
        _account_held_back(acc, ctx)
        return
    for exp in (e for e in experiment_results(ctx) if e.base is acc.pair.reduced and no_test(e.run) is None):
        if not exp.confirms() or exp.delta_ms <= 0:
            continue
        cause = _tested_cause(exp)
        if cause is None:
            continue
        existing = next((s for s in acc.shares if s.cause == cause), None)
        ops: list[dict[str, Any]] = []
        if cause in KERNEL_SWITCH_CAUSES:
            # The switch changed which kernels ran: the 16-bit compute the ops measured was those kernels.
            ops = _take(acc, "slow_16bit_compute", exp.delta_ms - (existing.ms if existing else 0.0))
        said = exp.describe()
        if existing is not None:
            # The first experiment that confirmed it stays the one its recommendation quotes.
            existing.confirmed_by, existing.experiment = exp.run.variant, existing.experiment or said
            existing.evidence.append(f"confirmed: {said}")
            existing.ops += ops
            # What the switch removed beyond what the ops measured is this cause's too; the number is then the
            # experiment's.
            beyond = min(max(0.0, exp.delta_ms - existing.ms), acc.remaining_ms())
            if beyond > 0:
                existing.ms += beyond
                existing.basis = "experiment"
            continue
        acc.add(Share(cause, exp.delta_ms, "experiment", [said], ops=ops, confirmed_by=exp.run.variant,
                      experiment=said))


def _tested_cause(exp: ExperimentResult) -> str | None:
    """The speed cause an experiment tests: its own, or a framework switch's."""
    if exp.tests in SPEED_CAUSES:
        return exp.tests
    return "framework_setting" if last_change(exp.run.variant) in SETTING_EXPERIMENTS else None


def _account_held_back(acc: Accounting, ctx: Context) -> None:
    """A faster 16-bit step that an experiment made faster still: the cause it tests held part of the gain back. It
    explains none of the difference (16 bits are faster without it); it is named against it, with the time the
    change saved (a gain left on the table)."""
    for exp in (e for e in experiment_results(ctx) if e.base is acc.pair.reduced and no_test(e.run) is None):
        cause = _tested_cause(exp)
        if cause is None or exp.delta_ms <= 0 or not exp.confirms():
            continue
        said = exp.describe()
        acc.against.append(Share(cause, exp.delta_ms, "experiment", [f"held back: {said}"],
                                 confirmed_by=exp.run.variant, experiment=said))


def _take(acc: Accounting, cause: str, ms: float) -> list[dict[str, Any]]:
    """Frees up to `ms` of a cause's share for a cause an experiment confirmed; returns the ops' freed parts."""
    share = next((s for s in acc.shares if s.cause == cause), None)
    if share is None or ms <= 0 or share.ms <= 0:
        return []
    fraction = min(ms, share.ms) / share.ms
    freed = [{**op, "ms": round(op["ms"] * fraction, 3)} for op in share.ops]
    for op in share.ops:
        op["ms"] = round(op["ms"] * (1 - fraction), 3)
    share.ms *= 1 - fraction
    if share.ms < MIN_MEASURED_SHARE * acc.magnitude_ms:
        acc.shares.remove(share)  # what is left of it is too small to name; it stays unexplained
    return freed


# ---------------------------------------------------------------------------------------- estimates


def _applies(finding: Mapping[str, Any] | None, run: RunView) -> bool:
    """A document-wide rule's finding speaks for this run's stack (where it names its stacks)."""
    if finding is None:
        return False
    stacks = finding.get("stacks")
    return not isinstance(stacks, list) or not stacks or run.stack in stacks


def _input_ops_measured(pair: Pair) -> bool:
    """Whether the windows timed the input pipeline's host work (tf.data, a generator's Python): then the host's
    batch time is already inside the ops' difference and counts there only. A GPU trace's rows hold the device's
    time (the batch's copy is an input row there); only its rows marked as the host's time the host's work."""
    return any(i.pass_ == "input" and (i.host_time or not run.ops.on_gpu)
               for run in (pair.reduced, pair.fp32) if run.ops for i in run.ops.items)


def _account_estimates(acc: Accounting, ctx: Context, found: Mapping[str, Mapping[str, Any]]) -> None:
    """Table-based causes for what measured ops and experiments left unclaimed (hand-written or older files). Each
    is its own number, never what is left: what nothing explains stays unexplained."""
    reduced, fp32 = acc.pair.reduced, acc.pair.fp32
    measured = reduced.ops is not None and fp32.ops is not None
    if acc.difference_ms <= 0:
        if "fp16_faster" in found and not measured:
            saved = _roofline_saving(acc.pair, ctx)
            # A best case beyond what the measured difference left is no account of it: never trimmed to fit.
            if saved is not None and saved[0] <= acc.remaining_ms():
                acc.add(Share("fast_16bit_kernels", saved[0], "estimate", [saved[1]]))
        return
    if _input_ops_measured(acc.pair):
        return  # the input ops' own difference is the host's part; the batch time would count it twice
    if _applies(found.get("host_fp16_emulation"), reduced) and is_pure(reduced.precision, FP16):
        if reduced.input_ms is not None and fp32.input_ms is not None:
            excess = reduced.input_ms - fp32.input_ms
            if excess > 0:
                # Measured: the workload times the input pipeline's own call for each batch (input_time_ms), the
                # host's work that the step waits for, as a trace's input op would.
                acc.add(Share("host_fp16_emulation", excess, "measured_ops",
                              [f"measured host batch time {fmt_ms(reduced.input_ms)} in float16 vs "
                               f"{fmt_ms(fp32.input_ms)} in float32 (the training step waits for each batch)"]))
        # Without a measured input time the table's figure (a batch timed on another machine) is no share: the
        # host_fp16_emulation finding carries it as evidence, and the verdict names it as its likely cause.


def _roofline_saving(pair: Pair, ctx: Context) -> tuple[float, str] | None:
    """The best-case time 16 bits save on this GPU by its table of peak rates, where the roofline has the model."""
    for est in estimate_context(ctx):
        if (est.machine, est.stack, est.device, est.precision) != (
                pair.reduced.machine, pair.reduced.stack, pair.reduced.device, pair.reduced.precision):
            continue
        if est.fp32_ms is None or est.fp16_ms is None or est.fp32_ms <= est.fp16_ms:
            return None
        saved = est.fp32_ms - est.fp16_ms
        return saved, (f"not measured: the {est.gpu_name}'s peak rates put this model's best-case step at "
                       f"{fmt_ms(est.fp32_ms)} in float32 and {fmt_ms(est.fp16_ms)} in {est.precision} "
                       f"({fmt_ms(saved)} saved; no ops were recorded to say which kernels saved the time)")
    return None


# ---------------------------------------------------------------------------------------- the whole


def account(ctx: Context, found: Mapping[str, Mapping[str, Any]], books: Sequence[Ledger]) -> list[Accounting]:
    """Every 16-bit run with a float32 partner on its machine, its difference split over causes; `books`: the
    document's ledgers (ledger.ledgers), whose parts a cause's figure may be."""
    result = []
    by_run = {(led.machine, led.stack, led.precision, led.variant): led for led in books}
    for pair in [*ctx.pairs, *ctx.peer_pairs]:
        if pair.reduced.experiment:
            continue  # an experiment is evidence for its base run, not a verdict of its own
        assert pair.reduced.step_ms is not None and pair.fp32.step_ms is not None
        diff = pair.interval.difference_ms  # the medians' difference, or the rounds' mean paired difference
        acc = Accounting(pair, diff, pair.slower or pair.faster, ledgers=_device_ledgers(pair, by_run))
        if acc.significant:
            _account_ops(acc, ctx)
            if pair in ctx.pairs:  # experiments and estimates are read against float32
                _account_experiments(acc, ctx)
                _account_estimates(acc, ctx, found)
            _figures_from_parts(acc)
            acc.shares.sort(key=lambda s: -s.ms)
            _lead_with_the_running_reference_kernel(acc)
        result.append(acc)
    return result


# The ledger part a measured cause's time lies in on a device's step (ledger.py): the host building the batch, the
# batch's copy, the device's kernels (a GPU's casts are kernels too).
CAUSE_PARTS = {"host_fp16_emulation": HOST_BATCH, "input_pipeline_bound": HOST_BATCH,
               "smaller_16bit_batches": COPIES, "fast_16bit_kernels": KERNELS, "slow_16bit_compute": KERNELS,
               "slow_fp16_kernels": KERNELS, "cast_overhead": KERNELS}


def _device_ledgers(pair: Pair, by_run: Mapping[tuple[str, str, str, str], Ledger]) -> tuple[Ledger, Ledger] | None:
    """The pair's two ledgers where both split a whole step on a device (a GPU's device time), else None."""
    runs = (pair.fp32, pair.reduced)
    found = [by_run.get((r.machine, r.stack, r.precision, r.variant)) for r in runs]
    if any(r.device_time is None for r in runs) or any(led is None or led.cut or not led.parts for led in found):
        return None
    base, mine = found
    assert base is not None and mine is not None
    return base, mine


def _figures_from_parts(acc: Accounting) -> None:
    """A measured cause whose time is one part of a device's step, the only cause the pair names there, takes that
    part's change in the two ledgers as its figure (the parts line beside it shows the same change): its ops' rows
    or its timed batches measure the same time another way. Its share of the difference stays capped at what the
    other causes leave; the words quote the part (ledger.part_of_step), and the parts that moved against it where it
    moved more than the step. A part that moved the other way than the cause acts leaves the cause its own figure."""
    if acc.ledgers is None:
        return
    base, mine = acc.ledgers
    sign = 1.0 if acc.difference_ms > 0 else -1.0
    if sign * (mine.step_ms - base.step_ms) <= 0:
        return  # the ledgers' steps moved the other way than the timed difference: no part speaks for it
    named = [*acc.shares, *acc.against]
    for share in named:
        part = CAUSE_PARTS.get(share.cause)
        if part is None or share.basis != "measured_ops" or sum(CAUSE_PARTS.get(s.cause) == part for s in named) > 1:
            continue
        along = any(s is share for s in acc.shares)
        moved = sign * part_change(mine, base, part) * (1.0 if along else -1.0)
        if moved <= 0:
            continue
        if share.ops and fmt_ms(moved) != fmt_ms(share.ms):
            before, after = base.part(part), mine.part(part)
            share.evidence.append(
                f"the ledgers' {PART_WORDS[part]}: {fmt_ms(before.ms if before else 0.0)} a step in {base.precision}, "
                f"{fmt_ms(after.ms if after else 0.0)} in {mine.precision} "
                f"({fmt_signed_ms(part_change(mine, base, part))}): this cause's figure, where its ops' rows gave it "
                f"{fmt_ms(share.ms)}")
        others = sum(s.ms for s in acc.shares if s is not share)
        share.ms = min(moved, max(acc.magnitude_ms - others, 0.0)) if along else moved
        share.part = part


def _lead_with_the_running_reference_kernel(acc: Accounting) -> None:
    """A step cut inside was still waiting for the ops in flight at the cut: where one of them is a slow kernel
    (oneDNN's reference), its cause leads the verdict, whatever the shares of the partial window say. That window
    holds only the part of the step before the cut (on the Xeon: the later layers' backward pass; the earlier
    layers' reference weight gradients, the largest part of a whole step, had not begun), and the ops in flight
    share the time to the cut among them, so by shares alone the lead flipped between three diagnoses in a row of
    one machine (mixed_float16: slow_fp16_kernels 1845-2391 ms, slow_16bit_compute 829-1863 ms)."""
    if not acc.pair.reduced.censored:
        return
    for index, share in enumerate(acc.shares):
        if share.cause == "slow_fp16_kernels" and any(op.get("in_flight") for op in share.ops):
            acc.shares.insert(0, acc.shares.pop(index))
            return

