"""The stack x precision matrix over one or many Docker engines and their GPUs, in parallel.

Every engine named by --docker-host (default: the environment's engine) is asked what it is and which
GPUs it hands to containers; each stack gets its pre-flight verdict per engine; then one worker
thread per slot (one per GPU, plus one CPU slot per engine, so two CPU runs never share an engine) takes
the next run it may do, makes sure the stack's image is on that engine (built there, or copied from
another engine that has it), runs it pinned to its GPU and writes the record at once.

Runs of one comparison group (a stack and variant, across precisions) stay on one kind of hardware,
so a float16 time is never compared with a float32 time from another GPU model or another machine's
CPU. An engine that cannot be reached or dies fails only the runs it had in flight; the others
take over what is still queued. All Docker calls go through fp16doctor.engines.sdk.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from fp16doctor.engines.base import EngineSetup, RunSink, base_run_record, stamp_engine
from fp16doctor.engines.spec import HOST_STACK, MIN_ROUNDS, RUN_TIMEOUT_S, RunSpec, with_slow_step_bound
from fp16doctor.errors import DoctorError
from fp16doctor.knowledge.gpus import gpu_has_bfloat16
from fp16doctor.results import HOST_MACHINE, LOCAL_DOCKER_SCHEMES
from fp16doctor.stacks import StackSpec, get_stack

if TYPE_CHECKING:
    from fp16doctor.engines.context import BuildOptions
    from fp16doctor.stacks.preflight import Verdict

GPU_SELECTOR = "#gpus="  # --docker-host URL#gpus=0,2 (indices or UUIDs); #gpus=none: CPU only
ENGINE_LOST = "engine_lost"
JOIN_POLL_S = 0.2  # the main thread wakes this often, so Ctrl-C is handled while workers run
# How long diagnose waits for an engine's version before anything runs (an ssh:// engine asks a password, a tcp://
# one sits behind a firewall that drops packets): an engine that does not answer is no engine to plan on.
CHECK_TIMEOUT_S = 20.0


# ------------------------------------------------------------------------------------------- engines


@dataclass(frozen=True)
class EngineTarget:
    """One --docker-host value: where to connect and which of the engine's GPUs to use."""

    docker_host: str | None  # None: the environment's engine (DOCKER_HOST or the local socket)
    gpu_selection: tuple[str, ...] | None = None  # indices or UUIDs; () = CPU only; None = every GPU


def parse_docker_host(text: str | None) -> EngineTarget:
    """ "tcp://node:2376#gpus=0,1" -> EngineTarget("tcp://node:2376", ("0", "1"))."""
    if text is None or not text.strip():
        return EngineTarget(None)
    url, sep, selection = text.strip().partition(GPU_SELECTOR)
    if not url:
        raise DoctorError(f"--docker-host {text!r} names no engine",
                          hint="pass unix://..., tcp://..., ssh://... or a context name, e.g. tcp://node:2376#gpus=0")
    if not sep:
        return EngineTarget(url)
    ids = tuple(s.strip() for s in selection.split(",") if s.strip())
    if ids == ("all",):
        return EngineTarget(url)
    if ids in ((), ("none",)):
        return EngineTarget(url, ())
    return EngineTarget(url, ids)


def select_gpus(gpus: Iterable[dict[str, Any]], selection: tuple[str, ...] | None) -> list[dict[str, Any]]:
    """The GPUs a #gpus= selection keeps (matched by index or UUID), in the engine's order."""
    gpus = list(gpus)
    if selection is None:
        return gpus
    wanted = set(selection)
    return [g for g in gpus if str(g.get("index")) in wanted or str(g.get("uuid")) in wanted]


