"""What was measured on a machine and stack, and which of it to use: every adoptable configuration against float32
there (its ratio, interval, caveats, and what makes it unsafe), the run each machine and stack is judged against, and
the fastest configuration significantly faster and safe (prescribe.py says it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.advice import variant_setting
from fp16doctor.analysis.context import CONTROL_VARIANTS, Context, Pair, RunView, names_a_change
from fp16doctor.analysis.intervals import RatioInterval
from fp16doctor.analysis.values import NOT_RESOLVED, ShownRatio, as_list, as_mapping, fmt_config, fmt_ms, round_ratio
from fp16doctor.analysis.words import config_notes
from fp16doctor.results import VARIANT_CHANGES
from fp16doctor.workload.protocol import BF16 as BF16_FAMILY
from fp16doctor.workload.protocol import FP16, compose_variant, is_pure, variant_parts

Finding = dict[str, Any]

# Variants that change how the same model trains (a switch, the batches' dtype, padded channels): a user can adopt
# them. Controls such as synthetic_input change what is measured, never what to run.
ADOPTABLE = ("original", *VARIANT_CHANGES)


def adoptable(run: RunView) -> bool:
    """A configuration a user can adopt: as written, a variant fp16doctor applies, or one a document measured with
    the change its experiment names (a layout, a graph rewrite); never a control."""
    return run.variant in ADOPTABLE or names_a_change(run)


def run_setting(run: RunView) -> str | None:
    """The setting a measured configuration carries beside its precision."""
    changes = (run.experiment or {}).get("changes")
    return setting_of(run.variant, changes if isinstance(changes, Mapping) else None)


setting_of = variant_setting  # the switch a variant flips, as a user would set it


def adopted_variant(variant: str) -> str:
    """What a user would adopt of a variant: its changes less the controls ("xla" of synthetic_input+xla, a switch
    measured with batches in memory)."""
    return compose_variant(tuple(p for p in variant_parts(variant) if p not in CONTROL_VARIANTS))


@dataclass(frozen=True)
class Measured:
    """One configuration measured on a machine and stack, against float32 there."""

    run: RunView
    interval: RatioInterval
    caveat: str | None
    unsafe: str | None  # why it may not be recommended (its loss went non-finite or stalled)
    shown: ShownRatio  # the ratio as every output prints it (Pair.shown)
    step_ms: float | None  # the step that ratio comes from, as its verdict quotes it (Pair.step_ms)
    base: str = "float32"  # what it is measured against: float32, or the fastest 16-bit type where none ran
    # A change (channels padded, float32 batches, TF32 off) against the run it changes as written, judged by
    # float32's A/A control: what the one change did, which a 16-bit change's ratio to float32 does not say.
    against: Pair | None = None

    @property
    def label(self) -> str:
        return fmt_config({"precision": self.run.precision, "setting": run_setting(self.run)})

    def speed_phrase(self) -> str:
        """'2.19x faster than float32 (95 % interval 2.08-2.30x, ...)', '>= 19x slower ...' or 'no faster or
        slower ...': the ratio as every output prints it (ShownRatio), its interval in its own direction."""
        iv, shown = self.interval, self.shown
        if shown.same or iv.outcome not in ("faster", "slower"):
            text = (f"not measurably faster or slower than {self.base} here now"  # describe() says why
                    if (iv.aa is not None and not iv.aa.passed) or iv.refused
                    else f"no faster or slower than {self.base}" if shown.equivalent
                    else f"{NOT_RESOLVED} against {self.base}")
        else:
            text = shown.figure(f"than {self.base}")
        spread = shown.interval_text()
        if iv.is_rounds and spread:
            return text + f" ({iv.confidence_level or 0.95:.0%} interval {spread}, {iv.rounds_words()})"
        return text + f" ({iv.describe()})"

    @property
    def baseline(self) -> bool:
        return self.run.precision == self.base and self.run.variant == "original" and not self.run.experiment

    def to_dict(self) -> dict[str, Any]:
        iv = self.interval
        return {"precision": self.run.precision, "variant": self.run.variant, "setting": run_setting(self.run),
                "step_ms": self.step_ms, "speedup": 1.0 if self.baseline else round_ratio(iv.speedup),
                # float32 against itself is the baseline, no comparison: no interval
                "speedup_interval": None if self.baseline else [round_ratio(iv.low), round_ratio(iv.high)],
                "outcome": "baseline" if self.baseline else iv.outcome,
                **({} if self.baseline else {"interval_method": iv.method}),
                **({"aa_check": iv.aa.to_dict()} if iv.aa is not None and not self.baseline else {}),
                **({"comparison_refused": iv.refused} if iv.refused else {}),
                "bound": self.run.bound, "caveat": self.caveat, "unsafe": self.unsafe, "notes": self.notes,
                **({"against": _against_dict(self.against)} if self.against is not None else {})}

    @property
    def notes(self) -> list[str]:
        notes = config_notes(self.unsafe, self.caveat, self.run.bound, self.interval.compared)
        if not self.baseline and self.interval.aa is not None and not self.interval.aa.passed:
            notes.append(f"not measurable {self.interval.aa.scope}: {self.interval.aa.reason}")
        if self.interval.refused:
            notes.append(f"not compared with {self.base}: {self.interval.refused}")
        return notes


