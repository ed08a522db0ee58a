"""The prescription: per machine and stack, every measured configuration ranked by step time against float32, the
one to use (the fastest significantly faster and numerically safe, else float32 itself), and what the hardware
suggests that nobody measured, with the command that measures it.

Then no advice may contradict it: each finding that recommends a configuration says which (`recommends`), quotes
the speed-up measured for it on that machine or says it was not measured, and one measured slower says so.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.advice import how_to_use
from fp16doctor.analysis.context import BF16, Context, Pair, RunView, Software
from fp16doctor.analysis.intervals import RatioInterval
from fp16doctor.analysis.values import (
    as_list,
    as_mapping,
    as_str,
    fmt_config,
    fmt_interval,
    fmt_ms,
    fmt_times,
    fmt_versus,
)
from fp16doctor.knowledge.frameworks import has_feature
from fp16doctor.knowledge.gpus import cc_tuple
from fp16doctor.redaction import redact_secrets
from fp16doctor.results import VARIANT_CHANGES

Finding = dict[str, Any]
Prescription = dict[str, Any]

# Variants that change how the same model trains (a switch, the batches' dtype, padded channels): a user can adopt
# them. Controls such as synthetic_input change what is measured, never what to run.
ADOPTABLE = ("original", *VARIANT_CHANGES)


def setting_of(variant: str) -> str | None:
    """The switch a variant flips, as a user would set it: 'TF_ENABLE_ONEDNN_OPTS=0', 'jit_compile=True'."""
    changes = VARIANT_CHANGES.get(variant)
    if not changes:
        return None
    env = changes.get("env")
    parts = [f"{k}={v}" for k, v in env.items()] if isinstance(env, Mapping) else []
    parts += [f"{k}={v}" for k, v in changes.items() if k != "env"]
    return ", ".join(parts)


@dataclass(frozen=True)
class Measured:
    """One configuration measured on a machine and stack, against float32 there."""

    run: RunView
    interval: RatioInterval
    caveat: str | None
    unsafe: str | None  # why it may not be recommended (its loss went non-finite or stalled)

    @property
    def label(self) -> str:
        return fmt_config({"precision": self.run.precision, "setting": setting_of(self.run.variant)})

    def speed_phrase(self) -> str:
        """'2.19x faster than float32 (95 % interval ...)' or '2.3x slower ...' or 'no faster or slower ...'."""
        iv = self.interval
        if iv.outcome == "faster":
            text = f"{fmt_times(iv.speedup, iv.relative_width)} faster than float32"
        elif iv.outcome == "slower":
            bound = ">= " if self.run.bound_on_first_step else ""
            text = f"{bound}{fmt_times(1 / iv.speedup, iv.relative_width)} slower than float32"
        else:
            text = "no faster or slower than float32"
        return text + f" ({iv.describe()})"

    @property
    def baseline(self) -> bool:
        return self.run.precision == "float32" and self.run.variant == "original"

    def to_dict(self) -> dict[str, Any]:
        iv = self.interval
        return {"precision": self.run.precision, "variant": self.run.variant, "setting": setting_of(self.run.variant),
                "step_ms": self.run.step_ms, "speedup": 1.0 if self.baseline else round(iv.speedup, 4),
                # float32 against itself is the baseline, no comparison: no interval
                "speedup_interval": None if self.baseline else [round(iv.low, 4), round(iv.high, 4)],
                "outcome": "baseline" if self.baseline else iv.outcome,
                "bound": self.run.bound, "caveat": self.caveat, "unsafe": self.unsafe, "notes": self.notes}

    @property
    def notes(self) -> list[str]:
        return _notes(self.unsafe, self.caveat, self.run.bound)


def _notes(unsafe: Any, caveat: Any, bound: bool) -> list[str]:
    notes = [str(n) for n in (unsafe, caveat) if n]
    if bound:
        notes.append("cut short by the slow-step bound: its time is a lower bound")
    return notes


def entry_versus(entry: Mapping[str, Any]) -> str:
    """A measured configuration against float32 as every output says it: "2.19x faster (2.08-2.30x)", "the
    baseline"."""
    outcome, speedup, interval = entry.get("outcome"), entry.get("speedup"), entry.get("speedup_interval")
    if outcome == "baseline" or not isinstance(speedup, (int, float)) or speedup <= 0:
        return "the baseline"
    known = interval if isinstance(interval, list) and len(interval) == 2 else None
    return fmt_versus(float(speedup), known, str(outcome))


