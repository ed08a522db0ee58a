"""Runs on a Slurm node, inside one job (array task): one comparison group's cells, in order, on the
node's own Python, through the host engine. `python -m fp16doctor.engines.slurm.job TASK_DIR`.

The task folder (on the shared filesystem) holds `group.json`, written by fp16doctor on the login node.
The job appends what happens to `progress.jsonl`, one JSON object a line, which fp16doctor reads back:
  {"kind": "job", "job_id": "4711_0", "node": "gpu-03", "gpus": [...]}    the job started here
  {"kind": "start", "run": LABEL}  {"kind": "event", "run": LABEL, "event": {...}}
  {"kind": "record", "record": {...}}                                      a run finished
  {"kind": "signal", "signal": "SIGTERM"}  {"kind": "end"}                  how the job ended
so the runs survive the job, and its end is known even where job accounting is off and scontrol has
forgotten the job (MinJobAge).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from fp16doctor.engines.base import EventCallback, stamp_engine
from fp16doctor.engines.host import HostEngine
from fp16doctor.engines.slurm import runtimes
from fp16doctor.engines.slurm import tools as slurm
from fp16doctor.engines.spec import RunSpec, comparison_groups, host_rerun, is_host_stack, spec_from_dict
from fp16doctor.errors import DoctorError
from fp16doctor.workload.protocol import SCRATCH_ENV

GROUP_FILE = "group.json"
PROGRESS_FILE = "progress.jsonl"
SIGNAL_GRACE_S = 3.0


def slurm_rerun(stack: str) -> list[str]:
    """The diagnose options that run a configuration on the cluster again (the invocation's own --partition, --gres
    and the like are kept from its command line by the analysis)."""
    return ["--slurm"] + (host_rerun(stack) if is_host_stack(stack) else ["--stack", stack, "--no-host"])


def job_id_from_env(env: dict[str, str]) -> str:
    """"4711_3" for an array task, else "4711"."""
    array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return env.get("SLURM_JOB_ID", "")


def allocated_gpus(gpus: list[dict[str, Any]], env: dict[str, str]) -> list[dict[str, Any]]:
    """The NVML GPUs Slurm gave this job. CUDA_VISIBLE_DEVICES names them by UUID where the cluster does
    (matched by UUID); where devices are constrained NVML sees only the job's; else SLURM_JOB_GPUS (or
    CUDA_VISIBLE_DEVICES) holds their indices."""
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if any(v.startswith(("GPU-", "MIG-")) for v in visible):
        return [g for g in gpus if g.get("uuid") in visible]
    if visible and len(gpus) == len(visible):
        return list(gpus)
    wanted = [v.strip() for v in (env.get("SLURM_JOB_GPUS") or env.get("CUDA_VISIBLE_DEVICES") or "").split(",")
              if v.strip().isdigit()]
    return [g for g in gpus if str(g.get("index")) in wanted]


def granted_gpu_ids(gpus: list[dict[str, Any]], env: dict[str, str]) -> list[str]:
    """The GPUs Slurm granted this job as a container runtime names them: NVML's UUIDs where it found the
    job's GPUs, else Slurm's own indices (SLURM_JOB_GPUS, or CUDA_VISIBLE_DEVICES)."""
    if gpus:
        return [str(g.get("uuid") or g.get("index")) for g in gpus]
    listed = env.get("SLURM_JOB_GPUS") or env.get("CUDA_VISIBLE_DEVICES") or ""
    return [part.strip() for part in listed.split(",") if part.strip()]


class FileSink:
    """The engine's RunSink on the node: every event and record goes to progress.jsonl at once."""

    def __init__(self, path: Path, engine_fields: dict[str, Any], machine: str) -> None:
        self.path = path
        self.engine_fields = engine_fields
        self.machine = machine
        self.records: list[dict[str, Any]] = []
        self.current = ""
        self.lock = threading.Lock()

    def write(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, default=str) + "\n"
        with self.lock, open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())  # the login node reads it over the shared filesystem

    def runs(self) -> list[dict[str, Any]]:
        return list(self.records)

    def note(self, message: str) -> None:
        self.write({"kind": "note", "message": message})

    def start_run(self, spec: RunSpec) -> None:
        self.current = spec.label
        self.write({"kind": "start", "run": spec.label, "reference_ms": spec.reference_ms})

    def event(self, event: dict[str, Any]) -> None:
        self.write({"kind": "event", "run": self.current, "event": event})

    def finish_run(self, record: dict[str, Any]) -> None:
        if record.get("status") == "failed" and isinstance(record.get("exit_code"), int) and record["exit_code"] < 0:
            # The workload was killed by a signal: when Slurm is ending the job (scancel, time limit,
            # preemption) the same signal reaches this process a moment later, and the run is the
            # job's loss (its Slurm state), not a failure of its own.
            time.sleep(SIGNAL_GRACE_S)
        engine = {**dict(record.get("engine") or {}), "runtime": "host", **self.engine_fields, "kind": "slurm"}
        if not str(record.get("device", "")).startswith("gpu"):
            engine = {k: v for k, v in engine.items() if not k.startswith("gpu_")}
        record["engine"] = engine
        stamp_engine(record, self.machine, f"slurm {self.machine}", slurm_rerun(str(record.get("stack"))))
        self.records.append(record)
        self.write({"kind": "record", "record": record})


