"""Runs on a Slurm node, inside one job (array task): one comparison group's cells, in order, on the
node's own Python, through the host engine. `python -m fp16doctor.engines.slurm_job TASK_DIR`.

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

from fp16doctor.engines.base import RunSpec, comparison_groups, spec_from_dict
from fp16doctor.engines.host import HostEngine

GROUP_FILE = "group.json"
PROGRESS_FILE = "progress.jsonl"
SIGNAL_GRACE_S = 3.0


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
        engine = {**dict(record.get("engine") or {}), **self.engine_fields, "kind": "slurm", "runtime": "host"}
        if not str(record.get("device", "")).startswith("gpu"):
            engine = {k: v for k, v in engine.items() if not k.startswith("gpu_")}
        record["engine"] = engine
        record["machine"] = self.machine
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


def _on_term(sink: FileSink) -> None:
    def handler(signum: int, _frame: FrameType | None) -> None:
        sink.write({"kind": "signal", "signal": signal.Signals(signum).name, "time": time.time()})
        raise SystemExit(128 + signum)  # the run loop stops the workload on its way out

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


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
    keep = group.get("keep_profiles")
    engine = HostEngine(python=sys.executable, backend=group.get("backend"), sampler=sampler,
                        cache_dir=Path(group["cache_dir"]) if group.get("cache_dir") else None,
                        keep_profiles=Path(keep) if keep else None,
                        gpu_index=gpus[0].get("index") if gpus else None)
    specs = [spec_from_dict(s) for s in group["specs"]]
    engine.run_groups(comparison_groups(specs), sink)
    sink.write({"kind": "end", "time": time.time()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
