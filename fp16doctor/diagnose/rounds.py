"""The interleaved rounds phase of a diagnose, in one room: which rounds processes run (each stack's precisions
timed again together, a second process where the budget has room, a setting's experiments, another Keras backend),
what each is priced at and given of the size's wall budget, and the sink that puts a rounds process's record into
the runs it timed. An engine runs a rounds process as any other cell (RunSpec.rounds); how its record merges into
the runs is the engines' (engines/rounds.py); the experiments' pricing and the budget's arithmetic are budget.py's.

Each precision's own run (its process: warm-up, profiled window, loss, input time) comes first; then one more
process times all of them in rounds, each round in a new order (workload/rounds.py), so drift of a shared machine
lands in every precision alike and the ratio's interval comes from paired rounds (workload/paired.py)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fp16doctor.diagnose.budget import (
    analysis_s,
    block_s,
    compile_s,
    original_run,
    rounds_warmup_steps,
    script_setup_s,
    unit_cost_s,
)
from fp16doctor.diagnose.plan import device_has_bfloat16, experiment_units
from fp16doctor.diagnose.prepare import Prepared
from fp16doctor.diagnose.sink import DocumentSink
from fp16doctor.engines.rounds import (
    FULL_ROUNDS_BUDGET_S,
    ROUNDS_MIN_BUDGET_S,
    failed_records,
    stack_rounds_budget_s,
    take_experiment_rounds,
    take_rounds,
)
from fp16doctor.engines.spec import (
    HOST_STACK,
    ROUNDS_MIN_SHARE,
    UNSETTLED_SHARE,
    ExperimentUnit,
    RoundsRequest,
    RunSpec,
    WorkloadSize,
    is_host_stack,
    rounds_label,
    stack_backend,
)
from fp16doctor.knowledge.cpu import CPU_FP16_FLAGS
from fp16doctor.knowledge.gpus import gpu_facts
from fp16doctor.options import Progress
from fp16doctor.results import HOST_MACHINE, ResultsWriter, Run, run_key
from fp16doctor.runplan import IMPORT_PRIOR_S
from fp16doctor.workload import protocol
from fp16doctor.workload.paired import MIN_ROUNDS
from fp16doctor.workload.protocol import (
    MODEL_VARIANTS,
    ROUNDS_VARIANTS,
    VARIANT_ENV,
    VARIANT_LABEL_SEP,
    in_memory_batch_count,
    window_steps,
)

# A run record with nothing in it: what a price reads where float32 has no run.
NO_RUN = Run.of({})

# --- Which rounds processes run ---------------------------------------------------------------------------------

# A precision whose minimum rounds would take longer than this is left out (its ratio then rests on its own
# process, said as such): a 20 s float16 step must not hold the rest hostage. A 1 s step (float16 on a 2-core
# AVX2 CPU) costs about 6 s for its three rounds, and stays in, past the quick budget if need be.
MAX_MIN_ROUNDS_S = 30.0
# What one step of rounds costs beyond its own time: the block's dropped first step, on average.
BLOCK_OVERHEAD_STEPS = 1.0
# A slow step's block times one step (workload/rounds.py aims a block at 0.4 s, never under one step).
TYPICAL_BLOCK_STEPS = 1


@dataclass(frozen=True)
class RoundsPlan:
    """One comparison group's rounds: the spec to run (None: no rounds), and why each precision that finished is
    not in them (said on the terminal and kept on its run as `rounds_left_out`)."""

    spec: RunSpec | None
    left_out: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def messages(self) -> list[str]:
        return [f"{precision} left out of the interleaved rounds: {why}" for precision, why in self.left_out.items()
                ] + list(self.notes)


def rounds_plan(runs: Sequence[Mapping[str, Any]], stack: str, size: WorkloadSize,
                variant: str = "original", profiled: tuple[str, ...] = (),
                changed: tuple[RunSpec, ...] = (), builds_changes: bool = True) -> RoundsPlan:
    """The rounds spec for the runs of one stack in one process setting (ROUNDS_VARIANTS: the original, or an
    environment switch such as oneDNN off), float32 first, and why any precision is left out (how long the rounds
    go on is priced below); `profiled`: precisions with no run of their own, timed and profiled in the rounds
    process alone; `changed`: experiments that change a model or its input (the original's rounds only), each
    timed beside the precision it changes where that precision is timed, as are the matrix's changes that ran on
    their own, where the rounds process builds changed models (`builds_changes`: the built-in workload's does; a
    script's runs the script as written)."""
    records = [Run.of(r) for r in runs]
    group = [r for r in records if r.stack == stack and r.variant == variant]
    medians = {r.precision: float(r.step_median_ms or 0.0) for r in group if r.usable}
    left_out: dict[str, str] = {}
    if "float32" not in medians:
        return RoundsPlan(None, notes=("no interleaved rounds: float32 did not finish, so nothing pairs with it",))
    if any(r.workload.get("api") == ["custom_loop"] for r in group):
        return RoundsPlan(None, notes=("no interleaved rounds: a custom training loop has no fit() call for them to "
                                       "replay, so each ratio rests on its own process",))
    chosen = ["float32"]
    for precision, median in medians.items():
        if precision == "float32":
            continue
        cost_s = size.min_rounds * (TYPICAL_BLOCK_STEPS + BLOCK_OVERHEAD_STEPS) * median / 1000.0
        if cost_s > MAX_MIN_ROUNDS_S * size.min_rounds / MIN_ROUNDS:
            left_out[precision] = (f"{size.min_rounds} rounds of its {median:.0f} ms steps would take about "
                                   f"{cost_s:.0f} s; its ratio rests on its own process (the runs' spread)")
            continue
        chosen.append(precision)
    for run in group:
        if run.cut:
            left_out[run.precision] = "cut short by the slow-step bound; its ratio is a bound from its own process"
    # A profiled label with a change to its model or its input (a GPU's in-memory control) comes with `changed`.
    profiled = tuple(p for p in profiled if p not in chosen)
    chosen += [p for p in profiled if VARIANT_LABEL_SEP not in p]
    if len(chosen) < 2:  # no precision to pair with float32: no rounds, whatever changes to a model wait for them
        return RoundsPlan(None, left_out)
    # Changes to a model or its input, beside the precision each changes: the matrix's (--variant
    # synthetic_input, the full size's controls) that finished whole, and the experiments to be made here.
    ran = [r for r in records if r.stack == stack and r.variant in MODEL_VARIANTS and variant == "original"
           and builds_changes and not r.made_by_rounds and r.usable]
    chosen += dict.fromkeys([rounds_label(r.precision, r.variant) for r in ran if r.precision in chosen]
                            + [s.rounds_label for s in changed if variant == "original" and s.precision in chosen])
    timed = {rounds_label(r.precision, r.variant) for r in [*group, *ran] if r.timed_in_rounds}
    if set(chosen) <= timed:
        return RoundsPlan(None)  # --resume: these were timed together already, and nothing new finished
    spec = RunSpec(stack, "float32", variant, size,
                   rounds=RoundsRequest(tuple(chosen), profiled=tuple(p for p in profiled if p in chosen)))
    return RoundsPlan(spec, left_out)


def mark_left_out(runs: list[dict[str, Any]], stack: str, plan: RoundsPlan, variant: str = "original") -> bool:
    """Keep on each left-out run of `stack` and `variant` why it is not in the rounds; True when a run changed."""
    changed = False
    for record in runs:
        run = Run.of(record)
        why = plan.left_out.get(run.precision)
        if why and run.stack == stack and run.variant == variant and record.get("rounds_left_out") != why:
            record["rounds_left_out"] = why
            changed = True
    return changed


def profiled_in_rounds(specs: list[RunSpec], host: Mapping[str, Any], budgeted_here: bool,
                       backend: str | None = None) -> list[RunSpec]:
    """The cells of `specs` timed and profiled in their stack's interleaved rounds alone, no run of their own: at a
    size whose budget binds here (`budgeted_here`), the built-in workload's host cells, float32 running beside them
    in a process of its own (its step sets the bound their warm-up meets in the rounds), of a precision that no
    pathological kernel is expected to meet (`_no_pathology_expected`).
    On a GPU (the size's GPU budget, WorkloadSize.gpu) the matrix's in-memory controls (synthetic_input) are timed
    and profiled there too, beside the precision each changes, where float32 or that precision is timed there: their
    ratio is the device's answer, and a process of their own costs the framework's import again (10-13 s on the
    H200 recording)."""
    if not budgeted_here:
        return []
    with_fp32 = {s.stack for s in specs if s.precision == "float32" and s.variant == "original"}
    alone = [s for s in specs if s.variant == "original" and s.script is None and is_host_stack(s.stack)
             and s.stack in with_fp32 and not s.native_only
             and _no_pathology_expected(s.precision, host, stack_backend(s.stack) or backend)]
    timed = {(s.stack, s.precision) for s in alone} | {(stack, "float32") for stack in with_fp32}
    controls = [s for s in specs if s.size.gpu and s.variant == "synthetic_input" and s.script is None
                and is_host_stack(s.stack) and (s.stack, s.precision) in timed]
    return alone + controls


def _no_pathology_expected(precision: str, host: Mapping[str, Any], backend: str | None) -> bool:
    """Whether a precision is expected to run without the pathology the slow-step bound is there for: mixed_bfloat16
    where the device computes bfloat16; float16 and mixed_float16 on TensorFlow on a CPU with no float16 arithmetic
    (knowledge/cpu.py CPU_FP16_FLAGS), where TensorFlow computes float16 in its own kernels, not oneDNN's (its
    IsDataTypeSupportedByOneDNNOnThisCPU wants AVX512-FP16 or AMX-FP16 for float16): 5.5-6x float32's step on an
    AVX-512 BF16 EPYC and 1.7-2.2x on an AVX2 EPYC (docs/benchmarks.md), where a Xeon with AVX512-FP16 met
    oneDNN's reference kernels at 160x. A warm-up past the bound still leaves the rounds for a run of its own.
    On an NVIDIA GPU, float16 and mixed_float16 where every GPU computes float16 at float32's rate or faster
    (knowledge/gpus.py: compute capability 5.3, 6.0, 7.0 on, not 6.1's 1/64): the H200's float16 step was 2.2x
    float32's for its host's float16 batches, far under the bound, where a GPU without fast float16 can be 64x."""
    if protocol.is_mixed(precision, protocol.BF16):
        return device_has_bfloat16(host)
    if protocol.family(precision) != protocol.FP16:
        return False
    gpus = [g for g in host.get("gpus") or [] if isinstance(g, Mapping)]
    if gpus:
        return all(gpu_facts(str(g.get("name") or ""), g.get("compute_capability")).native_16bit["float16"] is True
                   for g in gpus)
    keras = (host.get("frameworks") or {}).get("keras") if isinstance(host.get("frameworks"), Mapping) else None
    ran_on = backend or (keras.get("backend") if isinstance(keras, Mapping) else None) or "tensorflow"
    cpu = host.get("cpu")
    flags = cpu.get("flags") if isinstance(cpu, Mapping) else None
    if ran_on != "tensorflow" or not isinstance(flags, list) or not flags:
        return False
    return not set(flags) & set(CPU_FP16_FLAGS)


# --- What a rounds process costs, and what it gets of the budget ----------------------------------------------


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
    startup_s = rounds_process_s(runs, stack, size, profiled, changed, minimum=False)
    return max(ROUNDS_MIN_BUDGET_S, deadline - time.monotonic() - startup_s - reserve_s)


def rounds_process_s(runs: list[dict[str, Any]], stack: str, size: WorkloadSize, profiled: tuple[str, ...],
                     changed: tuple[RunSpec, ...], minimum: bool, windows: bool = True) -> float:
    """The rounds process's start-up: its import and every model's first step and warm-up (the original runs', the
    precisions it profiles, the changes timed in it), the last three with their share of the minimum rounds and of
    the round that starts as the budget ends; with `minimum`, every model's minimum rounds and no round more."""
    rounds = size.min_rounds if minimum else size.min_rounds + 1
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


def unsettled_allowance(size: WorkloadSize, deadline: float | None, variant: str = "original"
                        ) -> tuple[float | None, float | None]:
    """(min_s, unsettled_s) of a rounds process where the size's budget binds (`deadline`), the original's rounds
    only: never less than ROUNDS_MIN_SHARE of the wall budget of rounds, and up to UNSETTLED_SHARE of it more past
    their end for the comparisons still unsettled (workload/rounds.py); (None, None) elsewhere."""
    if deadline is None or size.budget_s is None or variant != "original":
        return None, None
    return size.budget_s * ROUNDS_MIN_SHARE, size.budget_s * UNSETTLED_SHARE


def rounds_end_s(deadline: float, reserve_s: float, windows: int, per_window_s: float) -> float:
    """Where the budget binds: how long after it starts the rounds process may go on timing rounds (the workload
    measures its own start-up against this), leaving `reserve_s` for the experiments to come and the time its
    `windows` profiled windows take to attribute (`per_window_s` each: attribution_per_window_s)."""
    return max(0.0, deadline - time.monotonic() - reserve_s - after_rounds_s(windows, per_window_s))


def after_rounds_s(windows: int, per_window_s: float) -> float:
    """What follows a rounds process's last round: attributing its `windows` profiled windows, then the rest."""
    return AFTER_ROUNDS_S + per_window_s * windows


def attribution_per_window_s(runs: list[dict[str, Any]], stack: str) -> float:
    """What attributing one profiled window costs on this machine: float32's own window's, as this invocation
    measured it (profile.attribution_s); ATTRIBUTION_PER_WINDOW_S before one was."""
    fp32 = original_run(runs, stack, "float32")
    measured = fp32.attribution_s if fp32 is not None else None
    return measured if measured is not None and measured > 0 else ATTRIBUTION_PER_WINDOW_S


def rounds_overrun_note(size: WorkloadSize, stack: str, runs: list[dict[str, Any]], deadline: float,
                        profiled: tuple[str, ...] = (), changed: tuple[RunSpec, ...] = ()) -> str | None:
    """What to say before the rounds where their minimum is expected to end past `deadline` by a second or more
    (rounds_overrun_s); None where it fits."""
    over_s = rounds_overrun_s(size, stack, runs, deadline, profiled, changed)
    if over_s < 1.0:
        return None
    fp32 = original_run(runs, stack, "float32")
    step_s = fp32.median_s if fp32 is not None else None
    steps = f" (float32 steps in {step_s * 1000:.0f} ms here)" if step_s is not None else ""
    return (f"the interleaved rounds' minimum of {size.min_rounds} rounds is expected to end about {over_s:.0f} s "
            f"past the {size.budget_s or 0:.0f} s {size.name} budget on this machine{steps}: they run all the same, "
            "since fewer rounds give no interval")


def rounds_left_out_for_time(size: WorkloadSize, stack: str, runs: list[dict[str, Any]], deadline: float,
                             profiled: tuple[str, ...] = (), changed: tuple[RunSpec, ...] = ()) -> dict[str, str]:
    """Where the rounds' minimum is expected to end past the budget by more than a comparison still unsettled may
    take (UNSETTLED_SHARE of it: 30 s at the quick size), the 16-bit precisions with runs of their own to leave
    out of them, slowest step first, until the rest fit (all of them where none does), each with why and the
    --budget that would fit every one (a script with 3 s steps: its own runs fill the budget, and its rounds would
    take minutes); none where they fit."""
    budget_s = size.budget_s or 0.0
    allowance_s = budget_s * UNSETTLED_SHARE
    over_all = rounds_overrun_s(size, stack, runs, deadline, profiled, changed)
    if over_all <= allowance_s:
        return {}
    needed = int(-(-(budget_s + over_all + AFTER_ROUNDS_S) // 10) * 10)  # rounded up to 10 s
    slowest = sorted((r for r in rounds_runs(runs, stack) if r.precision != "float32"),
                     key=lambda r: -(r.median_s or 0.0))
    left_out: dict[str, str] = {}
    for run in slowest:
        step = f"{run.median_s * 1000:.0f} ms" if run.median_s else "its"
        left_out[run.precision] = (
            f"its {size.min_rounds} rounds ({step} steps) would end this diagnose about {over_all:.0f} s past the "
            f"{budget_s:.0f} s {size.name} budget; its ratio rests on its own process (--budget {needed} times them)")
        kept = [r for r in runs if not (Run.of(r).stack == stack and Run.of(r).precision in left_out)]
        if rounds_overrun_s(size, stack, kept, deadline, profiled, changed) <= allowance_s:
            break
    return left_out


def repeat_fits(size: WorkloadSize, stack: str, runs: list[dict[str, Any]], deadline: float | None, reserve_s: float,
                profiled: tuple[str, ...] = (), changed: tuple[RunSpec, ...] = ()) -> float | None:
    """What a second rounds process of the same configurations is expected to cost (its import, each model's first
    step and warm-up, their minimum rounds, no profiled window, then its exit), where both processes' minimum fit
    before `deadline` beside `reserve_s` for the experiments; None where they do not, or no budget binds."""
    if deadline is None:
        return None
    repeat_s = (rounds_process_s(runs, stack, size, profiled, changed, minimum=True, windows=False)
                + AFTER_ROUNDS_S)
    if rounds_overrun_s(size, stack, runs, deadline - reserve_s - repeat_s, profiled, changed) > 0:
        return None
    return repeat_s


def rounds_overrun_s(size: WorkloadSize, stack: str, runs: list[dict[str, Any]], deadline: float,
                     profiled: tuple[str, ...] = (), changed: tuple[RunSpec, ...] = ()) -> float:
    """How far past `deadline` the rounds process is expected to end at its minimum (its start-up, the precisions it
    profiles, the changes timed in it, MIN_ROUNDS rounds of every configuration's blocks, then its windows'
    attribution and what follows it), priced from this invocation's runs; 0 where it fits."""
    minimum_s = rounds_process_s(runs, stack, size, profiled, changed, minimum=True)
    after_s = after_rounds_s(len(profiled), attribution_per_window_s(runs, stack))
    return max(0.0, time.monotonic() + minimum_s + after_s - deadline)


def _rounds_startup_s(all_runs: list[dict[str, Any]], stack: str, size: WorkloadSize, minimum: bool = False) -> float:
    """What the rounds process spends besides its budget: importing the framework, each model's first steps
    (tracing) and warm-up, float32's twice (its A/A control), and the round that starts just before the budget
    ends (the loop checks the clock between rounds); with `minimum`, the minimum rounds instead of that one."""
    runs = rounds_runs(all_runs, stack)
    import_s = max((r.import_s or 0.0 for r in runs), default=3.0)
    total = import_s
    one_round = 0.0
    for run in runs:
        copies = 2 if run.precision == "float32" else 1
        median_s = run.median_s or 0.0
        first_s = _rounds_first_step_s(run.first_step_s, median_s)
        total += copies * (first_s + rounds_warmup_steps(size) * median_s + script_setup_s(run)
                           + (GPU_MODEL_BUILD_S if run.on_gpu else 0.0))
        one_round += copies * (size.min_rounds * block_s(median_s) if minimum else 3 * median_s)
    return total + one_round


def rounds_runs(runs: list[dict[str, Any]], stack: str) -> list[Run]:
    """The stack's runs of their own that the rounds time again: the original's, finished whole."""
    return [run for run in map(Run.of, runs) if run.stack == stack and run.original and run.usable]


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


def _profiled_step_s(label: str, fp32: Run) -> float:
    """A configuration's expected step in the rounds with no run of its own (a precision, or a precision with a
    change: "float32+synthetic_input"), from float32's own run and the device it ran on: on a GPU from its step and
    its host's batch time (_gpu_step_s); on a CPU from its engine's flags (AVX-512 or not)."""
    if fp32.on_gpu:
        return _gpu_step_s(label, fp32)
    precision = label.partition(VARIANT_LABEL_SEP)[0]
    flags = (fp32.engine.get("cpu") or {}).get("flags") or []
    priors = PROFILED_STEP_PRIOR if not isinstance(flags, list) or not flags or "avx512f" in flags \
        else PROFILED_STEP_PRIOR_AVX2
    return (fp32.median_s or 0.0) * priors.get(precision, 1.0)


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


def _batch_s(precision: str, fp32: Run) -> float:
    """The host's time to make one batch of this precision, from float32's own run's (input_time_ms)."""
    measured = fp32.input_median_ms
    batch_s = measured / 1000.0 if measured is not None and measured > 0 else 0.0
    return batch_s * (HOST_FLOAT16_BATCH_PRIOR if protocol.is_pure(precision, protocol.FP16) else 1.0)


def _gpu_step_s(label: str, fp32: Run) -> float:
    """A configuration's expected step on a GPU: in memory, float32's step less its batch; from the generator, that
    plus its own batch (float16's: HOST_FLOAT16_BATCH_PRIOR times float32's)."""
    precision, _, variant = label.partition(VARIANT_LABEL_SEP)
    step_s = fp32.median_s or 0.0
    device_s = max(step_s - _batch_s("float32", fp32), 0.0)
    return device_s if variant == "synthetic_input" else device_s + _batch_s(precision, fp32)


def _gpu_build_s(label: str, fp32: Run, size: WorkloadSize, timed_input: bool = True) -> float:
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
    fp32 = original_run(runs, stack, "float32")
    if not profiled or fp32 is None:
        return 0.0
    fp32_step = fp32.median_s or 0.0
    first_s = fp32.first_step_s
    total = 0.0
    for label in profiled:
        step_s = _profiled_step_s(label, fp32)
        total += (_config_startup_s(_rounds_first_step_s(first_s, fp32_step, step_s), step_s, size, rounds)
                  + (_gpu_build_s(label, fp32, size) if fp32.on_gpu else 0.0))
        if windows:
            total += window_steps(size.profile_steps, step_s * 1000.0) * step_s + WINDOW_OVERHEAD_S
    return total


def _changed_startup_s(runs: list[dict[str, Any]], stack: str, size: WorkloadSize,
                       changed: tuple[RunSpec, ...], rounds: int = MIN_ROUNDS + 1) -> float:
    """What the rounds process spends on the experiments timed in it that change a model or its input, each priced
    at the run it changes (its first step, its warm-up, its share of the minimum rounds); at float32's with
    _profiled_step_s where that precision has no run of its own."""
    fp32 = original_run(runs, stack, "float32")
    total = 0.0
    for spec in changed:
        base = original_run(runs, stack, spec.precision)
        step_s = _changed_step_s(spec, runs)
        priced = base or fp32 or NO_RUN
        first_s = _rounds_first_step_s(priced.first_step_s, priced.median_s or 0.0, step_s) + compile_s(spec, runs)
        total += _config_startup_s(first_s, step_s, size, rounds)
        if fp32 is not None and fp32.on_gpu:
            total += _gpu_build_s(spec.rounds_label, fp32, size, timed_input=False)
    return total


def _changed_step_s(spec: RunSpec, runs: list[dict[str, Any]]) -> float:
    """A change's expected step in the rounds: the step of the run it changes, at float32's with _profiled_step_s
    where that precision has no run of its own; on a GPU the in-memory control's from float32's (_gpu_step_s)."""
    fp32 = original_run(runs, spec.stack, "float32") or NO_RUN
    base = original_run(runs, spec.stack, spec.precision)
    if fp32.on_gpu and spec.variant == "synthetic_input":
        return _profiled_step_s(spec.rounds_label, fp32)
    return (base.median_s if base is not None else None) or _profiled_step_s(spec.rounds_label, fp32)


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
    return first_s + rounds_warmup_steps(size) * step_s + rounds * block_s(step_s)


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
    fp32 = original_run(runs, stack, "float32") or NO_RUN
    import_s = experiment.import_s if experiment.import_s is not None else fp32.import_s or IMPORT_PRIOR_S
    configs_s = _profiled_startup_s(runs, stack, size, experiment.configurations, MIN_ROUNDS + 1)
    # float32's A/A control: a second float32 model, timed in every round beside the first.
    fp32_label = next((c for c in experiment.configurations if c.partition(VARIANT_LABEL_SEP)[0] == "float32"), None)
    aa_s = (MIN_ROUNDS + 1) * block_s(_profiled_step_s(fp32_label, fp32)) if fp32_label is not None else 0.0
    return import_s + configs_s + aa_s


def round_s(runs: list[dict[str, Any]], stack: str, profiled: tuple[str, ...], changed: tuple[RunSpec, ...]) -> float:
    """One round of a rounds process: every configuration's block (float32's twice, its A/A control)."""
    fp32 = original_run(runs, stack, "float32") or NO_RUN
    total = sum((2 if r.precision == "float32" else 1) * block_s(r.median_s or 0.0)
                for r in rounds_runs(runs, stack))
    total += sum(block_s(_profiled_step_s(label, fp32)) for label in profiled)
    total += sum(block_s(_changed_step_s(spec, runs)) for spec in changed)
    return total


# --- Where a rounds process's record goes -----------------------------------------------------------------------


class RoundsSink(DocumentSink):
    """The rounds process's record goes into the runs it timed (engines/rounds.take_rounds), not in as a run of
    its own; its start shows as a note (the runs' progress counts cells)."""

    def __init__(self, writer: ResultsWriter, progress: Progress, alone: str, measure_load: bool,
                 creates: list[RunSpec] | None = None, makes_all: bool = False,
                 repeat_of: int | None = None) -> None:
        super().__init__(writer, progress, len(creates or ()) or 1)
        self.alone = alone  # where each precision's own figures were timed, as the cross-check names it
        self.measure_load = measure_load  # the engine runs here: this machine's load beside the rounds is theirs
        self.before: Any = None
        # What the rounds time with no process of their own (a setting's experiments, or a precision of the
        # original profiled in the rounds): their records are made from the rounds.
        self.creates = list(creates or ())
        # Every record of the rounds' stack is made from them (another Keras backend's: no run of its own there).
        self.makes_all = makes_all
        self.made = False
        self.repeat_of = repeat_of  # the rounds process (group) this one repeats in a fresh process, if any
        self.rows: dict[tuple[Any, Any], str] = {}  # (stack, setting): the live row of its rounds process

    def start_run(self, spec: RunSpec) -> None:
        # A live row for the rounds process (what it is doing while it runs), ended without a line of its own.
        self.progress.start_run(spec, 1, 0)
        self.rows[(spec.stack, spec.variant)] = spec.label
        if self.measure_load:
            from fp16doctor.probe.load import snapshot

            self.before = snapshot()  # what else ran beside the rounds: the reason a failed A/A control gives

    def finish_run(self, record: dict[str, Any]) -> None:
        label = self.rows.pop((record.get("stack"), record.get("variant", "original")), None)
        if label is not None:
            self.progress.event({"event": "ended", "run": label})
        if self.before is not None:
            from fp16doctor.probe.load import machine_load, snapshot

            record["machine_load"] = machine_load(self.before, snapshot())
        prefix = "" if record.get("stack") in (None, HOST_STACK) else f"{record.get('stack')}: "
        if self.creates and (self.makes_all or record.get("variant", "original") != "original"):
            self._make_runs(record, prefix)
            return
        kept, notes, made = take_rounds(self.writer.doc, record, alone=self.alone, creates=self.creates,
                                        repeat_of=self.repeat_of)
        if kept is not None:
            self.writer.save()
        for note in notes:
            self.progress.note(prefix + note)
        self._add(made)

    def _add(self, made: list[dict[str, Any]] | None) -> None:
        for run in made or ():
            self.writer.add_run(run)  # saved at once, as every finished run is
            self.progress.finish_run(run)
        self.made = bool(made)

    def _make_runs(self, record: dict[str, Any], prefix: str) -> None:
        made, notes = take_experiment_rounds(self.writer.doc, record, self.creates)
        for note in notes:
            self.progress.note(prefix + note)
        if made is None and self.makes_all:  # nothing else times them: each is a failed run, with the error
            made = failed_records(record, self.creates)
        self._add(made)


# --- The phase ---------------------------------------------------------------------------------------------------


def time_in_rounds(prepared: Prepared, writer: ResultsWriter, coming: Sequence[RunSpec] = (),
                   in_rounds: list[RunSpec] | None = None) -> list[RunSpec]:
    """Each stack's precisions timed again, together, in interleaved rounds (engines/rounds.py), on the engine
    and hardware their runs used, one rounds process per process setting the matrix ran (the original, and an
    environment switch asked for with --variant); a script's in one process too, each precision's model from its
    own run of the script (workload/script_rounds.py). Where a budget binds, the original's rounds leave room for
    the experiments the runs so far ask for (cheapest evidence first: they test the cause, more rounds only
    narrow an interval); another setting's rounds get their minimum. The experiments planned so far (`coming`)
    that change a model or its input (protocol.MODEL_VARIANTS: the in-memory input control, float32 batches,
    padded channels, XLA) are timed in the original's rounds beside the precision they change, their records made
    from them; one the rounds did not make is planned again with the other experiments. `in_rounds`: cells with no
    run of their own, which their stack's rounds time and profile and make records of; those the rounds did not
    make are returned, to run in a process of their own after all (said here)."""
    progress, runs = prepared.progress, writer.doc["runs"]
    # A cell the rounds time and profile (a GPU's in-memory control among them) is no experiment to plan again.
    planned_here = {(s.stack, s.precision, s.variant) for s in in_rounds or ()}
    coming = [s for s in coming if (s.stack, s.precision, s.variant) not in planned_here]
    # The experiments that change a model or its input: timed in the original's rounds, beside what they change.
    changing = [s for s in coming if s.variant in MODEL_VARIANTS] if prepared.script is None else []
    reserve = experiment_units(coming) if prepared.deadline is not None else []
    moved: list[RunSpec] = []
    planned: list[RunSpec] = []
    repeats: dict[tuple[str, str], float] = {}  # (stack, setting): the experiments' reserve, where a 2nd process fits
    for stack in prepared.stacks:
        engine_class = prepared.router.engine_class(RunSpec(stack, "float32", "original", prepared.size))
        # The size's budget clock binds only what runs here, unqueued; the others get the minimum.
        deadline = prepared.deadline if engine_class.runs_here and not engine_class.queued else None
        for variant in ROUNDS_VARIANTS:
            if not any(s.stack == stack and s.variant == variant for s in prepared.specs):
                continue
            mine = [s for s in in_rounds or () if s.stack == stack and s.rounds_setting == variant]
            profiled = tuple(s.rounds_label for s in mine)
            # The matrix's changes to a model or its input with no run of their own (a GPU's in-memory controls).
            controls = tuple(s for s in mine if s.variant != variant)
            changed = tuple(s for s in changing if s.stack == stack)
            # Rounds that would run minutes past the budget (long steps) leave their slowest precisions out.
            too_long = (rounds_left_out_for_time(prepared.size, stack, runs, deadline, profiled, changed)
                        if deadline is not None and variant == "original" else {})
            timed_runs = [r for r in runs if not (Run.of(r).stack == stack and Run.of(r).precision in too_long)]
            plan = rounds_plan(timed_runs, stack, prepared.size, variant, profiled, changed + controls,
                               builds_changes=prepared.script is None)
            plan = replace(plan, left_out={**plan.left_out, **too_long})
            inside = tuple(s for s in changed if plan.spec is not None and s.rounds_label in plan.spec.rounds_of)
            moved += inside
            end_s = None
            prefix = "".join(f"{part}: " for part in (stack, variant) if part not in (HOST_STACK, "original"))
            if variant == "original":
                reserve_s = sum(unit_cost_s(unit, runs) for unit in reserve
                                if unit[0].stack == stack and not all(u in inside for u in unit)) + analysis_s(runs)
                # A second rounds process, where the budget has room for it beside the experiments: the ratio's
                # variation between processes is then measured, not left out of its interval.
                repeat_s = repeat_fits(prepared.size, stack, timed_runs, deadline, reserve_s, profiled, inside)
                if repeat_s is not None and plan.spec is not None:
                    repeats[(stack, variant)] = reserve_s
                    reserve_s += repeat_s
                budget = rounds_budget_s(prepared.size, stack, timed_runs, deadline, reserve_s, profiled, inside)
                if deadline is not None and prepared.script is None:
                    end_s = rounds_end_s(deadline, reserve_s, len(profiled), attribution_per_window_s(runs, stack))
                    overrun = rounds_overrun_note(prepared.size, stack, timed_runs, deadline, profiled, inside)
                    if overrun is not None:
                        progress.note(prefix + overrun)
            else:
                budget = stack_rounds_budget_s(prepared.size)
            for note in plan.messages():
                progress.note(prefix + note)
            if mark_left_out(runs, stack, plan, variant):
                writer.save()
            if plan.spec is None:
                continue
            min_s, unsettled_s = unsettled_allowance(prepared.size, deadline, variant)
            spec = replace(plan.spec, data_dir=prepared.data_dir if is_host_stack(stack) else None,
                           script=prepared.script, rounds=RoundsRequest(plan.spec.rounds_of, plan.spec.rounds_profiled,
                                                                        budget, end_s, min_s, unsettled_s))
            if engine_class.runs_here:
                until = (f"until {end_s:.0f} s after it starts" if end_s is not None else f"about {budget:.0f} s")
                more = (f"; up to {unsettled_s:.0f} s more for a comparison still unsettled then"
                        if unsettled_s else "")
                progress.note(f"{prefix}interleaved rounds of {', '.join(spec.rounds_of)} in one process, each "
                              f"round in a new order ({until}, at least {spec.size.min_rounds} rounds{more})")
            planned.append(spec)
    for engine, cells in prepared.router.route(planned):
        # What these rounds make records of: the precisions they profile, and the changes timed in them.
        creates = [s for s in [*(in_rounds or ()), *moved] if any(
            s.stack == c.stack and s.rounds_setting == c.variant and s.rounds_label in c.rounds_of for c in cells)]
        sink = RoundsSink(writer, progress, alone=engine.one_run, measure_load=engine.runs_here, creates=creates)
        engine.run_groups([[cell] for cell in cells], sink)
    for spec in planned:
        if (spec.stack, spec.variant) in repeats:
            repeat_rounds(prepared, writer, spec, repeats[(spec.stack, spec.variant)], moved)
    made = {run_key(r) for r in writer.doc["runs"]}
    unmade = [s for s in in_rounds or () if (s.stack, s.precision, s.variant) not in made]
    if unmade:
        progress.note(f"{', '.join(s.precision for s in unmade)}: not timed in the interleaved rounds, so each runs "
                      "in a process of its own")
    return unmade


def repeat_rounds(prepared: Prepared, writer: ResultsWriter, first: RunSpec, reserve_s: float,
                  changed: list[RunSpec]) -> None:
    """The configurations `first`'s rounds process timed, timed again in a fresh process (no profiled window: the
    first made them), their rounds added to the same runs (engines/rounds.merge_rounds `repeat_of`), with what the
    budget has left after `reserve_s` for the experiments: two processes' means let the analysis estimate how far
    the ratios move between processes (workload/paired.py between_processes) and widen each interval by it."""
    doc, progress, runs = writer.doc, prepared.progress, writer.doc["runs"]
    entries = [(i, e) for i, e in enumerate(doc.get("timing_rounds") or []) if e.get("stack") == first.stack
               and e.get("variant", "original") == first.variant and e.get("repeat_of") is None]
    if not entries or prepared.deadline is None:
        return
    group, entry = entries[-1]
    if entry.get("extended"):
        return  # it went on past the budget for an unsettled comparison: no time is left for a second process
    labels = tuple(str(p) for p in entry.get("precisions") or [])
    timed = {run.step_group for run in map(Run.of, runs) if run.stack == first.stack}
    if len(labels) < 2 or "float32" not in labels or group not in timed:
        return  # the first process failed, or paired nothing with float32
    inside = tuple(s for s in changed if s.stack == first.stack and s.rounds_label in labels)
    end_s = None
    if prepared.script is None:
        end_s = rounds_end_s(prepared.deadline, reserve_s, 0, attribution_per_window_s(runs, first.stack))
    budget = rounds_budget_s(prepared.size, first.stack, runs, prepared.deadline, reserve_s, (), inside)
    spec = replace(first, rounds=RoundsRequest(labels, budget_s=budget, end_s=end_s))
    prefix = "" if first.stack == HOST_STACK else f"{first.stack}: "
    progress.note(f"{prefix}interleaved rounds of {', '.join(labels)} again in a fresh process, so each interval "
                  "holds the variation between processes")
    for engine, cells in prepared.router.route([spec]):
        sink = RoundsSink(writer, progress, alone=engine.one_run, measure_load=engine.runs_here, repeat_of=group)
        engine.run_groups([[cell] for cell in cells], sink)


def time_setting_in_rounds(prepared: Prepared, writer: ResultsWriter, unit: ExperimentUnit) -> bool:
    """One setting's experiments timed in its own rounds process, float32 first; whether they were (the rounds
    made their records)."""
    first = unit[0]
    spec = RunSpec(first.stack, "float32", first.variant, first.size, data_dir=first.data_dir,
                   experiment=first.experiment, script=first.script,
                   rounds=RoundsRequest(tuple(s.precision for s in unit), budget_s=stack_rounds_budget_s(first.size)))
    setting = " ".join(f"{k}={v}" for k, v in VARIANT_ENV.get(first.variant, {}).items()) or first.variant
    prefix = "" if first.stack == HOST_STACK else f"{first.stack}: "
    prepared.progress.note(f"{prefix}{first.variant}: {', '.join(spec.rounds_of)} timed together in interleaved "
                           f"rounds, in one process with {setting}")
    made = False
    for engine, cells in prepared.router.route([spec]):
        sink = RoundsSink(writer, prepared.progress, alone=engine.one_run, measure_load=engine.runs_here,
                          creates=list(unit))
        engine.run_groups([[cell] for cell in cells], sink)
        made = sink.made
    return made


def try_backends(prepared: Prepared, writer: ResultsWriter) -> None:
    """The other Keras backends that see the GPU, after everything else (diagnose/plan.py backend_trials): float32
    and the precision prescribed for the configured backend so far, with batches in memory where the matrix measured
    them (the device-side answer; a script runs as written), timed together in one interleaved rounds process per
    backend (a backend cannot change inside one), as the configured backend's in-memory runs were, their records made
    from the rounds. The analysis names a backend only where it measured much faster
    (user_changes.BACKEND_MIN_SPEEDUP)."""
    from fp16doctor.analysis import diagnose_document

    doc, progress = writer.doc, prepared.progress
    prescribed = next((p for p in diagnose_document(doc).prescriptions
                       if (p.machine, p.stack) == (HOST_MACHINE, HOST_STACK)), None)
    precision = prescribed.recommended.precision if prescribed is not None else "float32"
    in_memory = prepared.script is None and any(
        s.stack == HOST_STACK and s.variant == "synthetic_input" for s in prepared.specs)
    variant = "synthetic_input" if in_memory else "original"
    done = {run_key(r) for r in doc["runs"]}
    for stack in prepared.backend_trials:
        cells = [RunSpec(stack, p, variant, prepared.size, data_dir=None if prepared.script else prepared.data_dir,
                         script=prepared.script) for p in dict.fromkeys(["float32", precision])
                 if (stack, p, variant) not in done]
        if not cells:
            continue
        spec = replace(cells[0], precision="float32", variant="original", rounds=RoundsRequest(
            tuple(c.rounds_label for c in cells), budget_s=stack_rounds_budget_s(prepared.size)))
        progress.note(f"{stack}: another Keras backend that sees the GPU: {', '.join(spec.rounds_of)} timed together "
                      "in interleaved rounds, in one process of its own")
        for engine, rounds in prepared.router.route([spec]):
            sink = RoundsSink(writer, progress, alone=engine.one_run, measure_load=engine.runs_here, creates=cells,
                              makes_all=True)
            engine.run_groups([rounds], sink)
