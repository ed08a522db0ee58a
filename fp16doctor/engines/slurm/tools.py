"""The only module that talks to Slurm: sbatch, squeue, scontrol and scancel, their output parsed here.

Nothing here needs job accounting (slurmdbd): a job's state comes from squeue while it is queued or
running, and from `scontrol show job` for MinJobAge seconds after it ended; the job also writes its own
state to the working directory (engines/slurm/job.py), which covers the rest.
"""

from __future__ import annotations

import logging
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fp16doctor.engines.failures import last_line
from fp16doctor.errors import DoctorError

_log = logging.getLogger(__name__)

# States in which a job is still queued or on a node (squeue lists them); anything else is its end.
ACTIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
                           "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED",
                           "RESV_DEL_HOLD", "SPECIAL_EXIT"})
# Ends that lose the runs still to come: their Slurm state becomes the runs' failure_kind.
FAILED_STATES = frozenset({"CANCELLED", "NODE_FAIL", "TIMEOUT", "PREEMPTED", "FAILED", "OUT_OF_MEMORY",
                           "BOOT_FAIL", "DEADLINE"})
# Neither squeue nor scontrol knows the job any more and it wrote no end of its own.
LOST_STATE = "LOST"
# Paths that are one node's own: a job on another node would not see what fp16doctor writes there.
NODE_LOCAL_PREFIXES = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/scratch/local", "/local")
NODE_LOCAL_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "overlay"})
COMMAND_TIMEOUT_S = 60.0
TOOLS = ("sbatch", "squeue", "scontrol", "scancel")


@dataclass(frozen=True)
class JobState:
    """One job (or array task) as Slurm reports it."""

    job_id: str  # "4711" or "4711_3"
    state: str  # PENDING, RUNNING, COMPLETED, CANCELLED, ...
    reason: str = ""  # why it is pending (Resources, Priority, ...), "None" when there is none
    node: str = ""
    exit_code: str = ""  # scontrol's ExitCode, "0:15"

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


# ------------------------------------------------------------------------------------------- parsing

SQUEUE_FORMAT = "%i|%T|%r|%N"


def parse_squeue(text: str) -> list[JobState]:
    """`squeue --noheader --array --format='%i|%T|%r|%N'` lines -> job states."""
    states: list[JobState] = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2 or not parts[0]:
            continue
        reason = parts[2] if len(parts) > 2 else ""
        node = parts[3] if len(parts) > 3 else ""
        states.append(JobState(parts[0], parts[1].split()[0], "" if reason in ("None", "(null)") else reason,
                               "" if node in ("(null)", "None") else node))
    return states


_FIELD = re.compile(r"(\w[\w/:]*)=(\S*)")


def parse_scontrol_jobs(text: str) -> list[JobState]:
    """`scontrol show job -o ID` (one line per job or array task) -> job states. An array task is
    named ArrayJobId_ArrayTaskId, as sbatch and squeue name it."""
    states: list[JobState] = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        if "JobId" not in fields or "JobState" not in fields:
            continue
        array, tasks = fields.get("ArrayJobId"), _task_ids(fields.get("ArrayTaskId", ""))
        ids = [f"{array}_{task}" for task in tasks] if array and tasks else [fields["JobId"]]
        reason = fields.get("Reason", "")
        node = fields.get("NodeList", "")
        states += [JobState(job_id, fields["JobState"], "" if reason == "None" else reason,
                            "" if node == "(null)" else node, fields.get("ExitCode", "")) for job_id in ids]
    return states


def _task_ids(text: str) -> list[int]:
    """An array's task ids as scontrol writes them: "3", or still pending together "0-3,7%2"."""
    ids: list[int] = []
    for part in text.split("%")[0].split(","):
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            ids += range(int(low), int(high or low) + 1)
    return ids


