"""The engine protocol: what diagnose tells an engine (EngineSetup), what an engine reports to (RunSink), the
Engine itself, and the run record's shape every engine starts from and fills from the workload's stdout protocol.

The workload (fp16doctor/workload/run_workload.py) runs in the target Python, on the host or in a
container, and reports through lines on stdout that start with the protocol's PREFIX followed by one JSON
object (fp16doctor/workload/protocol.py: what both sides agree on). Engines only parse those lines; they
never import the framework.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from fp16doctor.engines.options import EngineOptions, Options, options_of
from fp16doctor.engines.spec import RunSpec, slow_step_multiple
from fp16doctor.workload.protocol import PREFIX

# Called with each protocol event as it arrives ({"event": "step", "ms": ...}, ...).
EventCallback = Callable[[dict[str, Any]], None]


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
    ca_bundle: Path | None = None  # for stack image builds behind a TLS proxy
    wheelhouse: Path | None = None  # stack image builds install from these wheels only
    force: bool = False  # run a stack the pre-flight refused
    engines: tuple[EngineOptions, ...] = ()  # each engine's own options (engines/options.py), as the user set them

    @property
    def host_gpus(self) -> tuple[dict[str, Any], ...]:
        return tuple(g for g in self.host.get("gpus") or [] if isinstance(g, dict))

    def options(self, cls: type[Options]) -> Options:
        """One engine's options as this invocation set them (their defaults where it set none)."""
        return options_of(self.engines, cls)


class Engine(Protocol):
    """What runs cells of the matrix somewhere: this host's Python, Docker engines, a Slurm cluster.

    One engine is one module, its options (a dataclass, engines/options.py) and its row in
    `engines/registry.py: ENGINES` and `engines/option_table.py: ENGINE_OPTIONS`. What differs between engines
    is class data the core asks (`runs_here`, `queued`), its options' selector and one class method that routes
    cells (`takes`), never a test of `kind`. The run loop (engines/runloop.py: stdout protocol,
    watchdog), failure classification (engines/failures.py) and the fairness rules (`comparison_groups`,
    `with_slow_step_bound`) are shared; an engine only says where a group runs.
    """

    kind: ClassVar[str]
    # Its options, declared once: their flags, variables and tool arguments; the selector among them (if any)
    # says whether this invocation uses the engine at all (--slurm sends every cell to Slurm).
    options_class: ClassVar[type[EngineOptions]]
    # Its runs are processes on this machine, so the machine's load beside them is theirs (the A/A reading).
    runs_here: ClassVar[bool]
    # Its runs wait in a queue: the quick size's wall budget cannot bind them.
    queued: ClassVar[bool]
    # What one run is, as a sentence names it ("each ratio rests on its own process").
    one_run: ClassVar[str]
    # What one run is called in an estimate ("container"), and what else it costs that no prior covers.
    run_noun: ClassVar[str]
    also_costs: ClassVar[str]

    @classmethod
    def from_setup(cls, setup: EngineSetup) -> Engine:
        """The engine for one diagnose."""
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

    def where(self) -> list[str]:
        """Where its cells would run, in words (`diagnose --plan`): asks nothing, contacts nothing."""
        ...

    def has_gpus(self) -> bool | None:
        """Whether its runs get GPUs (the default size is full with them, quick without); None: not known before
        it runs (a remote Docker engine's)."""
        ...

    def findings(self) -> list[dict[str, Any]]:
        """What only the engine knows, as findings (a stack the pre-flight refused)."""
        ...

    def prepare(self, stack: str) -> None:
        """Make a stack runnable there (an image built or copied, a working directory staged)."""
        ...

    def run_groups(self, groups: list[list[RunSpec]], sink: RunSink) -> None:
        """Launch every group, stream its runs' protocol lines to `sink`, and hand it each record as it finishes,
        failures classified. KeyboardInterrupt cancels what is in flight and propagates.

        "One group, one machine" means one kind of hardware: a group's runs are timed on one GPU model, or on one
        machine's CPU, so its ratios compare like with like. An engine may run a group's cells side by side on
        several slots of that hardware (the Docker engine: two GPUs of one model), float32 first wherever its
        step sets the others' bound; it never spreads a group over two GPU models or two machines' CPUs."""
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
        if spec.first_bound_ms is not None:
            record["slow_step_bound"]["first_step_limit_ms"] = round(spec.first_bound_ms, 3)
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
