"""A size's wall budget (WorkloadSize.budget_s: quick's 90 s, smoke's): which experiments fit in what the rounds
leave of it, what each is expected to cost, and the arithmetic both share (the command's own start, a rounds block,
the analysis after the last run). What the interleaved rounds get is the rounds phase's (diagnose/rounds.py). An
engine whose runs wait in a queue is not bound by the budget (its `queued` trait)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from fp16doctor.engines.spec import ExperimentUnit, RunSpec, WorkloadSize
from fp16doctor.options import Progress
from fp16doctor.results import Run, find_run
from fp16doctor.runplan import IMPORT_PRIOR_S
from fp16doctor.workload.protocol import BLOCK_TARGET_S, variant_parts, window_steps


def command_started() -> float:
    """When this process began, on time.monotonic()'s clock: the budget counts the command's own start-up (the
    interpreter, its imports) as the user's wall clock does. Linux gives the process's start in clock ticks since
    boot (/proc/self/stat) beside the time since boot (/proc/uptime); elsewhere, or where unreadable, now."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat", encoding="ascii") as stat, open("/proc/uptime", encoding="ascii") as up:
            # The command name (field 2) may hold spaces and parentheses: the fields after its last ")" are fixed.
            start_ticks = float(stat.read().rsplit(")", 1)[1].split()[19])
            uptime_s = float(up.read().split()[0])
        age_s = uptime_s - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return now
    return now - age_s if 0.0 <= age_s < 60.0 else now


def within_budget(units: list[ExperimentUnit], runs: list[dict[str, Any]], deadline: float, size: WorkloadSize,
                  progress: Progress) -> list[ExperimentUnit]:
    """The experiments that fit what is left of the size's budget (it ends at `deadline`; on a GPU, less the
    analysis that follows them: analysis_s), each unit costed at its own expected steps (`unit_cost_s`), in the
    plan's order; a setting's rounds keep float32 and as many of its 16-bit precisions, in order, as fit. What does
    not fit is skipped, and said with the command that runs it (outside the budget)."""
    left = deadline - time.monotonic() - analysis_s(runs)
    kept, skipped = fit_units(units, runs, left)
    for unit, cost_s, left_s in skipped:
        precisions = [spec.precision for spec in unit]
        progress.note(f"experiment {', '.join(precisions)} {unit[0].variant} skipped: it would take about "
                      f"{cost_s:.0f} s and {max(left_s, 0):.0f} s of the "
                      f"{size.budget_s or 0:.0f} s {size.name} budget are left (run it with "
                      f"{' '.join(f'--precision {p}' for p in precisions)} --variant original --variant "
                      f"{unit[0].variant})")
    return kept


def fit_units(units: list[ExperimentUnit], runs: list[dict[str, Any]], left_s: float
              ) -> tuple[list[ExperimentUnit], list[tuple[ExperimentUnit, float, float]]]:
    """Pure: the units of experiments that fit `left_s` seconds, in the plan's order (a setting's rounds keep
    float32 and as many of its 16-bit precisions, in order, as fit), and what does not fit: (the specs left out,
    what they would cost, the seconds left when they came up)."""
    left = left_s
    kept: list[ExperimentUnit] = []
    skipped: list[tuple[ExperimentUnit, float, float]] = []
    for unit in units:
        # The unit's first n specs cost this much: float32 with at least one 16-bit precision, or the one spec.
        costs = {n: unit_cost_s(unit[:n], runs) for n in range(min(2, len(unit)), len(unit) + 1)}
        n = next((n for n in sorted(costs, reverse=True) if costs[n] <= left), 0)
        if n < len(unit):
            skipped.append((unit[n:], costs[len(unit)] - costs.get(n, 0.0), left))
        if n:
            left -= costs[n]
            kept.append(unit[:n])
    return kept, skipped


def unit_cost_s(unit: ExperimentUnit, runs: list[dict[str, Any]]) -> float:
    """What one unit of experiments is expected to cost: a run of its own, or one rounds process for a setting."""
    return experiment_rounds_cost_s(unit, runs) if len(unit) > 1 else experiment_cost_s(unit[0], runs)


