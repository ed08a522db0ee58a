"""The Slurm engine: the matrix on a cluster. One job per comparison group (machine x stack x setting),
as tasks of one array, so a comparison stays on one node and one GPU model; each job runs its group's
cells in order on the node's own Python (engines/slurm/job.py, through the host engine's run loop), or, for a
pinned stack, in the stack's container with the node's runtime (engines/slurm/runtimes.py), built or converted there
from the build context staged beside the jobs.

fp16doctor stages itself in a working folder on the shared filesystem, submits, then polls squeue (and,
for MinJobAge seconds after a job ended, scontrol) while it reads each job's progress file: events
for the live display, and every finished run as it lands. A job that ends early (cancelled, timed out,
preempted, its node failed) fails the runs it had left with Slurm's state as their failure_kind.
Ctrl-C cancels this invocation's jobs by their recorded ids, and nobody else's.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from fp16doctor import __version__
from fp16doctor.engines.base import EngineSetup, RunSink, base_run_record, stamp_engine
from fp16doctor.engines.failures import log_tail
from fp16doctor.engines.options import EngineOptions
from fp16doctor.engines.slurm import runtimes
from fp16doctor.engines.slurm import tools as slurm
from fp16doctor.engines.slurm.job import GROUP_FILE, PROGRESS_FILE, slurm_rerun
from fp16doctor.engines.slurm.options import SlurmOptions
from fp16doctor.engines.spec import RunSpec, is_host_stack, spec_to_dict, with_slow_step_bound
from fp16doctor.errors import DoctorError
from fp16doctor.results import Run

RUNNER_MODULE = "fp16doctor.engines.slurm.job"
PACKAGE_DIR = Path(__file__).resolve().parents[2]  # fp16doctor/, staged whole for the nodes
# squeue is asked this often; never slower than a tenth of MinJobAge, so a job's end is read from
# scontrol before the controller forgets it.
POLL_S = 2.0
CANCEL_WAIT_S = 30.0
# squeue may fail for a moment (a controller restart); give up after this many failures in a row.
QUEUE_FAILURES_MAX = 30
LOG_TAIL_LINES = 20
# What the job gets of this environment (it starts from --export=NONE): where home is, the locale, and
# the framework and fp16doctor settings a run reads.
PASS_ENV = ("HOME", "USER", "LANG", "LC_ALL", "KERAS_BACKEND", "KERAS_HOME", "TF_CPP_MIN_LOG_LEVEL",
            "XDG_CACHE_HOME", "CUDA_CACHE_PATH")
PASS_ENV_PREFIXES = ("FP16DOCTOR_",)


@dataclass
class _Task:
    """One array task: one comparison group's cells and what Slurm and the job said of it."""

    job_id: str  # "4711_0"
    array_id: str
    directory: Path
    specs: list[RunSpec]
    state: str = "PENDING"
    reason: str = ""
    node: str = ""
    offset: int = 0  # how far progress.jsonl was read
    recorded: set[str] = field(default_factory=set)  # labels of the runs that came back
    own_end: str = ""  # "end", or the signal that stopped the job, from its progress file
    ended: str = ""  # the state it ended in
    runtime: str = "host"  # what ran its cells: the node's Python, or a container runtime (engines/slurm/runtimes.py)
    error: str = ""  # why the job could not run its cells (no runtime, the image failed), from the job

    @property
    def group(self) -> str:
        return f"{self.specs[0].stack} / {self.specs[0].variant}"


