"""The matrix of one run_groups call over the Docker engines' slots: which run a slot may take (a comparison group
stays on one kind of hardware, a 16-bit run waits for its group's float32), the image it needs there, the run,
and what is written when it ends. An engine that cannot be reached or dies fails only the runs it had in flight;
the other slots take over what is still queued."""

from __future__ import annotations

import threading
from typing import Any

from fp16doctor.engines.base import EngineSetup, RunSink, base_run_record, stamp_engine
from fp16doctor.engines.docker.daemons import (
    ENGINE_LOST,
    Daemon,
    Slot,
    build_options_for,
    join_all,
    pin_group,
    reason_of,
    remove_containers,
)
from fp16doctor.engines.spec import RUN_TIMEOUT_S, RunSpec, with_slow_step_bound
from fp16doctor.errors import DoctorError
from fp16doctor.knowledge.gpus import gpu_has_bfloat16
from fp16doctor.results import HOST_MACHINE, Run
from fp16doctor.stacks import StackSpec
from fp16doctor.workload.paired import MIN_ROUNDS


def skipped_record(spec: RunSpec, reason: str) -> dict[str, Any]:
    record = base_run_record(spec, "cpu")
    record.update(status="skipped", error=reason, engine={"kind": "docker"})
    return record


def failed_record(spec: RunSpec, reason: str, kind: str) -> dict[str, Any]:
    record = base_run_record(spec, "cpu")
    record.update(status="failed", error=reason, failure_kind=kind, engine={"kind": "docker"})
    return record


class Matrix:
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
        for run in map(Run.of, self.sink.runs()):
            engine = run.engine
            if not run.ok or engine.get("kind") != "docker":
                continue
            if engine.get("gpu_name"):
                hardware = f"gpu:{engine['gpu_name']}"
            else:
                hardware = f"cpu:{engine.get('name') or engine.get('docker_host')}"
            group = pin_group(run.stack, run.variant)
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
            self.engine_down(engine, f"engine {engine.label} unreachable: {reason_of(exc)}")
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
            reason = reason_of(exc)
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


def not_native_reason(spec: RunSpec, stack: StackSpec, live: list[Daemon]) -> str | None:
    """Why a precision planned only where it is native does not run: no engine gives this stack a GPU that
    computes in it (bfloat16: compute capability 8.0+). None: some engine does."""
    gpus = [g for e in live if (v := e.verdicts.get(stack.name)) is not None and v.proceed and v.use_gpu
            for g in e.gpus if g.get("index") in v.gpu_indices]
    if any(gpu_has_bfloat16(g.get("compute_capability")) for g in gpus):
        return None
    have = ", ".join(sorted({f"{g.get('name')} ({g.get('compute_capability')})" for g in gpus})) or "no GPU for it"
    return (f"{spec.precision} is planned where a GPU computes in bfloat16 (compute capability 8.0 or newer); "
            f"the engines give the {stack.name} stack {have} (--precision {spec.precision} runs it anyway)")


def work_through(matrix: Matrix, slots: list[Slot], engines: list[Daemon]) -> None:
    """One worker per slot until the matrix' pending runs are done (or stranded); Ctrl-C removes the
    containers in flight and propagates, as does a worker's crash."""
    workers = [threading.Thread(target=matrix.work, args=(slot,), daemon=True, name=f"fp16doctor-slot-{i}")
               for i, slot in enumerate(slots)]
    try:
        for worker in workers:
            worker.start()
        join_all(workers)
    except KeyboardInterrupt:
        with matrix.cond:
            matrix.stopping = True
            matrix.cond.notify_all()
        remove_containers(engines)
        for worker in workers:
            if worker.ident is not None:  # Ctrl-C may come while the workers are still being started
                worker.join(timeout=10)
        remove_containers(engines)  # a container created while the first sweep ran
        raise
    if matrix.crash is not None:
        remove_containers(engines)
        raise matrix.crash
