"""What the step waits on once the batches are in memory: where the in-memory control (synthetic_input) leaves the
GPU idle more than half its step, the changes that go at it after the input pipeline (`prescriptions[].user_changes`,
user_changes.py): compiled execution (Keras' jit_compile: XLA on TensorFlow, torch.compile on torch), and fewer bytes to
copy (uint8 batches with the rescaling in the model, from pinned memory) where the batch copy is over a tenth of the
step. Compiled execution is measured by the synthetic_input+xla variant against the in-memory control (or the xla
variant against float32 as written) where it ran, else said untested with the command that measures it in memory;
the copy's worth is an estimate at the link's rate, and says so.

Pure: the context in, the changes' data out; the command comes from the prescription (untested.diagnose_command), which
prints none diagnose would refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.advice import variant_applies, variant_setting
from fp16doctor.analysis.context import Context, Pair, RunView
from fp16doctor.analysis.values import as_list, as_mapping, fmt_ms, idle_split_words, round_ratio
from fp16doctor.attribution.device_time import IDLE_KINDS
from fp16doctor.knowledge.links import pcie_gbps
from fp16doctor.workload.protocol import compose_variant

# The device idle more than half the in-memory step: the step is the host's dispatch and waiting, no longer the
# GPU's work (the input_pipeline_bound rule's INPUT_BOUND_SHARE, read on the device's side).
IDLE_MIN_SHARE = 0.5
# The batch copy is worth making smaller from a tenth of the in-memory step.
COPY_MIN_SHARE = 0.10
_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "uint8": 1}
# Compiled execution measured where the idle it goes at is seen: float32 with batches in memory, compiled, against
# the in-memory control (the input pipeline's time would hide a dispatch saving behind its own spread).
COMPILED_IN_MEMORY = compose_variant(("synthetic_input", "xla"))

CommandOf = Callable[[RunView, str, "str | None"], "tuple[str | None, str | None]"]


@dataclass(frozen=True)
class Idle:
    """The in-memory float32 control's idle device: its profiled step, the time no kernel or copy ran, and the
    split of that time where the document holds it (`device_time.idle`)."""

    run: RunView
    step_ms: float
    idle_ms: float
    split: Mapping[str, float]

    @property
    def share(self) -> float:
        return self.idle_ms / self.step_ms

    def to_dict(self) -> dict[str, Any]:
        return {"step_ms": round(self.step_ms, 3), "idle_ms": round(self.idle_ms, 3), "share": round(self.share, 4),
                **({"split": {k: round(v, 3) for k, v in self.split.items()}} if self.split else {})}


def idle_words(idle: Mapping[str, Any]) -> str:
    """"with batches in memory the GPU idled 76 ms of the 112 ms profiled step (68 %)", and its split."""
    text = (f"in memory the GPU idled {fmt_ms(idle.get('idle_ms'))} of the {fmt_ms(idle.get('step_ms'))} "
            f"profiled step ({float(idle.get('share') or 0):.0%})")
    split = as_mapping(idle.get("split"))
    if split:
        text += ": " + idle_split_words(split)
    return text


def _control(ctx: Context, fp32: RunView) -> RunView | None:
    return next((r for r in ctx.ok_runs() if (r.machine, r.stack, r.device, r.precision, r.variant) == (
        fp32.machine, fp32.stack, fp32.device, "float32", "synthetic_input") and not r.experiment), None)


def _whole_split(run: RunView) -> dict[str, float]:
    """The run's idle split (`device_time.idle`, read once by the context) where every part of it is known."""
    idle = run.device_time.idle if run.device_time is not None else None
    if idle is None or idle.launch_gaps_ms is None or idle.waiting_on_data_ms is None:
        return {}
    return {k: float(v) for k, v in idle.to_dict().items() if k in IDLE_KINDS}


