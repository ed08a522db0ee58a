"""Container runtimes on a Slurm node: the only module that writes docker, podman, apptainer, enroot and
srun-with-pyxis command lines. A stack's run in a Slurm job (engines/slurm/job.py) goes through here.

How the stack's image reaches the node, per runtime:
- docker, podman: built on the node from the build context fp16doctor staged in the working folder
  (the same context a Docker engine is streamed, so the same tag), skipped when the node has it; or
  pulled from the registry the user named (`--registry`).
- apptainer: converted once into the shared image folder as a SIF (`apptainer build`), from the
  registry's reference, or from the image a node's Docker built; every later job reuses the file.
- pyxis: the same with an Enroot squashfs (`enroot import`), run by `srun --container-image`.
A conversion holds a lock file beside its target, so two jobs never convert the same image at once.

A docker or podman container is not a child of the job (the daemon, or conmon, runs it), so scancel
does not stop it where cgroups are off: every container carries the job's id as a label, the job
removes its own on SIGTERM, and `sweep` removes those whose job is no longer queued. Apptainer's and
Pyxis's containers are processes of the job (a job step for Pyxis) and end with it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fp16doctor.engines.failures import last_line
from fp16doctor.errors import DoctorError

RUNTIMES = ("docker", "podman", "apptainer", "pyxis")
# The order a node's runtime is detected in: a daemon first (its images persist on the node), then
# the rootless and the file-based ones.
DETECT_ORDER = RUNTIMES
# Labels every container started from a job carries (the Docker engine's managed label, shared).
MANAGED_LABEL = "org.fp16doctor.managed"
JOB_LABEL = "org.fp16doctor.slurm-job"
# Whose job it was: the sweep judges only its own user's containers. Where Slurm hides other users' jobs
# (PrivateData=jobs), squeue would call another user's live job ended.
USER_LABEL = "org.fp16doctor.slurm-user"
STACK_LABEL = "org.fp16doctor.stack"
WORKLOAD_DIR = "/opt/fp16doctor/workload"
# The Dockerfile writes fp16doctor-python, the stack's own interpreter.
WORKLOAD_COMMAND = ("fp16doctor-python", f"{WORKLOAD_DIR}/run_workload.py")
IMAGE_SUFFIX = {"apptainer": ".sif", "pyxis": ".sqsh"}
COMMAND_TIMEOUT_S = 120.0
# An image build or conversion may download gigabytes (a CUDA base, TensorFlow's wheels).
BUILD_TIMEOUT_S = 3600.0

Log = Callable[[str], None]
Which = Callable[[str], str | None]


def tool(runtime: str) -> str:
    """The executable a runtime is driven by (pyxis: srun, with the plugin; enroot converts)."""
    return {"pyxis": "srun"}.get(runtime, runtime)


def _has_pyxis(which: Which) -> bool:
    """srun knows --container-image only where the pyxis plugin is loaded (plugstack.conf)."""
    srun = which("srun")
    if srun is None:
        return False
    try:
        proc = subprocess.run([srun, "--help"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--container-image" in proc.stdout


def available(runtime: str, which: Which = shutil.which) -> bool:
    """Whether this machine can run containers with `runtime` (its tool on PATH)."""
    if runtime == "pyxis":
        return _has_pyxis(which)
    if runtime == "apptainer":
        return which("apptainer") is not None
    return which(runtime) is not None


def require(runtime: str, which: Which = shutil.which) -> None:
    """DoctorError unless `runtime` is one fp16doctor knows and can drive from here."""
    if runtime not in RUNTIMES:
        raise DoctorError(f"unknown --runtime {runtime!r}", hint=f"use one of: {', '.join(RUNTIMES)}")
    if available(runtime, which):
        return
    needs = {"pyxis": "srun with the pyxis plugin (srun --container-image)"}.get(runtime, runtime)
    raise DoctorError(f"--runtime {runtime} needs {needs} on PATH, and this machine has none",
                      hint="run fp16doctor where the nodes' runtime is installed (module load "
                           f"{tool(runtime) if runtime != 'pyxis' else 'enroot'}), or leave --runtime out and "
                           "each job uses the runtime its node has")


def detect(which: Which = shutil.which) -> str | None:
    """The runtime this node has, in DETECT_ORDER; None when it has none."""
    return next((r for r in DETECT_ORDER if available(r, which)), None)


@dataclass(frozen=True)
class ContainerPlan:
    """How one stack's runs go into containers on the nodes (written to each job's group.json)."""

    stack: str
    image: str  # fp16doctor/<stack>:<context hash>, the tag every engine gives this context
    context_dir: str  # the build context, unpacked in the working folder (docker, podman build from it)
    image_dir: str  # the shared folder converted images (SIF, squashfs) are kept in and reused from
    runtime: str | None = None  # None: the node's own (detect)
    registry: str | None = None  # pull <registry>/<image> instead of building
    gpu: bool = False
    keras_backend: str = "tensorflow"
    build_args: tuple[tuple[str, str], ...] = ()  # the Dockerfile's build args for this stack (engines/context.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContainerPlan:
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        fields["build_args"] = tuple((str(k), str(v)) for k, v in fields.get("build_args") or ())
        return cls(**fields)

    @property
    def reference(self) -> str | None:
        """The image's registry reference, when the nodes pull it."""
        return f"{self.registry.rstrip('/')}/{self.image}" if self.registry else None

    def image_file(self, runtime: str) -> Path:
        """Where apptainer's SIF or Enroot's squashfs of this image is kept (one per context hash)."""
        name = self.image.replace("/", "+").replace(":", "+")
        return Path(self.image_dir) / f"{name}{IMAGE_SUFFIX[runtime]}"