def parse_min_job_age_s(text: str) -> float | None:
    """`scontrol show config` -> MinJobAge in seconds (how long a finished job stays in scontrol)."""
    found = re.search(r"^MinJobAge\s*=\s*(\d+)", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def failure_kind(state: str) -> str:
    """The failure_kind of the runs a job lost, from the state it ended in: Slurm's own word
    (CANCELLED, NODE_FAIL, TIMEOUT, PREEMPTED, ...). A job that completed without its runs failed."""
    state = state.split()[0] if state else LOST_STATE
    return "FAILED" if state == "COMPLETED" else state


# --------------------------------------------------------------------------------------- job script


def job_script(*, python: str, runner_module: str, lib_dir: Path, batch_dir: Path, env: Mapping[str, str],
               exclusive: bool, version: str) -> str:
    """The batch script of one array: each task runs one comparison group's cells, in order, with the
    node's own Python. Defaults go in #SBATCH lines, so SBATCH_* variables and the command line
    override them; the job starts from an empty environment (--export=NONE) plus what the run needs."""
    directives = ["--export=NONE", "--no-requeue", "--nodes=1", "--ntasks=1"]
    if exclusive:
        directives.append("--exclusive")  # a CPU timing shares its cores with nobody
    exports = {"PYTHONPATH": str(lib_dir), "PYTHONUNBUFFERED": "1", **env}
    lines = ["#!/bin/bash",
             *(f"#SBATCH {d}" for d in directives),
             f"# fp16doctor {version}: one comparison group (machine x stack x setting) per array task.",
             "set -eu",
             *(f"export {name}={shlex.quote(value)}" for name, value in exports.items()),
             f"exec {shlex.quote(python)} -m {runner_module} "
             f"{shlex.quote(str(batch_dir))}/\"${{SLURM_ARRAY_TASK_ID:-0}}\"",
             ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ commands


def require_tools() -> None:
    """DoctorError unless sbatch, squeue, scontrol and scancel are on PATH."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise DoctorError(f"--slurm needs {', '.join(missing)} on PATH, and this machine has none of them"
                          if len(missing) == len(TOOLS) else f"--slurm needs {', '.join(missing)} on PATH",
                          hint="run fp16doctor on a login node of the cluster (where sbatch works), "
                               "or load the Slurm module first (module load slurm)")


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except FileNotFoundError as exc:
        raise DoctorError(f"{args[0]} is not on PATH", hint="load the Slurm module (module load slurm)") from exc
    except subprocess.TimeoutExpired as exc:
        raise DoctorError(f"{args[0]} did not answer within {COMMAND_TIMEOUT_S:.0f} s",
                          hint="check that slurmctld is up (scontrol ping)") from exc


def submit(script: Path, args: Iterable[str]) -> str:
    """sbatch the script; returns the job id ("4711"; an array's tasks are 4711_0, 4711_1, ...)."""
    argv = ["sbatch", "--parsable", *args, str(script)]
    proc = _run(argv)
    _log.info("%s: exit %d, %s", shlex.join(argv), proc.returncode, last_line(proc.stdout or proc.stderr))
    if proc.returncode != 0:
        raise DoctorError(f"sbatch refused the job: {last_line(proc.stderr or proc.stdout)}",
                          hint="check --partition, --gres, --account, --qos and --time against `sinfo` "
                               "and `sacctmgr show assoc` (or pass what the cluster needs with --slurm-arg)")
    job_id = proc.stdout.strip().splitlines()[-1].split(";")[0] if proc.stdout.strip() else ""
    if not job_id.isdigit():
        raise DoctorError(f"sbatch answered {proc.stdout.strip()!r}, not a job id",
                          hint="run the job script by hand with sbatch to see why")
    return job_id


def queued(job_ids: Iterable[str]) -> list[JobState] | None:
    """The jobs (array tasks expanded) that squeue still lists; None when squeue did not answer."""
    ids = sorted(set(job_ids))
    if not ids:
        return []
    proc = _run(["squeue", "--noheader", "--array", f"--jobs={','.join(ids)}", f"--format={SQUEUE_FORMAT}"])
    if proc.returncode != 0:
        # Every id already left the queue: squeue says so instead of printing nothing.
        return [] if "Invalid job id" in proc.stderr else None
    return parse_squeue(proc.stdout)


def named(name: str) -> list[str]:
    """Ids of the queued jobs with this name (an invocation's jobs, should one id have gone unrecorded)."""
    proc = _run(["squeue", "--noheader", f"--name={name}", "--format=%A"])
    return [line.strip() for line in proc.stdout.splitlines() if line.strip().isdigit()]


def shown(job_id: str) -> list[JobState]:
    """What scontrol still knows of a job (an array: every task); [] once it is past MinJobAge."""
    proc = _run(["scontrol", "show", "job", "-o", job_id])
    return parse_scontrol_jobs(proc.stdout) if proc.returncode == 0 else []


def min_job_age_s() -> float | None:
    proc = _run(["scontrol", "show", "config"])
    return parse_min_job_age_s(proc.stdout) if proc.returncode == 0 else None


def cancel(job_ids: Iterable[str]) -> None:
    """scancel these jobs by id (an array id cancels all its tasks); nobody else's."""
    ids = sorted(set(job_ids))
    if ids:
        _run(["scancel", *ids])


# ------------------------------------------------------------------------------------ working folder


@dataclass(frozen=True)
class Mount:
    point: str
    fstype: str


def _mounts(text: str) -> list[Mount]:
    found: list[Mount] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            found.append(Mount(parts[1].replace("\\040", " "), parts[2]))
    return found


def node_local_reason(path: Path, mounts_text: str | None = None) -> str | None:
    """Why `path` looks like one node's own disk (a job elsewhere would not see it), or None."""
    resolved = str(path.resolve())
    if mounts_text is None:
        try:
            mounts_text = Path("/proc/mounts").read_text(encoding="utf-8")
        except OSError:
            mounts_text = ""
    holding = [m for m in _mounts(mounts_text)
               if resolved == m.point or resolved.startswith(m.point.rstrip("/") + "/")]
    best = max(holding, key=lambda m: len(m.point), default=None)
    if best is not None and best.fstype in NODE_LOCAL_FILESYSTEMS:
        return f"it is on {best.fstype} ({best.point})"
    prefix = next((p for p in NODE_LOCAL_PREFIXES if resolved == p or resolved.startswith(p + "/")), None)
    if prefix is not None:
        return f"it is under {prefix}"
    return None