def in_memory_idle(ctx: Context, fp32: RunView) -> Idle | None:
    """The in-memory float32 control's idle device where it idles more than IDLE_MIN_SHARE of its profiled step;
    None where no control carries device time, or its device is busy most of the step."""
    control = _control(ctx, fp32)
    dt = control.device_time if control is not None else None
    if control is None or dt is None or not dt.step_ms:
        return None
    split = _whole_split(control)
    idle_ms = sum(split.values()) if split else dt.host_ms
    if idle_ms is None or idle_ms <= IDLE_MIN_SHARE * dt.step_ms:
        return None
    return Idle(control, dt.step_ms, idle_ms, split)


# ---------------------------------------------------------------------------------------- compiled execution


def _compile_how(backend: str) -> str:
    """A prose line (what compiles it), then the code."""
    what = {"torch": "torch.compile of the training step (torch >= 2.1); its first steps compile",
            "tensorflow": "XLA"}.get(backend, "the backend's compiler")
    return (f"Compile the training step (Keras 3 on {backend}: {what}).\n"
            "model.compile(loss='binary_crossentropy', optimizer=optimizer, metrics=['accuracy'],\n"
            "              jit_compile=True)")


def compiled_applies(ctx: Context, fp32: RunView) -> bool:
    """Whether compiled execution is a change on this run's stack: not where it compiles already (Keras on JAX, a
    run that recorded jit_compile=True), nor where its Keras has no jit_compile (advice.variant_applies)."""
    sw = fp32.software
    runs = as_list(ctx.doc.get("runs"))
    workload = as_mapping(as_mapping(runs[fp32.index]).get("workload")) if fp32.index < len(runs) else {}
    if sw.keras_backend == "jax" or workload.get("jit_compile") is True:
        return False
    return variant_applies("xla", sw, fp32.workload_name == "script") is None


def compiled_change(ctx: Context, fp32: RunView, idle: Idle, command_of: CommandOf) -> dict[str, Any] | None:
    """Compiled execution on this stack: measured where the xla variant ran float32 here, else untested with the
    command that measures it; None where the stack compiles already (Keras on JAX, a run that recorded
    jit_compile=True) or has no jit_compile (variant_applies)."""
    if not compiled_applies(ctx, fp32):
        return None
    sw = fp32.software
    backend = sw.keras_backend or "tensorflow"
    change: dict[str, Any] = {"kind": "compiled", "setting": variant_setting("xla"), "precision": "float32",
                              "backend": backend, "how": _compile_how(backend), "device_idle": idle.to_dict()}
    # Measured where it is seen: with batches in memory against the in-memory control (the reason it is proposed),
    # else float32 as written against float32 as written.
    for base, variant in ((idle.run, COMPILED_IN_MEMORY), (fp32, "xla")):
        measured = next((r for r in ctx.ok_runs() if (r.machine, r.stack, r.device, r.precision, r.variant) == (
            fp32.machine, fp32.stack, fp32.device, "float32", variant)), None)
        if measured is None:
            continue
        pair = Pair(base, measured)
        iv = pair.interval
        return {**change, "basis": "measured", "measured_by": variant, "variant": base.variant,
                "step_ms": pair.fp32_step_ms, "changed_step_ms": pair.step_ms, "speedup": round_ratio(iv.speedup),
                "speedup_interval": [round_ratio(iv.low), round_ratio(iv.high)], "outcome": iv.outcome,
                "figure": pair.shown.figure()}
    command, no_command = command_of(fp32, "float32", COMPILED_IN_MEMORY)
    return {**change, "basis": "untested", "variant": COMPILED_IN_MEMORY, "command": command,
            **({"no_command": no_command} if not command else {})}


# ---------------------------------------------------------------------------------------- the batch's bytes


def _link_gbps(ctx: Context, run: RunView) -> tuple[float, str] | None:
    """The run's GPU's PCIe link: (GB/s per direction, "PCIe gen 5 x16"), from its machine's record."""
    machines = as_mapping(ctx.doc.get("machines"))
    record = as_mapping(machines.get(run.machine)) or (as_mapping(ctx.doc.get("host")) if run.machine == "host"
                                                       else {})
    gpus = [as_mapping(g) for g in as_list(record.get("gpus"))]
    index = run.device.split(":", 1)[1] if ":" in run.device else "0"
    gpu = next((g for g in gpus if str(g.get("index")) == index), gpus[0] if gpus else {})
    pcie = as_mapping(gpu.get("pcie"))
    gen, width = pcie.get("gen_current") or pcie.get("gen"), pcie.get("width_current") or pcie.get("width")
    rate = pcie_gbps(gen, width)
    return (rate, f"PCIe gen {gen} x{width}") if rate is not None else None


