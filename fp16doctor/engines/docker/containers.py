"""What fp16doctor's containers are, apart from the engine that runs them: their names and the owner they record,
what a script's container mounts, the profile copied out of one, an engine's answers read (nvidia-smi's CSV, its
timestamps). Pure, or the local filesystem only: the Docker SDK is engines/docker/sdk.py's alone."""

from __future__ import annotations

import io
import os
import re
import shutil
import socket
import tarfile
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from fp16doctor.engines.artifacts import WindowCapture, attach_ops, split_script_log
from fp16doctor.engines.labels import OWNER_HOST_LABEL, OWNER_PID_LABEL
from fp16doctor.engines.spec import SCRIPT_RUNNER, RunSpec, script_runner_args

# A stopped container whose owner cannot be asked (another machine, or a version without owner labels) is
# left by a dead run only once it has stayed created or exited this long: a live run keeps its container
# created for the instant before its start, and exited while its log and profile are copied out.
LEFTOVER_AFTER_S = 3600.0

WORKLOAD_DIR = "/opt/fp16doctor/workload"
# The Dockerfile writes fp16doctor-python, a wrapper for the stack's own interpreter (venv or system).
WORKLOAD_ENTRYPOINT = ["fp16doctor-python", f"{WORKLOAD_DIR}/run_workload.py"]
GPU_CAPABILITIES = ["gpu", "compute", "utility"]
DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
OUTPUT_TAIL_LINES = 200
# Where the workload records its profiled window inside the container; copied out before removal.
CONTAINER_PROFILE_DIR = "/tmp/fp16doctor-profile"