# The prior for a 16-bit step that an experiment takes off the kernel that made it pathological (oneDNN off, on a
# run the slow-step bound cut), until one has run: 7.6x float32's step, TensorFlow 2.21's float16 step without
# oneDNN against float32's with it on the Intel Xeon with AVX512-FP16 and AMX-BF16 where the bound cuts float16
# (944 ms against 124 ms at the quick size, docs/benchmarks.md). Where TensorFlow computes float16 without oneDNN
# anyway (an AVX2 EPYC) it measured 2.2x (1004 ms against 449 ms), and its float16 runs are not cut there.
UNBOUND_16BIT_STEP_PRIOR = 7.6
# float32 without oneDNN (TensorFlow's own kernels) against float32 with it, the same Xeon: 356 ms against 124 ms.
ONEDNN_OFF_FLOAT32_PRIOR = 2.9
# Steps a run may spend, untimed, before its profiled window, to keep an epoch's first step out of it (two at the
# quick size: eight batches an epoch, seven steps before the window).
WINDOW_HOLD_STEPS = 2


def original_run(runs: Iterable[Mapping[str, Any]], stack: str, precision: str) -> Run | None:
    """The stack's finished run of a precision in the original setting (cut or not), that prices what changes it."""
    return find_run(runs, stack, precision)


def _steps_s(run: Run, window: bool = True) -> float:
    """The time a run spent in its training steps: the warm-up (its first step in it), the timed and, with
    `window`, the profiled."""
    record = run.record
    warmup = record.get("warmup_step_ms") or [run.first_step_ms or 0.0]
    steps = [*warmup, *(record.get("step_ms_all") or []), *((record.get("window_step_ms") or []) if window else [])]
    return sum(float(ms) for ms in steps if isinstance(ms, (int, float))) / 1000.0


def _expected_step_s(spec: RunSpec, runs: list[dict[str, Any]]) -> float:
    """An experiment's expected step: the step of the run it changes (float32's where there is none). A run the
    slow-step bound cut is no guide: that one is priced at float32's step times UNBOUND_16BIT_STEP_PRIOR, never
    above the cut run's own; float32 without oneDNN at its own step times ONEDNN_OFF_FLOAT32_PRIOR."""
    base, fp32 = original_run(runs, spec.stack, spec.precision), original_run(runs, spec.stack, "float32")
    base_step = base.median_s if base is not None else None
    fp32_step = fp32.median_s if fp32 is not None else None
    step_s = base_step or fp32_step or 1.0
    if base is not None and base.cut and fp32_step:
        step_s = min(step_s, fp32_step * UNBOUND_16BIT_STEP_PRIOR)
    if spec.precision == "float32" and spec.variant == "onednn_off":
        step_s *= ONEDNN_OFF_FLOAT32_PRIOR
    return step_s


# Keras 3 on torch runs jit_compile=True (the xla variant) as torch.compile, which compiles on the first step: 52.4 s
# for the seed model at 32 x 48 pixels, float32, on a 2-core Xeon (torch 2.13's CPU inductor, Keras 3.15.1), against
# float32's eager tracing of under a second; a prior until the stack's own compiled run has been timed.
TORCH_COMPILE_PRIOR_S = 52.0


def compile_s(spec: RunSpec, runs: list[dict[str, Any]]) -> float:
    """What compiling the training step adds to an experiment's first step: TORCH_COMPILE_PRIOR_S for the xla
    variant on Keras' torch backend (torch.compile), else nothing (XLA's compile is within float32's tracing)."""
    fp32 = original_run(runs, spec.stack, "float32")
    compiled = "xla" in variant_parts(spec.variant)  # alone, or combined (synthetic_input+xla)
    return TORCH_COMPILE_PRIOR_S if compiled and fp32 is not None and fp32.keras_backend == "torch" else 0.0


def _first_step_s(spec: RunSpec, runs: list[dict[str, Any]], step_s: float) -> float:
    """An experiment's first step: float32's one-time work (tracing) plus one of its own steps, and its compile
    (compile_s)."""
    fp32 = original_run(runs, spec.stack, "float32")
    if fp32 is None:
        return step_s
    return max(fp32.first_step_s - (fp32.median_s or 0.0), 0.0) + step_s + compile_s(spec, runs)