def _gpu_fields(gpus: list[dict[str, Any]]) -> dict[str, Any]:
    if not gpus:
        return {}
    gpu = gpus[0]
    fields = {"gpu_index": gpu.get("index"), "gpu_name": gpu.get("name"), "gpu_uuid": gpu.get("uuid"),
              "gpu_compute_capability": gpu.get("compute_capability"),
              "gpu_driver_version": gpu.get("driver_version")}
    return {k: v for k, v in fields.items() if v is not None}


def _on_term(sink: FileSink, runtime: str | None = None, job_id: str = "") -> None:
    def handler(signum: int, _frame: FrameType | None) -> None:
        sink.write({"kind": "signal", "signal": signal.Signals(signum).name, "time": time.time()})
        if runtime is not None and job_id:
            # The container is the daemon's (or conmon's) child, not the job's: scancel would leave it running.
            try:
                removed = runtimes.remove_job_containers(runtime, job_id)
            except DoctorError:
                removed = []
            sink.write({"kind": "note", "message": f"removed container(s) {', '.join(removed)}"} if removed else
                       {"kind": "note", "message": "no container of this job was left"})
        raise SystemExit(128 + signum)  # the run loop stops the workload on its way out

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


class ContainerEngine(HostEngine):
    """The host engine's run loop with the workload in the stack's container (engines/slurm/runtimes.py): the
    runtime's CLI is the child process, the container's stdout its stdout; the run's scratch folder and
    the data cache are bound at the same paths inside."""

    def __init__(self, plan: runtimes.ContainerPlan, runtime: str, job_id: str, gpus: list[str],
                 digest: str | None, cache_dir: Path | None, keep_profiles: Path | None,
                 gpu_index: int | None) -> None:
        super().__init__(python=runtimes.tool(runtime), cache_dir=cache_dir, backend=plan.keras_backend,
                         keep_profiles=keep_profiles, gpu_index=gpu_index)
        self.plan = plan
        self.runtime = runtime
        self.job_id = job_id
        self.gpus = gpus
        self.digest = digest
        self.container = ""

    def command(self, spec: RunSpec, scratch: Path | None = None, profile_dir: Path | None = None) -> list[str]:
        if spec.script is not None or scratch is None:
            raise DoctorError("a script run does not go into a stack's container on Slurm yet",
                              hint="drop --stack, or --slurm")
        args = [*spec.workload_args(), "--cache-dir", str(self.cache_dir), "--backend", self.plan.keras_backend]
        if profile_dir is not None:
            args += ["--profile-dir", str(profile_dir)]
        env = {"KERAS_BACKEND": self.plan.keras_backend, "PYTHONUNBUFFERED": "1", SCRATCH_ENV: str(scratch),
               "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"), **spec.extra_env}
        self.container = f"fp16doctor-{self.job_id}-{spec.slug}".replace("/", "_")
        return runtimes.run_command(self.plan, self.runtime, name=self.container, job_id=self.job_id, env=env,
                                    binds=[str(scratch), str(self.cache_dir)], args=args, gpus=self.gpus,
                                    user=runtimes.current_user())

    def run(self, spec: RunSpec, on_event: EventCallback, gpu_index: int | None = None) -> dict[str, Any]:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        try:
            record = super().run(spec, on_event, gpu_index)
        finally:
            # A run stopped by its watchdog killed the runtime's CLI, not the container it started.
            runtimes.remove_job_containers(self.runtime, self.job_id)
        engine = {k: v for k, v in dict(record.get("engine") or {}).items() if k != "python"}
        record["engine"] = {**engine, "runtime": self.runtime, "image": self.plan.image,
                            "image_digest": self.digest, "container": self.container}
        return record


