"""The prescription: per machine and stack, every measured configuration ranked by step time against float32, the
one to use (the fastest significantly faster and numerically safe, else float32 itself), and what the hardware
suggests that nobody measured, with the command that measures it.

Then no advice may contradict it: each finding that recommends a configuration says which (`recommends`), quotes
the speed-up measured for it on that machine or says it was not measured, and one measured slower says so.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.advice import (
    advice_of,
    how_to_use,
    input_pipeline_code,
    variant_setting,
)
from fp16doctor.analysis.busy import Contention
from fp16doctor.analysis.context import (
    BF16,
    CONTROL_VARIANTS,
    Context,
    Pair,
    RunView,
    Software,
    names_a_change,
)
from fp16doctor.analysis.intervals import RatioInterval
from fp16doctor.analysis.next_bound import CommandOf, idle_words, next_bound_changes
from fp16doctor.analysis.values import (
    EQUIVALENCE_BAND,
    NOT_RESOLVED,
    ShownRatio,
    as_list,
    as_mapping,
    as_positive,
    as_str,
    fmt_config,
    fmt_interval,
    fmt_ms,
    fmt_times,
    on,
    round_ratio,
)
from fp16doctor.analysis.words import change_worth, config_notes
from fp16doctor.engines.spec import WORKLOAD_SIZES, on_gpu
from fp16doctor.invocation import check_diagnose_argv, per_stack_options, stack_only_options
from fp16doctor.knowledge.frameworks import has_feature
from fp16doctor.knowledge.gpus import cc_tuple
from fp16doctor.redaction import redact_secrets
from fp16doctor.results import SIZE_CAVEATS, VARIANT_CHANGES, rerun_options
from fp16doctor.workload.protocol import BF16 as BF16_FAMILY
from fp16doctor.workload.protocol import FP16, SEED_WORKLOAD, compose_variant, is_pure, variant_base, variant_parts

Finding = dict[str, Any]
Prescription = dict[str, Any]

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


def _best(configs: Sequence[Measured], fp32: RunView) -> Measured:
    """The fastest configuration significantly faster than float32 and safe (a switch only where it measured faster
    than the same precision without it); else float32 itself."""
    eligible = [m for m in configs if m.interval.outcome == "faster" and m.unsafe is None and not m.run.bound]
    eligible = [m for m in eligible if m.run.variant == "original" or all(
        _beats(m, o) for o in eligible if o.run.variant == "original" and o.run.precision == m.run.precision)]
    if eligible:
        return max(eligible, key=lambda m: m.interval.speedup)
    return next(m for m in configs if m.run is fp32)  # the baseline is always among them


# ---------------------------------------------------------------------------------------- untested


# Chosen anew for the configuration to measure (a budget where a comparison was not settled: _not_settled).
_DROPPED = ("--precision", "--variant", "--out", "--stack", "--budget")
_DROPPED_ALONE = ("--resume", "--json", "--no-host")


def _targeting(ctx: Context, run: RunView) -> list[str]:
    """The invocation's targeting, kept in an untested configuration's command (its engines, script, size),
    narrowed to the run's own stack."""
    invocation = as_mapping(ctx.doc.get("invocation"))
    argv = [str(a) for a in as_list(invocation.get("argv"))]
    runs = as_list(ctx.doc.get("runs"))
    raw = as_mapping(runs[run.index]) if run.index < len(runs) else {}
    rerun = rerun_options(raw)
    # This host's Python on another Keras backend (host-jax) runs again with its engine's own option (--backend
    # jax), which every option that makes a stack of its own gives way to.
    own = [] if run.stack == "host" else rerun
    host = run.stack == "host" or (bool(own) and "--stack" not in own)
    if argv:
        # What targets stacks' containers (--docker-host, --runtime): a command for the host's own Python keeps none.
        dropped = _DROPPED + per_stack_options() + (stack_only_options() if host else ())
        kept, skip_next = [], False
        for arg in argv[2:] if argv[1:2] == ["diagnose"] else argv[1:]:
            if skip_next:
                skip_next = False
                continue
            if arg in dropped:
                skip_next = True
                continue
            if arg.startswith(tuple(f"{flag}=" for flag in dropped)) or arg in _DROPPED_ALONE:
                continue
            kept.append(arg)
        return (own if host else ["--stack", run.stack, "--no-host"]) + kept
    workload = as_mapping(raw.get("workload"))
    script = ["--script", as_str(workload.get("script")) or "train.py"] if workload.get("name") == "script" else []
    return [*rerun, *script]  # how its engine runs there again (results.rerun_options)