def entry_notes(entry: Mapping[str, Any]) -> list[str]:
    """What every output says beside a measured configuration's time: why it may be unsafe, its caveat, a bound
    (its `notes`; a file saved before they were kept gets the same words from the fields)."""
    saved = entry.get("notes")
    if isinstance(saved, list):
        return [str(n) for n in saved]
    return _notes(entry.get("unsafe"), entry.get("caveat"), entry.get("bound") is True)


def _caveat(run: RunView) -> str | None:
    if run.precision == "float16":
        return ("pure fp16: weights and optimizer state in float16, so updates under 1/2048 of a weight are lost; "
                "watch the loss against float32's")
    if run.precision == "bfloat16":
        return ("pure bfloat16: weights and optimizer state in bfloat16 (8-bit mantissa), so updates under 1/256 of a "
                "weight are lost; watch the loss against float32's")
    return None


def _unsafe(run: RunView, unstable: set[tuple[str, str, str, str]]) -> str | None:
    if run.loss_nan:
        return "its loss went non-finite"
    if (run.machine, run.stack, run.precision, run.variant) in unstable:
        return "its training was numerically unstable (numerics_unstable)"
    return None


def _unstable_runs(found: Mapping[str, Finding]) -> set[tuple[str, str, str, str]]:
    finding = found.get("numerics_unstable") or {}
    keys = set()
    for item in as_list(finding.get("runs")):
        item = as_mapping(item)
        keys.add((str(item.get("machine")), str(item.get("stack")), str(item.get("precision")),
                  str(item.get("variant") or "original")))
    return keys


def measured_configs(ctx: Context, fp32: RunView, found: Mapping[str, Finding]) -> list[Measured]:
    """Every adoptable configuration measured on float32's machine and stack, fastest first (float32 included)."""
    unstable = _unstable_runs(found)
    configs = []
    for run in ctx.ok_runs():
        if run.machine != fp32.machine or run.stack != fp32.stack or run.device != fp32.device:
            continue
        if run.variant not in ADOPTABLE:
            continue
        configs.append(Measured(run, Pair(fp32, run).interval, _caveat(run), _unsafe(run, unstable)))
    configs.sort(key=lambda m: -m.interval.speedup)
    return configs


def _best(configs: Sequence[Measured], fp32: RunView) -> Measured:
    """The fastest configuration significantly faster than float32 and safe; else float32 itself."""
    eligible = [m for m in configs if m.interval.outcome == "faster" and m.unsafe is None and not m.run.bound]
    if eligible:
        return max(eligible, key=lambda m: m.interval.speedup)
    return next(m for m in configs if m.run is fp32)  # the baseline is always among them


# ---------------------------------------------------------------------------------------- untested


_DROPPED = ("--precision", "--variant", "--out", "--stack")  # chosen anew for the configuration to measure
_DROPPED_ALONE = ("--resume", "--json", "--no-host")


