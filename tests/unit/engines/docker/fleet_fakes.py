"""A fleet of fake Docker engines: sdk's functions and ensure_image replaced by fakes that
record where each run went, how many ran at once per GPU, and what was cleaned up."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.diagnose import BASE_PRECISIONS, DiagnoseOptions, plan_runs
from fp16doctor.diagnose.prepare import Prepared
from fp16doctor.diagnose.rounds import time_in_rounds
from fp16doctor.diagnose.run import experiments_coming
from fp16doctor.diagnose.sink import DocumentSink
from fp16doctor.engines.base import EngineSetup, base_run_record
from fp16doctor.engines.docker import build, sdk
from fp16doctor.engines.docker.fleet import DockerEngine
from fp16doctor.engines.docker.options import DockerOptions
from fp16doctor.engines.registry import Router
from fp16doctor.engines.spec import QUICK, RunSpec, comparison_groups
from fp16doctor.errors import DoctorError
from fp16doctor.results import ResultsWriter, new_document
from fp16doctor.stacks import StackSpec
from fp16doctor.workload.protocol import VARIANT_LABEL_SEP

STEP_MS = {"float32": 100.0, "float16": 160.0, "mixed_float16": 120.0, "mixed_bfloat16": 110.0}


def gpu(index: int, name: str, cc: str, driver: str = "560.35.03") -> dict[str, Any]:
    return {"index": index, "uuid": f"GPU-{name.replace(' ', '')}-{index}", "name": name,
            "compute_capability": cc, "driver_version": driver}


@dataclass
class FakeEngine:
    url: str
    name: str = "node"
    gpus: list[dict[str, Any]] = field(default_factory=list)
    reachable: bool = True
    die_on_run: int | None = None  # the engine dies during its n-th run (1-based)
    build_error: str | None = None
    build_delay_s: float = 0.0
    runs: list[tuple[str, str | None]] = field(default_factory=list)  # (spec label, gpu uuid)
    images: set[str] = field(default_factory=set)
    builds: int = 0
    empty: bool = False  # no image yet to run nvidia-smi in
    smi_fails: bool = False  # nvidia-smi cannot run in any image there
    orphans: list[str] = field(default_factory=list)  # containers of a killed fp16doctor, still running

    def refuse(self) -> DoctorError:
        return DoctorError(f"cannot reach the Docker engine at {self.url}: connection refused", hint="start it")


class Fleet:
    """The engines by URL, plus what the scheduler did with them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.engines: dict[str, FakeEngine] = {}
        self.lock = threading.Lock()
        self.run_s = 0.05
        self.active: dict[tuple[str, str], int] = {}
        self.max_active: dict[tuple[str, str], int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.containers: set[str] = set()  # containers that exist right now
        self.cleanups: list[tuple[str, str | None]] = []
        self.timeline: list[str] = []  # "start <url>" and "cleanup <url>", in the order they happened
        self.copies: list[tuple[str, str]] = []
        self.release = threading.Event()
        self.hold = False  # runs wait for `release` (or a cleanup) before they finish
        self.on_start: Callable[[Fleet], None] | None = None
        for name, fake in (("engine_facts", self.engine_facts), ("engine_gpus", self.engine_gpus),
                           ("client_for", self.client_for), ("forget_client", lambda _host: None),
                           ("run_in_stack", self.run_in_stack), ("cleanup", self.cleanup),
                           ("copy_image", self.copy_image), ("remove_orphans", self.remove_orphans)):
            monkeypatch.setattr(sdk, name, fake)
        monkeypatch.setattr(build, "ensure_image", self.ensure_image)

    def add(self, url: str, **kwargs: Any) -> FakeEngine:
        self.engines[url] = FakeEngine(url, **kwargs)
        return self.engines[url]

    def _engine(self, docker_host: str | None) -> FakeEngine:
        engine = self.engines[sdk.engine_label(docker_host)]
        if not engine.reachable:
            raise engine.refuse()
        return engine

    def client_for(self, docker_host: str | None) -> object:
        return self._engine(docker_host)

    def engine_facts(self, docker_host: str | None) -> sdk.EngineFacts:
        engine = self._engine(docker_host)
        return sdk.EngineFacts(engine.url, "20.10.24", "Debian", 2, 4096, ("runc",), None,
                                         name=engine.name, engine_id=f"ID-{engine.url}")

    def engine_gpus(self, docker_host: str | None, image: str | None = None) -> list[dict[str, Any]] | None:
        engine = self._engine(docker_host)
        if engine.smi_fails or (engine.empty and image is None):
            return None
        return list(engine.gpus)

    def ensure_image(self, stack: StackSpec, docker_host: str | None, options: Any, log: Any) -> str:
        engine = self._engine(docker_host)
        time.sleep(engine.build_delay_s)
        engine.builds += 1
        if engine.build_error:
            raise DoctorError(f"building fp16doctor/{stack.name}:abc failed: {engine.build_error}", hint="")
        engine.images.add(stack.name)
        return f"fp16doctor/{stack.name}:abc"

    def copy_image(self, source: str | None, target: str | None, tag: str, log: Any) -> str:
        self.copies.append((sdk.engine_label(source), sdk.engine_label(target)))
        self._engine(target).images.add(tag.split("/")[1].split(":")[0])
        return tag

    def cleanup(self, docker_host: str | None, *, run_id: str | None = None, images: bool = False,
                stopped_only: bool = False) -> dict[str, list[str]]:
        url = self._engine(docker_host).url
        if stopped_only:
            return {"containers": [], "images": []}  # the fake never leaves stopped containers
        with self.lock:
            self.cleanups.append((url, run_id))
            self.timeline.append(f"cleanup {url}")
            gone = sorted(c for c in self.containers if c.startswith(url))
            self.containers -= set(gone)
        self.release.set()
        return {"containers": gone, "images": []}

    def remove_orphans(self, docker_host: str | None) -> list[str]:
        engine = self._engine(docker_host)
        gone, engine.orphans = engine.orphans, []
        return gone

    def run_in_stack(self, spec: RunSpec, stack: StackSpec, docker_host: str | None,
                     gpu: dict[str, Any] | None, on_event: Callable[[dict[str, Any]], None],
                     **kwargs: Any) -> dict[str, Any]:
        engine = self._engine(docker_host)
        slot = (engine.url, gpu["uuid"] if gpu else "cpu")
        container = f"{engine.url}/{spec.label}"
        with self.lock:
            engine.runs.append((spec.label, gpu["uuid"] if gpu else None))
            self.timeline.append(f"start {engine.url}")
            number = len(engine.runs)
            self.active[slot] = self.active.get(slot, 0) + 1
            self.max_active[slot] = max(self.max_active.get(slot, 0), self.active[slot])
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.containers.add(container)
        try:
            if self.on_start is not None:
                self.on_start(self)
            on_event({"event": "step", "phase": "measure", "ms": STEP_MS[spec.precision]})
            if engine.die_on_run == number:
                time.sleep(self.run_s / 2)
                engine.reachable = False
                return {**base_run_record(spec, "cpu"), "status": "failed", "failure_kind": "unknown",
                        "error": "the container stopped without a result", "engine": {"kind": "docker"}}
            if self.hold:
                self.release.wait(10)
            time.sleep(self.run_s)
            if container not in self.containers:
                return {**base_run_record(spec, "cpu"), "status": "failed", "error": "container removed"}
            record = base_run_record(spec, f"gpu:{gpu['index']}" if gpu and stack.gpu else "cpu")
            if spec.rounds_of:  # what the workload's rounds report: a median per round for each configuration
                labels = [*spec.rounds_of, "float32_aa"]
                # float32_aa: float32's A/A control; float32+synthetic_input: float32's model on in-memory input.
                record["rounds"] = {p: [STEP_MS[p.removesuffix("_aa").partition(VARIANT_LABEL_SEP)[0]]] * 3
                                    for p in labels}
                record["order"] = [labels] * 3
            record.update(status="ok", step_time_ms={"median": STEP_MS[spec.precision], "n": 10},
                          engine={"kind": "docker", "docker_host": engine.url, "image": kwargs.get("image"),
                                  "gpu_uuid": gpu["uuid"] if gpu and stack.gpu else None})
            return record
        finally:
            with self.lock:
                self.active[slot] -= 1
                self.in_flight -= 1
                self.containers.discard(container)


class RecordingProgress:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.started: list[tuple[str, int, int]] = []
        self.events: list[dict[str, Any]] = []
        self.finished: list[dict[str, Any]] = []

    def note(self, message: str) -> None:
        self.notes.append(message)

    def start_run(self, spec: RunSpec, total: int, index: int) -> None:
        self.started.append((spec.label, total, index))

    def event(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def finish_run(self, record: dict[str, Any]) -> None:
        self.finished.append(record)


def plan(*stacks: str) -> list[RunSpec]:
    """Two comparison groups per stack: every precision as written, and float32 on synthetic input (the control a
    quick diagnose runs where a run's batch time asks for it)."""
    return [spec for stack in stacks for spec in (*plan_runs([stack], list(BASE_PRECISIONS), QUICK, None, None),
                                                  RunSpec(stack, "float32", "synthetic_input", QUICK))]


def options(tmp_path: Path, *hosts: str, force: bool = False) -> DiagnoseOptions:
    return DiagnoseOptions(out_dir=tmp_path, size="quick", engines=(DockerOptions(docker_hosts=hosts),),
                           include_host=False,
                           force=force)


def writer(tmp_path: Path, gpus: list[dict[str, Any]] | None = None) -> ResultsWriter:
    return ResultsWriter(tmp_path / "results.json", new_document({"gpus": gpus or []}))


def side_by_side(fleet: Fleet) -> None:
    """An on_start hook: a run waits (up to 2 s) for a second one to start beside it, so a scheduler that runs two
    side by side is seen doing so however slowly its threads are scheduled, and one that does not never is."""
    deadline = time.monotonic() + 2.0
    while fleet.max_in_flight < 2 and time.monotonic() < deadline:
        time.sleep(0.01)


def run_stack_specs(specs: list[RunSpec], host: dict[str, Any], options: DiagnoseOptions, writer: ResultsWriter,
                    progress: RecordingProgress, offset: int, total: int) -> list[dict[str, Any]]:
    """The Docker engine's part of a diagnose, as diagnose drives it (diagnose/run.py): the cells, then each
    stack's interleaved rounds; `offset`: cells the display counted before these. Returns its findings."""
    setup = EngineSetup(out_dir=options.out_dir, keep_profiles=options.keep_profiles, host=host,
                        engines=options.engines, ca_bundle=options.ca_bundle,
                        wheelhouse=options.wheelhouse, force=options.force)
    router = Router(setup, engines=(DockerEngine,))
    engine = router.engine(DockerEngine)
    sink = DocumentSink(writer, progress, total)
    sink.started = offset
    engine.run_groups(comparison_groups(specs), sink)
    writer.doc.update(engine.describe())
    prepared = Prepared(started=time.monotonic(), host=dict(host), size=specs[0].size if specs else QUICK,
                        stacks=list(dict.fromkeys(s.stack for s in specs)), data_dir=None, script=None, backend=None,
                        doc=writer.doc, results_path=writer.path, specs=specs, todo=specs, router=router,
                        progress=progress)
    time_in_rounds(prepared, writer, experiments_coming(prepared, writer.doc))
    writer.doc.update(engine.describe())
    writer.save()
    return engine.findings()