@dataclass
class Daemon:
    """One Docker engine (a daemon named by --docker-host) and how it is doing during this diagnose."""

    target: EngineTarget
    label: str
    facts: dict[str, Any] = field(default_factory=dict)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # why it is out (unreachable at start, died mid-run)
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)  # stack -> image tag ready on this engine
    image_errors: dict[str, str] = field(default_factory=dict)  # stack -> why no image here
    image_lock: threading.Lock = field(default_factory=threading.Lock)
    swept: list[str] = field(default_factory=list)  # stopped containers of earlier runs, removed
    orphans: list[str] = field(default_factory=list)  # containers of a killed fp16doctor, removed
    gpu_note: str = ""  # why its GPUs are unknown

    @property
    def docker_host(self) -> str | None:
        return self.target.docker_host

    @property
    def alive(self) -> bool:
        return self.error is None

    @property
    def local(self) -> bool:
        """The engine runs on this machine (a unix socket), so the host probe's GPUs are its GPUs."""
        return self.label.startswith(LOCAL_DOCKER_SCHEMES)

    def host_view(self, host: Mapping[str, Any]) -> dict[str, Any]:
        """The host dict pre-flight judges this engine by: its GPUs and its NVIDIA runtime."""
        view = dict(host)
        view["gpus"] = self.gpus
        view["docker"] = {**dict(host.get("docker") or {}),
                          "nvidia_runtime": self.facts.get("nvidia_runtime")}
        return view

    def summary(self) -> dict[str, Any]:
        """The engine as results.json lists it under "engines"."""
        out: dict[str, Any] = {"docker_host": self.label, **{k: v for k, v in self.facts.items()
                                                              if k != "docker_host"}}
        out["gpus"] = [{k: g.get(k) for k in ("index", "uuid", "name", "compute_capability")
                        if g.get(k) is not None} for g in self.gpus]
        out["status"] = "ok" if self.alive else "failed"
        if self.error:
            out["error"] = self.error
        return out


# Controls that measure a part of their original's step: they run on the original's hardware, never another.
CONTROL_VARIANTS = ("synthetic_input",)


def pin_group(stack: str, variant: str) -> tuple[str, str]:
    """The group whose hardware pin a run keeps: its own (stack, variant), or its original's for a control."""
    return (stack, "original" if variant in CONTROL_VARIANTS else variant)


@dataclass(frozen=True)
class Slot:
    """One run at a time: a GPU of an engine, or the engine's CPU."""

    engine: Daemon
    gpu: dict[str, Any] | None

    @property
    def hardware(self) -> str:
        """What makes two slots' timings comparable: the GPU model, or the machine for CPU runs."""
        if self.gpu is not None:
            return f"gpu:{self.gpu.get('name', '?')}"
        return f"cpu:{self.engine.facts.get('name') or self.engine.label}"

    @property
    def where(self) -> str:
        if self.gpu is None:
            return f"{self.engine.label} (CPU)"
        return f"{self.engine.label} gpu {self.gpu.get('index', '?')} ({self.gpu.get('name', '?')})"


# ------------------------------------------------------------------------------------------ records


def build_options_for(setup: EngineSetup, docker_host: str | None) -> BuildOptions:
    """How to build a stack's image on one engine: diagnose's --ca-bundle / --wheelhouse, else the CA
    bundle the environment names (context.default_ca_bundle)."""
    from fp16doctor.engines.context import BuildOptions, default_ca_bundle

    return BuildOptions(docker_host=docker_host, ca_bundle=setup.ca_bundle or default_ca_bundle(),
                        wheelhouse=setup.wheelhouse)


def _skipped(spec: RunSpec, reason: str) -> dict[str, Any]:
    record = base_run_record(spec, "cpu")
    record.update(status="skipped", error=reason, engine={"kind": "docker"})
    return record


def _failed(spec: RunSpec, reason: str, kind: str) -> dict[str, Any]:
    record = base_run_record(spec, "cpu")
    record.update(status="failed", error=reason, failure_kind=kind, engine={"kind": "docker"})
    return record


# ------------------------------------------------------------------------------------- the matrix


