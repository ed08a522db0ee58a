"""A cell of the matrix and how big it is: what an engine is told to run, the same on every engine (host, Docker,
Slurm), and how it crosses to a Slurm node (as JSON). The fairness rules live here too: which cells are compared
with each other, and the slow-step bound a 16-bit cell takes from its group's float32."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from fp16doctor.results import find_run
from fp16doctor.workload.paired import MAX_ROUNDS, MIN_ROUNDS
from fp16doctor.workload.protocol import KERAS3_BACKENDS, MODEL_VARIANTS, SIZES, VARIANT_LABEL_SEP

# Slow-step bound: a 16-bit run whose steady step (the second on: the first pays tracing) takes longer than the
# bound stops after that step, which is its measurement. The bound is time: SLOW_STEP_S of the run's size, but
# never under SLOW_STEP_FLOOR times float32's median (a 2-5x slowdown is what a diagnosis must measure well)
# and never over SLOW_STEP_MULTIPLE times it (50x is beyond anything a precision change explains by arithmetic
# alone: a GPU without fast fp16 is 2x-64x, a CPU emulating it 5x-10x).
# First-step bound: a 16-bit run whose first step already exceeds float32's first step by the whole steady bound,
# and is at least SLOW_STEP_FLOOR times it, stops after that step, which is its measurement (read, like any bound
# run, against float32's first step). Both conditions: a healthy 16-bit first step on a GPU pays cuDNN's
# autotuning or XLA's compilation afresh for its own dtype and can take seconds more than float32's, which the
# margin alone would mistake for pathology; 5x float32's whole first step, tracing included, it does not reach.
SLOW_STEP_MULTIPLE = 50.0
SLOW_STEP_FLOOR = 5.0
SLOW_STEP_S = {"smoke": 1.0, "quick": 5.0, "full": 30.0}
# The wall budget a size keeps where its engine runs here, unqueued (diagnose/rounds.py, diagnose/budget.py): the
# interleaved rounds fill what the runs leave of it and experiments run only where they fit. The full size has none.
# Smoke's is about what its five runs and three rounds took on a 2-core Xeon (46 s, docs/benchmarks.md).
WALL_BUDGET_S = {"smoke": 45.0, "quick": 90.0}
# The wall budget of a size whose host runs go to a GPU this machine holds (WorkloadSize.gpu, `on_gpu`): the full
# size's default diagnose in the time a coffee takes. The H200 recording's 340 s went on eight processes of their own
# (10-13 s of import each) and rounds of twelve configurations; the planner's replay of its phases fits 120 s
# (docs/benchmarks.md). A CPU's full size keeps none: its runs are the user's script as posted, minutes a run.
GPU_WALL_BUDGET_S = {"full": 120.0}
# Such a size's runs of their own stop measuring after this long (the full size's 120 s otherwise): every
# configuration is timed again in the interleaved rounds, whose figures replace its own (as quick's 3 s).
GPU_MAX_MEASURE_S = 3.0
# A budgeted size's interleaved rounds stop once every ratio against float32 (the A/A control's included) is known
# to within this, relative, either way (its 95 % interval; workload/rounds.py), instead of filling the budget: on the
# 2-core AVX-512 BF16 EPYC a quiet morning's quick rounds reached 4.3 % at round 5 and stayed 3.8-6.3 % for 7
# more; a noisy day's (12 % between identical blocks) would need about 30 rounds, and fill the budget
# (docs/benchmarks.md). The full size fills its rounds' budget.
ROUNDS_PRECISION = {"smoke": 0.05, "quick": 0.05}
# The same target for a size budgeted on a GPU (GPU_WALL_BUDGET_S).
GPU_ROUNDS_PRECISION = 0.05
# A budgeted size's rounds where the budget binds: never less than this share of the wall budget of rounds, however
# long the runs before them took (a 2-core Xeon under load: float32's first step took 912 ms, the 16-bit first steps
# cut by the slow-step bound filled the budget, and 3 rounds in 11 s left mixed_bfloat16 at 0.85-3.53x); and, where a
# comparison that would change the prescription is still unsettled when the budget ends (workload/paired.py
# `unsettled`), up to this share more, those configurations alone beside float32 (quick: 9 s and 30 s, so a
# quick diagnose on a busy 2-core machine ends within 150 s; an idle one settles within its 90 s).
ROUNDS_MIN_SHARE = 0.1
UNSETTLED_SHARE = 1 / 3
# Benchmarks and tests force the slow path on a machine where no precision is pathological.
SLOW_STEP_MULTIPLE_ENV = "FP16DOCTOR_SLOW_STEP_MULTIPLE"
# The stack name of the cells that run on the target Python itself, not in a pinned stack's image, on the Keras
# backend its configuration selects (KERAS_BACKEND, else keras.json).
HOST_STACK = "host"
# The target Python on another Keras 3 backend is a stack of its own, "host-jax": a backend cannot change inside a
# process, and its runs compare with the configured backend's as a pinned stack's do (stack_comparisons).
HOST_BACKEND_PREFIX = HOST_STACK + "-"


def host_stack(backend: str | None, configured: str | None) -> str:
    """The host stack that runs a Keras backend: `host` for the configured one, else `host-<backend>`."""
    return HOST_STACK if backend is None or backend == configured else HOST_BACKEND_PREFIX + backend


def is_host_stack(stack: str) -> bool:
    """Whether a stack's cells run on the target Python itself (any backend), not in a pinned stack."""
    return stack == HOST_STACK or (stack.startswith(HOST_BACKEND_PREFIX)
                                   and stack[len(HOST_BACKEND_PREFIX):] in KERAS3_BACKENDS)


