"""What a diagnose runs: the matrix of stacks x precisions x variants, what --resume keeps, the experiments the
analysis asks for next. Pure: data in, run specs out."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from fp16doctor.diagnose.checks import float32_first
from fp16doctor.engines.spec import (
    ExperimentUnit,
    RunSpec,
    ScriptSpec,
    WorkloadSize,
    host_stack,
    is_host_stack,
    stack_backend,
)
from fp16doctor.knowledge.cpu import CPU_BF16_FLAGS
from fp16doctor.knowledge.gpus import gpu_has_bfloat16
from fp16doctor.options import Progress
from fp16doctor.results import Document, Run, experiment_changes
from fp16doctor.workload import protocol
from fp16doctor.workload.protocol import PRECISIONS, ROUNDS_VARIANTS, SCRIPT_VARIANTS, variant_clash

# The matrix every diagnose runs; mixed_bfloat16 joins it where the device computes in bfloat16.
BASE_PRECISIONS = protocol.default_precisions(bfloat16_device=False)


def device_has_bfloat16(host: Mapping[str, Any]) -> bool:
    """Whether the device the host runs use computes in bfloat16: with NVIDIA GPUs, any of compute
    capability 8.0 or newer; without, a CPU with BF16 instructions (knowledge/cpu.py CPU_BF16_FLAGS:
    AVX512-BF16, AMX-BF16, Arm BF16)."""
    gpus = [g for g in host.get("gpus") or [] if isinstance(g, Mapping)]
    if gpus:
        return any(gpu_has_bfloat16(g.get("compute_capability")) for g in gpus)
    cpu = host.get("cpu")
    if not isinstance(cpu, Mapping):
        return False
    flags = cpu.get("flags")
    return bool(set(flags if isinstance(flags, list) else []) & set(CPU_BF16_FLAGS)) or cpu.get("bf16_native") is True


def backend_trials(host: Mapping[str, Any], configured: str | None, asked: Sequence[str]) -> list[str]:
    """The host stacks of the other Keras backends the default diagnose tries on a GPU (`host-jax`, ...): each this
    Python has working and seeing the GPU (the probe's `keras_backends`), where --backend chose none. A backend changes
    the answer more than a precision can (Keras 3 on JAX and on torch differ 2.2x on an H200, docs/examples), and it
    cannot change inside a process, so each is its own stack."""
    if asked or not host.get("gpus"):
        return []
    return [host_stack(str(b["name"]), configured) for b in host.get("keras_backends") or []
            if isinstance(b, Mapping) and b.get("works") and b.get("gpu") and b.get("name") != configured]


def default_precisions(host: Mapping[str, Any]) -> list[str]:
    """The matrix when --precision is not given: float32, float16 and mixed_float16 everywhere, and
    mixed_bfloat16 where the device has bfloat16 arithmetic (elsewhere it would only be emulated)."""
    return list(protocol.default_precisions(device_has_bfloat16(host)))


def same_host_setup(run: Run, python: str, backend: str | None) -> bool:
    """A finished host run still compares with new ones: same interpreter, same Keras backend (where
    both are known). Container runs are judged by their stack and size alone."""
    if not is_host_stack(run.stack):
        return True
    backend = stack_backend(run.stack) or backend
    recorded = run.engine.get("python")
    if recorded and os.path.abspath(str(recorded)) != os.path.abspath(python):
        return False
    return not (backend and run.keras_backend and run.keras_backend != backend)


def _uses_gpu(stack: str) -> bool:
    from fp16doctor.stacks import get_stack

    return get_stack(stack).gpu


def plan_runs(
    stacks: list[str], precisions: list[str], size: WorkloadSize, variants: list[str] | None,
    data_dir: str | None, where_native: Iterable[str] = (),
) -> list[RunSpec]:
    """The matrix; `where_native`: precisions for the GPU stacks of engines whose devices are not known yet, run
    only where a GPU computes them natively (RunSpec.native_only), whatever this machine's own device would say."""
    specs: list[RunSpec] = []
    for stack in stacks:
        extra = [p for p in where_native if not is_host_stack(stack) and _uses_gpu(stack)]
        ordered = float32_first(dict.fromkeys([*precisions, *extra]))
        for v in variants or ["original"]:
            changes = experiment_changes(v)
            experiment = {"changes": changes, "tests": None} if changes is not None else None
            specs += [RunSpec(stack, precision, v, size, data_dir=data_dir if is_host_stack(stack) else None,
                              experiment=experiment, native_only=precision in extra)
                      for precision in ordered]
        if variants is None and (size.budget_s is None or size.gpu):
            # synthetic_input (batches already in memory) isolates device compute from the input pipeline; a
            # budgeted size on a CPU runs it as a control where a run's measured batch time says it could show
            # something (analysis/experiments.py INPUT_CONTROL_MIN_SHARE); on a GPU, where its ratio is the device's
            # answer, for every precision, in the interleaved rounds (profiled_in_rounds).
            specs += [RunSpec(stack, p, "synthetic_input", size, native_only=p in extra) for p in ordered]
    return specs


def script_experiments(planned: list[RunSpec], script: ScriptSpec, progress: Progress) -> list[RunSpec]:
    """The planned experiments a script can take unchanged (an environment variable or a compile argument);
    the others would rewrite its model or its data, and are said, not run."""
    kept = [replace(s, script=script, data_dir=None) for s in planned if s.variant in SCRIPT_VARIANTS]
    for spec in planned:
        if spec.variant not in SCRIPT_VARIANTS:
            progress.note(f"experiment {spec.precision} {spec.variant} not run: it changes the built-in "
                          "workload's model or data, and your script runs unchanged")
    return kept


def plan_experiments(doc: Document, progress: Progress) -> list[dict[str, Any]]:
    """The experiments the analysis asks for after the main matrix; the ones not worth a run are said.
    A planner that breaks costs the experiments, never the measured runs, the analysis or the report."""
    from fp16doctor.analysis.experiments import plan

    try:
        items = plan(doc)
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError) as exc:
        progress.note(f"no experiments: planning them failed ({exc.__class__.__name__}: {exc})")
        return []
    for item in items:
        if "skip_reason" in item:
            progress.note(f"experiment {item['precision']} {item['variant']} skipped: {item['skip_reason']}")
    return [item for item in items if "skip_reason" not in item]