# ----------------------------------------------------------------------------------- command lines


def inspect_command(runtime: str, image: str) -> list[str]:
    """Prints the image's id (its digest: sha256 of its config) when the node has it; fails otherwise."""
    return [runtime, "image", "inspect", "--format", "{{.Id}}", image]


def prepare_commands(plan: ContainerPlan, runtime: str, have_docker_image: bool = False) -> list[list[str]]:
    """What makes the image runnable on this node, in order (nothing when it is already there):
    docker / podman build from the staged context or pull; apptainer / enroot convert once into the
    shared folder (from the registry, else from the image the node's Docker has)."""
    ref = plan.reference
    if runtime in ("docker", "podman"):
        if ref:
            return [[runtime, "pull", ref], [runtime, "tag", ref, plan.image]]
        build_args = [part for key, value in plan.build_args for part in ("--build-arg", f"{key}={value}")]
        return [[runtime, "build", "--tag", plan.image, *build_args, "--label", f"{MANAGED_LABEL}=true",
                 "--label", f"{STACK_LABEL}={plan.stack}", plan.context_dir]]
    target = plan.image_file(runtime)
    partial = f"{target}.partial"
    if runtime == "apptainer":
        source = f"docker://{ref}" if ref else f"docker-daemon://{plan.image}"
        build = ["apptainer", "build", "--force", partial, source]
    elif runtime == "pyxis":
        source = f"docker://{ref.replace('/', '#', 1)}" if ref and "/" in ref else (
            f"docker://{ref}" if ref else f"dockerd://{plan.image}")
        build = ["enroot", "import", "--output", partial, source]
    else:
        raise DoctorError(f"unknown runtime {runtime!r}", hint=f"use one of: {', '.join(RUNTIMES)}")
    if not ref and not have_docker_image:
        # No registry: the node's Docker builds the image first, then it is converted from there.
        return [*prepare_commands(plan, "docker"), build, ["mv", "-f", partial, str(target)]]
    return [build, ["mv", "-f", partial, str(target)]]


