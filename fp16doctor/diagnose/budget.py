"""A size's wall budget (WorkloadSize.budget_s: quick's 90 s, smoke's): what the interleaved rounds get, and which
experiments fit in what is left. An engine whose runs wait in a queue is not bound by it (its `queued` trait)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from fp16doctor.engines.rounds import FULL_ROUNDS_BUDGET_S, ROUNDS_MIN_BUDGET_S, stack_rounds_budget_s
from fp16doctor.engines.spec import MIN_ROUNDS, ExperimentUnit, RunSpec, WorkloadSize
from fp16doctor.options import Progress
from fp16doctor.runplan import IMPORT_PRIOR_S
from fp16doctor.workload.protocol import BLOCK_TARGET_S


def rounds_budget_s(size: WorkloadSize, stack: str, runs: list[dict[str, Any]], deadline: float | None,
                    reserve_s: float = 0.0, profiled: tuple[str, ...] = (),
                    changed: tuple[RunSpec, ...] = ()) -> float:
    """The rounds' budget for one stack: the full size's fixed budget; at a budgeted size, what the wall budget
    has left after the rounds process's own start-up and `reserve_s` (the experiments to come) where the budget
    binds (`deadline`: the engine runs here, unqueued, the budget's clock is its own), else the minimum (a
    container stack already cost more than the budget; a queued job's wait is not the budget's). `profiled`: the
    precisions the rounds process also profiles, with no run of their own; `changed`: the experiments timed in it
    that change a model or its input."""
    if size.budget_s is None:
        return FULL_ROUNDS_BUDGET_S
    if deadline is None:
        return stack_rounds_budget_s(size)
    startup_s = (_rounds_startup_s(runs, stack, size) + _profiled_startup_s(runs, stack, size, profiled)
                 + _changed_startup_s(runs, stack, size, changed))
    return max(ROUNDS_MIN_BUDGET_S, deadline - time.monotonic() - startup_s - reserve_s)


# What follows a rounds process's last round within the budget: the process's exit, the analysis and the report
# (0.5-1 s on the AVX-512 BF16 EPYC), the command's own start before its clock (about 0.8 s there), a last round
# longer than the one before it, and the engine attributing each window the process profiled (0.9 s each: three
# windows took 2.7 s there). Three quick diagnoses with 1.5 s here took 87.6-90.0 s of wall time.
AFTER_ROUNDS_S = 2.5
ATTRIBUTION_PER_WINDOW_S = 0.9


def rounds_end_s(deadline: float, reserve_s: float, windows: int) -> float:
    """Where the budget binds: how long after it starts the rounds process may go on timing rounds (the workload
    measures its own start-up against this), leaving `reserve_s` for the experiments to come and the time its
    `windows` profiled windows take to attribute."""
    return max(0.0, deadline - time.monotonic() - reserve_s - AFTER_ROUNDS_S - ATTRIBUTION_PER_WINDOW_S * windows)


def within_budget(units: list[ExperimentUnit], runs: list[dict[str, Any]], deadline: float, size: WorkloadSize,
                  progress: Progress) -> list[ExperimentUnit]:
    """The experiments that fit what is left of the size's budget (it ends at `deadline`), each unit costed at its
    own expected steps (`unit_cost_s`), in the plan's order; a setting's rounds keep float32 and as many of its
    16-bit precisions, in order, as fit. What does not fit is skipped, and said with the command that runs it
    (outside the budget)."""
    left = deadline - time.monotonic()
    kept = []
    for unit in units:
        # The unit's first n specs cost this much: float32 with at least one 16-bit precision, or the one spec.
        costs = {n: unit_cost_s(unit[:n], runs) for n in range(min(2, len(unit)), len(unit) + 1)}
        n = next((n for n in sorted(costs, reverse=True) if costs[n] <= left), 0)
        if n < len(unit):
            precisions = [spec.precision for spec in unit[n:]]
            progress.note(f"experiment {', '.join(precisions)} {unit[0].variant} skipped: it would take about "
                          f"{costs[len(unit)] - costs.get(n, 0.0):.0f} s and {max(left, 0):.0f} s of the "
                          f"{size.budget_s or 0:.0f} s {size.name} budget are left (run it with "
                          f"{' '.join(f'--precision {p}' for p in precisions)} --variant original --variant "
                          f"{unit[0].variant})")
        if n:
            left -= costs[n]
            kept.append(unit[:n])
    return kept


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


def _original(runs: list[dict[str, Any]], stack: str, precision: str) -> Mapping[str, Any] | None:
    return next((r for r in runs if r.get("stack") == stack and r.get("precision") == precision
                 and r.get("variant", "original") == "original" and r.get("status") == "ok"), None)


def _median_s(run: Mapping[str, Any] | None) -> float | None:
    median = ((run or {}).get("step_time_ms") or {}).get("median")
    return float(median) / 1000.0 if isinstance(median, (int, float)) and median > 0 else None


def _steps_s(run: Mapping[str, Any], window: bool = True) -> float:
    """The time a run spent in its training steps: the warm-up (its first step in it), the timed and, with
    `window`, the profiled."""
    warmup = run.get("warmup_step_ms") or [float(run.get("first_step_ms") or 0.0)]
    steps = [*warmup, *(run.get("step_ms_all") or []), *((run.get("window_step_ms") or []) if window else [])]
    return sum(float(ms) for ms in steps if isinstance(ms, (int, float))) / 1000.0


def _expected_step_s(spec: RunSpec, runs: list[dict[str, Any]]) -> float:
    """An experiment's expected step: the step of the run it changes (float32's where there is none). A run the
    slow-step bound cut is no guide: that one is priced at float32's step times UNBOUND_16BIT_STEP_PRIOR, never
    above the cut run's own; float32 without oneDNN at its own step times ONEDNN_OFF_FLOAT32_PRIOR."""
    base, fp32 = _original(runs, spec.stack, spec.precision), _original(runs, spec.stack, "float32")
    base_step, fp32_step = _median_s(base), _median_s(fp32)
    step_s = base_step or fp32_step or 1.0
    if base is not None and base.get("bound") and fp32_step is not None:
        step_s = min(step_s, fp32_step * UNBOUND_16BIT_STEP_PRIOR)
    if spec.precision == "float32" and spec.variant == "onednn_off":
        step_s *= ONEDNN_OFF_FLOAT32_PRIOR
    return step_s


