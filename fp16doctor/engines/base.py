"""What every engine shares: the run plan, the workload's command line, and its stdout protocol.

The workload (fp16doctor/workload/run_workload.py) runs in the target Python, on the host or in a
container, and reports through lines on stdout that start with PROTOCOL_PREFIX followed by one JSON
object. Engines only parse those lines; they never import the framework.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PROTOCOL_PREFIX = "@@fp16doctor "


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


FULL = WorkloadSize("full", 224, 336, 128, warmup_steps=3, min_steps=10, max_steps=200,
                    max_measure_s=120.0, input_batches=5)
# Quick: the size SEED.md measured on a 2-core CPU; float16 there runs ~1 s/step, so the time budget
# (not the step count) usually ends a run, and the whole diagnose stays within 90 s.
QUICK = WorkloadSize("quick", 112, 168, 32, warmup_steps=2, min_steps=5, max_steps=60,
                     max_measure_s=8.0, input_batches=3)
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
        suffix = "" if spec.variant == "original" else f"-{spec.variant}"
        return f"{spec.stack}-{spec.precision}{suffix}.log"


SCRIPT_RUNNER = "script_runner.py"


def script_runner_args(spec: RunSpec, workdir: str, log_path: str) -> list[str]:
    """The runner's command line after `python -u script_runner.py` (host and container alike)."""
    script = spec.script
    assert script is not None
    size = spec.size
    args = ["--precision", spec.precision, "--log", log_path, "--workdir", workdir,
            "--warmup-steps", str(size.warmup_steps), "--script-label", script.label or script.path]
    if script.steps:
        args += ["--steps", str(script.steps)]
    else:
        args += ["--min-steps", str(size.min_steps), "--max-steps", str(size.max_steps),
                 "--max-measure-s", str(size.max_measure_s)]
    return [*args, "--", script.path, *script.args]


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

    def workload_args(self) -> list[str]:
        args = ["--precision", self.precision, "--variant", self.variant, *self.size.to_args()]
        if self.data_dir:
            args += ["--data", self.data_dir]
        return args

    @property
    def label(self) -> str:
        return f"{self.stack} / {self.precision} / {self.variant}"


# Called with each protocol event as it arrives ({"event": "step", "ms": ...}, ...).
EventCallback = Callable[[dict[str, Any]], None]


def parse_protocol_line(line: str) -> dict[str, Any] | None:
    """One stdout line -> its event, or None for ordinary output (framework logs, warnings)."""
    line = line.strip()
    if not line.startswith(PROTOCOL_PREFIX.strip()):
        return None
    payload = line[len(PROTOCOL_PREFIX.strip()):].strip()
    try:
        event = json.loads(payload)
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def base_run_record(spec: RunSpec, device: str) -> dict[str, Any]:
    return {
        "stack": spec.stack,
        "precision": spec.precision,
        "variant": spec.variant,
        "device": device,
        "size": spec.size.name,
    }


def merge_workload_result(record: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """Fold the workload's final `result` event into the run record the engine started."""
    merged = dict(record)
    for key, value in result.items():
        if key in ("stack", "precision", "variant"):
            continue
        merged[key] = value
    return merged