def experiment_rounds_cost_s(unit: ExperimentUnit, runs: list[dict[str, Any]]) -> float:
    """What one setting's rounds process is expected to cost (a process of its own, float32 beside the 16-bit
    precisions, workload/rounds.py): the framework's import, then for each model (float32's twice, its A/A
    control) what a script does before it trains, its first step, its warm-up steps and its share of the minimum
    rounds (a block of at least one step, aimed at BLOCK_TARGET_S, after a dropped step), and one more round
    where the loop checks the clock."""
    size, stack = unit[0].size, unit[0].stack
    fp32 = original_run(runs, stack, "float32")
    import_s = (fp32.import_s if fp32 is not None else None) or IMPORT_PRIOR_S
    total, one_round = import_s, 0.0
    for spec in unit:
        copies = 2 if spec.precision == "float32" else 1
        step_s = _expected_step_s(spec, runs)
        one_block_s = block_s(step_s)
        total += copies * (script_setup_s(fp32) + _first_step_s(spec, runs, step_s)
                           + rounds_warmup_steps(size) * step_s + size.min_rounds * one_block_s)
        one_round += copies * one_block_s
    return total + one_round


def experiment_cost_s(spec: RunSpec, runs: list[dict[str, Any]]) -> float:
    """What one experiment run is expected to cost, from its own expected step: the framework's import, the first
    step (float32's tracing plus one step), the warm-up, the measured steps (the size's stop rule: its minimum of
    steps, at least three, within its time budget), a step held back before the profiled window, the window, and
    what the run it changes (float32, where that run was cut) spent besides its import and its steps (building,
    profiling, the teardown). A run the slow-step bound cut is no guide to its experiment's step: that one is priced
    at float32's step times UNBOUND_16BIT_STEP_PRIOR, never above the cut run's own; float32 without oneDNN at its
    own step times ONEDNN_OFF_FLOAT32_PRIOR (`_expected_step_s`)."""
    size = spec.size
    base, fp32 = original_run(runs, spec.stack, spec.precision), original_run(runs, spec.stack, "float32")
    step_s = _expected_step_s(spec, runs)
    priced = base or fp32
    import_s = (priced.import_s if priced is not None else None) or IMPORT_PRIOR_S
    first_s = _first_step_s(spec, runs, step_s)
    measured_s = max(3 * step_s, min(size.max_measure_s, size.min_steps * step_s))
    window = window_steps(size.profile_steps, step_s * 1000.0)
    steps_s = (first_s + (size.warmup_steps - 1 + WINDOW_HOLD_STEPS + window) * step_s + measured_s)
    # Besides the import and the steps: the cut run's went on reading its long window, so float32's stands for it.
    around = fp32 if base is None or base.cut else base
    around_s = 0.0
    if around is not None:
        around_s = max((around.wall_s or 0.0) - (around.import_s or 0.0) - _steps_s(around), 0.0)
    return import_s + steps_s + around_s


def rounds_warmup_steps(size: WorkloadSize) -> int:
    """The steps a rounds process's warm-up block runs after a model's first step (workload/rounds.py: the
    size's warm-up steps, the first included, two at least)."""
    return max(2, size.warmup_steps) - 1


def block_s(step_s: float) -> float:
    """One rounds block: its timed steps, aimed at BLOCK_TARGET_S and never under one step, after a dropped step."""
    return max(step_s, BLOCK_TARGET_S) + step_s


# The analysis and the report after the last run on a GPU, whose torch traces list hundreds of kernels: 3.3-3.4 s on
# the H200 recording (phases_s.analysis), where a CPU's 0.5-1 s fit in the rounds' AFTER_ROUNDS_S.
GPU_ANALYSIS_S = 3.5


def analysis_s(runs: list[dict[str, Any]]) -> float:
    """What the analysis and the report take after the experiments, where the budget prices it: GPU_ANALYSIS_S
    where float32 ran on a GPU; 0 on a CPU, whose budget leaves it to AFTER_ROUNDS_S's margin (as it always did)."""
    on_gpu = any(run.on_gpu for run in map(Run.of, runs) if run.precision == "float32" and run.ok)
    return GPU_ANALYSIS_S if on_gpu else 0.0


def script_setup_s(run: Run | None) -> float:
    """What a script did before its first training step (reading data, building the model): the rounds run it
    again for each model. 0 for the built-in workload."""
    timing = run.record.get("timing") if run is not None else None
    script_s = timing.get("script_s") if isinstance(timing, Mapping) else None
    if run is None or run.workload.get("name") != "script" or not isinstance(script_s, (int, float)):
        return 0.0
    return max(0.0, float(script_s) - (run.import_s or 0.0) - _steps_s(run, window=False))
