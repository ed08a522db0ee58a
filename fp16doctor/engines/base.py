"""What every engine shares: the run plan, the workload's command line, and its stdout protocol.

The workload (fp16doctor/workload/run_workload.py) runs in the target Python, on the host or in a
container, and reports through lines on stdout that start with the protocol's PREFIX followed by one JSON
object (fp16doctor/workload/protocol.py: what both sides agree on). Engines only parse those lines; they
never import the framework.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol

# The workload reports in PREFIX lines and brackets its profiled window with the WINDOW_ markers on stdout.
from fp16doctor.workload.protocol import ONEDNN_PREFIXES, PREFIX, SIZES, WINDOW_END, WINDOW_START

# oneDNN lines kept per window: a window's steps run tens to hundreds of primitives each.
MAX_WINDOW_LINES = 20000

# Slow-step bound: a 16-bit run whose steady step (the second on: the first pays tracing) takes longer than the
# bound stops after that step, which is its measurement. The bound is time: SLOW_STEP_S of the run's size, but
# never under SLOW_STEP_FLOOR times float32's median (a 2-5x slowdown is what a diagnosis must measure well)
# and never over SLOW_STEP_MULTIPLE times it (50x is beyond anything a precision change explains by arithmetic
# alone: a GPU without fast fp16 is 2x-64x, a CPU emulating it 5x-10x).
SLOW_STEP_MULTIPLE = 50.0
SLOW_STEP_FLOOR = 5.0
SLOW_STEP_S = {"quick": 5.0, "full": 30.0}
# Benchmarks and tests force the slow path on a machine where no precision is pathological.
SLOW_STEP_MULTIPLE_ENV = "FP16DOCTOR_SLOW_STEP_MULTIPLE"
# The stack name of the cells that run on the target Python itself, not in a pinned stack's image.
HOST_STACK = "host"
# Interleaved rounds: never fewer than this (a t interval needs them; analysis/intervals.py MIN_ROUNDS).
MIN_ROUNDS = 3


@dataclass(frozen=True)
class WorkloadSize:
    """How big one run is. `full` is the user's script as posted; `quick` fits a 2-core CPU in 90 s."""

    name: str
    image_height: int
    image_width: int
    batch_size: int
    warmup_steps: int
    min_steps: int
    max_steps: int
    max_measure_s: float  # stop measuring after this long even if the median is not yet stable
    input_batches: int  # batches timed to measure host input time
    profile_steps: int = 2  # the profiled window after the timed steps

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
# Quick: the size SEED.md measured on a 2-core CPU; float16 there runs ~1 s/step, so the time budget
# (not the step count) usually ends a run, and the whole diagnose stays within 90 s.
QUICK = WorkloadSize("quick", **SIZES["quick"])
SIZES = {s.name: s for s in (FULL, QUICK)}
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
    if spec.bound_ms is not None:
        args += ["--bound-ms", f"{spec.bound_ms:.3f}"]
    if profile_dir is not None:
        args += ["--profile-dir", profile_dir]
    return [*args, *spec.rounds_args(), "--", script.path, *script.args]


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
    # Interleaved rounds (engines/rounds.py): these precisions timed in one process, each round in a new order;
    # the record carries their rounds, not a run of its own.
    rounds_of: tuple[str, ...] = ()
    rounds_budget_s: float | None = None

    @property
    def bound_ms(self) -> float | None:
        if not self.reference_ms:
            return None
        multiple = slow_step_multiple()
        by_time = max(SLOW_STEP_S.get(self.size.name, SLOW_STEP_S["full"]) * 1000.0,
                      min(SLOW_STEP_FLOOR, multiple) * self.reference_ms)
        return min(multiple * self.reference_ms, by_time)

    def workload_args(self) -> list[str]:
        args = ["--precision", self.precision, "--variant", self.variant, *self.size.to_args(),
                "--profile-steps", str(self.size.profile_steps)]
        if self.data_dir:
            args += ["--data", self.data_dir]
        if self.bound_ms is not None:
            args += ["--bound-ms", f"{self.bound_ms:.3f}"]
        return [*args, *self.rounds_args()]

    def rounds_args(self) -> list[str]:
        """The workload's and the script runner's arguments for interleaved rounds (none without rounds_of)."""
        if not self.rounds_of:
            return []
        args = ["--rounds-of", ",".join(self.rounds_of), "--min-rounds", str(MIN_ROUNDS)]
        if self.rounds_budget_s is not None:
            args += ["--rounds-budget-s", f"{self.rounds_budget_s:.1f}"]
        return args

    @property
    def label(self) -> str:
        if self.rounds_of:
            return f"{self.stack} / interleaved rounds of {', '.join(self.rounds_of)}"
        return f"{self.stack} / {self.precision} / {self.variant}"

    @property
    def slug(self) -> str:
        """The cell as one file name: host-float16-original (host-interleaved-rounds for the rounds)."""
        if self.rounds_of:
            return f"{self.stack.replace('/', '_')}-interleaved-rounds"
        return "-".join(part.replace("/", "_") for part in (self.stack, self.precision, self.variant))