def _targeting(ctx: Context, run: RunView) -> list[str]:
    """The invocation's targeting, kept in an untested configuration's command (its engines, script, size),
    narrowed to the run's own stack."""
    invocation = as_mapping(ctx.doc.get("invocation"))
    argv = [str(a) for a in as_list(invocation.get("argv"))]
    if argv:
        kept, skip_next = [], False
        for arg in argv[2:] if argv[1:2] == ["diagnose"] else argv[1:]:
            if skip_next:
                skip_next = False
                continue
            if arg in _DROPPED:
                skip_next = True
                continue
            if arg.startswith(tuple(f"{flag}=" for flag in _DROPPED)) or arg in _DROPPED_ALONE:
                continue
            kept.append(arg)
        return (["--stack", run.stack, "--no-host"] if run.stack != "host" else []) + kept
    raw = as_mapping(as_list(ctx.doc.get("runs"))[run.index]) if run.index < len(as_list(ctx.doc.get("runs"))) else {}
    engine, workload = as_mapping(raw.get("engine")), as_mapping(raw.get("workload"))
    out: list[str] = []
    if run.stack != "host":
        out += ["--stack", run.stack, "--no-host"]
    host = as_str(engine.get("docker_host"))
    if host and not host.startswith(("unix://", "npipe://")):
        out += ["--docker-host", host]
    if as_str(engine.get("kind")) == "slurm":
        out += ["--slurm"]
    if workload.get("name") == "script":
        out += ["--script", as_str(workload.get("script")) or "train.py"]
    return out


def _command(ctx: Context, run: RunView, precision: str, variant: str | None = None) -> str:
    args = ["fp16doctor", "diagnose", *_targeting(ctx, run), "--precision", "float32", "--precision", precision]
    if variant:
        args += ["--variant", "original", "--variant", variant]
    return redact_secrets(shlex.join(args))  # a URL's password or a token argument never reaches the page


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
        ideas.append({"precision": precision, "variant": variant or "original",
                      "setting": setting_of(variant) if variant else None, "why": why,
                      "command": _command(ctx, fp32, precision, variant)})

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


# ---------------------------------------------------------------------------------------- the whole


def _headline(fp32: RunView, best: Measured, configs: Sequence[Measured]) -> str:
    where = fp32.stack if fp32.machine == "host" else f"{fp32.stack} on {fp32.machine}"
    others = [m for m in configs if not m.baseline]
    if best.run is fp32:
        if not others:
            return f"Use float32 on {where}: no 16-bit configuration was measured here"
        fastest = others[0]
        if fastest.interval.outcome == "faster":
            return (f"Use float32 on {where}: the one faster configuration, {fastest.label}, "
                    f"is not safe here ({fastest.unsafe})")
        return (f"Use float32 on {where}: no measured configuration is significantly faster; the fastest other, "
                f"{fastest.label}, is {fastest.speed_phrase()}")
    caveat = f"; {best.caveat}" if best.caveat else ""
    return f"Use {best.label} on {where}: {best.speed_phrase()}{caveat}"


def prescribe(ctx: Context, found: Mapping[str, Finding]) -> list[Prescription]:
    """One prescription per machine and stack with a float32 run of the original workload."""
    result = []
    for fp32 in ctx.ok_runs():
        if fp32.precision != "float32" or fp32.variant != "original" or fp32.experiment:
            continue
        configs = measured_configs(ctx, fp32, found)
        best = _best(configs, fp32)
        iv = best.interval
        low, high = (1.0, 1.0) if best.baseline else (iv.low, iv.high)
        result.append({
            "machine": fp32.machine,
            "stack": fp32.stack,
            "device": fp32.device,
            "recommended": {
                "precision": best.run.precision, "variant": best.run.variant, "setting": setting_of(best.run.variant),
                "step_ms": best.run.step_ms, "speedup": 1.0 if best.baseline else round(iv.speedup, 4),
                "speedup_interval": [round(low, 4), round(high, 4)],
                "how": how_to_use(best.run.precision, best.run.software, best.run.variant, best.run.on_gpu),
                "caveat": best.caveat,
            },
            "measured": [m.to_dict() for m in configs],
            "untested": _untested(ctx, fp32, configs, best, found),
            "headline": _headline(fp32, best, configs),
        })
    return result


# ---------------------------------------------------------------------------------------- advice held to it


def _prescription_for(finding: Finding, prescriptions: Sequence[Prescription]) -> Prescription | None:
    machine, stack = finding.get("machine"), finding.get("stack")
    stacks = finding.get("stacks") if isinstance(finding.get("stacks"), list) else None
    for p in prescriptions:
        if machine is not None and p["machine"] != machine:
            continue
        if stack is not None and p["stack"] != stack:
            continue
        if stacks and p["stack"] not in stacks:
            continue
        return p
    return None