class _Matrix:
    """Shared state of one diagnose's container runs; every mutation happens under `cond`."""

    def __init__(self, specs: list[RunSpec], stacks: dict[str, StackSpec], engines: list[Daemon],
                 setup: EngineSetup, sink: RunSink) -> None:
        self.pending: list[tuple[int, RunSpec]] = list(enumerate(specs))  # plan order kept
        self.stacks = stacks
        self.engines = engines
        self.setup = setup
        self.sink = sink
        self.in_flight = 0
        self.stopping = False
        self.crash: BaseException | None = None
        # Runs in flight by label -> (machine, most other runs seen on that machine at once).
        self.running: dict[str, tuple[str, list[int]]] = {}
        self.show_where = False  # name the engine and GPU of each run (when there is a choice)
        # (stack, variant) -> the hardware its runs use, and how many runs hold that pin (pin_group: a control
        # holds its original's)
        self.pins: dict[tuple[str, str], str] = {}
        self.pin_holders: dict[tuple[str, str], int] = {}
        # (stack, variant) groups whose float32 is running: their 16-bit runs wait for its step (the bound)
        self.float32_running: set[tuple[str, str]] = set()
        self.cond = threading.Condition()
        self.io_lock = threading.Lock()  # results.json and the progress display, one writer at a time

    def pin_measured_groups(self) -> None:
        """A group's missing precisions (--resume) and the experiments on a group go to the hardware its
        measured runs ran on."""
        for run in self.sink.runs():
            engine = run.get("engine") if isinstance(run.get("engine"), dict) else None
            if run.get("status") != "ok" or not engine or engine.get("kind") != "docker":
                continue
            if engine.get("gpu_name"):
                hardware = f"gpu:{engine['gpu_name']}"
            else:
                hardware = f"cpu:{engine.get('name') or engine.get('docker_host')}"
            group = pin_group(str(run.get("stack")), str(run.get("variant", "original")))
            self.pins.setdefault(group, hardware)
            self.pin_holders[group] = self.pin_holders.get(group, 0) + 1  # held for good
        # An experiment changes one thing of the runs it tests: it runs on their hardware, not another.
        for _, spec in self.pending:
            group, original = pin_group(spec.stack, spec.variant), (spec.stack, "original")
            if spec.experiment is not None and group not in self.pins and original in self.pins:
                self.pins[group] = self.pins[original]
                self.pin_holders[group] = 1  # held for good

    # --- what a slot may take

    def _gpu_wanted(self, stack: str) -> bool:
        """Some live engine can give this stack a GPU: then CPU slots leave it alone."""
        return any(e.alive and e.verdicts.get(stack) is not None and e.verdicts[stack].use_gpu
                   for e in self.engines)

    def eligible(self, slot: Slot, spec: RunSpec) -> bool:
        engine = slot.engine
        verdict = engine.verdicts.get(spec.stack)
        if not engine.alive or verdict is None or not verdict.proceed or spec.stack in engine.image_errors:
            return False
        if verdict.use_gpu:
            if slot.gpu is None or slot.gpu.get("index") not in verdict.gpu_indices:
                return False
        elif slot.gpu is not None or self._gpu_wanted(spec.stack):
            return False
        pin = self.pins.get(pin_group(spec.stack, spec.variant))
        return pin is None or pin == slot.hardware

    def take(self, slot: Slot) -> tuple[int, RunSpec] | None:
        """The next run for this slot; waits while runs in flight elsewhere may come back; None: done."""
        with self.cond:
            while True:
                if self.stopping or not slot.engine.alive:
                    return None
                for item in self.pending:
                    spec = item[1]
                    group = (spec.stack, spec.variant)
                    if spec.precision != "float32" and group in self.float32_running:
                        continue  # another GPU is free, but this run's bound comes from that float32's step
                    if self.eligible(slot, spec):
                        self.pending.remove(item)
                        if spec.precision == "float32":
                            self.float32_running.add(group)
                        pinned = pin_group(spec.stack, spec.variant)
                        self.pins.setdefault(pinned, slot.hardware)
                        self.pin_holders[pinned] = self.pin_holders.get(pinned, 0) + 1
                        self.in_flight += 1
                        return item
                if self.in_flight == 0:
                    return None
                self.cond.wait()

    def _release(self, spec: RunSpec) -> None:
        """Drop one hold on the group's pin; with none left, the group may go to other hardware."""
        group = pin_group(spec.stack, spec.variant)
        self.pin_holders[group] = self.pin_holders.get(group, 1) - 1
        if self.pin_holders[group] <= 0:
            self.pins.pop(group, None)
            self.pin_holders.pop(group, None)

    def _finished(self, spec: RunSpec) -> None:
        self.in_flight -= 1
        if spec.precision == "float32":
            self.float32_running.discard((spec.stack, spec.variant))

    def give_back(self, item: tuple[int, RunSpec]) -> None:
        """A run that never started (its engine went away, or has no image) waits for another slot."""
        with self.cond:
            self._finished(item[1])
            self._release(item[1])
            self.pending.append(item)
            self.pending.sort(key=lambda pending: pending[0])
            self.cond.notify_all()

    def done(self, spec: RunSpec, record: dict[str, Any]) -> None:
        with self.cond:
            self._finished(spec)
            if record.get("status") != "ok" and not spec.rounds_of:
                self._release(spec)  # nothing measured there: the group is not bound to that hardware
            stopping = self.stopping
            self.cond.notify_all()
        if stopping:  # an interrupted run measured nothing; --resume runs it again
            return
        self.write(record)

    def write(self, record: dict[str, Any]) -> None:
        with self.io_lock:
            self.sink.finish_run(record)

    def engine_down(self, engine: Daemon, reason: str) -> None:
        with self.cond:
            if engine.error is None:
                engine.error = reason
            self.cond.notify_all()
        self.note(f"{reason}; its queued runs go to the other engines")

    def note(self, message: str) -> None:
        with self.io_lock:
            self.sink.note(message)

    # --- one slot's work

    def work(self, slot: Slot) -> None:
        while True:
            item = self.take(slot)
            if item is None:
                return
            try:
                record = self.run_one(slot, item[1])
            except BaseException as exc:  # noqa: BLE001 (re-raised by the main thread)
                # A bug must not leave the other workers waiting for this run forever.
                with self.cond:
                    self.crash = self.crash or exc
                    self.stopping = True
                    self.in_flight -= 1
                    self.cond.notify_all()
                return
            if record is None:
                self.give_back(item)
            else:
                self.done(item[1], record)

    def run_one(self, slot: Slot, spec: RunSpec) -> dict[str, Any] | None:
        """Run one spec on this slot; None when it never started and should go elsewhere."""
        from fp16doctor.engines.docker import sdk

        engine = slot.engine
        stack = self.stacks[spec.stack]
        image = self.image_for(engine, stack)
        if image is None or self.stopping:
            return None
        with self.io_lock:  # float32's step, where it finished, sets the slow-step bound
            spec = with_slow_step_bound(spec, self.sink.runs())
        verdict = engine.verdicts[spec.stack]
        gpu = slot.gpu if verdict.use_gpu else None
        label = spec.label
        machine = str(engine.facts.get("name") or engine.label)
        with self.cond:
            self.running[label] = (machine, [0])
            neighbours = [seen for m, seen in self.running.values() if m == machine]
            for seen in neighbours:
                seen[0] = max(seen[0], len(neighbours) - 1)

        def on_event(event: dict[str, Any]) -> None:
            if spec.rounds_of:
                return
            with self.io_lock:
                self.sink.event({**event, "run": label})

        with self.io_lock:
            if spec.rounds_of:
                where = f" on {slot.where}" if self.show_where else ""
                self.sink.note(f"{label}{where}: in one container, each round in a new order (at least "
                               f"{MIN_ROUNDS} rounds)")
            self.sink.start_run(spec)
            if self.show_where and not spec.rounds_of:
                self.sink.event({"event": "placed", "run": label, "where": slot.where})
        try:
            keep = self.setup.out_dir / "profiles" / spec.slug if self.setup.keep_profiles else None
            record = sdk.run_in_stack(spec, stack, engine.docker_host, gpu, on_event,
                                                image=image, run_id=sdk.RUN_ID,
                                                timeout_s=RUN_TIMEOUT_S, keep_profile=keep)
        except DoctorError as exc:  # the engine did not answer before the container started
            with self.cond:
                self.running.pop(label, None)
            self.engine_down(engine, f"engine {engine.label} unreachable: {_detail(exc)}")
            return None
        with self.cond:
            concurrent = self.running.pop(label, (machine, [0]))[1][0]
        if record.get("status") == "failed":
            lost = self.check_engine(engine)
            if lost is not None:
                record["error"] = f"engine {engine.label} died during the run ({lost}); " \
                                  "--resume runs it again"
                record["failure_kind"] = ENGINE_LOST
        record.setdefault("engine", {}).update(self.engine_fields(slot, gpu))
        stamp_engine(record, *self.placement(slot, gpu, spec.stack))
        # Other runs on the same machine share its CPU cores (and input pipelines): timings are
        # comparable only between runs that ran under the same load.
        record["engine"]["concurrent_runs"] = concurrent
        if verdict.forced and not verdict.ok:
            record["forced"] = True
            record.setdefault("notes", []).append(f"pre-flight said: {verdict.reason}")
        return record

    @staticmethod
    def placement(slot: Slot, gpu: dict[str, Any] | None, stack: str) -> tuple[str, str, list[str]]:
        """The run's machine (this one for an engine on a local socket), its label, and how to run there again."""
        daemon = slot.engine
        name = daemon.facts.get("name")
        machine = HOST_MACHINE if daemon.local else str(name or daemon.label)
        label = f"docker {daemon.label}" + (f" gpu {gpu.get('index')}" if gpu is not None else "")
        rerun = ["--stack", stack, "--no-host"] + ([] if daemon.local else ["--docker-host", daemon.label])
        return machine, label, rerun

    def engine_fields(self, slot: Slot, gpu: dict[str, Any] | None) -> dict[str, Any]:
        facts = slot.engine.facts
        fields: dict[str, Any] = {"kind": "docker", "docker_host": slot.engine.label,
                                  "name": facts.get("name"), "engine_id": facts.get("engine_id"),
                                  "server_version": facts.get("server_version")}
        if gpu is not None:
            fields.update(gpu_index=gpu.get("index"), gpu_name=gpu.get("name"), gpu_uuid=gpu.get("uuid"),
                          gpu_compute_capability=gpu.get("compute_capability"),
                          gpu_driver_version=gpu.get("driver_version"))
        return {k: v for k, v in fields.items() if v is not None}

    def check_engine(self, engine: Daemon) -> str | None:
        """After a failed run: None when the engine still answers, else why not (and mark it down)."""
        from fp16doctor.engines.docker import sdk

        sdk.forget_client(engine.docker_host)
        try:
            sdk.client_for(engine.docker_host)
        except DoctorError as exc:
            reason = _detail(exc)
            self.engine_down(engine, f"engine {engine.label} died mid-run: {reason}")
            return reason
        return None

    def image_for(self, engine: Daemon, stack: StackSpec) -> str | None:
        """The stack's image on this engine: already there, built there, or copied from another engine."""
        from fp16doctor.engines.docker.build import ensure_image

        with engine.image_lock:
            if stack.name in engine.images:
                return engine.images[stack.name]
            if stack.name in engine.image_errors:
                return None

            def log(line: str) -> None:
                with self.io_lock:
                    self.sink.event({"event": "log", "message": f"{engine.label}: {line}"})

            try:
                tag = ensure_image(stack, engine.docker_host, build_options_for(self.setup, engine.docker_host),
                                   log)
            except DoctorError as exc:
                if self.check_engine(engine) is not None:
                    return None
                copied = self.copy_from_peer(engine, stack, exc, log)
                if copied is None:
                    return None
                tag = copied
            engine.images[stack.name] = tag
            return tag

    def copy_from_peer(self, engine: Daemon, stack: StackSpec, build_error: DoctorError,
                       log: Any) -> str | None:
        from fp16doctor.engines.docker import sdk

        for peer in self.engines:
            tag = peer.images.get(stack.name)
            if peer is engine or not peer.alive or tag is None:
                continue
            try:
                sdk.copy_image(peer.docker_host, engine.docker_host, tag, log)
            except DoctorError as exc:
                self.note(f"{exc.message}")
                continue
            self.note(f"building {stack.name} on {engine.label} failed ({build_error.message}); "
                      f"copied the image from {peer.label}")
            return tag
        with self.cond:
            engine.image_errors[stack.name] = f"no {stack.name} image on {engine.label}: {build_error.message}"
            self.cond.notify_all()
        self.note(engine.image_errors[stack.name] + (f" ({build_error.hint})" if build_error.hint else ""))
        return None

    # --- what is left when every slot stopped

    def stranded_reason(self, spec: RunSpec) -> tuple[str, str]:
        """Why no slot ran this spec: (reason, failure kind)."""
        reasons: list[str] = []
        kind = "no_engine"
        for engine in self.engines:
            if engine.error:
                reasons.append(engine.error)
                kind = ENGINE_LOST
            elif spec.stack in engine.image_errors:
                reasons.append(engine.image_errors[spec.stack])
                kind = "image"
        pin = self.pins.get(pin_group(spec.stack, spec.variant))
        if pin and not reasons:
            reasons.append(f"its other precisions ran on {pin.partition(':')[2]}, and no engine with "
                           "that hardware is left to keep the comparison fair")
        return "; ".join(reasons) or "no engine could run it", kind