class SlurmEngine:
    kind: ClassVar[str] = "slurm"
    options_class: ClassVar[type[EngineOptions]] = SlurmOptions
    runs_here: ClassVar[bool] = False
    one_run: ClassVar[str] = "its own job's run"
    run_noun: ClassVar[str] = "Slurm job"
    also_costs: ClassVar[str] = "plus the time the jobs wait in the queue"
    queued: ClassVar[bool] = True  # a job's wait in the queue is no run's time

    def __init__(self, options: SlurmOptions, out_dir: Path, python: str | None = None,
                 backend: str | None = None, keep_profiles: bool = False, run_id: str | None = None,
                 ca_bundle: Path | None = None, wheelhouse: Path | None = None) -> None:
        self.options = options
        self.ca_bundle = ca_bundle  # the nodes' image builds: diagnose's own --ca-bundle and --wheelhouse
        self.wheelhouse = wheelhouse
        self.out_dir = out_dir
        self.python_given = python
        self.python = python or sys.executable
        self.backend = backend
        self.keep_profiles = keep_profiles
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.workdir = Path(os.path.abspath(options.workdir or out_dir / "slurm"))
        self.run_dir = self.workdir / self.run_id
        self.job_ids: list[str] = []  # the arrays this invocation submitted
        self.tasks: list[_Task] = []
        self.poll_s = POLL_S
        self._staged = False
        self.plans: dict[str, runtimes.ContainerPlan] = {}  # stack -> how its containers reach the nodes

    @classmethod
    def from_setup(cls, setup: EngineSetup) -> SlurmEngine:
        return cls(setup.options(SlurmOptions), setup.out_dir, setup.python, setup.backend, setup.keep_profiles,
                   ca_bundle=setup.ca_bundle, wheelhouse=setup.wheelhouse)

    @classmethod
    def takes(cls, spec: RunSpec) -> bool:
        """Every cell: the host's on the nodes' Python, a stack's in its container there."""
        return True

    def check(self) -> None:
        """The container runtime asked for, an interpreter the nodes can find, and Slurm's tools."""
        if self.options.runtime is not None:
            runtimes.require(self.options.runtime)
        if self.python_given is not None and not os.path.isabs(self.python_given):
            raise DoctorError(f"--python {self.python_given} must be an absolute path with --slurm",
                              hint="the job runs it on the node, e.g. --python /shared/venvs/tf/bin/python")
        slurm.require_tools()

    def findings(self) -> list[dict[str, Any]]:
        return []

    def has_gpus(self) -> bool | None:
        return self.options.gpu  # --gres asks for them

    def where(self) -> list[str]:
        return [f"Slurm ({' '.join(self.options.sbatch_args()) or 'the default partition'}): one job per comparison "
                "group, the host's cells on the nodes' Python"]

    @property
    def job_name(self) -> str:
        return f"fp16doctor-{self.run_id}"

    def describe(self) -> dict[str, Any]:
        return {"slurm": self.summary()}

    def summary(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "kind": self.kind, "run_id": self.run_id, "job_name": self.job_name, "workdir": str(self.workdir),
            "python": self.python, "jobs": list(self.job_ids), "sbatch_args": self.options.sbatch_args()}
        if self.plans:
            described["runtime"] = self.options.runtime or "detected on each node"
            described["images"] = {stack: plan.image for stack, plan in self.plans.items()}
        return described

    # --- the engine protocol

    def prepare(self, stack: str) -> None:
        """Stage this fp16doctor in the working folder, where every node reads it (PYTHONPATH); for a
        stack, also its build context, which the nodes build (docker, podman) or convert from."""
        if not self._staged:
            self._stage()
        if not is_host_stack(stack) and stack not in self.plans:
            self.plans[stack] = self._stage_context(stack)

    def _stage_context(self, stack_name: str) -> runtimes.ContainerPlan:
        """The stack's build context, unpacked under the run's folder: the same files and tag a Docker
        engine is streamed (engines/context.py), so a node that built it before reuses its image."""
        from fp16doctor.engines import context as build
        from fp16doctor.stacks import get_stack

        stack = get_stack(stack_name)
        options = build.BuildOptions(ca_bundle=self.ca_bundle or build.default_ca_bundle(),
                                     wheelhouse=self.wheelhouse)
        files = build.context_files(stack, options)
        args = build.build_args(stack, options)
        tag = build.image_tag(stack, build.context_hash(files, args))
        context = self.run_dir / "context" / stack_name
        try:
            for name, content in files.items():
                path = context / name
                path.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(content, Path):
                    shutil.copyfile(content, path)
                else:
                    path.write_bytes(content)
                path.chmod(0o644)
        except OSError as exc:
            raise DoctorError(f"cannot stage the {stack_name} stack's build context in {context}: {exc}",
                              hint="pass --slurm-workdir on the cluster's shared filesystem that you can write to") \
                from exc
        return runtimes.ContainerPlan(stack=stack_name, image=tag, context_dir=str(context),
                                      image_dir=str(self.workdir / "images"), runtime=self.options.runtime,
                                      registry=self.options.registry, gpu=self.options.gpu and stack.gpu,
                                      keras_backend=stack.keras_backend,
                                      build_args=tuple(sorted(args.items())))

    def _stage(self) -> None:
        lib = self.run_dir / "lib" / "fp16doctor"
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            shutil.copytree(PACKAGE_DIR, lib, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_data"))
        except OSError as exc:
            raise DoctorError(f"cannot stage fp16doctor in --slurm-workdir {self.workdir}: {exc}",
                              hint="pass --slurm-workdir on the cluster's shared filesystem that you can write to") \
                from exc
        self._staged = True

    def run_groups(self, groups: list[list[RunSpec]], sink: RunSink) -> None:
        groups = [kept for group in groups if (kept := self._runnable(group, sink))]
        if not groups:
            return
        slurm.require_tools()
        for stack in dict.fromkeys(spec.stack for group in groups for spec in group):
            self.prepare(stack)
        why = slurm.node_local_reason(self.workdir)
        if why is not None:
            sink.note(f"warning: --slurm-workdir {self.workdir} looks node-local ({why}); jobs on other nodes "
                      "cannot read it: pass a folder on the cluster's shared filesystem")
        age = slurm.min_job_age_s()
        if age:
            self.poll_s = max(0.5, min(POLL_S, age / 10))
        batches: dict[str, list[list[RunSpec]]] = {}
        for group in groups:
            batches.setdefault(_pinned_node(group, sink.runs()) or "", []).append(group)
        try:
            for node, batch in batches.items():
                self._submit(batch, node, sink)
            self._watch(sink)
        except KeyboardInterrupt:
            self.cancel()
            raise
        self.cleanup()

    def _runnable(self, group: list[RunSpec], sink: RunSink) -> list[RunSpec]:
        """The cells a stack can run; the others (mixed_float16 on Keras 2.1.5, ...) are recorded skipped with the
        reason instead of costing a job."""
        from fp16doctor.stacks import get_stack

        kept = []
        for spec in group:
            reason = None if is_host_stack(spec.stack) else get_stack(spec.stack).precision_refusal(spec.precision)
            if reason is None:
                kept.append(spec)
            elif not spec.rounds_of:
                record = base_run_record(spec, "cpu")
                record.update(status="skipped", error=reason, engine={"kind": self.kind})
                sink.finish_run(record)
        return kept

    def cancel(self) -> None:
        """scancel this invocation's arrays (by recorded id, plus any queued under its unique name whose
        id went unrecorded), and wait until the queue no longer lists them."""
        ids = set(self.job_ids)
        try:
            ids |= set(slurm.named(self.job_name))
            slurm.cancel(ids)
            deadline = time.monotonic() + CANCEL_WAIT_S
            while ids and time.monotonic() < deadline:
                left = slurm.queued(ids)
                if left is not None and not left:
                    break
                time.sleep(0.5)
        except DoctorError:
            pass  # the controller went away: its jobs cannot run on either

    def cleanup(self) -> None:
        """The staged copy goes; the task folders (their Slurm logs) stay when a run failed."""
        shutil.rmtree(self.run_dir / "lib", ignore_errors=True)
        if self.tasks and all(t.ended == "COMPLETED" and len(t.recorded) == len(t.specs) for t in self.tasks):
            shutil.rmtree(self.run_dir, ignore_errors=True)

    # --- submitting

    def _submit(self, groups: list[list[RunSpec]], node: str, sink: RunSink) -> None:
        batch_dir = self.run_dir / f"array-{len(self.job_ids)}"
        done = sink.runs()
        for index, group in enumerate(groups):
            task_dir = batch_dir / str(index)
            task_dir.mkdir(parents=True, exist_ok=True)
            # A group's float32 measured earlier (--resume) sets its 16-bit runs' bound; else the job does.
            specs = [with_slow_step_bound(spec, done) for spec in group]
            (task_dir / GROUP_FILE).write_text(json.dumps({
                "specs": [spec_to_dict(s) for s in specs],
                "backend": self.backend,
                "gpu": self.options.gpu,
                "cache_dir": str(self.workdir / "cache"),
                "keep_profiles": str(self.out_dir.absolute() / "profiles") if self.keep_profiles else None,
                "container": self.plans[group[0].stack].to_dict() if group[0].stack in self.plans else None,
            }, indent=1), encoding="utf-8")
        script = batch_dir / "job.sh"
        script.write_text(slurm.job_script(python=self.python, runner_module=RUNNER_MODULE,
                                           lib_dir=self.run_dir / "lib", batch_dir=batch_dir, env=_job_env(),
                                           exclusive=not self.options.gpu, version=__version__),
                          encoding="utf-8")
        args = [f"--job-name={self.job_name}", f"--comment=fp16doctor run {self.run_id}",
                f"--array=0-{len(groups) - 1}", f"--output={batch_dir}/%a/slurm.out", f"--chdir={batch_dir}",
                *self.options.sbatch_args(), *([f"--nodelist={node}"] if node else [])]
        array_id = slurm.submit(script, args)
        self.job_ids.append(array_id)
        pinned = f", on {node} where their other runs ran" if node else ""
        sink.note(f"submitted Slurm array {array_id} ({self.job_name}): {len(groups)} comparison group(s), "
                  f"one job each{pinned}")
        for index, group in enumerate(groups):
            task = _Task(f"{array_id}_{index}", array_id, batch_dir / str(index), list(group))
            self.tasks.append(task)
            for spec in group:
                sink.start_run(spec)
                sink.event({"event": "log", "run": spec.label, "message": f"submitted as job {task.job_id}"})

    # --- watching

    def _watch(self, sink: RunSink) -> None:
        failures = 0
        while True:
            live = [t for t in self.tasks if not t.ended]
            if not live:
                return
            for task in live:
                self._read_progress(task, sink)
            states = slurm.queued({t.array_id for t in live})
            if states is None:
                failures += 1
                if failures >= QUEUE_FAILURES_MAX:
                    raise DoctorError("squeue stopped answering while the jobs ran",
                                      hint=f"check the cluster (scontrol ping); the jobs are {self.job_name}; "
                                           "--resume picks up what finished")
            else:
                failures = 0
                by_id = {s.job_id: s for s in states}
                # An array's pending tasks may still be listed together ("4711_[1-3]").
                pending_arrays = {s.job_id.split("_")[0]: s for s in states if "[" in s.job_id}
                for task in live:
                    state = by_id.get(task.job_id) or pending_arrays.get(task.array_id)
                    if state is not None:
                        self._update(task, state, sink)
                    else:
                        self._ended(task, sink)
            time.sleep(self.poll_s)

    def _update(self, task: _Task, state: slurm.JobState, sink: RunSink) -> None:
        if (state.state, state.reason, state.node) == (task.state, task.reason, task.node):
            return
        task.state, task.reason, task.node = state.state, state.reason, state.node or task.node
        if state.state == "PENDING":
            text = f"pending in Slurm ({state.reason or 'queued'})"
        elif state.state == "RUNNING":
            text = f"running on {task.node}"
        else:
            text = state.state.lower()
        sink.note(f"{task.group}: job {task.job_id} {text}")
        for spec in task.specs:
            if spec.label in task.recorded:
                continue
            if state.state == "RUNNING":
                sink.event({"event": "placed", "run": spec.label, "where": f"{task.node} (job {task.job_id})"})
            sink.event({"event": "log", "run": spec.label, "message": f"job {task.job_id}: {text}"})

    def _ended(self, task: _Task, sink: RunSink) -> None:
        """The job left the queue: how it ended (scontrol, else its own files), and its last runs."""
        final = next((s for s in slurm.shown(task.array_id) if s.job_id == task.job_id), None)
        self._read_progress(task, sink)
        if final is not None and not final.active:
            state = final.state
            task.node = task.node or final.node
        elif task.own_end == "end":
            state = "COMPLETED"
        elif final is not None:
            return  # still finishing (COMPLETING) as scontrol sees it: ask again
        else:
            state = slurm.LOST_STATE
        task.ended = state
        missing = [s for s in task.specs if s.label not in task.recorded]
        where = f" on {task.node}" if task.node else ""
        sink.note(f"{task.group}: job {task.job_id} {'done' if not missing else 'ended ' + state}{where}")
        if not missing:
            return
        kind = slurm.failure_kind(state)
        tail = _tail(task.directory / "slurm.out")
        for spec in missing:
            record = base_run_record(spec, "gpu:0" if self.options.gpu else "cpu")
            record.update(status="failed", failure_kind=kind,
                          error=(f"Slurm job {task.job_id} ended {state}{where} before this run finished"
                                 + (f": {task.error}" if task.error else "") + "; --resume runs it again"),
                          engine={"kind": "slurm", "runtime": task.runtime, "job_id": task.job_id,
                                  **({"node": task.node, "name": task.node} if task.node else {})})
            stamp_engine(record, task.node or "slurm", f"slurm {task.node or task.job_id}", slurm_rerun(spec.stack))
            if tail:
                record["log_tail"] = tail
            sink.finish_run(record)
            task.recorded.add(spec.label)

    def _read_progress(self, task: _Task, sink: RunSink) -> None:
        path = task.directory / PROGRESS_FILE
        try:
            with open(path, "rb") as handle:
                handle.seek(task.offset)
                data = handle.read()
        except OSError:
            return
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits for the next read
        task.offset += len(complete)
        for raw in complete.decode("utf-8", "replace").splitlines():
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict):
                self._take(task, entry, sink)

    def _take(self, task: _Task, entry: dict[str, Any], sink: RunSink) -> None:
        kind = entry.get("kind")
        if kind == "job":
            task.node = str(entry.get("node") or task.node)
            gpus = entry.get("gpus") or []
            if self.options.gpu and not gpus:
                why = entry.get("nvml_error") or "none of its GPUs matched"
                sink.note(f"{task.group}: job {task.job_id} on {task.node}: NVML names no GPU of the job ({why})")
        elif kind == "event" and isinstance(entry.get("event"), dict):
            sink.event({**entry["event"], "run": entry.get("run", "")})
        elif kind == "record" and isinstance(entry.get("record"), dict):
            record = entry["record"]
            label = " / ".join(str(record.get(k, "original")) for k in ("stack", "precision", "variant"))
            if label not in task.recorded:
                task.recorded.add(label)
                sink.finish_run(record)
        elif kind in ("note", "log"):
            sink.note(f"{task.group}: {entry.get('message', entry.get('line', ''))}")
        elif kind == "runtime":
            task.runtime = str(entry.get("runtime") or task.runtime)
            sink.note(f"{task.group}: job {task.job_id} runs {entry.get('image')} with {task.runtime}")
        elif kind == "error":
            task.error = str(entry.get("error") or "")
            sink.note(f"{task.group}: job {task.job_id}: {task.error}")
        elif kind == "signal":
            task.own_end = str(entry.get("signal") or "signal")
        elif kind == "end":
            task.own_end = "end"


def _pinned_node(group: list[RunSpec], runs: Iterable[dict[str, Any]]) -> str | None:
    """The node a group's measured runs used (--resume), or, for an experiment, its original group's:
    the missing cells go there, so the comparison stays on one machine."""
    spec = group[0]
    variants = (spec.variant, "original") if spec.experiment is not None else (spec.variant,)
    runs = list(runs)
    for variant in variants:
        for run in map(Run.of, runs):
            if (run.ok and run.stack == spec.stack and run.variant == variant and run.engine.get("kind") == "slurm"
                    and run.engine.get("node")):
                return str(run.engine["node"])
    return None


def _job_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in PASS_ENV or k.startswith(PASS_ENV_PREFIXES)}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("LANG", "C.UTF-8")
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    return env


def _tail(path: Path) -> list[str]:
    """The job's output's last lines, as every engine's failed run keeps them (`log_tail`)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return log_tail(text, LOG_TAIL_LINES)