def slow_step_multiple() -> float:
    """SLOW_STEP_MULTIPLE, unless the environment sets another (a positive number)."""
    try:
        value = float(os.environ.get(SLOW_STEP_MULTIPLE_ENV, ""))
    except ValueError:
        return SLOW_STEP_MULTIPLE
    return value if value > 0 else SLOW_STEP_MULTIPLE


def _float32_partner(spec: RunSpec, runs: Iterable[Mapping[str, Any]], variant: str) -> Mapping[str, Any] | None:
    for run in runs:
        step = run.get("step_time_ms")
        median = step.get("median") if isinstance(step, dict) else None
        if (run.get("stack") == spec.stack and run.get("precision") == "float32"
                and run.get("variant", "original") == variant and run.get("status") == "ok"
                and not run.get("bound") and isinstance(median, (int, float)) and median > 0):
            return run
    return None


def with_slow_step_bound(spec: RunSpec, runs: Iterable[Mapping[str, Any]]) -> RunSpec:
    """The spec with its float32 reference (same stack and variant, else the stack's original), which
    sets the slow-step bound; unchanged for float32 itself or when no float32 run finished."""
    if spec.precision == "float32":
        return spec
    runs = list(runs)
    partner = _float32_partner(spec, runs, spec.variant) or _float32_partner(spec, runs, "original")
    if partner is None:
        return spec
    first = partner.get("first_step_ms")
    return replace(spec, reference_ms=float(partner["step_time_ms"]["median"]),
                   reference_first_step_ms=float(first) if isinstance(first, (int, float)) else None)


# Called with each protocol event as it arrives ({"event": "step", "ms": ...}, ...).
EventCallback = Callable[[dict[str, Any]], None]


def spec_to_dict(spec: RunSpec) -> dict[str, Any]:
    """A RunSpec as plain JSON data (a Slurm job reads its cells from a file)."""
    data = asdict(spec)
    data["size"] = asdict(spec.size)
    return data


def spec_from_dict(data: dict[str, Any]) -> RunSpec:
    fields_ = dict(data)
    fields_["size"] = WorkloadSize(**fields_["size"])
    fields_["rounds_of"] = tuple(fields_.get("rounds_of") or ())  # JSON has lists, the spec a tuple
    script = fields_.get("script")
    if isinstance(script, dict):
        fields_["script"] = ScriptSpec(**{**script, "args": tuple(script.get("args") or ()),
                                          "read_only_dirs": tuple(script.get("read_only_dirs") or ())})
    return RunSpec(**fields_)


# ------------------------------------------------------------------------ the engine protocol


def comparison_groups(specs: Iterable[RunSpec]) -> list[list[RunSpec]]:
    """The fairness rule, in one place: the cells that are compared with each other (one stack and
    variant, across precisions) form a group that runs on one machine (one GPU model, or one CPU),
    float32 first, since its step sets the 16-bit runs' slow-step bound. Groups keep the plan's order."""
    groups: dict[tuple[str, str], list[RunSpec]] = {}
    for spec in specs:
        groups.setdefault((spec.stack, spec.variant), []).append(spec)
    return [sorted(group, key=lambda s: s.precision != "float32") for group in groups.values()]