def _not_native_reason(spec: RunSpec, stack: StackSpec, live: list[Daemon]) -> str | None:
    """Why a precision planned only where it is native does not run: no engine gives this stack a GPU that
    computes in it (bfloat16: compute capability 8.0+). None: some engine does."""
    gpus = [g for e in live if (v := e.verdicts.get(stack.name)) is not None and v.proceed and v.use_gpu
            for g in e.gpus if g.get("index") in v.gpu_indices]
    if any(gpu_has_bfloat16(g.get("compute_capability")) for g in gpus):
        return None
    have = ", ".join(sorted({f"{g.get('name')} ({g.get('compute_capability')})" for g in gpus})) or "no GPU for it"
    return (f"{spec.precision} is planned where a GPU computes in bfloat16 (compute capability 8.0 or newer); "
            f"the engines give the {stack.name} stack {have} (--precision {spec.precision} runs it anyway)")


def _connect(engine: Daemon, host: Mapping[str, Any], first_stack: StackSpec | None, setup: EngineSetup) -> None:
    """Ask the engine what it is and which GPUs it gives containers; on failure, record why."""
    from fp16doctor.engines.docker import sdk

    try:
        if not engine.facts:
            engine.facts = sdk.engine_facts(engine.docker_host).to_dict()
        # Containers an earlier diagnose left when this engine died under it (they stopped with it).
        engine.swept = sdk.cleanup(engine.docker_host, stopped_only=True)["containers"]
        # Containers still running for an fp16doctor that was killed (SIGKILL leaves them to run on).
        engine.orphans = sdk.remove_orphans(engine.docker_host)
        if engine.local:
            gpus = [g for g in host.get("gpus") or [] if isinstance(g, dict)]
        else:
            found = sdk.engine_gpus(engine.docker_host)
            if found is None and first_stack is not None and first_stack.gpu:
                # No image to ask with: the first stack's image is needed anyway, and nvidia-smi runs in it.
                found = _gpus_after_build(engine, first_stack, setup)
            if found is None:
                engine.gpu_note = (f"could not list the GPUs of {engine.label} (nvidia-smi did not run there); "
                                   "using its CPU only")
            gpus = found or []
        engine.gpus = select_gpus(gpus, engine.target.gpu_selection)
    except DoctorError as exc:
        engine.error = f"engine {engine.label} unreachable: {_detail(exc)}"