def _caveat(run: RunView) -> str | None:
    """What a pure 16-bit type risks in training (advice `weight_updates`); inference updates no weight."""
    if not run.advice_applies("weight_updates"):
        return None
    if is_pure(run.precision, FP16):
        return ("pure fp16: weights and optimizer state in float16, so updates under 1/2048 of a weight are lost; "
                "watch the loss against float32's")
    if is_pure(run.precision, BF16_FAMILY):
        return ("pure bfloat16: weights and optimizer state in bfloat16 (8-bit mantissa), so updates under 1/256 of a "
                "weight are lost; watch the loss against float32's")
    return None


RunKey = tuple[str, str, str, str]  # machine, stack, precision, variant


def _unsafe(run: RunView, unstable: set[RunKey], rounded: set[RunKey]) -> str | None:
    key = (run.machine, run.stack, run.precision, run.variant)
    if key in rounded:
        return "it rounds the model's integer inputs, so it computes another model (integer_ids_rounded)"
    if run.loss_nan:
        return "its loss went non-finite"
    if key in unstable:
        return "its training was numerically unstable (numerics_unstable)"
    return None


def _runs_of(found: Mapping[str, Finding], finding_id: str) -> set[RunKey]:
    """The runs a numerics finding names (`runs[]`): configurations never prescribed."""
    finding = found.get(finding_id) or {}
    keys = set()
    for item in as_list(finding.get("runs")):
        item = as_mapping(item)
        keys.add((str(item.get("machine")), str(item.get("stack")), str(item.get("precision")),
                  str(item.get("variant") or "original")))
    return keys


def measured_configs(ctx: Context, fp32: RunView, found: Mapping[str, Finding]) -> list[Measured]:
    """Every adoptable configuration measured on float32's machine and stack, fastest first (float32 included), the
    ones not compared last."""
    unstable, rounded = _runs_of(found, "numerics_unstable"), _runs_of(found, "integer_ids_rounded")
    configs = []
    for run in ctx.ok_runs():
        if run.machine != fp32.machine or run.stack != fp32.stack or run.device != fp32.device:
            continue
        if not adoptable(run):
            continue
        pair = Pair(fp32, run)
        configs.append(Measured(run, pair.interval, _caveat(run), _unsafe(run, unstable, rounded), pair.shown,
                                pair.step_ms, fp32.precision, _against(ctx, pair)))
    # A configuration its comparison refused (two processes that differ more than the effect) goes last: its time is
    # no rank among the compared ones.
    configs.sort(key=lambda m: (m.interval.refused is not None, -m.interval.speedup))
    return configs


