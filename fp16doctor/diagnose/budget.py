"""A size's wall budget (WorkloadSize.budget_s: quick's 90 s, smoke's): what the interleaved rounds get, and which
experiments fit in what is left. An engine whose runs wait in a queue is not bound by it (its `queued` trait)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fp16doctor.engines.rounds import FULL_ROUNDS_BUDGET_S, ROUNDS_MIN_BUDGET_S, stack_rounds_budget_s
from fp16doctor.engines.spec import ExperimentUnit, RunSpec, WorkloadSize
from fp16doctor.options import Progress
from fp16doctor.runplan import IMPORT_PRIOR_S
from fp16doctor.workload.paired import MIN_ROUNDS
from fp16doctor.workload.protocol import BLOCK_TARGET_S, VARIANT_LABEL_SEP, in_memory_batch_count, window_steps


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
        total += copies * (first_s + rounds_warmup_steps(size) * median_s + _script_setup_s(run)
                           + (GPU_MODEL_BUILD_S if _device_gpu(run) else 0.0))
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


def _profiled_step_s(label: str, fp32: Mapping[str, Any]) -> float:
    """A configuration's expected step in the rounds with no run of its own (a precision, or a precision with a
    change: "float32+synthetic_input"), from float32's own run and the device it ran on: on a GPU from its step and
    its host's batch time (_gpu_step_s); on a CPU from its engine's flags (AVX-512 or not)."""
    if _device_gpu(fp32):
        return _gpu_step_s(label, fp32)
    precision = label.partition(VARIANT_LABEL_SEP)[0]
    flags = ((fp32.get("engine") or {}).get("cpu") or {}).get("flags") or []
    priors = PROFILED_STEP_PRIOR if not isinstance(flags, list) or not flags or "avx512f" in flags \
        else PROFILED_STEP_PRIOR_AVX2
    return (_median_s(fp32) or 0.0) * priors.get(precision, 1.0)


# On a GPU the seed workload's step waits for its host's batch (ImageDataGenerator, on the CPU): the H200 recording's
# float32 step of 305 ms held a 162 ms batch, its in-memory step 83-109 ms. A 16-bit precision's device work is
# priced at float32's (the H200's mixed precisions: 0.9-1.0x in memory; float16 0.55x), and its batches at float32's
# but for float16, whose images the host builds in float16: HOST_FLOAT16_BATCH_PRIOR times float32's (numpy's float16
# arithmetic: 638 ms against 162 ms on the H200's Xeon with AVX512-FP16; rounded up).
HOST_FLOAT16_BATCH_PRIOR = 4.0
# A model and its input pipeline built in a rounds process on a GPU, besides any batches made for it: the H200
# recording's rounds process spent 14.2 s building thirteen configurations, 9.3 s of it making the in-memory
# controls' batches (eight each, at each precision's batch time): the rest, 0.4 s a model.
GPU_MODEL_BUILD_S = 0.4
# The analysis and the report after the last run on a GPU, whose torch traces list hundreds of kernels: 3.3-3.4 s on
# the H200 recording (phases_s.analysis), where a CPU's 0.5-1 s fit in AFTER_ROUNDS_S.
GPU_ANALYSIS_S = 3.5


def _device_gpu(run: Mapping[str, Any]) -> bool:
    """Whether a run's workload ran on a GPU (its record's `device`: "gpu:0")."""
    return str(run.get("device") or "").startswith("gpu")


def _on_gpu(runs: list[dict[str, Any]]) -> bool:
    return any(_device_gpu(r) for r in runs if r.get("precision") == "float32" and r.get("status") == "ok")


def analysis_s(runs: list[dict[str, Any]]) -> float:
    """What the analysis and the report take after the experiments, where the budget prices it: GPU_ANALYSIS_S
    where float32 ran on a GPU; 0 on a CPU, whose budget leaves it to AFTER_ROUNDS_S's margin (as it always did)."""
    return GPU_ANALYSIS_S if _on_gpu(runs) else 0.0


def _batch_s(precision: str, fp32: Mapping[str, Any]) -> float:
    """The host's time to make one batch of this precision, from float32's own run's (input_time_ms)."""
    measured = (fp32.get("input_time_ms") or {}).get("median")
    batch_s = float(measured) / 1000.0 if isinstance(measured, (int, float)) and measured > 0 else 0.0
    return batch_s * (HOST_FLOAT16_BATCH_PRIOR if precision == "float16" else 1.0)


def _gpu_step_s(label: str, fp32: Mapping[str, Any]) -> float:
    """A configuration's expected step on a GPU: in memory, float32's step less its batch; from the generator, that
    plus its own batch (float16's: HOST_FLOAT16_BATCH_PRIOR times float32's)."""
    precision, _, variant = label.partition(VARIANT_LABEL_SEP)
    step_s = _median_s(fp32) or 0.0
    device_s = max(step_s - _batch_s("float32", fp32), 0.0)
    return device_s if variant == "synthetic_input" else device_s + _batch_s(precision, fp32)