def _gpus_after_build(engine: Daemon, stack: StackSpec, setup: EngineSetup) -> list[dict[str, Any]] | None:
    from fp16doctor.engines.docker import sdk
    from fp16doctor.engines.docker.build import ensure_image

    try:
        image = ensure_image(stack, engine.docker_host, build_options_for(setup, engine.docker_host),
                             lambda _line: None)
    except DoctorError:
        return None  # the run's own build tries again, and says why
    engine.images[stack.name] = image
    return sdk.engine_gpus(engine.docker_host, image)


def _detail(exc: DoctorError) -> str:
    """"cannot reach the Docker engine at X: why" -> "why" (the caller names the engine)."""
    message = exc.message
    if message.startswith("cannot reach") and ": " in message:
        return message.split(": ", 1)[1]
    return message


def _join_all(threads: list[threading.Thread]) -> None:
    for thread in threads:
        while thread.is_alive():
            thread.join(JOIN_POLL_S)


def _slots(engine: Daemon) -> list[Slot]:
    return [Slot(engine, None)] + [Slot(engine, gpu) for gpu in engine.gpus]


class DockerEngine:
    """The stack cells on one or many Docker engines (--docker-host, default: the environment's), in parallel:
    one worker per slot, each stack's image built on an engine or copied from another, every run pinned to the
    hardware its comparison group uses. Connects once per diagnose; each stack's pre-flight verdict is made once
    per engine."""

    kind: ClassVar[str] = "docker"
    runs_here: ClassVar[bool] = False  # a --docker-host may be another machine: its load is not this one's
    one_run: ClassVar[str] = "its own container's run"
    queued: ClassVar[bool] = False

    def __init__(self, setup: EngineSetup) -> None:
        from fp16doctor.engines.docker import sdk

        self.setup = setup
        hosts: list[str | None] = list(setup.docker_hosts) or [None]
        targets = dict.fromkeys(parse_docker_host(h) for h in hosts)  # a malformed URL is refused here
        self.engines = [Daemon(t, sdk.engine_label(t.docker_host)) for t in targets]
        self.connected = False
        self.preflight_findings: list[dict[str, Any]] = []
        self.stacks: dict[str, StackSpec] = {}

    @classmethod
    def from_setup(cls, setup: EngineSetup) -> DockerEngine:
        return cls(setup)

    @classmethod
    def selected(cls, setup: EngineSetup) -> bool:
        return setup.slurm is None

    @classmethod
    def takes(cls, spec: RunSpec) -> bool:
        return spec.stack != HOST_STACK

    def check(self) -> None:
        """Before anything runs: every engine answers with its version within CHECK_TIMEOUT_S, or diagnose stops
        (an engine that dies later fails only its runs). The engines are asked side by side."""
        from fp16doctor.engines.docker import sdk

        answers: dict[int, dict[str, Any] | DoctorError] = {}

        def ask(i: int, engine: Daemon) -> None:
            try:
                answers[i] = sdk.engine_facts(engine.docker_host).to_dict()
            except DoctorError as exc:
                answers[i] = exc

        threads = [threading.Thread(target=ask, args=(i, e), daemon=True, name=f"fp16doctor-check-{i}")
                   for i, e in enumerate(self.engines)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + CHECK_TIMEOUT_S
        for thread in threads:
            while thread.is_alive() and time.monotonic() < deadline:
                thread.join(JOIN_POLL_S)
        for i, engine in enumerate(self.engines):
            answer = answers.get(i)
            if isinstance(answer, dict):
                engine.facts = answer
                continue
            why = _detail(answer) if answer is not None else f"no answer within {CHECK_TIMEOUT_S:.0f} s"
            hint = (answer.hint if answer is not None else None) or (
                "start it (or pass --docker-host for another), or drop --stack to diagnose this host's Python only")
            raise DoctorError(f"Docker engine {engine.label} unreachable: {why}", hint=hint)

    def describe(self) -> dict[str, Any]:
        return {"engines": [e.summary() for e in self.engines]}

    def findings(self) -> list[dict[str, Any]]:
        """What the pre-flight said of stacks an engine cannot run (stack_incompatible_gpu)."""
        return list(self.preflight_findings)

    def prepare(self, stack: str) -> None:
        """A stack's image is built on an engine when a run there first needs it (image_for)."""

    def cancel(self) -> None:
        _remove_containers(self.engines)

    def cleanup(self) -> None:
        """Each run's container is removed when it ends (sdk.run_in_stack)."""

    def run_groups(self, groups: list[list[RunSpec]], sink: RunSink) -> None:
        """Every cell of `groups` over the engines; each record goes to `sink` as it finishes, with `engine` naming
        the engine, its machine and the GPU. KeyboardInterrupt removes the containers in flight and propagates."""
        specs = [spec for group in groups for spec in group]
        for spec in specs:
            self.stacks.setdefault(spec.stack, get_stack(spec.stack))
        matrix = _Matrix([], self.stacks, self.engines, self.setup, sink)
        runnable: list[RunSpec] = []
        for spec in specs:
            reason = self.stacks[spec.stack].precision_refusal(spec.precision)
            if reason is None:
                runnable.append(spec)
            elif not spec.rounds_of:
                matrix.write(_skipped(spec, reason))
        if not runnable:
            return
        if not self.connected:
            self._connect(runnable, sink)
        live = [e for e in self.engines if e.alive]
        for name in dict.fromkeys(s.stack for s in runnable):
            if not all(name in e.verdicts for e in live):
                self._preflight(name, live)
            verdicts = [(e, e.verdicts[name]) for e in live]
            if live and not any(v.proceed for _, v in verdicts):
                reason = "; ".join(f"{e.label}: {v.reason}" if len(live) > 1 else v.reason for e, v in verdicts)
                for spec in [s for s in runnable if s.stack == name]:
                    runnable.remove(spec)
                    if not spec.rounds_of:
                        matrix.write(_skipped(spec, reason + " (--force tries anyway)"))
        for spec in [s for s in runnable if s.native_only]:
            reason = _not_native_reason(spec, self.stacks[spec.stack], live)
            if reason is not None:
                runnable.remove(spec)
                matrix.write(_skipped(spec, reason))
        matrix.pending = list(enumerate(runnable))
        matrix.pin_measured_groups()
        slots = [s for e in live for s in _slots(e)]
        matrix.show_where = len(slots) > 1
        _work_through(matrix, slots, self.engines)
        for _, spec in list(matrix.pending):
            reason, kind = matrix.stranded_reason(spec)
            if spec.rounds_of:
                sink.note(f"{spec.stack}: no interleaved rounds ({reason})")
            else:
                matrix.write(_failed(spec, reason, kind))

    def _connect(self, specs: list[RunSpec], sink: RunSink) -> None:
        """Every engine, in parallel: what it is, its GPUs, the containers an earlier fp16doctor left."""
        engines = self.engines
        sink.note("connecting to Docker engine" + ("s " if len(engines) > 1 else " ")
                  + ", ".join(e.label for e in engines))
        # The stack to build on an engine with no image yet, to ask it for its GPUs: the first that can use one.
        first_stack = next((self.stacks[s.stack] for s in specs if self.stacks[s.stack].gpu), None)
        host = self.setup.host
        threads = [threading.Thread(target=_connect, args=(e, host, first_stack, self.setup), daemon=True,
                                    name=f"fp16doctor-connect-{i}") for i, e in enumerate(engines)]
        for thread in threads:
            thread.start()
        _join_all(threads)
        self.connected = True
        for engine in engines:
            if engine.error:
                sink.note(engine.error)
                continue
            gpus = ", ".join(f"{g.get('index')}: {g.get('name')}" for g in engine.gpus) or "no GPU"
            sink.note(f"engine {engine.label} ({engine.facts.get('name', '?')}): {gpus}")
            if engine.gpu_note:
                sink.note(engine.gpu_note)
            if engine.swept:
                sink.note(f"removed {len(engine.swept)} stopped fp16doctor container(s) on {engine.label} "
                          "left by an earlier run")
            if engine.orphans:
                sink.note(f"removed {len(engine.orphans)} fp16doctor container(s) on {engine.label} whose "
                          f"fp16doctor was killed mid-run: {', '.join(engine.orphans)}")

    def _preflight(self, name: str, live: list[Daemon]) -> None:
        """The stack's pre-flight verdict on each live engine; the first refusal is kept as a finding."""
        from fp16doctor.stacks import preflight

        stack = self.stacks[name]
        for engine in live:
            engine.verdicts[name] = preflight.check(stack, engine.host_view(self.setup.host), force=self.setup.force)
        for engine in live:
            verdict = engine.verdicts[name]
            if verdict.finding is not None and not any(f.get("stack") == name for f in self.preflight_findings):
                finding = dict(verdict.finding)
                if len(self.engines) > 1:
                    finding["evidence"] = [f"on {engine.label}: {e}" for e in finding.get("evidence", [])]
                self.preflight_findings.append(finding)


def _work_through(matrix: _Matrix, slots: list[Slot], engines: list[Daemon]) -> None:
    """One worker per slot until the matrix' pending runs are done (or stranded); Ctrl-C removes the
    containers in flight and propagates, as does a worker's crash."""
    workers = [threading.Thread(target=matrix.work, args=(slot,), daemon=True, name=f"fp16doctor-slot-{i}")
               for i, slot in enumerate(slots)]
    try:
        for worker in workers:
            worker.start()
        _join_all(workers)
    except KeyboardInterrupt:
        with matrix.cond:
            matrix.stopping = True
            matrix.cond.notify_all()
        _remove_containers(engines)
        for worker in workers:
            if worker.ident is not None:  # Ctrl-C may come while the workers are still being started
                worker.join(timeout=10)
        _remove_containers(engines)  # a container created while the first sweep ran
        raise
    if matrix.crash is not None:
        _remove_containers(engines)
        raise matrix.crash


def _remove_containers(engines: list[Daemon]) -> None:
    from fp16doctor.engines.docker import sdk

    for engine in engines:
        if not engine.alive:
            continue
        try:
            sdk.cleanup(engine.docker_host, run_id=sdk.RUN_ID)
        except DoctorError:
            pass  # the engine went away: its containers went with it
