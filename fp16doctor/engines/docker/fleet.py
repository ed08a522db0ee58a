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
from typing import Any, ClassVar

from fp16doctor.engines.base import EngineSetup, RunSink
from fp16doctor.engines.docker.daemons import (
    JOIN_POLL_S,
    Daemon,
    connect_daemon,
    join_all,
    parse_docker_host,
    reason_of,
    remove_containers,
    slots_of,
)
from fp16doctor.engines.docker.matrix import Matrix, failed_record, not_native_reason, skipped_record, work_through
from fp16doctor.engines.docker.options import DockerOptions
from fp16doctor.engines.options import EngineOptions
from fp16doctor.engines.spec import RunSpec, is_host_stack
from fp16doctor.errors import DoctorError
from fp16doctor.stacks import StackSpec, get_stack

# How long diagnose waits for an engine's version before anything runs (an ssh:// engine asks a password, a tcp://
# one sits behind a firewall that drops packets): an engine that does not answer is no engine to plan on.
CHECK_TIMEOUT_S = 20.0


class DockerEngine:
    """The stack cells on one or many Docker engines (--docker-host, default: the environment's), in parallel:
    one worker per slot, each stack's image built on an engine or copied from another, every run pinned to the
    hardware its comparison group uses. Connects once per diagnose; each stack's pre-flight verdict is made once
    per engine."""

    kind: ClassVar[str] = "docker"
    options_class: ClassVar[type[EngineOptions]] = DockerOptions
    runs_here: ClassVar[bool] = False  # a --docker-host may be another machine: its load is not this one's
    one_run: ClassVar[str] = "its own container's run"
    run_noun: ClassVar[str] = "container"
    also_costs: ClassVar[str] = "plus a build of each image an engine lacks (minutes each)"
    queued: ClassVar[bool] = False

    def __init__(self, setup: EngineSetup) -> None:
        from fp16doctor.engines.docker import sdk

        self.setup = setup
        hosts: list[str | None] = list(setup.options(DockerOptions).docker_hosts) or [None]
        targets = dict.fromkeys(parse_docker_host(h) for h in hosts)  # a malformed URL is refused here
        self.engines = [Daemon(t, sdk.engine_label(t.docker_host)) for t in targets]
        self.connected = False
        self.preflight_findings: list[dict[str, Any]] = []
        self.stacks: dict[str, StackSpec] = {}

    @classmethod
    def from_setup(cls, setup: EngineSetup) -> DockerEngine:
        return cls(setup)

    @classmethod
    def takes(cls, spec: RunSpec) -> bool:
        return not is_host_stack(spec.stack)

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
            why = reason_of(answer) if answer is not None else f"no answer within {CHECK_TIMEOUT_S:.0f} s"
            hint = (answer.hint if answer is not None else None) or (
                "start it (or pass --docker-host for another), or drop --stack to diagnose this host's Python only")
            raise DoctorError(f"Docker engine {engine.label} unreachable: {why}", hint=hint)

    def describe(self) -> dict[str, Any]:
        return {"engines": [e.summary() for e in self.engines]}

    def where(self) -> list[str]:
        return [f"Docker: {e.label}" for e in self.engines]

    def has_gpus(self) -> bool | None:
        """Known once connected (a remote engine's GPUs are asked then); a local engine's are this host's."""
        return bool(self.setup.host_gpus) if all(e.local for e in self.engines) else None

    def findings(self) -> list[dict[str, Any]]:
        """What the pre-flight said of stacks an engine cannot run (stack_incompatible_gpu)."""
        return list(self.preflight_findings)

    def prepare(self, stack: str) -> None:
        """A stack's image is built on an engine when a run there first needs it (image_for)."""

    def cancel(self) -> None:
        remove_containers(self.engines)

    def cleanup(self) -> None:
        """Each run's container is removed when it ends (sdk.run_in_stack)."""

    def run_groups(self, groups: list[list[RunSpec]], sink: RunSink) -> None:
        """Every cell of `groups` over the engines; each record goes to `sink` as it finishes, with `engine` naming
        the engine, its machine and the GPU. KeyboardInterrupt removes the containers in flight and propagates."""
        specs = [spec for group in groups for spec in group]
        for spec in specs:
            self.stacks.setdefault(spec.stack, get_stack(spec.stack))
        matrix = Matrix([], self.stacks, self.engines, self.setup, sink)
        runnable: list[RunSpec] = []
        for spec in specs:
            reason = self.stacks[spec.stack].precision_refusal(spec.precision)
            if reason is None:
                runnable.append(spec)
            elif not spec.rounds_of:
                matrix.write(skipped_record(spec, reason))
        if not runnable:
            return
        if not self.connected:
            self._connect_all(runnable, sink)
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
                        matrix.write(skipped_record(spec, reason + " (--force tries anyway)"))
        for spec in [s for s in runnable if s.native_only]:
            reason = not_native_reason(spec, self.stacks[spec.stack], live)
            if reason is not None:
                runnable.remove(spec)
                matrix.write(skipped_record(spec, reason))
        matrix.pending = list(enumerate(runnable))
        matrix.pin_measured_groups()
        slots = [s for e in live for s in slots_of(e)]
        matrix.show_where = len(slots) > 1
        work_through(matrix, slots, self.engines)
        for _, spec in list(matrix.pending):
            reason, kind = matrix.stranded_reason(spec)
            if spec.rounds_of:
                sink.note(f"{spec.stack}: no interleaved rounds ({reason})")
            else:
                matrix.write(failed_record(spec, reason, kind))

    def _connect_all(self, specs: list[RunSpec], sink: RunSink) -> None:
        """Every engine, in parallel: what it is, its GPUs, the containers an earlier fp16doctor left."""
        engines = self.engines
        sink.note("connecting to Docker engine" + ("s " if len(engines) > 1 else " ")
                  + ", ".join(e.label for e in engines))
        # The stack to build on an engine with no image yet, to ask it for its GPUs: the first that can use one.
        first_stack = next((self.stacks[s.stack] for s in specs if self.stacks[s.stack].gpu), None)
        host = self.setup.host
        threads = [threading.Thread(target=connect_daemon, args=(e, host, first_stack, self.setup), daemon=True,
                                    name=f"fp16doctor-connect-{i}") for i, e in enumerate(engines)]
        for thread in threads:
            thread.start()
        join_all(threads)
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
