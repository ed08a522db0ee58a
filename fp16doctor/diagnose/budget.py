"""A size's wall budget (WorkloadSize.budget_s: quick's 90 s, smoke's): what the interleaved rounds get, and which
experiments fit in what is left. An engine whose runs wait in a queue is not bound by it (its `queued` trait)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from fp16doctor.engines.rounds import FULL_ROUNDS_BUDGET_S, ROUNDS_MIN_BUDGET_S, stack_rounds_budget_s
from fp16doctor.engines.spec import ExperimentUnit, RunSpec, WorkloadSize
from fp16doctor.options import Progress
from fp16doctor.runplan import IMPORT_PRIOR_S
from fp16doctor.workload.paired import MIN_ROUNDS
from fp16doctor.workload.protocol import BLOCK_TARGET_S, window_steps


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
    startup_s = _rounds_process_s(runs, stack, size, profiled, changed, minimum=False)
    return max(ROUNDS_MIN_BUDGET_S, deadline - time.monotonic() - startup_s - reserve_s)


def _rounds_process_s(runs: list[dict[str, Any]], stack: str, size: WorkloadSize, profiled: tuple[str, ...],
                      changed: tuple[RunSpec, ...], minimum: bool, windows: bool = True) -> float:
    """The rounds process's start-up: its import and every model's first step and warm-up (the original runs', the
    precisions it profiles, the changes timed in it), the last three with their share of the minimum rounds and of
    the round that starts as the budget ends; with `minimum`, every model's minimum rounds and no round more."""
    rounds = MIN_ROUNDS if minimum else MIN_ROUNDS + 1
    return (_rounds_startup_s(runs, stack, size, minimum)
            + _profiled_startup_s(runs, stack, size, profiled, rounds, windows)
            + _changed_startup_s(runs, stack, size, changed, rounds))


# What follows a rounds process's last round within the budget besides attributing its windows: the process's exit,
# a last round longer than the one before it, the analysis and the report (0.5-1 s on the AVX-512 BF16 EPYC). The
# budget's clock starts with the command's own process (`command_started`), so its start-up is counted, not guessed.
AFTER_ROUNDS_S = 2.0
# Attributing one profiled window, until this invocation has attributed one (float32's own run's
# profile.attribution_s): 0.9 s each on the AVX-512 BF16 EPYC (three windows took 2.7 s there).
ATTRIBUTION_PER_WINDOW_S = 0.9


def rounds_end_s(deadline: float, reserve_s: float, windows: int, per_window_s: float) -> float:
    """Where the budget binds: how long after it starts the rounds process may go on timing rounds (the workload
    measures its own start-up against this), leaving `reserve_s` for the experiments to come and the time its
    `windows` profiled windows take to attribute (`per_window_s` each: attribution_per_window_s)."""
    return max(0.0, deadline - time.monotonic() - reserve_s - _after_rounds_s(windows, per_window_s))


def _after_rounds_s(windows: int, per_window_s: float) -> float:
    """What follows a rounds process's last round: attributing its `windows` profiled windows, then the rest."""
    return AFTER_ROUNDS_S + per_window_s * windows


def attribution_per_window_s(runs: list[dict[str, Any]], stack: str) -> float:
    """What attributing one profiled window costs on this machine: float32's own window's, as this invocation
    measured it (profile.attribution_s); ATTRIBUTION_PER_WINDOW_S before one was."""
    measured = ((_original(runs, stack, "float32") or {}).get("profile") or {}).get("attribution_s")
    return float(measured) if isinstance(measured, (int, float)) and measured > 0 else ATTRIBUTION_PER_WINDOW_S


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


def rounds_overrun_note(size: WorkloadSize, stack: str, runs: list[dict[str, Any]], deadline: float,
                        profiled: tuple[str, ...] = (), changed: tuple[RunSpec, ...] = ()) -> str | None:
    """What to say before the rounds where their minimum is expected to end past `deadline` by a second or more
    (rounds_overrun_s); None where it fits."""
    over_s = rounds_overrun_s(size, stack, runs, deadline, profiled, changed)
    if over_s < 1.0:
        return None
    step_s = _median_s(_original(runs, stack, "float32"))
    steps = f" (float32 steps in {step_s * 1000:.0f} ms here)" if step_s is not None else ""
    return (f"the interleaved rounds' minimum of {MIN_ROUNDS} rounds is expected to end about {over_s:.0f} s past the "
            f"{size.budget_s or 0:.0f} s {size.name} budget on this machine{steps}: they run all the same, since "
            "fewer rounds give no interval")


