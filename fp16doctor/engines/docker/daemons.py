"""The Docker engines of one diagnose (--docker-host, default: the environment's), what each is and how it is doing,
and the slots a run takes on them: one per GPU, plus the engine's CPU. All Docker calls go through
fp16doctor.engines.docker.sdk."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fp16doctor.engines.base import EngineSetup
from fp16doctor.errors import DoctorError
from fp16doctor.results import LOCAL_DOCKER_SCHEMES
from fp16doctor.stacks import StackSpec

if TYPE_CHECKING:
    from fp16doctor.engines.context import BuildOptions
    from fp16doctor.stacks.preflight import Verdict

GPU_SELECTOR = "#gpus="  # --docker-host URL#gpus=0,2 (indices or UUIDs); #gpus=none: CPU only
ENGINE_LOST = "engine_lost"
JOIN_POLL_S = 0.2  # the main thread wakes this often, so Ctrl-C is handled while workers run


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


def build_options_for(setup: EngineSetup, docker_host: str | None) -> BuildOptions:
    """How to build a stack's image on one engine: diagnose's --ca-bundle / --wheelhouse, else the CA
    bundle the environment names (context.default_ca_bundle)."""
    from fp16doctor.engines.context import BuildOptions, default_ca_bundle

    return BuildOptions(docker_host=docker_host, ca_bundle=setup.ca_bundle or default_ca_bundle(),
                        wheelhouse=setup.wheelhouse)


def connect_daemon(engine: Daemon, host: Mapping[str, Any], first_stack: StackSpec | None, setup: EngineSetup) -> None:
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
                found = gpus_after_build(engine, first_stack, setup)
            if found is None:
                engine.gpu_note = (f"could not list the GPUs of {engine.label} (nvidia-smi did not run there); "
                                   "using its CPU only")
            gpus = found or []
        engine.gpus = select_gpus(gpus, engine.target.gpu_selection)
    except DoctorError as exc:
        engine.error = f"engine {engine.label} unreachable: {reason_of(exc)}"


def gpus_after_build(engine: Daemon, stack: StackSpec, setup: EngineSetup) -> list[dict[str, Any]] | None:
    from fp16doctor.engines.docker import sdk
    from fp16doctor.engines.docker.build import ensure_image

    try:
        image = ensure_image(stack, engine.docker_host, build_options_for(setup, engine.docker_host),
                             lambda _line: None)
    except DoctorError:
        return None  # the run's own build tries again, and says why
    engine.images[stack.name] = image
    return sdk.engine_gpus(engine.docker_host, image)


def reason_of(exc: DoctorError) -> str:
    """"cannot reach the Docker engine at X: why" -> "why" (the caller names the engine)."""
    message = exc.message
    if message.startswith("cannot reach") and ": " in message:
        return message.split(": ", 1)[1]
    return message


def join_all(threads: list[threading.Thread]) -> None:
    for thread in threads:
        while thread.is_alive():
            thread.join(JOIN_POLL_S)


def slots_of(engine: Daemon) -> list[Slot]:
    return [Slot(engine, None)] + [Slot(engine, gpu) for gpu in engine.gpus]


def remove_containers(engines: list[Daemon]) -> None:
    from fp16doctor.engines.docker import sdk

    for engine in engines:
        if not engine.alive:
            continue
        try:
            sdk.cleanup(engine.docker_host, run_id=sdk.RUN_ID)
        except DoctorError:
            pass  # the engine went away: its containers went with it