def stack_backend(stack: str) -> str | None:
    """The Keras backend a host stack names ("host-jax": jax); None for `host` (the configured one) and pinned
    stacks."""
    return stack[len(HOST_BACKEND_PREFIX):] if stack != HOST_STACK and is_host_stack(stack) else None


def host_rerun(stack: str) -> list[str]:
    """The diagnose options that run a host stack's configuration again: `--backend jax` for `host-jax`."""
    backend = stack_backend(stack)
    return ["--backend", backend] if backend else []


@dataclass(frozen=True)
class WorkloadSize:
    """How big one run is. `full` is the user's script as posted; `quick` fits a 2-core CPU in 90 s; `smoke` checks
    that everything runs, in seconds a run."""

    name: str
    image_height: int
    image_width: int
    batch_size: int
    warmup_steps: int
    min_steps: int
    max_steps: int
    max_measure_s: float  # stop measuring after this long even if the median is not yet stable
    input_batches: int  # batches timed to measure host input time
    profile_steps: int = 2  # the profiled window after the timed steps (fewer for long steps: window_steps)
    gpu: bool = False  # the host's runs go to a GPU this machine holds: the size's GPU budget binds (on_gpu)
    # The user's own wall budget (`diagnose --budget`), in place of the size's; only for a size that has one.
    wall_budget_s: float | None = None
    # The user's own minimum of interleaved rounds (`diagnose --rounds`), in place of MIN_ROUNDS where larger.
    rounds: int | None = None

    @property
    def budget_s(self) -> float | None:
        """The size's wall budget (WALL_BUDGET_S; on a GPU, GPU_WALL_BUDGET_S where it names the size; the user's
        --budget in place of either), None for a size without one."""
        if self.wall_budget_s is not None and self.has_budget:
            return self.wall_budget_s
        if self.gpu and self.name in GPU_WALL_BUDGET_S:
            return GPU_WALL_BUDGET_S[self.name]
        return WALL_BUDGET_S.get(self.name)

    @property
    def has_budget(self) -> bool:
        """Whether the size keeps a wall budget at all (quick, smoke; the full size on a GPU)."""
        return (self.gpu and self.name in GPU_WALL_BUDGET_S) or self.name in WALL_BUDGET_S

    @property
    def min_rounds(self) -> int:
        """The fewest interleaved rounds a rounds process times: MIN_ROUNDS, or the user's --rounds where more."""
        return max(MIN_ROUNDS, self.rounds or 0)

    @property
    def rounds_precision(self) -> float | None:
        """Where the size's interleaved rounds may stop early (ROUNDS_PRECISION), None: they fill their budget."""
        if self.gpu and self.name in GPU_WALL_BUDGET_S:
            return GPU_ROUNDS_PRECISION
        return ROUNDS_PRECISION.get(self.name)

    def to_args(self) -> list[str]:
        return [
            "--height", str(self.image_height),
            "--width", str(self.image_width),
            "--batch-size", str(self.batch_size),
            "--warmup-steps", str(self.warmup_steps),
            "--min-steps", str(self.min_steps),
            "--max-steps", str(self.max_steps),
            "--max-measure-s", str(self.max_measure_s),
            "--input-batches", str(self.input_batches),
        ]


FULL = WorkloadSize("full", **SIZES["full"])
# Quick: the question's seed script made small enough for a 2-core CPU; float16 there runs ~1 s/step, so the time
# budget (not the step count) usually ends a run, and the whole diagnose stays within 90 s.
QUICK = WorkloadSize("quick", **SIZES["quick"])
SMOKE = WorkloadSize("smoke", **SIZES["smoke"])