# A stack name a command line can carry as written (a hand-written document may name a stack anything).
_STACK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
NO_STACK_COMMAND = "its stack's name is not one `diagnose --stack` takes"


def _argv(ctx: Context, run: RunView, precision: str, variant: str | None, extra: Sequence[str] = ()) -> list[str]:
    precisions = dict.fromkeys(("float32", precision))  # float32 itself, where it is what nobody measured, once
    args = ["fp16doctor", "diagnose", *_targeting(ctx, run), *(a for p in precisions for a in ("--precision", p))]
    # The variant beside the configuration it is compared with: as written, or batches in memory for a change
    # made with them (synthetic_input+xla).
    return args + (["--variant", variant_base(variant), "--variant", variant] if variant else []) + list(extra)


def diagnose_command(ctx: Context, run: RunView, precision: str, variant: str | None = None,
                     extra: Sequence[str] = ()) -> str | None:
    """The diagnose command that measures a configuration on this run's machine and stack; None where the stack's
    name could not be passed to --stack, or where diagnose would refuse the command (invocation.py: a variant that
    changes the built-in model, for a script): no refused command is ever printed."""
    if not _STACK_NAME.fullmatch(run.stack):
        return None
    args = _argv(ctx, run, precision, variant, extra)
    if check_diagnose_argv(args) is not None:
        return None
    return redact_secrets(shlex.join(args))  # a URL's password or a token argument never reaches the page


def no_command_why(ctx: Context, run: RunView, precision: str, variant: str | None = None) -> str:
    """Why `diagnose_command` gave none: the stack's name, or diagnose's own refusal of the command."""
    refused = check_diagnose_argv(_argv(ctx, run, precision, variant)) if _STACK_NAME.fullmatch(run.stack) else None
    return f"diagnose refuses it here: {refused.message}" if refused is not None else NO_STACK_COMMAND


def has_mixed_precision(sw: Software) -> bool:
    """Whether the run's framework has a dtype policy (or autocast) to switch to: Keras 3, tf.keras from TF 2.4,
    PyTorch with autocast, JAX; multi-backend Keras 2 and TF 1.x have none a user would adopt."""
    fw = sw.framework
    if fw in ("keras3", "jax"):
        return True
    if fw == "tf.keras":
        return has_feature("tf_keras_policy", sw.tensorflow) is not False
    if fw == "torch":
        return has_feature("torch_amp", sw.torch) is not False
    return False