def run_command(plan: ContainerPlan, runtime: str, *, name: str, job_id: str, env: Mapping[str, str],
                binds: Iterable[str], args: list[str], gpus: list[str], user: str | None = None) -> list[str]:
    """One run of the workload in the stack's container, its stdout on this process's stdout.

    `binds`: folders seen at the same path inside (the run's scratch, the data cache); `gpus`: the GPUs
    Slurm granted the job (UUIDs or indices), passed the runtime's way; `args`: the workload's arguments.
    """
    binds = list(dict.fromkeys(binds))
    if runtime in ("docker", "podman"):
        cmd = [runtime, "run", "--rm", "--name", name, "--label", f"{MANAGED_LABEL}=true",
               "--label", f"{JOB_LABEL}={job_id}", "--label", f"{USER_LABEL}={os.getuid()}",
               "--label", f"{STACK_LABEL}={plan.stack}", "--network", "none", "--shm-size", "1g"]
        if user:
            cmd += ["--user", user]
        for path in binds:
            cmd += ["--volume", f"{path}:{path}"]
        for key, value in env.items():
            cmd += ["--env", f"{key}={value}"]
        if gpus and runtime == "docker":
            # docker run --gpus '"device=GPU-a,GPU-b"': the quotes keep the comma inside the device list.
            cmd += ["--gpus", f'"device={",".join(gpus)}"']
        elif gpus:
            # Podman reaches GPUs through CDI (nvidia-ctk cdi generate): nvidia.com/gpu=<index or UUID>.
            for gpu in gpus:
                cmd += ["--device", f"nvidia.com/gpu={gpu}"]
        return [*cmd, plan.image, *args]
    if runtime == "apptainer":
        cmd = ["apptainer", "exec", "--cleanenv", "--no-home", "--containall", "--writable-tmpfs"]
        if binds:
            cmd += ["--bind", ",".join(binds)]
        for key, value in env.items():
            cmd += ["--env", f"{key}={value}"]
        if gpus:
            # --nv binds the driver; CUDA_VISIBLE_DEVICES (Slurm's, passed on) keeps the job's GPUs.
            cmd += ["--nv", "--env", f"CUDA_VISIBLE_DEVICES={','.join(gpus)}"]
        return [*cmd, str(plan.image_file(runtime)), *WORKLOAD_COMMAND, *args]
    if runtime == "pyxis":
        # A job step of its own: Slurm stops it with the job, and pyxis removes the unnamed container.
        # The step inherits the job's GPUs (enroot's NVIDIA hook mounts those Slurm granted).
        cmd = ["srun", "--ntasks=1", "--nodes=1", f"--container-image={plan.image_file(runtime)}",
               "--no-container-mount-home", "--container-remap-root", "--container-workdir=/opt/fp16doctor"]
        if binds:
            cmd.append("--container-mounts=" + ",".join(f"{p}:{p}" for p in binds))
        if env:
            cmd.append("--export=ALL," + ",".join(f"{k}={v}" for k, v in env.items()))
        return [*cmd, *WORKLOAD_COMMAND, *args]
    raise DoctorError(f"unknown runtime {runtime!r}", hint=f"use one of: {', '.join(RUNTIMES)}")


def list_command(runtime: str, job_id: str | None = None) -> list[str]:
    """This user's fp16doctor containers started from Slurm jobs (one job's, or all), as `<name> <job id>` lines."""
    label = f"{JOB_LABEL}={job_id}" if job_id else JOB_LABEL
    return [runtime, "ps", "--all", "--filter", f"label={label}", "--filter", f"label={USER_LABEL}={os.getuid()}",
            "--format",
            "{{.Names}} {{.Label \"" + JOB_LABEL + "\"}}" if runtime == "docker" else
            "{{.Names}} {{index .Labels \"" + JOB_LABEL + "\"}}"]


def remove_command(runtime: str, names: Iterable[str]) -> list[str]:
    return [runtime, "rm", "--force", *names]


# --------------------------------------------------------------------------------------- on the node