class RunSink(Protocol):
    """Where an engine reports while it runs groups: diagnose's results writer and progress display
    (on a Slurm node: the job's files, which fp16doctor reads back)."""

    def runs(self) -> list[dict[str, Any]]:
        """The records finished so far (a 16-bit run's bound comes from its group's float32)."""
        ...

    def note(self, message: str) -> None: ...
    def start_run(self, spec: RunSpec) -> None: ...
    def event(self, event: dict[str, Any]) -> None:
        """A protocol event of a run in flight (with "run": the spec's label when several are)."""
        ...

    def finish_run(self, record: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class EngineSetup:
    """What diagnose tells the engines of one invocation (engines/registry.py makes them from it)."""

    out_dir: Path
    python: str | None = None  # the interpreter that runs the workload (default: this one)
    backend: str | None = None  # KERAS_BACKEND for it
    keep_profiles: bool = False
    host: Mapping[str, Any] = field(default_factory=dict)  # this machine, as the probe found it
    docker_hosts: tuple[str, ...] = ()  # --docker-host values (none: the environment's engine)
    ca_bundle: Path | None = None  # for stack image builds behind a TLS proxy
    wheelhouse: Path | None = None  # stack image builds install from these wheels only
    force: bool = False  # run a stack the pre-flight refused
    slurm: Any = None  # engines.slurm.tools.SlurmOptions: the cells go to a Slurm cluster (diagnose --slurm)

    @property
    def host_gpus(self) -> tuple[dict[str, Any], ...]:
        return tuple(g for g in self.host.get("gpus") or [] if isinstance(g, dict))


class Engine(Protocol):
    """What runs cells of the matrix somewhere: this host's Python, Docker engines, a Slurm cluster.

    One engine is one module plus one entry in `engines/registry.py: ENGINES`. What differs between engines
    is class data the core asks (`runs_here`, `queued`) and two class methods that route cells
    (`selected`, `takes`), never a test of `kind`. The run loop (engines/runloop.py: stdout protocol,
    watchdog), failure classification (engines/failures.py) and the fairness rules (`comparison_groups`,
    `with_slow_step_bound`) are shared; an engine only says where a group runs.
    """

    kind: ClassVar[str]
    # Its runs are processes on this machine, so the machine's load beside them is theirs (the A/A reading).
    runs_here: ClassVar[bool]
    # Its runs wait in a queue: the quick size's wall budget cannot bind them.
    queued: ClassVar[bool]
    # What one run is, as a sentence names it ("each ratio rests on its own process").
    one_run: ClassVar[str]

    @classmethod
    def from_setup(cls, setup: EngineSetup) -> Engine:
        """The engine for one diagnose."""
        ...

    @classmethod
    def selected(cls, setup: EngineSetup) -> bool:
        """Whether this invocation uses the engine at all (--slurm sends every cell to Slurm)."""
        ...

    @classmethod
    def takes(cls, spec: RunSpec) -> bool:
        """Whether a cell is this engine's (the host's Python, or a pinned stack), among the selected ones."""
        ...

    def check(self) -> None:
        """What would make every run fail, said before anything runs (a DoctorError): the engine reached,
        its tools present. Creates nothing."""
        ...

    def describe(self) -> dict[str, Any]:
        """What results.json records of the engine, by top-level key ({} for none)."""
        ...

    def findings(self) -> list[dict[str, Any]]:
        """What only the engine knows, as findings (a stack the pre-flight refused)."""
        ...

    def prepare(self, stack: str) -> None:
        """Make a stack runnable there (an image built or copied, a working directory staged)."""
        ...

    def run_groups(self, groups: list[list[RunSpec]], sink: RunSink) -> None:
        """Launch every group (each on one machine, in its order), stream its runs' protocol lines to
        `sink`, and hand it each record as it finishes, failures classified. KeyboardInterrupt cancels
        what is in flight and propagates."""
        ...

    def cancel(self) -> None:
        """Stop this invocation's runs in flight, and nobody else's."""
        ...

    def cleanup(self) -> None:
        """Remove what this invocation left on the engine."""
        ...


def parse_protocol_line(line: str) -> dict[str, Any] | None:
    """One stdout line -> its event, or None for ordinary output (framework logs, warnings)."""
    line = line.strip()
    if not line.startswith(PREFIX.strip()):
        return None
    payload = line[len(PREFIX.strip()):].strip()
    try:
        event = json.loads(payload)
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def base_run_record(spec: RunSpec, device: str) -> dict[str, Any]:
    record: dict[str, Any] = {
        "stack": spec.stack,
        "precision": spec.precision,
        "variant": spec.variant,
        "device": device,
        "size": spec.size.name,
    }
    if spec.experiment is not None:
        record["experiment"] = dict(spec.experiment)
    if spec.bound_ms is not None:
        record["slow_step_bound"] = {"multiple": slow_step_multiple(), "float32_step_ms": spec.reference_ms,
                                     "float32_first_step_ms": spec.reference_first_step_ms,
                                     "limit_ms": round(spec.bound_ms, 3)}
    return record


def stamp_engine(record: dict[str, Any], machine: str, label: str, rerun: list[str]) -> dict[str, Any]:
    """What the layers below need of a run's engine, written by the engine into the record, so results, analysis
    and report never ask which engine it was: the machine it ran on (`runs[].machine`, "host" for this one), where it
    ran in words (`engine.label`), and the diagnose options that run a configuration there again (`engine.rerun`)."""
    record["machine"] = machine
    engine = record.setdefault("engine", {})
    engine["label"] = label
    engine["rerun"] = list(rerun)
    return record


def merge_workload_result(record: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """Fold the workload's final `result` event into the run record the engine started."""
    merged = dict(record)
    for key, value in result.items():
        if key in ("stack", "precision", "variant"):
            continue
        if key == "cpu":  # the engine machine's CPU, as the workload saw it (a remote engine's too)
            merged["engine"] = {**dict(merged.get("engine") or {}), "cpu": value}
            continue
        merged[key] = value
    return merged


# ------------------------------------------------------------------------------- the profiled window


class WindowCapture:
    """Keeps the oneDNN verbose lines of each profiled window (by its kind) and drops every other line.

    With ONEDNN_VERBOSE on for the whole process, every step prints; only the window's lines matter.
    """

    def __init__(self, max_lines: int = MAX_WINDOW_LINES) -> None:
        self.windows: dict[str, list[str]] = {}
        self.truncated: set[str] = set()
        self.max_lines = max_lines
        self.outside = 0  # oneDNN execution lines printed outside any window (during the timed steps)
        self._kind: str | None = None

    def feed(self, line: str) -> bool:
        """Take one stdout line; True when it was a window marker or a oneDNN line (not for the log)."""
        if line.startswith(WINDOW_START):
            self._kind = _marker_field(line, "kind") or "window"
            self.windows[self._kind] = []
            return True
        if line.startswith(WINDOW_END):
            self._kind = None
            return True
        if not line.startswith(ONEDNN_PREFIXES):
            return False
        if self._kind is not None:
            lines = self.windows[self._kind]
            if len(lines) < self.max_lines:
                lines.append(line.rstrip("\n"))
            else:
                self.truncated.add(self._kind)
        elif ",exec," in line:
            self.outside += 1
        return True


def split_script_log(path: str | Path, capture: WindowCapture) -> None:
    """A script run's log holds the script's own output and, interleaved, oneDNN's verbose lines and the
    window markers (the runner sends the script's stdout there, and oneDNN prints to the same stream):
    those go to `capture`, and the log keeps the script's output alone. A log that cannot be read or
    rewritten is left as it is."""
    log = Path(path)
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    kept = [line for line in text.splitlines(keepends=True) if not capture.feed(line)]
    if len(kept) != len(text.splitlines()):
        try:
            log.write_text("".join(kept), encoding="utf-8")
        except OSError:
            pass


def _marker_field(line: str, name: str) -> str | None:
    """ "=== fp16doctor-window-start 1764.2 kind first_step" -> "first_step" for name "kind"."""
    words = line.split()
    for i, word in enumerate(words[:-1]):
        if word == name:
            return words[i + 1]
    return None


# Paths the workload's `profile` may name; relocated when the files were copied out of a container.
PROFILE_PATH_KEYS = ("xplane", "torch_events_path", "tf1_step_stats")


def attach_ops(record: dict[str, Any], capture: WindowCapture, local_dir: Path | None,
               keep_dir: Path | None = None) -> None:
    """Turn the run's raw profile into `record["ops"]` (fp16doctor.attribution), or say why not in
    `record["ops_error"]`. `local_dir` holds the workload's profile folder here (for a container: the
    copy taken out of it); `keep_dir`, when given, receives a copy of the raw files. Never raises for
    a profile it cannot read: the run's measurement stands without it."""
    profile = record.get("profile")
    if not isinstance(profile, dict):
        return
    window = profile.get("window") if isinstance(profile.get("window"), dict) else None
    kind = str((window or {}).get("kind", ""))
    remote_dir = str(profile.get("dir") or "")
    artifacts: dict[str, Any] = {k: v for k, v in profile.items() if k not in ("dir", "error")}
    artifacts["device"] = record.get("device")
    for key in PROFILE_PATH_KEYS:
        path = artifacts.get(key)
        if isinstance(path, str) and local_dir is not None and remote_dir and path.startswith(remote_dir):
            artifacts[key] = str(local_dir / path[len(remote_dir):].lstrip("/"))
    lines = capture.windows.get(kind, []) if profile.get("onednn") else []
    if lines:
        artifacts["onednn_lines"] = lines
        if local_dir is not None and local_dir.is_dir():
            log = local_dir / kind / "onednn_verbose.log"
            try:
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text("\n".join(lines) + "\n", encoding="utf-8")
                artifacts["onednn_log"] = str(log)
            except OSError:
                pass  # the lines themselves are in the artifacts
    errors = [str(profile["error"])] if profile.get("error") else []
    if kind in capture.truncated:
        errors.append(f"oneDNN verbose output cut at {capture.max_lines} lines")
    torch_path = artifacts.get("torch_events_path")
    if isinstance(torch_path, str):
        try:
            artifacts["torch_events"] = json.loads(Path(torch_path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            errors.append(f"cannot read the torch profile: {exc.__class__.__name__}")
    if isinstance(artifacts.get("xplane"), str):
        # The attribution's names for the trace and whose it is.
        artifacts["xplane_path"] = artifacts["xplane"]
        artifacts["xplane_framework"] = "jax" if profile.get("backend") == "jax" else "tensorflow"
    tf1_path = artifacts.get("tf1_step_stats")
    if isinstance(tf1_path, str):
        artifacts["tf1_step_stats_path"] = tf1_path
        try:
            artifacts["tf1_step_stats"] = _merge_step_stats(json.loads(Path(tf1_path).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            artifacts.pop("tf1_step_stats")
            errors.append(f"cannot read the TF1 step stats: {exc.__class__.__name__}")
    present = sorted(k for k in ("xplane", "torch_events_path", "tf1_step_stats_path", "onednn_lines")
                     if artifacts.get(k) and (k == "onednn_lines" or Path(str(artifacts[k])).exists()))
    summary: dict[str, Any] = {"window": window, "artifacts": present}
    if capture.outside:
        # What oneDNN printed while the timed steps ran: a cost on them (benchmarks/onednn_verbose_overhead.py).
        summary["onednn_lines_outside_window"] = capture.outside
    ops, why = _build_ops(artifacts, (record.get("model") or {}).get("layers") or []) if present else (
        None, "the profiled window recorded nothing")
    if ops is not None:
        record["ops"] = ops
    else:
        errors.insert(0, why)
    if errors:
        record["ops_error"] = "; ".join(e for e in errors if e)
    if keep_dir is not None and local_dir is not None and local_dir.is_dir():
        try:
            shutil.copytree(local_dir, keep_dir, dirs_exist_ok=True)
            summary["kept"] = str(keep_dir)
        except OSError as exc:
            record["ops_error"] = "; ".join([*errors, f"could not keep the profile: {exc}"])
    record["profile"] = summary


def _merge_step_stats(recorded: Any) -> dict[str, Any]:
    """The workload's {"steps": [step_stats, ...]} (one RunMetadata.step_stats per window step, as
    MessageToDict gives it) as one step_stats holding every step's nodes, device by device."""
    devices: dict[str, list[Any]] = {}
    for step in recorded.get("steps", []) if isinstance(recorded, dict) else []:
        for dev in step.get("devStats", []) if isinstance(step, dict) else []:
            devices.setdefault(str(dev.get("device", "")), []).extend(dev.get("nodeStats", []))
    return {"devStats": [{"device": name, "nodeStats": nodes} for name, nodes in devices.items()]}


def _build_ops(artifacts: dict[str, Any], layers: list[Any]) -> tuple[dict[str, Any] | None, str]:
    try:
        # Imported when needed: the attribution reads traces (xprof) that a run without a profile never needs.
        module = importlib.import_module("fp16doctor.attribution")
    except ImportError as exc:
        return None, f"no attribution here ({exc})"
    try:
        ops = module.build_ops(artifacts, layers)
    except Exception as exc:  # noqa: BLE001  (a parser's failure must not lose the measured run; it is recorded)
        return None, f"attribution failed: {exc.__class__.__name__}: {exc}"
    if not isinstance(ops, dict):
        return None, "the attribution found no ops in this profile"
    return ops, ""