def _gpu_build_s(label: str, fp32: Mapping[str, Any], size: WorkloadSize, timed_input: bool = True) -> float:
    """What a configuration costs a GPU's rounds process before its first step: its model (GPU_MODEL_BUILD_S), and
    the batches made for it: the in-memory control's (in_memory_batch_count), or, profiled (`timed_input`), the
    original's timed input (the size's input_batches after a first one, as its own run times them)."""
    precision, _, variant = label.partition(VARIANT_LABEL_SEP)
    batches = (in_memory_batch_count(size.batch_size, size.image_height, size.image_width)
               if variant == "synthetic_input" else size.input_batches + 1 if timed_input else 0)
    return GPU_MODEL_BUILD_S + batches * _batch_s(precision, fp32)


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
    for label in profiled:
        step_s = _profiled_step_s(label, fp32)
        total += (_config_startup_s(_rounds_first_step_s(first_s, fp32_step, step_s), step_s, size, rounds)
                  + (_gpu_build_s(label, fp32, size) if _device_gpu(fp32) else 0.0))
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
        step_s = _changed_step_s(spec, runs)
        priced = base or fp32 or {}
        first_s = _rounds_first_step_s(_first_s(priced), _median_s(priced) or 0.0, step_s)
        total += _config_startup_s(first_s, step_s, size, rounds)
        if fp32 is not None and _device_gpu(fp32):
            total += _gpu_build_s(spec.rounds_label, fp32, size, timed_input=False)
    return total


def _changed_step_s(spec: RunSpec, runs: list[dict[str, Any]]) -> float:
    """A change's expected step in the rounds: the step of the run it changes, at float32's with _profiled_step_s
    where that precision has no run of its own; on a GPU the in-memory control's from float32's (_gpu_step_s)."""
    fp32 = _original(runs, spec.stack, "float32") or {}
    base = _original(runs, spec.stack, spec.precision)
    if _device_gpu(fp32) and spec.variant == "synthetic_input":
        return _profiled_step_s(spec.rounds_label, fp32)
    return _median_s(base) or _profiled_step_s(spec.rounds_label, fp32)


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


@dataclass(frozen=True)
class ProcessExperiment:
    """An extra experiment in a fresh process of its own, priced before it runs: its configurations (rounds labels,
    "float32+synthetic_input", "mixed_bfloat16+synthetic_input") timed together in one rounds process, float32's
    with its A/A control, each profiled; `import_s`: that process's import where known (another Keras backend's),
    else the stack's float32 run's. The entry point for a backend experiment (the in-memory float32 and the
    prescribed precision on another Keras backend)."""

    label: str
    configurations: tuple[str, ...]
    import_s: float | None = None


def process_experiment_cost_s(experiment: ProcessExperiment, runs: list[dict[str, Any]], stack: str,
                              size: WorkloadSize) -> float:
    """What one ProcessExperiment is expected to cost, from the stack's float32 run: the import, then each
    configuration as a profiled one in a rounds process (_profiled_startup_s: its first step, warm-up, window and
    build, MIN_ROUNDS rounds), float32's A/A control beside it, and one more round where the loop checks the clock."""
    fp32 = _original(runs, stack, "float32") or {}
    import_s = experiment.import_s if experiment.import_s is not None else float(
        (fp32.get("timing") or {}).get("import_s") or IMPORT_PRIOR_S)
    configs_s = _profiled_startup_s(runs, stack, size, experiment.configurations, MIN_ROUNDS + 1)
    # float32's A/A control: a second float32 model, timed in every round beside the first.
    fp32_label = next((c for c in experiment.configurations if c.partition(VARIANT_LABEL_SEP)[0] == "float32"), None)
    aa_s = (MIN_ROUNDS + 1) * _block_s(_profiled_step_s(fp32_label, fp32)) if fp32_label is not None else 0.0
    return import_s + configs_s + aa_s


@dataclass(frozen=True)
class PricedPhase:
    """One phase of a priced diagnose: its name, its seconds, and what it holds."""

    name: str
    seconds: float
    what: str = ""


@dataclass(frozen=True)
class PricedPlan:
    """A diagnose priced before it runs (price_diagnose): its phases within the budget, the rounds they leave room
    for, what does not fit (with its price), and what is priced beside the budget."""

    budget_s: float | None
    phases: tuple[PricedPhase, ...]
    rounds: int
    skipped: tuple[PricedPhase, ...] = ()
    beside: tuple[PricedPhase, ...] = ()

    @property
    def total_s(self) -> float:
        return sum(phase.seconds for phase in self.phases)

    @property
    def fits(self) -> bool:
        return self.budget_s is None or self.total_s <= self.budget_s + 1e-6

    def lines(self) -> list[str]:
        """The plan as text, phase by phase."""
        out = [f"{p.seconds:6.1f} s  {p.name}" + (f" ({p.what})" if p.what else "") for p in self.phases]
        budget = f" of the {self.budget_s:.0f} s budget" if self.budget_s is not None else ""
        out.append(f"{self.total_s:6.1f} s  in all{budget}, with {self.rounds} interleaved rounds")
        out += [f"skipped: {p.name}, about {p.seconds:.0f} s ({p.what})" for p in self.skipped]
        out += [f"beside the budget: {p.name}, about {p.seconds:.0f} s" + (f" ({p.what})" if p.what else "")
                for p in self.beside]
        return out