def _run(args: list[str], timeout_s: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError as exc:
        raise DoctorError(f"{args[0]} is not on this node's PATH", hint="install it, or pick another --runtime") \
            from exc
    except subprocess.TimeoutExpired as exc:
        raise DoctorError(f"{' '.join(args[:3])} did not finish within {timeout_s:.0f} s",
                          hint="see the job's slurm.out") from exc


def image_digest(plan: ContainerPlan, runtime: str) -> str | None:
    """The image's digest on this node: the id docker / podman give it (sha256 of its config), or the
    sha256 of the SIF / squashfs file (kept beside it, computed once)."""
    if runtime in ("docker", "podman"):
        proc = _run(inspect_command(runtime, plan.image))
        if proc.returncode != 0 or not proc.stdout.strip():
            return None
        digest = proc.stdout.strip().splitlines()[0]
        return digest if digest.startswith("sha256:") else f"sha256:{digest}"
    target = plan.image_file(runtime)
    sidecar = Path(f"{target}.sha256")
    try:
        return sidecar.read_text(encoding="utf-8").strip()
    except OSError:
        pass
    if not target.is_file():
        return None
    sha = hashlib.sha256()
    with open(target, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    digest = f"sha256:{sha.hexdigest()}"
    try:
        sidecar.write_text(digest + "\n", encoding="utf-8")
    except OSError:
        pass
    return digest


def ensure_image(plan: ContainerPlan, runtime: str, log: Log) -> str | None:
    """Make the stack's image runnable here (built, pulled or converted once); returns its digest.
    DoctorError, with the tool's last line, when that fails."""
    if runtime in ("docker", "podman"):
        if _run(inspect_command(runtime, plan.image)).returncode == 0:
            log(f"{plan.image} is already in {runtime} on this node")
            return image_digest(plan, runtime)
        commands = prepare_commands(plan, runtime)
    else:
        target = plan.image_file(runtime)
        Path(plan.image_dir).mkdir(parents=True, exist_ok=True)
        # One conversion per image for the whole cluster: the others wait on the lock, then reuse it.
        with open(f"{target}.lock", "w", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if target.is_file():
                log(f"reusing {target}")
                return image_digest(plan, runtime)
            have = (not plan.reference and shutil.which("docker") is not None
                    and _run(inspect_command("docker", plan.image)).returncode == 0)
            _run_all(prepare_commands(plan, runtime, have_docker_image=have), log)
            return image_digest(plan, runtime)
    _run_all(commands, log)
    return image_digest(plan, runtime)


def _run_all(commands: list[list[str]], log: Log) -> None:
    for command in commands:
        log("$ " + " ".join(command))
        proc = _run(command, BUILD_TIMEOUT_S)
        if proc.returncode != 0:
            raise DoctorError(f"{' '.join(command[:2])} failed: {last_line(proc.stderr or proc.stdout)}",
                              hint="see the job's slurm.out; --registry lets the nodes pull a pushed image instead")


def containers(runtime: str, job_id: str | None = None) -> dict[str, str]:
    """fp16doctor's containers from Slurm jobs on this node: name -> job id."""
    if runtime not in ("docker", "podman"):
        return {}
    proc = _run(list_command(runtime, job_id))
    found: dict[str, str] = {}
    for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
        name, _, job = line.strip().partition(" ")
        if name:
            found[name] = job.strip()
    return found


def remove_job_containers(runtime: str, job_id: str) -> list[str]:
    """Remove every container this job started (the job's SIGTERM trap, and after each run)."""
    names = sorted(containers(runtime, job_id))
    if names:
        _run(remove_command(runtime, names))
    return names


def sweep(runtime: str, active_jobs: Callable[[list[str]], set[str] | None]) -> list[str]:
    """Remove the containers whose job is no longer queued (a job killed before its trap ran).
    `active_jobs` answers which of these job ids Slurm still lists (None: it could not say: keep all)."""
    found = containers(runtime)
    if not found:
        return []
    active = active_jobs(sorted(set(found.values())))
    if active is None:
        return []
    stale = sorted(name for name, job in found.items() if job not in active)
    if stale:
        _run(remove_command(runtime, stale))
    return stale


def current_user() -> str | None:
    """uid:gid for docker / podman --user, so what a run writes stays the job user's; None for root."""
    return None if os.getuid() == 0 else f"{os.getuid()}:{os.getgid()}"