def on_gpu(size: WorkloadSize) -> WorkloadSize:
    """The size where the host's runs go to a GPU this machine holds: a size GPU_WALL_BUDGET_S names gets that
    budget, and its runs of their own measure for GPU_MAX_MEASURE_S at most; any other size is unchanged."""
    if size.name not in GPU_WALL_BUDGET_S:
        return size
    return replace(size, gpu=True, max_measure_s=min(size.max_measure_s, GPU_MAX_MEASURE_S))

WORKLOAD_SIZES = {s.name: s for s in (FULL, QUICK, SMOKE)}
# The most one run may take, on the host or in a container: a hung driver call prints nothing and
# would otherwise hold the diagnose forever.
RUN_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class ScriptSpec:
    """The user's own training script (`diagnose --script`), run unchanged by workload/script_runner.py."""

    path: str  # absolute
    args: tuple[str, ...] = ()
    sha256: str = ""
    steps: int | None = None  # exactly this many measured steps; None: the size's statistics decide
    log_dir: str | None = None  # the script's own output is kept here, one file per run
    read_only_dirs: tuple[str, ...] = ()  # what a container sees of the host: the script's folder, --data
    label: str = ""  # the path as results show it (home as ~); the content is never stored
    # Arguments naming an existing file, as typed (relative) and the file: each run gets a copy at that path under its
    # working directory, so the script reads the same content and what it writes there never reaches the user's file.
    copies: tuple[tuple[str, str], ...] = ()

    def log_name(self, spec: RunSpec) -> str:
        if spec.rounds_of:
            return f"{spec.stack}-interleaved-rounds.log"
        suffix = "" if spec.variant == "original" else f"-{spec.variant}"
        return f"{spec.stack}-{spec.precision}{suffix}.log"


SCRIPT_RUNNER = "script_runner.py"


def script_runner_args(spec: RunSpec, workdir: str, log_path: str, profile_dir: str | None = None) -> list[str]:
    """The runner's command line after `python -u script_runner.py` (host and container alike)."""
    script = spec.script
    assert script is not None
    size = spec.size
    args = ["--precision", spec.precision, "--variant", spec.variant, "--log", log_path, "--workdir", workdir,
            "--warmup-steps", str(size.warmup_steps), "--script-label", script.label or script.path,
            "--profile-steps", str(size.profile_steps)]
    if script.steps:
        args += ["--steps", str(script.steps)]
    else:
        args += ["--min-steps", str(size.min_steps), "--max-steps", str(size.max_steps),
                 "--max-measure-s", str(size.max_measure_s)]
    args += spec.bound_args()
    if profile_dir is not None:
        args += ["--profile-dir", profile_dir]
    for rel, source in script.copies:
        args += ["--copy-in", f"{rel}={source}"]
    return [*args, *spec.rounds_args(), "--", script.path, *script.args]


@dataclass(frozen=True)
class RoundsRequest:
    """What a rounds process is asked (workload/rounds.py, workload/script_rounds.py): these configurations timed in
    one process, each round in a new order, its record carrying their rounds (engines/rounds.py merges them)."""

    of: tuple[str, ...]  # rounds labels, float32 first: a precision, or "float32+synthetic_input" (rounds_label)
    # Of `of`, those with no run of their own: the rounds process profiles each and describes its model and input,
    # and their records are made from it (diagnose/rounds.py profiled_in_rounds).
    profiled: tuple[str, ...] = ()
    budget_s: float | None = None  # how long the rounds go on after their minimum
    # Where a wall budget binds: the rounds end this many seconds after their process starts, whatever its start-up
    # took (instead of budget_s of rounds after it).
    end_s: float | None = None
    min_s: float | None = None  # never less than this of rounds, whatever the start-up took (ROUNDS_MIN_SHARE)
    # Past the budget, the rounds go on up to this long with the comparisons still unsettled (UNSETTLED_SHARE).
    unsettled_s: float | None = None