def repeat_fits(size: WorkloadSize, stack: str, runs: list[dict[str, Any]], deadline: float | None, reserve_s: float,
                profiled: tuple[str, ...] = (), changed: tuple[RunSpec, ...] = ()) -> float | None:
    """What a second rounds process of the same configurations is expected to cost (its import, each model's first
    step and warm-up, their minimum rounds, no profiled window, then its exit), where both processes' minimum fit
    before `deadline` beside `reserve_s` for the experiments; None where they do not, or no budget binds."""
    if deadline is None:
        return None
    repeat_s = (_rounds_process_s(runs, stack, size, profiled, changed, minimum=True, windows=False)
                + AFTER_ROUNDS_S)
    if rounds_overrun_s(size, stack, runs, deadline - reserve_s - repeat_s, profiled, changed) > 0:
        return None
    return repeat_s


def rounds_overrun_s(size: WorkloadSize, stack: str, runs: list[dict[str, Any]], deadline: float,
                     profiled: tuple[str, ...] = (), changed: tuple[RunSpec, ...] = ()) -> float:
    """How far past `deadline` the rounds process is expected to end at its minimum (its start-up, the precisions it
    profiles, the changes timed in it, MIN_ROUNDS rounds of every configuration's blocks, then its windows'
    attribution and what follows it), priced from this invocation's runs; 0 where it fits."""
    minimum_s = _rounds_process_s(runs, stack, size, profiled, changed, minimum=True)
    after_s = _after_rounds_s(len(profiled), attribution_per_window_s(runs, stack))
    return max(0.0, time.monotonic() + minimum_s + after_s - deadline)


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


def _first_s(run: Mapping[str, Any]) -> float:
    """A run's first step (tracing included), in seconds; 0 where it has none."""
    return float(run.get("first_step_ms") or 0.0) / 1000.0


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
    fp32_first = _first_s(fp32 or {})
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
        block_s = _block_s(step_s)
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
    window = window_steps(size.profile_steps, step_s * 1000.0)
    steps_s = (first_s + (size.warmup_steps - 1 + WINDOW_HOLD_STEPS + window) * step_s + measured_s)
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


def _rounds_startup_s(all_runs: list[dict[str, Any]], stack: str, size: WorkloadSize, minimum: bool = False) -> float:
    """What the rounds process spends besides its budget: importing the framework, each model's first steps
    (tracing) and warm-up, float32's twice (its A/A control), and the round that starts just before the budget
    ends (the loop checks the clock between rounds); with `minimum`, the minimum rounds instead of that one."""
    runs = _rounds_runs(all_runs, stack)
    import_s = max((float((r.get("timing") or {}).get("import_s") or 0.0) for r in runs), default=3.0)
    total = import_s
    one_round = 0.0
    for run in runs:
        copies = 2 if run.get("precision") == "float32" else 1
        median_s = _median_s(run) or 0.0
        first_s = _rounds_first_step_s(_first_s(run), median_s)
        total += copies * (first_s + rounds_warmup_steps(size) * median_s + _script_setup_s(run))
        one_round += copies * (MIN_ROUNDS * _block_s(median_s) if minimum else 3 * median_s)
    return total + one_round


def _rounds_runs(runs: list[dict[str, Any]], stack: str) -> list[dict[str, Any]]:
    """The stack's runs of their own that the rounds time again: the original's, not cut by the slow-step bound."""
    return [r for r in runs if r.get("stack") == stack and r.get("status") == "ok"
            and r.get("variant", "original") == "original" and not r.get("bound")]


def _block_s(step_s: float) -> float:
    """One rounds block: its timed steps, aimed at BLOCK_TARGET_S and never under one step, after a dropped step."""
    return max(step_s, BLOCK_TARGET_S) + step_s


# What starting and stopping the profiler around a window costs beyond its steps, and writing its trace: float32's
# own run on the 2-core AVX-512 BF16 EPYC spent 1.6 s from its window's start to its end for two 224-242 ms steps.
WINDOW_OVERHEAD_S = 1.1


# A precision profiled in the rounds has no run of its own to price it: its step is priced at float32's times this.
# mixed_bfloat16 only where the device computes bfloat16 (0.5-0.7x float32's step on the AVX-512 BF16 EPYC and the
# Xeon with AMX); float16 and mixed_float16 only where TensorFlow computes float16 in its own kernels, while float32
# runs on oneDNN's: 5.0-5.5x where oneDNN has AVX-512 for float32 (the AVX-512 BF16 EPYC, on 2 cores and on 1),
# 2.2x where it has AVX2 only (an AVX2 EPYC: 1004 ms against 449 ms; docs/benchmarks.md), each rounded up.
PROFILED_STEP_PRIOR = {"mixed_bfloat16": 1.0, "float16": 6.0, "mixed_float16": 6.0}
PROFILED_STEP_PRIOR_AVX2 = {"mixed_bfloat16": 1.0, "float16": 2.5, "mixed_float16": 2.5}