def short(exc: BaseException, width: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def container_name(spec: RunSpec, run_id: str) -> str:
    raw = f"fp16doctor-{run_id}-{spec.stack}-{spec.precision}-{spec.variant}-{uuid.uuid4().hex[:6]}"
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", raw)


def script_container_options(spec: RunSpec, scratch: str, user: str | None) -> dict[str, Any]:
    """How a container runs the user's script: the script's folder and the data folder read-only at the
    same paths as on this machine (so its own paths keep working), `scratch` writable as its working
    directory and log, and nothing else of the host. `user` ("uid:gid") keeps what the script writes
    removable by the user who ran fp16doctor."""
    script = spec.script
    assert script is not None
    volumes: dict[str, dict[str, str]] = {d: {"bind": d, "mode": "ro"} for d in script.read_only_dirs}
    volumes[scratch] = {"bind": scratch, "mode": "rw"}
    options: dict[str, Any] = {
        "entrypoint": ["fp16doctor-python", f"{WORKLOAD_DIR}/{SCRIPT_RUNNER}"],
        "command": script_runner_args(spec, f"{scratch}/work", f"{scratch}/{script.log_name(spec)}",
                                      CONTAINER_PROFILE_DIR),
        "volumes": volumes,
        "working_dir": scratch,
    }
    if user:
        options["user"] = user
    return options


def host_user() -> str | None:
    getuid, getgid = getattr(os, "getuid", None), getattr(os, "getgid", None)
    return f"{getuid()}:{getgid()}" if getuid and getgid else None


def keep_script_log(spec: RunSpec, scratch: str, record: dict[str, Any], capture: WindowCapture) -> None:
    script = spec.script
    assert script is not None
    source = os.path.join(scratch, script.log_name(spec))
    split_script_log(source, capture)  # oneDNN's window lines went to the script's log
    if script.log_dir and os.path.exists(source):
        target = os.path.join(script.log_dir, script.log_name(spec))
        try:
            shutil.copyfile(source, target)
        except OSError as exc:  # the run's result matters more than its log
            record.setdefault("notes", []).append(f"the script's log was not kept: {exc.strerror or exc}")
            return
        record["script_log"] = target


def device_for(spec_device: Any, gpu: dict[str, Any] | None) -> Any:
    """The workload sees its one GPU as gpu:0; the record names the host's index."""
    if gpu is not None and isinstance(spec_device, str) and spec_device.startswith("gpu"):
        return f"gpu:{gpu.get('index', 0)}"
    return spec_device


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def owner_alive(labels: dict[str, str]) -> bool | None:
    """Whether the fp16doctor that started a container still runs; None where it cannot be asked (a
    container of another machine, or without owner labels: older versions)."""
    pid = labels.get(OWNER_PID_LABEL, "")
    if labels.get(OWNER_HOST_LABEL) != socket.gethostname() or not pid.isdigit():
        return None
    return int(pid) == os.getpid() or process_alive(int(pid))


def orphaned(labels: dict[str, str]) -> bool:
    """Started by an fp16doctor on this machine whose process is gone. A container of another machine,
    or without owner labels (older versions), is never judged: its owner may be alive."""
    return owner_alive(labels) is False


DOCKER_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def docker_time(text: Any) -> float | None:
    """A Docker timestamp (RFC 3339, nanoseconds) in epoch seconds; None when absent or unset (year 1).
    Python 3.10's fromisoformat takes neither "Z" nor nine digits."""
    found = DOCKER_TIME.match(str(text or ""))
    if found is None or found.group(1).startswith("0001-"):
        return None
    whole, fraction, zone = found.groups()
    micros = (fraction or "")[:6].ljust(6, "0")
    return datetime.fromisoformat(f"{whole}.{micros}{'+00:00' if zone == 'Z' else zone}").timestamp()


def parse_gpu_csv(text: str, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    gpus: list[dict[str, Any]] = []
    for line in text.splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            continue
        row = dict(zip(fields, values, strict=True))
        gpu: dict[str, Any] = {"index": int(row["index"]) if row["index"].isdigit() else len(gpus),
                               "uuid": row["uuid"], "name": row["name"],
                               "driver_version": row["driver_version"]}
        if row["memory.total"].isdigit():
            gpu["memory_total_mib"] = int(row["memory.total"])
        if re.fullmatch(r"\d+\.\d+", row.get("compute_cap", "")):
            gpu["compute_capability"] = row["compute_cap"]
        gpus.append(gpu)
    return gpus


def attach_container_ops(record: dict[str, Any], capture: WindowCapture, archive: bytes | None,
                          error: str | None, keep_profile: Path | None) -> None:
    if not isinstance(record.get("profile"), dict):
        return
    with tempfile.TemporaryDirectory(prefix="fp16doctor-profile-") as tmp:
        local: Path | None = None
        if archive is not None:
            try:
                with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                    members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]  # no links, no devices
                    # The "data" filter (Python >= 3.10.12) also refuses absolute paths and "..".
                    safe: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                    tar.extractall(tmp, members=members, **safe)  # noqa: S202
                local = Path(tmp) / Path(CONTAINER_PROFILE_DIR).name
            except (tarfile.TarError, OSError) as exc:
                error = f"could not unpack the container's profile: {short(exc)}"
        attach_ops(record, capture, local, keep_profile)
    if error:
        record["ops_error"] = "; ".join(e for e in (error, record.get("ops_error")) if e)


@dataclass(frozen=True)
class EngineFacts:
    docker_host: str
    server_version: str
    os: str
    ncpu: int
    mem_total_mib: int
    runtimes: tuple[str, ...]
    nvidia_runtime: bool | None  # True: "nvidia" runtime registered; None: not confirmed either way
    name: str = ""  # the engine machine's host name (docker info Name)
    engine_id: str = ""  # the daemon's id (from its key file: daemons sharing /etc/docker share it)

    def to_dict(self) -> dict[str, Any]:
        return {"docker_host": self.docker_host, "server_version": self.server_version, "os": self.os,
                "ncpu": self.ncpu, "mem_total_mib": self.mem_total_mib, "runtimes": list(self.runtimes),
                "nvidia_runtime": self.nvidia_runtime, "name": self.name, "engine_id": self.engine_id}


def stream_lines(chunks: Iterator[bytes]) -> Iterator[str]:
    """Re-split a byte stream into text lines (chunks need not end on line boundaries)."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode("utf-8", "replace")
    if pending:
        yield pending.decode("utf-8", "replace")