def _measured_entry(prescription: Prescription, precision: str, variant: str) -> dict[str, Any] | None:
    """The measured configuration a recommendation names; for a variant measured only at another precision (the
    experiment ran on the 16-bit run it tested), that one: the switch is what is recommended."""
    same = [m for m in prescription["measured"] if m["variant"] == variant]
    exact = next((m for m in same if m["precision"] == precision), None)
    return exact if exact is not None or variant == "original" else (same[0] if same else None)


def hold_advice(ctx: Context, findings: list[Finding], prescriptions: Sequence[Prescription],
                recommends: Mapping[str, tuple[str, str]]) -> None:
    """Each finding that recommends a configuration says which and what was measured for it on its machine; one
    that names a configuration measured no faster than the prescription says so first, in its recommendation; one
    that names a configuration nobody measured there says so, with the command that measures it."""
    for finding in findings:
        fid = str(finding.get("id"))
        if fid == "framework_setting" and finding.get("variant"):
            target: tuple[str, str] | None = (str(finding.get("precision")), str(finding["variant"]))
        else:
            target = recommends.get(fid)
        if target is None:
            continue
        precision, variant = target
        prescription = _prescription_for(finding, prescriptions)
        entry = _measured_entry(prescription, precision, variant) if prescription else None
        precision = entry["precision"] if entry else precision
        finding["recommends"] = {
            "precision": precision, "variant": variant, "setting": setting_of(variant),
            "measured_speedup": entry["speedup"] if entry else None,
            **({"speedup_interval": entry["speedup_interval"]} if entry else {}),
        }
        if prescription is None:
            continue
        if entry is None:
            fp32 = next(r for r in ctx.ok_runs() if r.machine == prescription["machine"]
                        and r.stack == prescription["stack"] and r.precision == "float32" and r.variant == "original")
            command = _command(ctx, fp32, precision, None if variant == "original" else variant)
            finding["recommendation"] = (str(finding.get("recommendation", "")).rstrip()
                                         + f"\nUntested on this machine: {command} measures it.")
            continue
        chosen = prescription["recommended"]
        baseline = next((m for m in prescription["measured"] if m["outcome"] == "baseline"), None)
        if entry["outcome"] == "faster" and baseline is not None and entry["step_ms"]:
            finding["saves_ms"] = round(baseline["step_ms"] - entry["step_ms"], 3)
        if (chosen["precision"], chosen["variant"]) == (precision, variant):
            finding["prescribed"] = True
            continue
        label = fmt_config({"precision": precision, "setting": setting_of(variant)})
        where = prescription["stack"] if prescription["machine"] == "host" else \
            f"{prescription['stack']} on {prescription['machine']}"
        use = fmt_config(chosen)
        if entry["outcome"] == "baseline":  # recommends float32 where a 16-bit configuration measured faster
            finding["recommendation"] = (f"Not the fastest on {where}: float32 took {fmt_ms(entry['step_ms'])} per "
                                         f"step, and the prescription, {use}, is {fmt_times(chosen['speedup'])} "
                                         f"faster. " + str(finding.get("recommendation", "")))
            continue
        if entry["outcome"] == "no_significant_difference":
            measured = f"{label} measured no faster than float32 ({fmt_interval(*entry['speedup_interval'])})"
        else:
            measured = f"{label} measured " + fmt_versus(entry["speedup"], entry["speedup_interval"],
                                                          entry["outcome"], "than float32")
        if entry["outcome"] == "faster":
            measured += f", less than the prescription's {fmt_times(chosen['speedup'])}"
        verdict = f"{measured}, {fmt_ms(entry['step_ms'])} per step; the prescription is {use}"
        if fid == "framework_setting":  # the switch is all it recommends: measured end to end, it loses
            finding["recommendation"] = f"Do not set {setting_of(variant)} on {where} for speed: {verdict}."
            finding["severity"] = "info"
            continue
        finding["recommendation"] = f"Not for speed on {where}: {verdict}. " + str(finding.get("recommendation", ""))