def _active_jobs(ids: list[str]) -> set[str] | None:
    """Which of these job ids ("4711" or "4711_3") Slurm still lists (None: squeue did not answer)."""
    try:
        states = slurm.queued({i.split("_")[0] for i in ids})
    except DoctorError:
        return None
    return None if states is None else {s.job_id for s in states}


def _container_engine(group: dict[str, Any], sink: FileSink, job_id: str, gpus: list[dict[str, Any]],
                      fields: dict[str, Any]) -> ContainerEngine | None:
    """The stack's image made runnable on this node and the engine that runs its cells; None (said in the
    progress file, so every cell fails with the reason) when the node cannot."""
    plan = runtimes.ContainerPlan.from_dict(group["container"])
    runtime = plan.runtime or runtimes.detect()
    if runtime is None:
        sink.write({"kind": "error", "error": f"node {sink.machine} has none of {', '.join(runtimes.RUNTIMES)} "
                                              "on PATH to run the stack's container"})
        return None
    fields["runtime"] = runtime
    fields.pop("python", None)
    sink.write({"kind": "runtime", "runtime": runtime, "image": plan.image, "time": time.time()})
    _on_term(sink, runtime, job_id)
    stale = runtimes.sweep(runtime, _active_jobs)
    if stale:
        sink.note(f"removed container(s) left by ended jobs: {', '.join(stale)}")
    try:
        digest = runtimes.ensure_image(plan, runtime, lambda line: sink.write({"kind": "log", "line": line}))
    except DoctorError as exc:
        sink.write({"kind": "error", "error": f"{exc.message} ({exc.hint})" if exc.hint else exc.message})
        return None
    fields.update(image=plan.image, image_digest=digest)
    sink.write({"kind": "image", "image": plan.image, "digest": digest, "time": time.time()})
    keep = group.get("keep_profiles")
    return ContainerEngine(plan, runtime, job_id, granted_gpu_ids(gpus, dict(os.environ)) if plan.gpu else [], digest,
                           Path(group["cache_dir"]) if group.get("cache_dir") else None,
                           Path(keep) if keep else None, gpus[0].get("index") if gpus else None)


def main(argv: list[str]) -> int:
    task_dir = Path(argv[1])
    group = json.loads((task_dir / GROUP_FILE).read_text(encoding="utf-8"))
    env = dict(os.environ)
    node = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    job_id = job_id_from_env(env)
    gpus: list[dict[str, Any]] = []
    nvml_error: str | None = None
    if group.get("gpu"):
        from fp16doctor.probe.nvml import probe_gpus

        every, status = probe_gpus()
        gpus = allocated_gpus(every, env)
        nvml_error = status.get("error")
    fields: dict[str, Any] = {"job_id": job_id, "node": node, "name": node, "python": sys.executable,
                              **_gpu_fields(gpus)}
    sink = FileSink(task_dir / PROGRESS_FILE, fields, node)
    _on_term(sink)
    sink.write({"kind": "job", "job_id": job_id, "node": node, "gpus": gpus, "nvml_error": nvml_error,
                "python": sys.executable, "pid": os.getpid(), "time": time.time()})
    sampler = None
    if gpus:
        from fp16doctor.probe.nvml import UtilizationSampler

        sampler = UtilizationSampler
    specs = [spec_from_dict(s) for s in group["specs"]]
    if group.get("container"):
        container = _container_engine(group, sink, job_id, gpus, fields)
        if container is None:
            sink.write({"kind": "end", "time": time.time()})
            return 1
        container.run_groups(comparison_groups(specs), sink)
        sink.write({"kind": "end", "time": time.time()})
        return 0
    keep = group.get("keep_profiles")
    engine = HostEngine(python=sys.executable, backend=group.get("backend"), sampler=sampler,
                        cache_dir=Path(group["cache_dir"]) if group.get("cache_dir") else None,
                        keep_profiles=Path(keep) if keep else None,
                        gpu_index=gpus[0].get("index") if gpus else None)
    engine.run_groups(comparison_groups(specs), sink)
    sink.write({"kind": "end", "time": time.time()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