def _pinned_how(backend: str) -> str:
    uint8 = ("uint8 images with Rescaling(1/255) in the model: the input pipeline's program does both "
             "(a quarter of float32's bytes to copy).")
    pinned = {
        "torch": ("Pinned memory with non-blocking copies: a torch DataLoader(..., pin_memory=True) over the uint8 "
                  "arrays, each batch moved with .to('cuda', non_blocking=True) before model.fit takes it."),
        "tensorflow": ("Copies that overlap the step: "
                       "ds = ds.apply(tf.data.experimental.prefetch_to_device('/gpu:0')) at the end of the "
                       "tf.data pipeline."),
        "jax": "Copies that overlap the step: jax.device_put the next uint8 batch while the step runs.",
    }.get(backend, "")
    return f"{uint8}\n{pinned}" if pinned else uint8


def batch_bytes_change(ctx: Context, fp32: RunView, idle: Idle) -> dict[str, Any] | None:
    """uint8 batches from pinned memory where the in-memory control's host-to-device copy is over COPY_MIN_SHARE of
    its profiled step: the copy priced at the link's rate for a uint8 batch (an estimate, never measured), where
    the batch's size is known."""
    control = idle.run
    dt = control.device_time
    h2d = dt.copies_ms.get("h2d", 0.0) if dt is not None else 0.0
    width = _BYTES.get(control.batch_dtype or "")
    size = control.image_size
    if dt is None or h2d <= COPY_MIN_SHARE * idle.step_ms or not (width and width > 1 and size and control.batch_size):
        return None
    values = control.batch_size * size[0] * size[1] * (control.channels or 3)
    link = _link_gbps(ctx, control)
    if link is not None:
        rate, basis = link[0], f"{link[1]}'s {link[0]:.0f} GB/s, which pinned copies approach"
    else:
        rate, basis = values * width / (h2d / 1000.0) / 1e9, "the copy's own measured rate"
    estimated = values / (rate * 1e9) * 1000.0
    saved = max(h2d - estimated, 0.0)
    # The in-memory step as the input pipeline's change says it (its paired figure against float32), so one step has
    # one rendering; the control's own median where no pair holds it.
    step = Pair(fp32, control).interval.other_ms or control.step_ms
    if not step or saved <= 0:
        return None
    changed = max(step - saved, 1e-3)
    return {"kind": "batch_bytes", "basis": "estimate", "precision": "float32", "variant": "synthetic_input",
            "batch_dtype": control.batch_dtype, "pageable": dt.h2d_pageable, "copy_ms": round(h2d, 3),
            "estimated_copy_ms": round(estimated, 3), "batch_mb": round(values * width / 1e6, 1),
            "uint8_mb": round(values / 1e6, 1), "rate_gbs": round(rate, 1), "rate_basis": basis,
            "step_ms": round(step, 3), "changed_step_ms": round(changed, 3),
            "speedup": round_ratio(step / changed), "figure": f"about {step / changed:.1f}x faster (an estimate)",
            "how": _pinned_how(control.software.keras_backend or "tensorflow")}


def next_bound_changes(ctx: Context, fp32: RunView, command_of: CommandOf) -> list[dict[str, Any]]:
    """The changes after the input pipeline, where the in-memory control idles the device more than half its
    step: compiled execution, then the batch's bytes (the backend change is the prescription's, measured)."""
    idle = in_memory_idle(ctx, fp32)
    if idle is None:
        return []
    found = [compiled_change(ctx, fp32, idle, command_of), batch_bytes_change(ctx, fp32, idle)]
    return [c for c in found if c is not None]