@dataclass(frozen=True)
class RunSpec:
    """One cell of the matrix: where (stack), how (precision, variant) and how big (size)."""

    stack: str
    precision: str
    variant: str
    size: WorkloadSize
    data_dir: str | None = None  # the user's own train directory (host engine only)
    extra_env: dict[str, str] = field(default_factory=dict)
    script: ScriptSpec | None = None  # set: run the user's script instead of the seed workload
    # {"changes": {...}, "tests": "<finding id>" | None}: the run is an experiment (docs/results-schema.md)
    experiment: dict[str, Any] | None = None
    # float32's median and first step for the same stack and variant: they set the slow-step bound
    reference_ms: float | None = None
    reference_first_step_ms: float | None = None
    # A default precision planned before the engine's devices were known: run only where one computes it
    # natively (mixed_bfloat16: a GPU of compute capability 8.0+), else skipped with the reason.
    native_only: bool = False
    # Set: the cell is an interleaved rounds process (diagnose/rounds.py plans it), its record no run of its own.
    rounds: RoundsRequest | None = None

    @property
    def bound_ms(self) -> float | None:
        if not self.reference_ms:
            return None
        multiple = slow_step_multiple()
        by_time = max(SLOW_STEP_S.get(self.size.name, SLOW_STEP_S["full"]) * 1000.0,
                      min(SLOW_STEP_FLOOR, multiple) * self.reference_ms)
        return min(multiple * self.reference_ms, by_time)

    @property
    def first_bound_ms(self) -> float | None:
        """The first-step bound: float32's first step plus the whole steady bound, and never under
        min(SLOW_STEP_FLOOR, multiple) times float32's first step; None without both of float32's steps."""
        bound = self.bound_ms
        if bound is None or not self.reference_first_step_ms:
            return None
        first = self.reference_first_step_ms
        return max(first + bound, min(SLOW_STEP_FLOOR, slow_step_multiple()) * first)

    @property
    def first_step_cuttable(self) -> bool:
        """Whether the first step may be ended inside, at its bound (where the workload finds oneDNN naming the
        kernel still running): only at a bound of at least SLOW_STEP_FLOOR times float32's first step, well past the
        one-time work (tracing) any first step begins with, as the default bounds always are. A tighter bound (one
        forced through SLOW_STEP_MULTIPLE_ENV) judges the first step after it ends."""
        first, reference = self.first_bound_ms, self.reference_first_step_ms
        return first is not None and bool(reference) and first >= SLOW_STEP_FLOOR * float(reference or 0.0)

    def bound_args(self) -> list[str]:
        """Both runners' slow-step bound arguments (none for a run without a float32 reference)."""
        args: list[str] = []
        if self.bound_ms is not None:
            args += ["--bound-ms", f"{self.bound_ms:.3f}"]
        if self.first_bound_ms is not None:
            args += ["--first-bound-ms", f"{self.first_bound_ms:.3f}"]
        if self.first_step_cuttable:
            args.append("--cut-first-step")
        return args

    def workload_args(self) -> list[str]:
        args = ["--precision", self.precision, "--variant", self.variant, *self.size.to_args(),
                "--profile-steps", str(self.size.profile_steps)]
        if self.data_dir:
            args += ["--data", self.data_dir]
        return [*args, *self.bound_args(), *self.rounds_args()]

    def rounds_args(self) -> list[str]:
        """The workload's and the script runner's arguments for interleaved rounds (none without rounds)."""
        rounds = self.rounds
        if rounds is None or not rounds.of:
            return []
        args = ["--rounds-of", ",".join(rounds.of), "--min-rounds", str(self.size.min_rounds)]
        if self.size.min_rounds > MAX_ROUNDS:
            args += ["--max-rounds", str(self.size.min_rounds)]
        if rounds.budget_s is not None:
            args += ["--rounds-budget-s", f"{rounds.budget_s:.1f}"]
        if rounds.end_s is not None:
            args += ["--rounds-end-s", f"{rounds.end_s:.1f}"]
        if rounds.min_s:
            args += ["--rounds-min-s", f"{rounds.min_s:.1f}"]
        if rounds.unsettled_s:
            args += ["--rounds-unsettled-s", f"{rounds.unsettled_s:.1f}"]
        if self.size.rounds_precision is not None:
            args += ["--rounds-precision", f"{self.size.rounds_precision:g}"]
        if rounds.profiled:
            args += ["--profile-rounds", ",".join(rounds.profiled)]
        return args

    @property
    def rounds_of(self) -> tuple[str, ...]:
        """The configurations its rounds process times (none: it is no rounds process)."""
        return self.rounds.of if self.rounds is not None else ()

    @property
    def rounds_profiled(self) -> tuple[str, ...]:
        """Of rounds_of, those its rounds process profiles, with no run of their own."""
        return self.rounds.profiled if self.rounds is not None else ()

    @property
    def label(self) -> str:
        if self.rounds_of:
            return f"{self.stack} / interleaved rounds of {', '.join(self.rounds_of)}"
        return f"{self.stack} / {self.precision} / {self.variant}"

    @property
    def rounds_label(self) -> str:
        return rounds_label(self.precision, self.variant)

    @property
    def rounds_setting(self) -> str:
        return rounds_setting(self.variant)

    @property
    def slug(self) -> str:
        """The cell as one file name: host-float16-original (host-interleaved-rounds for the rounds)."""
        if self.rounds_of:
            return f"{self.stack.replace('/', '_')}-interleaved-rounds"
        return "-".join(part.replace("/", "_") for part in (self.stack, self.precision, self.variant))