def _against(ctx: Context, pair: Pair) -> Pair | None:
    """A change against the run it changes as written (its machine, stack and device), float32's A/A control
    judging it: a change to float32 is its own comparison with float32 (`pair`); None for a precision as written."""
    fp32, run = pair.fp32, pair.reduced
    if run.variant == "original":
        return None
    if run.precision == fp32.precision:
        return pair
    base = next((r for r in ctx.ok_runs() if (r.machine, r.stack, r.device, r.precision) == (
        run.machine, run.stack, run.device, run.precision) and r.variant == "original" and not r.experiment), None)
    return Pair(base, run, control=fp32) if base is not None else None


def _against_dict(pair: Pair) -> dict[str, Any]:
    """`measured[].against`: the change against the run it changes, in the fields a measured entry uses."""
    iv = pair.interval
    notes = config_notes(None, None, iv.is_bound, iv.compared)
    notes += [f"not compared with {pair.fp32.precision}: {iv.refused}"] if iv.refused else []
    notes += [apart] if (apart := _apart(pair)) else []
    return {"precision": pair.fp32.precision, "step_ms": pair.step_ms, "base_step_ms": pair.fp32_step_ms,
            "speedup": round_ratio(iv.speedup),
            "speedup_interval": None if iv.is_bound else [round_ratio(iv.low), round_ratio(iv.high)],
            "outcome": iv.outcome, "interval_method": iv.method,
            **({"aa_check": iv.aa.to_dict()} if iv.aa is not None else {}),
            **({"comparison_refused": iv.refused} if iv.refused else {}), "bound": iv.is_bound, "notes": notes}


def _apart(pair: Pair) -> str:
    """Why a comparison timed in two processes quotes another step for the run it changes than every other line:
    each side's own process (intervals.py); "" where it quotes the same one."""
    iv = pair.interval
    if iv.is_rounds or iv.is_bound or iv.refused or fmt_ms(pair.fp32_step_ms) == fmt_ms(pair.fp32.step_ms):
        return ""
    return (f"timed in two processes: {pair.fp32.precision}'s {fmt_ms(pair.fp32_step_ms)} is its own process's "
            f"step, {fmt_ms(pair.fp32.step_ms)} in its rounds")


def _beats(switch: Measured, original: Measured) -> bool:
    """Whether a switch (a variant) is worth it over the same precision as written: its own comparison with that
    run, two processes and all (intervals.py), must say faster. Ratios against float32 from two timing designs
    (rounds, one process) are never ranked against each other alone."""
    return Pair(original.run, switch.run).interval.outcome == "faster"


def best_config(configs: Sequence[Measured], fp32: RunView) -> Measured:
    """The fastest configuration significantly faster than float32 and safe (a switch only where it measured faster
    than the same precision without it); else float32 itself."""
    eligible = [m for m in configs if m.interval.outcome == "faster" and m.unsafe is None and not m.run.bound]
    eligible = [m for m in eligible if m.run.variant == "original" or all(
        _beats(m, o) for o in eligible if o.run.variant == "original" and o.run.precision == m.run.precision)]
    if eligible:
        return max(eligible, key=lambda m: m.interval.speedup)
    return next(m for m in configs if m.run is fp32)  # the baseline is always among them


def baselines(ctx: Context) -> list[RunView]:
    """The run each machine and stack is prescribed against: float32 as written, else (no float32 run there) the
    fastest 16-bit type as written (Context.peer_pairs' baseline)."""
    found = [r for r in ctx.ok_runs() if r.precision == "float32" and r.variant == "original" and not r.experiment]
    covered = {(r.machine, r.stack, r.device) for r in found}
    for pair in ctx.peer_pairs:
        base = pair.fp32
        if base.variant == "original" and not base.experiment and all(base is not r for r in found) and (
                base.machine, base.stack, base.device) not in covered:
            found.append(base)
    return found