def experiment_specs(
    items: Iterable[Mapping[str, Any]], stacks: list[str], size: WorkloadSize, data_dir: str | None,
    done: set[tuple[str, str, str]],
) -> list[RunSpec]:
    """Planned experiments as run specs: only for stacks this diagnose runs, each cell once, not the
    cells already measured (so --resume picks up where it stopped), float32 first in each group."""
    specs: dict[tuple[str, str, str], RunSpec] = {}
    for item in items:
        stack, precision, variant = (str(item.get(k)) for k in ("stack", "precision", "variant"))
        key = (stack, precision, variant)
        if stack not in stacks or precision not in PRECISIONS or variant_clash(variant) is not None or key in done:
            continue
        experiment: dict[str, Any] | None = None
        if not item.get("control"):  # a control (the in-memory input) changes what is measured, and tests nothing
            given = item.get("experiment")
            experiment = dict(given if isinstance(given, Mapping)
                              else {"changes": experiment_changes(variant) or {}, "tests": None})
            if item.get("reason"):
                experiment.setdefault("reason", str(item["reason"]))
        specs.setdefault(key, RunSpec(stack, precision, variant, size,
                                      data_dir=data_dir if is_host_stack(stack) else None,
                                      experiment=experiment))
    order = {group: i for i, group in enumerate(dict.fromkeys((s.stack, s.variant) for s in specs.values()))}
    return sorted(specs.values(), key=lambda s: (order[(s.stack, s.variant)], s.precision != "float32"))


def experiment_units(planned: list[RunSpec]) -> list[ExperimentUnit]:
    """The planned experiments as the units they run in, in the plan's order: the precisions of one stack in one
    process setting (an environment switch, ROUNDS_VARIANTS), float32 among them, are timed together in that
    setting's interleaved rounds, float32 first; every other experiment (one that changes the model or its
    input, or a setting planned for one precision) runs on its own."""
    groups: dict[tuple[str, str], list[RunSpec]] = {}
    for spec in planned:
        if spec.variant in ROUNDS_VARIANTS:
            groups.setdefault((spec.stack, spec.variant), []).append(spec)
    units: list[ExperimentUnit] = []
    for spec in planned:
        group = groups.get((spec.stack, spec.variant), [])
        if len(group) < 2 or not any(s.precision == "float32" for s in group):
            units.append((spec,))
        elif spec is group[0]:
            units.append(tuple(sorted(group, key=lambda s: s.precision != "float32")))
    return units