def rounds_label(precision: str, variant: str) -> str:
    """A cell as a configuration of a rounds process: its precision, or "float32+synthetic_input" for a change to
    its model or its input (protocol.MODEL_VARIANTS), timed beside the original configuration it changes."""
    return f"{precision}{VARIANT_LABEL_SEP}{variant}" if variant in MODEL_VARIANTS else precision


def rounds_setting(variant: str) -> str:
    """The process setting whose rounds time a cell of this variant: the variant itself (the original, or an
    environment switch), or the original for a change to a model or its input."""
    return "original" if variant in MODEL_VARIANTS else variant


# Experiments that run as one: a run of its own (one spec), or the precisions of one process setting timed together
# in that setting's rounds process, float32 first (diagnose/plan.py experiment_units).
ExperimentUnit = tuple[RunSpec, ...]


def slow_step_multiple() -> float:
    """SLOW_STEP_MULTIPLE, unless the environment sets another (a positive number)."""
    try:
        value = float(os.environ.get(SLOW_STEP_MULTIPLE_ENV, ""))
    except ValueError:
        return SLOW_STEP_MULTIPLE
    return value if value > 0 else SLOW_STEP_MULTIPLE


def with_slow_step_bound(spec: RunSpec, runs: Iterable[Mapping[str, Any]]) -> RunSpec:
    """The spec with its float32 reference (same stack and variant, else the stack's original), which
    sets the slow-step bound; unchanged for float32 itself or when no float32 run finished. A rounds process that
    profiles precisions with no run of their own (RoundsRequest.profiled) takes it for their warm-ups."""
    if spec.precision == "float32" and not spec.rounds_profiled:
        return spec
    runs = list(runs)
    partner = (find_run(runs, spec.stack, "float32", spec.variant, usable=True)
               or find_run(runs, spec.stack, "float32", usable=True))
    if partner is None:
        return spec
    return replace(spec, reference_ms=partner.step_median_ms, reference_first_step_ms=partner.first_step_ms)


def spec_to_dict(spec: RunSpec) -> dict[str, Any]:
    """A RunSpec as plain JSON data (a Slurm job reads its cells from a file)."""
    data = asdict(spec)
    data["size"] = asdict(spec.size)
    return data


# A RunSpec's rounds as spec_to_dict wrote them before they were one field (RunSpec.rounds): read all the same.
_FLAT_ROUNDS = {"rounds_of": "of", "rounds_profiled": "profiled", "rounds_budget_s": "budget_s",
                "rounds_end_s": "end_s"}


def spec_from_dict(data: dict[str, Any]) -> RunSpec:
    fields_ = dict(data)
    fields_["size"] = WorkloadSize(**fields_["size"])
    flat = {new: fields_.pop(old) for old, new in _FLAT_ROUNDS.items() if old in fields_}
    rounds = fields_.get("rounds")
    rounds = dict(rounds) if isinstance(rounds, dict) else flat if flat.get("of") else None
    fields_["rounds"] = None if rounds is None else RoundsRequest(
        **{**rounds, "of": tuple(rounds.get("of") or ()),  # JSON has lists, the spec tuples
           "profiled": tuple(rounds.get("profiled") or ())})
    script = fields_.get("script")
    if isinstance(script, dict):
        fields_["script"] = ScriptSpec(**{**script, "args": tuple(script.get("args") or ()),
                                          "read_only_dirs": tuple(script.get("read_only_dirs") or ())})
    return RunSpec(**fields_)


def comparison_groups(specs: Iterable[RunSpec]) -> list[list[RunSpec]]:
    """The fairness rule, in one place: the cells that are compared with each other (one stack and
    variant, across precisions) form a group that runs on one machine (one GPU model, or one CPU),
    float32 first, since its step sets the 16-bit runs' slow-step bound. Groups keep the plan's order."""
    groups: dict[tuple[str, str], list[RunSpec]] = {}
    for spec in specs:
        groups.setdefault((spec.stack, spec.variant), []).append(spec)
    return [sorted(group, key=lambda s: s.precision != "float32") for group in groups.values()]