def price_diagnose(size: WorkloadSize, stack: str, runs: list[dict[str, Any]], own: Sequence[RunSpec],
                   profiled: tuple[str, ...], changed: tuple[RunSpec, ...], reserved: Sequence[ExperimentUnit],
                   later: Sequence[ExperimentUnit], prepare_s: float,
                   extra: Sequence[ProcessExperiment] = (), extra_inside: bool = False,
                   later_runs: list[dict[str, Any]] | None = None) -> PricedPlan:
    """Pure: a diagnose of one stack priced as diagnose runs it where its size's budget binds, from `runs` (the
    records its prices rest on: float32's own run at least, as measured on this machine or a recording of it):
    `prepare_s`, the cells with a process of their own (`own`, each at experiment_cost_s), one rounds process
    (its import, builds, warm-ups, the windows of the `profiled` labels, the `changed` configurations, MIN_ROUNDS
    rounds and one more for every whole round the budget leaves after `reserved`, the experiments planned before
    the rounds), the experiments that fit (`reserved`, then `later`, those planned after the rounds, in the plan's
    order: fit_units, priced from `later_runs` where given: the records the rounds make), the windows' attribution
    and the analysis. `extra`: experiments in fresh processes of their
    own (a backend's), inside the budget where `extra_inside`, else priced beside it."""
    phases = [PricedPhase("prepare", prepare_s, "checks, probe, plan")]
    phases += [PricedPhase(f"{spec.precision} {spec.variant}", experiment_cost_s(spec, runs),
                           "a process of its own") for spec in own]
    startup_s = _rounds_process_s(runs, stack, size, profiled, changed, minimum=True)
    one_round_s = _round_s(runs, stack, profiled, changed)
    after_s = _after_rounds_s(len(profiled), attribution_per_window_s(runs, stack)) + analysis_s(runs)
    extras = [PricedPhase(f"{e.label}", process_experiment_cost_s(e, runs, stack, size),
                          ", ".join(e.configurations)) for e in extra]
    used = sum(p.seconds for p in phases) + startup_s + after_s + sum(
        p.seconds for p in extras if extra_inside)
    reserve_s = sum(unit_cost_s(unit, runs) for unit in reserved)
    more = 0
    if size.budget_s is not None and one_round_s > 0:
        more = max(0, int((size.budget_s - used - reserve_s) // one_round_s))
    rounds_s = startup_s + more * one_round_s
    configurations = len(_rounds_runs(runs, stack)) + len(profiled) + len(changed)
    phases.append(PricedPhase("interleaved rounds", rounds_s,
                              f"{configurations} configurations and float32's A/A control in one process, "
                              f"{len(profiled)} of them profiled; {MIN_ROUNDS + more} rounds of "
                              f"{one_round_s:.1f} s"))
    left = (size.budget_s - used - more * one_round_s) if size.budget_s is not None else float("inf")
    priced_by = later_runs if later_runs is not None else runs
    kept, skipped = fit_units([*reserved, *later], priced_by, left)
    for unit in kept:
        phases.append(PricedPhase(f"experiment {', '.join(s.precision for s in unit)} {unit[0].variant}",
                                  unit_cost_s(unit, priced_by), "a rounds process" if len(unit) > 1 else
                                  "a process of its own"))
    if extra_inside:
        phases += extras
    phases.append(PricedPhase("attribution and analysis", after_s,
                              f"{len(profiled)} windows of the rounds, the analysis and the report"))
    return PricedPlan(size.budget_s, tuple(phases), MIN_ROUNDS + more,
                      tuple(PricedPhase(f"experiment {', '.join(s.precision for s in unit)} {unit[0].variant}", cost,
                                        f"{max(left_s, 0):.0f} s left") for unit, cost, left_s in skipped),
                      () if extra_inside else tuple(extras))


def _round_s(runs: list[dict[str, Any]], stack: str, profiled: tuple[str, ...], changed: tuple[RunSpec, ...]) -> float:
    """One round of a rounds process: every configuration's block (float32's twice, its A/A control)."""
    fp32 = _original(runs, stack, "float32") or {}
    total = sum((2 if r.get("precision") == "float32" else 1) * _block_s(_median_s(r) or 0.0)
                for r in _rounds_runs(runs, stack))
    total += sum(_block_s(_profiled_step_s(label, fp32)) for label in profiled)
    total += sum(_block_s(_changed_step_s(spec, runs)) for spec in changed)
    return total