def _first_step_s(spec: RunSpec, runs: list[dict[str, Any]], step_s: float) -> float:
    """An experiment's first step: float32's one-time work (tracing) plus one of its own steps."""
    fp32 = _original(runs, spec.stack, "float32")
    fp32_first = float((fp32 or {}).get("first_step_ms") or 0.0) / 1000.0
    return max(fp32_first - (_median_s(fp32) or 0.0), 0.0) + step_s


def experiment_rounds_cost_s(unit: ExperimentUnit, runs: list[dict[str, Any]]) -> float:
    """What one setting's rounds process is expected to cost (a process of its own, float32 beside the 16-bit
    precisions, workload/rounds.py): the framework's import, then for each model (float32's twice, its A/A
    control) what a script does before it trains, its first step, its warm-up steps and its share of the minimum
    rounds (a block of at least one step, aimed at BLOCK_TARGET_S, after a dropped step), and one more round
    where the loop checks the clock."""
    size, stack = unit[0].size, unit[0].stack
    fp32 = _original(runs, stack, "float32")
    import_s = float(((fp32 or {}).get("timing") or {}).get("import_s") or IMPORT_PRIOR_S)
    total, one_round = import_s, 0.0
    for spec in unit:
        copies = 2 if spec.precision == "float32" else 1
        step_s = _expected_step_s(spec, runs)
        block_s = max(step_s, BLOCK_TARGET_S) + step_s
        total += copies * (_script_setup_s(fp32 or {}) + _first_step_s(spec, runs, step_s)
                           + rounds_warmup_steps(size) * step_s + MIN_ROUNDS * block_s)
        one_round += copies * block_s
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
    base, fp32 = _original(runs, spec.stack, spec.precision), _original(runs, spec.stack, "float32")
    step_s = _expected_step_s(spec, runs)
    timing = dict((base or fp32 or {}).get("timing") or {})
    import_s = float(timing.get("import_s") or IMPORT_PRIOR_S)
    first_s = _first_step_s(spec, runs, step_s)
    measured_s = max(3 * step_s, min(size.max_measure_s, size.min_steps * step_s))
    steps_s = (first_s + (size.warmup_steps - 1 + WINDOW_HOLD_STEPS + size.profile_steps) * step_s + measured_s)
    # Besides the import and the steps: the cut run's went on reading its long window, so float32's stands for it.
    around = fp32 if base is None or base.get("bound") else base
    around_s = 0.0
    if around is not None:
        around_import = float((around.get("timing") or {}).get("import_s") or 0.0)
        around_s = max(float(around.get("wall_s") or 0.0) - around_import - _steps_s(around), 0.0)
    return import_s + steps_s + around_s


def rounds_warmup_steps(size: WorkloadSize) -> int:
    """The steps a rounds process's warm-up block runs after a model's first step (workload/rounds.py: the
    size's warm-up steps, the first included, two at least)."""
    return max(2, size.warmup_steps) - 1