def _untested(ctx: Context, fp32: RunView, configs: Sequence[Measured], best: Measured,
              found: Mapping[str, Finding]) -> list[dict[str, Any]]:
    """What this machine's hardware suggests and nobody measured here."""
    have = {(m.run.precision, m.run.variant) for m in configs}
    precisions = {m.run.precision for m in configs}
    ideas: list[dict[str, Any]] = []

    def idea(precision: str, why: str, variant: str | None = None) -> None:
        if not all(fp32.advice_applies(a) for a in advice_of(precision, variant)):
            return  # a framework's switch for an inference-only library
        command = diagnose_command(ctx, fp32, precision, variant)
        ideas.append({"precision": precision, "variant": variant or "original",
                      "setting": setting_of(variant) if variant else None, "why": why, "command": command,
                      **({} if command else {"no_command": no_command_why(ctx, fp32, precision, variant)}),
                      "from": "hardware"})

    if not has_mixed_precision(fp32.software):
        return ideas  # an old stack has no mixed precision to try: old_stack says what to upgrade to
    gpu = ctx.gpu_for(fp32) if fp32.on_gpu else None
    cc = cc_tuple(gpu.compute_capability) if gpu is not None else None
    if not any(p in precisions for p in BF16):
        if gpu is None and not fp32.on_gpu:
            cpu = ctx.cpu_for(fp32)
            if cpu.bf16_flags:
                idea("mixed_bfloat16", f"this CPU has {', '.join(f.upper() for f in cpu.bf16_flags)}")
        elif cc is not None and cc >= (8, 0):
            idea("mixed_bfloat16", f"{gpu.label if gpu else 'this GPU'} (compute capability "
                 f"{cc[0]}.{cc[1]}) computes bfloat16 on its Tensor Cores")
    if gpu is not None and gpu.tensor_cores and "mixed_float16" not in precisions:
        idea("mixed_float16", f"{gpu.label} has Tensor Cores for float16")
    if gpu is not None and "tensor_cores_not_eligible" in found and not any(v == "channels_padded" for _, v in have):
        idea(best.run.precision if best.run.precision != "float32" else "mixed_float16",
             "a layer's channel count is not a multiple of 8, which keeps it off Tensor Cores", "channels_padded")
    return ideas


# ---------------------------------------------------------------------------------------- changes beyond a precision

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


def _command_of(ctx: Context) -> CommandOf:
    def command_of(run: RunView, precision: str, variant: str | None) -> tuple[str | None, str | None]:
        command = diagnose_command(ctx, run, precision, variant)
        return command, None if command else no_command_why(ctx, run, precision, variant)
    return command_of


def user_changes(ctx: Context, fp32: RunView) -> list[dict[str, Any]]:
    """Changes to the user's code beyond a precision on this machine (`prescriptions[].user_changes`): those a
    control or an experiment measured (batches in memory; another Keras backend; compiled execution), largest
    first; then, where batches in memory still leave the GPU idle most of the step, what goes at that bound and
    nobody measured, in the order it is worth trying (compiled execution with the command that measures it; uint8
    batches from pinned memory, an estimate): next_bound.py."""
    following = next_bound_changes(ctx, fp32, _command_of(ctx))
    measured = _input_change(ctx, fp32) + _backend_changes(ctx, fp32) + [
        c for c in following if c["basis"] == "measured"]
    return sorted(measured, key=lambda c: -float(c["speedup"])) + [c for c in following if c["basis"] != "measured"]


def _change_headline(change: Mapping[str, Any], on: str, best: Measured) -> str:
    """Two short sentences: the change measured largest, then the precision; intervals live in the table. `on`:
    " on STACK" where the document has more than one machine or stack to tell apart, else ""."""
    then = (f"use {best.label}, {best.shown.figure('than float32')} as written" if not best.baseline
            else "keep float32: as written, no configuration measured significantly faster")
    faster = [m for m in change.get("in_memory") or [] if m.get("outcome") == "faster"]
    top = min(faster, key=lambda m: float(m["step_ms"] or 0.0)) if faster else None
    if change.get("kind") == "backend":
        memory = " with batches in memory" if change.get("variant") == "synthetic_input" else ""
        again = f", and {top['precision']} {top['figure']} again" if top else ""
        return (f"Switch Keras to the {change['backend']} backend{on} first: float32{memory} took "
                f"{fmt_ms(change['changed_step_ms'])} a step there, not {fmt_ms(change['step_ms'])} "
                f"({change['figure']}){again}. On {change.get('from_backend')}, {then}.")
    text = (f"Fix the input pipeline first{on}: with batches in memory float32 took "
            f"{fmt_ms(change['changed_step_ms'])} a step, not {fmt_ms(change['step_ms'])} "
            f"({change_worth(change, detail=False)}). "
            f"Then {then}")
    if top is not None:
        # Why the in-memory gain is not the prescription: it is measured where the pipeline is fixed, not as written.
        risk = " (pure float16: watch its loss)" if is_pure(str(top["precision"]), FP16) else ""
        text += f"; in memory {top['precision']} was {top['figure']}, to measure again after the fix{risk}"
    return text + "."



