"""What nobody measured here, and the command that measures it: the precisions this machine's hardware suggests
beyond those measured, a user change nobody measured, and the diagnose command for each (never one diagnose would
refuse)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from fp16doctor.analysis.advice import advice_of
from fp16doctor.analysis.configs import Finding, Measured, setting_of
from fp16doctor.analysis.context import BF16, Context, RunView, Software
from fp16doctor.analysis.next_bound import CommandOf, idle_words
from fp16doctor.analysis.values import as_list, as_mapping, as_str
from fp16doctor.invocation import check_diagnose_argv, per_stack_options, stack_only_options
from fp16doctor.knowledge.frameworks import has_feature
from fp16doctor.knowledge.gpus import cc_tuple
from fp16doctor.redaction import redact_secrets
from fp16doctor.results import rerun_options
from fp16doctor.workload.protocol import variant_base

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


def untested_ideas(ctx: Context, fp32: RunView, configs: Sequence[Measured], best: Measured,
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


def command_of(ctx: Context) -> CommandOf:
    def command_of(run: RunView, precision: str, variant: str | None) -> tuple[str | None, str | None]:
        command = diagnose_command(ctx, run, precision, variant)
        return command, None if command else no_command_why(ctx, run, precision, variant)
    return command_of


def untested_changes(changes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A user change nobody measured (compiled execution) is an untested configuration too, with its command."""
    return [{"precision": c.get("precision"), "variant": c.get("variant") or "xla", "setting": c.get("setting"),
             "why": idle_words(as_mapping(c.get("device_idle"))),
             "command": c["command"]}
            for c in changes if c.get("basis") == "untested" and c.get("command")]