def _rounds_startup_s(all_runs: list[dict[str, Any]], stack: str, size: WorkloadSize) -> float:
    """What the rounds process spends besides its budget: importing the framework, each model's first steps
    (tracing) and warm-up, float32's twice (its A/A control), and the round that starts just before the budget
    ends (the loop checks the clock between rounds)."""
    runs = [r for r in all_runs if r.get("stack") == stack and r.get("status") == "ok"
            and r.get("variant", "original") == "original" and not r.get("bound")]
    import_s = max((float((r.get("timing") or {}).get("import_s") or 0.0) for r in runs), default=3.0)
    total = import_s
    one_round = 0.0
    for run in runs:
        copies = 2 if run.get("precision") == "float32" else 1
        median_s = float((run.get("step_time_ms") or {}).get("median") or 0.0) / 1000.0
        total += copies * (float(run.get("first_step_ms") or 0.0) / 1000.0 + rounds_warmup_steps(size) * median_s
                           + _script_setup_s(run))
        one_round += copies * 3 * median_s
    return total + one_round


# What starting and stopping the profiler around a window costs beyond its steps, and writing its trace: float32's
# own run on the 2-core AVX-512 BF16 EPYC spent 1.6 s from its window's start to its end for two 224-242 ms steps.
WINDOW_OVERHEAD_S = 1.1


# A precision profiled in the rounds has no run of its own to price it: its step is priced at float32's times this.
# mixed_bfloat16 only where the device computes bfloat16 (0.5-0.7x float32's step on the AVX-512 BF16 EPYC and the
# Xeon with AMX); float16 and mixed_float16 only where TensorFlow computes float16 in its own kernels: 5.5-6x on the
# AVX-512 BF16 EPYC, 1.7-2.2x on an AVX2 EPYC (docs/benchmarks.md), the larger taken.
PROFILED_STEP_PRIOR = {"mixed_bfloat16": 1.0, "float16": 6.0, "mixed_float16": 6.0}


def _profiled_startup_s(runs: list[dict[str, Any]], stack: str, size: WorkloadSize,
                        profiled: tuple[str, ...]) -> float:
    """What the rounds process spends on the precisions it profiles with no run of their own, each priced from
    float32's own run (PROFILED_STEP_PRIOR): float32's first step with one of its own steps for the tracing, its
    warm-up, the profiled block (a step outside the window, the window, the profiler's own cost) and its share of
    the minimum rounds (a block of at least one step after a dropped one)."""
    fp32 = _original(runs, stack, "float32")
    if not profiled or fp32 is None:
        return 0.0
    fp32_step = _median_s(fp32) or 0.0
    first_s = float(fp32.get("first_step_ms") or 0.0) / 1000.0
    total = 0.0
    for precision in profiled:
        step_s = fp32_step * PROFILED_STEP_PRIOR.get(precision, 1.0)
        total += (_config_startup_s(max(first_s - fp32_step, 0.0) + step_s, step_s, size)
                  + (1 + size.profile_steps) * step_s + WINDOW_OVERHEAD_S)
    return total


def _changed_startup_s(runs: list[dict[str, Any]], stack: str, size: WorkloadSize,
                       changed: tuple[RunSpec, ...]) -> float:
    """What the rounds process spends on the experiments timed in it that change a model or its input, each priced
    at the run it changes (its first step, its warm-up, its share of the minimum rounds); at float32's with
    PROFILED_STEP_PRIOR where that precision has no run of its own."""
    fp32 = _original(runs, stack, "float32")
    total = 0.0
    for spec in changed:
        base = _original(runs, stack, spec.precision)
        step_s = _median_s(base) or (_median_s(fp32) or 0.0) * PROFILED_STEP_PRIOR.get(spec.precision, 1.0)
        first_s = float((base or fp32 or {}).get("first_step_ms") or 0.0) / 1000.0
        total += _config_startup_s(first_s, step_s, size)
    return total


def _config_startup_s(first_s: float, step_s: float, size: WorkloadSize) -> float:
    """One more configuration in a rounds process: its first step, its warm-up and its share of the minimum rounds
    (a block of at least one step after a dropped one, the round that starts as the budget ends among them)."""
    block_s = max(step_s, BLOCK_TARGET_S) + step_s
    return first_s + rounds_warmup_steps(size) * step_s + (MIN_ROUNDS + 1) * block_s


def _script_setup_s(run: Mapping[str, Any]) -> float:
    """What a script did before its first training step (reading data, building the model): the rounds run it
    again for each model. 0 for the built-in workload."""
    timing = run.get("timing") or {}
    if (run.get("workload") or {}).get("name") != "script" or not isinstance(timing.get("script_s"), (int, float)):
        return 0.0
    return max(0.0, float(timing["script_s"]) - float(timing.get("import_s") or 0.0) - _steps_s(run, window=False))