# ---------------------------------------------------------------------------------------- the whole


def _headline(fp32: RunView, best: Measured, configs: Sequence[Measured], on: str) -> str:
    """One sentence: the configuration to use here and its measured worth (`on` as in _change_headline)."""
    others = [m for m in configs if not m.baseline]
    if fp32.precision != "float32":
        # No float32 run: the 16-bit types against the fastest of them (Context.peer_pairs).
        if best.run is fp32:
            return (f"Use {best.label}{on}: the fastest of the 16-bit types measured here (no float32 run to "
                    "compare with)")
        return f"Use {best.label}{on}: {best.speed_phrase()} (no float32 run to compare with)"
    if best.run is fp32:
        if not others:
            return f"Use float32{on}: no 16-bit configuration was measured here"
        fastest = others[0]
        if fastest.interval.outcome == "faster":
            return (f"Use float32{on}: the one faster configuration, {fastest.label}, "
                    f"is not safe here ({fastest.unsafe})")
        return (f"Use float32{on}: no measured configuration is significantly faster; the fastest other, "
                f"{fastest.label}, is {fastest.speed_phrase()}")
    caveat = f"; {best.caveat}" if best.caveat else ""
    return f"Use {best.label}{on}: {best.speed_phrase()}{caveat}"


def _unsettled(configs: Sequence[Measured], best: Measured, fp32: RunView) -> Measured | None:
    """The configuration a busy machine left unsettled where its comparison would change the prescription: as
    written, safe and not cut short, its point estimate beyond the equivalence band faster than what is prescribed,
    and not significantly faster (its interval reaches 1, or the A/A control could not tell it from noise), while
    other processes held the CPU as its rounds measured (busy.py); the largest such speed-up, else None."""
    floor = (1.0 if best.baseline else best.interval.speedup) * (1 + EQUIVALENCE_BAND)
    unsure = [m for m in configs if not m.baseline and m is not best and m.run.variant == "original"
             and m.unsafe is None and not m.run.bound and not m.interval.is_bound and m.interval.outcome != "faster"
             and m.interval.speedup >= floor and _busy(m, fp32) is not None]
    return max(unsure, key=lambda m: m.interval.speedup) if unsure else None


def _busy(m: Measured, fp32: RunView) -> Contention | None:
    """What else held the CPU while a configuration's comparison was timed, where that made the machine busy."""
    contention = m.run.contention or fp32.contention
    return contention if contention is not None and contention.busy else None


def _busy_machine(configs: Sequence[Measured], fp32: RunView) -> Contention | None:
    """The busiest contention its configurations were timed under, where one was busy."""
    found = [c for c in (_busy(m, fp32) for m in configs) if c is not None]
    return max(found, key=lambda c: c.figure) if found else None


def _not_settled(ctx: Context, fp32: RunView, m: Measured) -> dict[str, Any]:
    """`unsettled`: the decision that the prescription is not settled, in data (the headline says it)."""
    iv = m.interval
    contention = _busy(m, fp32)
    assert contention is not None  # _unsettled keeps only those
    return {"precision": m.run.precision, "variant": m.run.variant, "speedup": round_ratio(iv.speedup),
            "speedup_interval": [round_ratio(iv.low), round_ratio(iv.high)], "contention": contention.to_dict(),
            "busy_words": contention.words(),
            "command": diagnose_command(ctx, fp32, m.run.precision, extra=_more_budget(ctx))}


def _more_budget(ctx: Context) -> list[str]:
    """`--budget` at twice the wall budget the document was measured in (the user's, else its size's): rounds that
    go on where a comparison was not settled; none for a size without a budget."""
    invocation = as_mapping(ctx.doc.get("invocation"))
    size = WORKLOAD_SIZES.get(as_str(invocation.get("size")) or "")
    if size is not None and as_list(as_mapping(ctx.doc.get("host")).get("gpus")):
        size = on_gpu(size)
    used = as_positive(invocation.get("budget_s")) or (size.budget_s if size is not None else None)
    return ["--budget", f"{2 * used:.0f}"] if used else []