def _profiled_step_s(precision: str, fp32: Mapping[str, Any]) -> float:
    """A precision's expected step in the rounds with no run of its own, from float32's own run and the CPU it ran
    on (its engine's flags: AVX-512 or not)."""
    flags = ((fp32.get("engine") or {}).get("cpu") or {}).get("flags") or []
    priors = PROFILED_STEP_PRIOR if not isinstance(flags, list) or not flags or "avx512f" in flags \
        else PROFILED_STEP_PRIOR_AVX2
    return (_median_s(fp32) or 0.0) * priors.get(precision, 1.0)


def _profiled_startup_s(runs: list[dict[str, Any]], stack: str, size: WorkloadSize,
                        profiled: tuple[str, ...], rounds: int = MIN_ROUNDS + 1, windows: bool = True) -> float:
    """What the rounds process spends on the precisions it profiles with no run of their own, each priced from
    float32's own run (_profiled_step_s): float32's first step with one of its own steps for the tracing, its
    warm-up, its profiled window (in the warm-up's call: the window's steps and the profiler's own cost) and its
    share of the minimum rounds (a block of at least one step after a dropped one)."""
    fp32 = _original(runs, stack, "float32")
    if not profiled or fp32 is None:
        return 0.0
    fp32_step = _median_s(fp32) or 0.0
    first_s = _first_s(fp32)
    total = 0.0
    for precision in profiled:
        step_s = _profiled_step_s(precision, fp32)
        total += _config_startup_s(_rounds_first_step_s(first_s, fp32_step, step_s), step_s, size, rounds)
        if windows:
            total += window_steps(size.profile_steps, step_s * 1000.0) * step_s + WINDOW_OVERHEAD_S
    return total


def _changed_startup_s(runs: list[dict[str, Any]], stack: str, size: WorkloadSize,
                       changed: tuple[RunSpec, ...], rounds: int = MIN_ROUNDS + 1) -> float:
    """What the rounds process spends on the experiments timed in it that change a model or its input, each priced
    at the run it changes (its first step, its warm-up, its share of the minimum rounds); at float32's with
    _profiled_step_s where that precision has no run of its own."""
    fp32 = _original(runs, stack, "float32")
    total = 0.0
    for spec in changed:
        base = _original(runs, stack, spec.precision)
        step_s = _median_s(base) or _profiled_step_s(spec.precision, fp32 or {})
        priced = base or fp32 or {}
        first_s = _rounds_first_step_s(_first_s(priced), _median_s(priced) or 0.0, step_s)
        total += _config_startup_s(first_s, step_s, size, rounds)
    return total


# A model's first step in the rounds process spends a share of what float32's own first step spent beyond its step
# (that one also paid the process's one-time work, which the rounds process spreads over building all its models
# first). On the AVX-512 BF16 EPYC, float16's, mixed_float16's and mixed_bfloat16's first steps in the rounds spent
# 1.5, 1.8 and 1.0 s beyond their step against float32's own 2.7 s on 2 cores (0.37-0.68, mean 0.54), and 1.7, 1.4
# and 0.8 s against 4.2 s on 1 core (0.2-0.41): the mean on 2 cores, rounded.
ROUNDS_TRACING_SHARE = 0.5


def _rounds_first_step_s(first_s: float, step_s: float, own_step_s: float | None = None) -> float:
    """A model's first step in a rounds process, from a run's own first step `first_s` and step `step_s`:
    ROUNDS_TRACING_SHARE of the tracing and one-time work, then one step of its own (`own_step_s`, default
    `step_s`)."""
    return ROUNDS_TRACING_SHARE * max(first_s - step_s, 0.0) + (step_s if own_step_s is None else own_step_s)


def _config_startup_s(first_s: float, step_s: float, size: WorkloadSize, rounds: int = MIN_ROUNDS + 1) -> float:
    """One more configuration in a rounds process: its first step, its warm-up and its share of `rounds` rounds
    (a block of at least one step after a dropped one; by default the minimum and the round that starts as the
    budget ends)."""
    return first_s + rounds_warmup_steps(size) * step_s + rounds * _block_s(step_s)


def _script_setup_s(run: Mapping[str, Any]) -> float:
    """What a script did before its first training step (reading data, building the model): the rounds run it
    again for each model. 0 for the built-in workload."""
    timing = run.get("timing") or {}
    if (run.get("workload") or {}).get("name") != "script" or not isinstance(timing.get("script_s"), (int, float)):
        return 0.0
    return max(0.0, float(timing["script_s"]) - float(timing.get("import_s") or 0.0) - _steps_s(run, window=False))