def _not_settled_headline(unsettled: Mapping[str, Any], on: str) -> str:
    """"Not settled: mixed_bfloat16 measured 1.73x (0.85-3.53x) while other processes used 48 % of the CPU; rerun on
    a quiet machine: <command>"."""
    low, high = unsettled["speedup_interval"]
    speedup = float(unsettled["speedup"])
    command = unsettled.get("command")
    rerun = f": {command}" if command else ""
    return (f"Not settled{on}: {unsettled['precision']} measured {fmt_times(speedup, (high - low) / speedup)} "
            f"({fmt_interval(low, high)}) while {unsettled['busy_words']}; rerun on a quiet machine, with more time "
            f"for its rounds{rerun}")


def _busy_caveat(contention: Contention | None) -> str:
    """After a headline the machine did not unsettle: that it was busy, with its figure; empty where it was not."""
    return f" (measured while {contention.words()})" if contention is not None else ""


def _size_caveat(ctx: Context) -> str:
    """What the invocation's size says of its timings (SIZE_CAVEATS), after the headline; empty for a real size."""
    caveat = SIZE_CAVEATS.get(as_str(as_mapping(ctx.doc.get("invocation")).get("size")) or "")
    return f" ({caveat})" if caveat else ""


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


def _untested_changes(changes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A user change nobody measured (compiled execution) is an untested configuration too, with its command."""
    return [{"precision": c.get("precision"), "variant": c.get("variant") or "xla", "setting": c.get("setting"),
             "why": idle_words(as_mapping(c.get("device_idle"))),
             "command": c["command"]}
            for c in changes if c.get("basis") == "untested" and c.get("command")]


def prescribe(ctx: Context, found: Mapping[str, Finding]) -> list[Prescription]:
    """One prescription per machine and stack with a float32 run of the original workload (or, with none, its
    fastest 16-bit type as written)."""
    result = []
    fp32s = baselines(ctx)
    for fp32 in fp32s:
        configs = measured_configs(ctx, fp32, found)
        best = _best(configs, fp32)
        changes = user_changes(ctx, fp32)
        # The headline leads with the largest change a control measured (the pipeline, a backend).
        lead = next((c for c in changes if c["kind"] in ("input_pipeline", "backend")), None)
        on_place = on(fp32.place)
        unsettled = _unsettled(configs, best, fp32)
        settled_not = _not_settled(ctx, fp32, unsettled) if unsettled is not None else None
        busy = _busy_machine(configs, fp32)
        iv = best.interval
        low, high = (1.0, 1.0) if best.baseline else (iv.low, iv.high)
        result.append({
            "machine": fp32.machine,
            "stack": fp32.stack,
            "device": fp32.device,
            "baseline": fp32.precision,
            "recommended": {
                "precision": best.run.precision, "variant": best.run.variant, "setting": run_setting(best.run),
                "step_ms": best.step_ms, "speedup": 1.0 if best.baseline else round_ratio(iv.speedup),
                "speedup_interval": [round_ratio(low), round_ratio(high)],
                "how": how_to_use(best.run.precision, best.run.software, best.run.variant, best.run.on_gpu,
                                  run_setting(best.run), training=best.run.advice_applies("loss_scaling")),
                "caveat": best.caveat,
            },
            "measured": [m.to_dict() for m in configs],
            "untested": _untested(ctx, fp32, configs, best, found) + _untested_changes(changes),
            "user_changes": changes,
            "headline": (_not_settled_headline(settled_not, on_place) if settled_not is not None
                         else (_change_headline(lead, on_place, best) if lead is not None
                               else _headline(fp32, best, configs, on_place)) + _busy_caveat(busy))
            + _size_caveat(ctx),
            **({"unsettled": settled_not} if settled_not is not None else {}),
            **({"contention": busy.to_dict()} if busy is not None else {}),
        })
    return result


# ---------------------------------------------------------------------------------------- advice held to it
