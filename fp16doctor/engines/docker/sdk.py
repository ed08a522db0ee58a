"""The only module that talks to the Docker SDK: engines, image builds, one container per run, cleanup.

Every engine is named by a docker_host string (unix://, tcp://, ssh:// URL, or a Docker context name;
None = the environment's default), so several engines can be driven at once: clients are cached per
docker_host and nothing here depends on the client's filesystem (build contexts travel as tar
streams, results come back through the container's stdout). Every image and container carries
fp16doctor labels, so leftovers can be found and removed.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import docker
import docker.context
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.types import DeviceRequest
from requests.exceptions import RequestException

from fp16doctor import __version__
from fp16doctor.engines.artifacts import ONEDNN_PREFIXES
from fp16doctor.engines.base import EventCallback, base_run_record
from fp16doctor.engines.docker.containers import (
    CONTAINER_PROFILE_DIR,
    DEFAULT_DOCKER_HOST,
    GPU_CAPABILITIES,
    LEFTOVER_AFTER_S,
    OUTPUT_TAIL_LINES,
    WORKLOAD_ENTRYPOINT,
    EngineFacts,
    attach_container_ops,
    container_name,
    device_for,
    docker_time,
    host_user,
    keep_script_log,
    orphaned,
    owner_alive,
    parse_gpu_csv,
    script_container_options,
    short,
    stream_lines,
)
from fp16doctor.engines.failures import classify, log_tail
from fp16doctor.engines.labels import (
    MANAGED_LABEL,
    OWNER_HOST_LABEL,
    OWNER_PID_LABEL,
    PRECISION_LABEL,
    RUN_ID_LABEL,
    STACK_LABEL,
    VARIANT_LABEL,
    VERSION_LABEL,
)
from fp16doctor.engines.runloop import Streamed, stream, to_record
from fp16doctor.engines.spec import RunSpec
from fp16doctor.errors import DoctorError
from fp16doctor.results import LOCAL_DOCKER_SCHEMES
from fp16doctor.stacks import StackSpec
from fp16doctor.workload.protocol import PROFILE_DIR_ENV

Log = Callable[[str], None]

_clients: dict[str | None, Any] = {}
_clients_lock = threading.Lock()  # guards the two dicts; never held while an engine is asked anything
_connect_locks: dict[str | None, threading.Lock] = {}  # one connection attempt per engine at a time
# Process-wide: a run id groups the containers of one fp16doctor invocation.
RUN_ID = uuid.uuid4().hex[:12]


def owner_labels() -> dict[str, str]:
    """This process as the owner of the containers it starts."""
    return {OWNER_HOST_LABEL: socket.gethostname(), OWNER_PID_LABEL: str(os.getpid())}


def engine_label(docker_host: str | None) -> str:
    """The engine as results.json names it: the URL or context given, else DOCKER_HOST, else the socket."""
    return docker_host or os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def _make_client(docker_host: str | None) -> Any:
    """A DockerClient for a URL, a context name, or (None) the environment. Tests replace this."""
    if docker_host is None:
        return docker.from_env()
    if "://" in docker_host:
        kwargs: dict[str, Any] = {}
        if docker_host.startswith("ssh://"):
            kwargs["use_ssh_client"] = True  # the system ssh client: keys, agents and config just work
        elif docker_host.startswith("tcp://"):
            tls = docker.utils.kwargs_from_env().get("tls")  # DOCKER_TLS_VERIFY / DOCKER_CERT_PATH
            if tls:
                kwargs["tls"] = tls
        return docker.DockerClient(base_url=docker_host, **kwargs)
    context = docker.context.ContextAPI.get_context(docker_host)
    if context is None:
        raise DoctorError(f"no Docker context named {docker_host!r}",
                          hint="pass a URL (unix://, tcp://, ssh://) or a name from `docker context ls`")
    return docker.DockerClient(base_url=context.Host, tls=context.TLSConfig or False)


def client_for(docker_host: str | None) -> Any:
    """The cached, reachable client for one engine; DoctorError when it does not answer."""
    with _clients_lock:
        client = _clients.get(docker_host)
        if client is not None:
            return client
        connect_lock = _connect_locks.setdefault(docker_host, threading.Lock())
    # An engine that does not answer may take a connection timeout to say so; the other engines'
    # workers must not wait for it.
    with connect_lock:
        with _clients_lock:
            client = _clients.get(docker_host)
        if client is not None:
            return client
        try:
            client = _make_client(docker_host)
            client.ping()
        except (DockerException, RequestException, OSError) as exc:
            raise DoctorError(
                f"cannot reach the Docker engine at {engine_label(docker_host)}: {short(exc)}",
                hint="start it (CI: `bash .ci/docker-up.sh`), or pass --docker-host with a reachable engine",
            ) from exc
        with _clients_lock:
            _clients[docker_host] = client
        return client


def forget_client(docker_host: str | None) -> None:
    """Drop a cached client (after the engine went away)."""
    with _clients_lock:
        client = _clients.pop(docker_host, None)
    if client is not None:
        try:
            client.close()
        except (DockerException, RequestException, OSError):
            pass


def engine_facts(docker_host: str | None) -> EngineFacts:
    """What the engine says about itself (for host["docker"] and the pre-flight check)."""
    client = client_for(docker_host)
    try:
        info = client.info()
    except (APIError, RequestException, OSError) as exc:
        forget_client(docker_host)
        raise DoctorError(f"cannot ask the Docker engine at {engine_label(docker_host)} what it is: {short(exc)}",
                          hint="check that the engine is running") from exc
    runtimes = tuple(sorted((info.get("Runtimes") or {}).keys()))
    # GPU requests also work through nvidia-container-toolkit's hook without a registered runtime,
    # so a missing "nvidia" runtime is "not confirmed", not "absent".
    nvidia = True if "nvidia" in runtimes else None
    return EngineFacts(
        docker_host=engine_label(docker_host),
        server_version=str(info.get("ServerVersion", "?")),
        os=str(info.get("OperatingSystem", "?")),
        ncpu=int(info.get("NCPU") or 0),
        mem_total_mib=int((info.get("MemTotal") or 0) // (1024 * 1024)),
        runtimes=runtimes,
        nvidia_runtime=nvidia,
        name=str(info.get("Name", "")),
        engine_id=str(info.get("ID", "")),
    )


# ---------------------------------------------------------------------------------------------- images


def image_id(docker_host: str | None, tag: str) -> str | None:
    """The image id behind a tag on this engine, or None."""
    client = client_for(docker_host)
    try:
        return str(client.images.get(tag).id)
    except ImageNotFound:
        return None
    except (APIError, RequestException, OSError) as exc:
        # Asked from stack-run worker threads, which expect DoctorError from an engine that went away.
        forget_client(docker_host)
        raise DoctorError(f"cannot look up {tag} on {engine_label(docker_host)}: {short(exc)}",
                          hint="check that the engine is running") from exc


def build_image(
    docker_host: str | None,
    context: IO[bytes],
    tag: str,
    build_args: dict[str, str],
    labels: dict[str, str],
    log: Log,
    nocache: bool = False,
    pull: bool = False,
) -> tuple[str, bool]:
    """Build from a tar stream (top-level Dockerfile inside), streaming progress lines to `log`.

    Returns (image id, cached) where cached means the engine reused every layer (same id as before).
    """
    client = client_for(docker_host)
    before = image_id(docker_host, tag)
    output: list[str] = []
    error: str | None = None
    built: str | None = None
    last_status = ""
    try:
        stream = client.api.build(fileobj=context, custom_context=True, tag=tag, buildargs=build_args,
                                  labels=labels, rm=True, forcerm=True, decode=True, nocache=nocache,
                                  pull=pull)
        for chunk in stream:
            if "stream" in chunk:
                for line in str(chunk["stream"]).splitlines():
                    if line.strip():
                        output.append(line)
                        log(line)
            elif "status" in chunk:  # base image pull progress: one line per layer state change
                status = f"{chunk.get('id', '')} {chunk['status']}".strip()
                if status != last_status and "progress" not in chunk:
                    log(status)
                    output.append(status)
                last_status = status
            elif "error" in chunk:
                error = str(chunk.get("error"))
                output.append(error)
            elif "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
                built = str(chunk["aux"]["ID"])
    except (APIError, RequestException, OSError) as exc:
        error = short(exc)
        output.append(error)
    if error is not None:
        failure = classify("\n".join(output))
        raise DoctorError(f"building {tag} failed: {failure.reason}",
                          hint="last build output: " + " | ".join(log_tail("\n".join(output), 6)))
    after = image_id(docker_host, tag) or built
    if after is None:
        raise DoctorError(f"building {tag} finished without an image", hint="see the build output above")
    return after, before == after


# ----------------------------------------------------------------------------------------- containers


def run_in_stack(
    spec: RunSpec,
    stack: StackSpec,
    docker_host: str | None,
    gpu: dict[str, Any] | None,
    on_event: EventCallback,
    *,
    image: str,
    run_id: str | None = None,
    timeout_s: float | None = None,
    log: Log | None = None,
    keep_profile: Path | None = None,
) -> dict[str, Any]:
    """Run the workload for one RunSpec in a fresh container of `stack` and return its run record.

    `gpu` is a host GPU dict (index, uuid, ...) to pin with a DeviceRequest, or None for the CPU.
    `image` is the stack's image on that engine (engines.build.ensure_image). The container is removed in every case,
    KeyboardInterrupt included; a failure becomes status "failed" with the classified reason and the
    log tail, never an exception (except DoctorError when the engine cannot be reached at all).
    """
    run_id = run_id or RUN_ID
    log = log or (lambda _line: None)
    client = client_for(docker_host)

    use_gpu = gpu is not None and stack.gpu
    # The profile folder goes by environment, so the command stays the spec's workload arguments.
    env = {"KERAS_BACKEND": stack.keras_backend, PROFILE_DIR_ENV: CONTAINER_PROFILE_DIR,
           **spec.extra_env}
    device_requests = None
    if use_gpu:
        assert gpu is not None
        device_id = str(gpu.get("uuid") or gpu.get("index", 0))
        device_requests = [DeviceRequest(device_ids=[device_id], capabilities=[GPU_CAPABILITIES])]
        # The NVIDIA runtime mounts only what these capabilities name; compute brings libcuda.
        env["NVIDIA_DRIVER_CAPABILITIES"] = "compute,utility"
        env["NVIDIA_VISIBLE_DEVICES"] = device_id
    elif stack.gpu:
        # CUDA base images set NVIDIA_VISIBLE_DEVICES=all; where nvidia is the default runtime that
        # would hand every GPU to a run meant for the CPU.
        env["NVIDIA_VISIBLE_DEVICES"] = "void"
    record = base_run_record(spec, f"gpu:{gpu.get('index', 0)}" if use_gpu and gpu else "cpu")
    scratch: str | None = None
    create_args: dict[str, Any] = {"entrypoint": WORKLOAD_ENTRYPOINT, "command": spec.workload_args()}
    if spec.script is not None:
        if not engine_label(docker_host).startswith(LOCAL_DOCKER_SCHEMES):
            # Bind mounts name the engine machine's paths: the script's folder is only here.
            record.update(status="failed", failure_kind="remote_engine",
                          error=f"a script run needs a Docker engine on this machine (the script's folder is "
                                f"mounted from here); {engine_label(docker_host)} is remote")
            return record
        scratch = tempfile.mkdtemp(prefix="fp16doctor-script-")
        create_args = script_container_options(spec, scratch, host_user())
    record["engine"] = {
        "kind": "docker",
        "docker_host": engine_label(docker_host),
        "image": image,
        "gpu_uuid": gpu.get("uuid") if use_gpu and gpu else None,
        # What the stack is, in the catalogue's words (a CPU twin says it is not the question's GPU stack).
        "stack_description": stack.description,
    }
    labels = {
        MANAGED_LABEL: "true",
        STACK_LABEL: stack.name,
        RUN_ID_LABEL: run_id,
        PRECISION_LABEL: spec.precision,
        VARIANT_LABEL: spec.variant,
        VERSION_LABEL: __version__,
        **owner_labels(),
    }
    oom_killed = False
    output = ""
    container = None
    streamed = Streamed()
    started = time.monotonic()
    profile_tar: bytes | None = None
    profile_error: str | None = None
    try:
        try:
            container = client.containers.create(
                image,
                **create_args,
                name=container_name(spec, run_id),
                labels=labels,
                environment=env,
                device_requests=device_requests,
                network_mode="none",  # the workload makes its own data; nothing to fetch
                shm_size="1g",
                detach=True,
            )
            record["engine"]["container"] = container.name
            container.start()
            streamed = stream(_Container(container), on_event, timeout_s)
            container.reload()
            oom_killed = bool(container.attrs.get("State", {}).get("OOMKilled", False))
            raw = container.logs(stdout=True, stderr=True, tail=OUTPUT_TAIL_LINES)
            # oneDNN's verbose lines (the profiled window) say nothing about why a run failed.
            output = "\n".join(line for line in raw.decode("utf-8", "replace").splitlines()
                               if not line.startswith(ONEDNN_PREFIXES))
            if streamed.result is not None and isinstance(streamed.result.get("profile"), dict):
                profile_tar, profile_error = _copy_profile_out(container)
        except (APIError, RequestException, OSError, DockerException) as exc:
            output = (output + "\n" + str(exc)).strip()
            if isinstance(exc, (RequestException, OSError)):
                forget_client(docker_host)
                output += f"\nlost the Docker engine at {engine_label(docker_host)}"
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except NotFound:
                pass
            except (DockerException, RequestException, OSError) as exc:
                log(f"could not remove container {container.name}: {short(exc)}")
        if scratch is not None:
            keep_script_log(spec, scratch, record, streamed.capture)
            shutil.rmtree(scratch, ignore_errors=True)

    record = to_record(record, streamed, output, timeout_s, oom_killed)
    if record["status"] == "ok":
        record["device"] = device_for(record.get("device"), gpu if use_gpu else None)
        attach_container_ops(record, streamed.capture, profile_tar, profile_error, keep_profile)
    record["wall_s"] = round(time.monotonic() - started, 3)  # the container's whole life, as the host times a run
    return record


class _Container:
    """A started container as the run loop drives it: its stdout, its exit status, a kill."""

    def __init__(self, container: Any) -> None:
        self.container = container

    def lines(self) -> Iterator[str]:
        return stream_lines(self.container.logs(stream=True, follow=True, stdout=True, stderr=False))

    def wait(self) -> int | None:
        return int(self.container.wait().get("StatusCode", -1))

    def stop(self) -> None:
        try:
            self.container.kill()
        except (DockerException, RequestException, OSError):
            pass  # it stopped by itself, or its engine went away with it


def _copy_profile_out(container: Any) -> tuple[bytes | None, str | None]:
    """The container's profile folder as a tar archive (docker cp works on a stopped container)."""
    try:
        chunks, _stat = container.get_archive(CONTAINER_PROFILE_DIR)
        return b"".join(chunks), None
    except (AttributeError, APIError, NotFound, RequestException, OSError) as exc:
        return None, f"could not copy the profile out of the container: {short(exc)}"


# -------------------------------------------------------------------------------------------- cleanup


def leftover_containers(docker_host: str | None, run_id: str | None = None) -> list[str]:
    """Names of fp16doctor containers still on the engine (all of them, or one run id's)."""
    filters = [f"{MANAGED_LABEL}=true"] + ([f"{RUN_ID_LABEL}={run_id}"] if run_id else [])
    containers = client_for(docker_host).containers.list(all=True, filters={"label": filters})
    return [str(c.name) for c in containers]


def cleanup(
    docker_host: str | None, *, run_id: str | None = None, images: bool = False, stopped_only: bool = False
) -> dict[str, list[str]]:
    """Remove leftover fp16doctor containers (and with images=True its images) found by label.

    stopped_only: only those no longer running (left by an engine that died mid-run) and left by a dead
    run (`_leftover`), so another fp16doctor's runs on the same engine are never touched, including the
    container it has just created and not yet started.
    """
    client = client_for(docker_host)
    filters = [f"{MANAGED_LABEL}=true"] + ([f"{RUN_ID_LABEL}={run_id}"] if run_id else [])
    removed: dict[str, list[str]] = {"containers": [], "images": []}
    query: dict[str, Any] = {"label": filters}
    if stopped_only:
        query["status"] = ["created", "exited", "dead"]
    try:
        containers = client.containers.list(all=True, filters=query)
    except (APIError, RequestException, OSError) as exc:
        # Callers run this while an engine may be going away; they handle DoctorError, not SDK errors.
        forget_client(docker_host)
        raise DoctorError(f"cannot list the containers of {engine_label(docker_host)}: {short(exc)}",
                          hint="check that the engine is running") from exc
    for container in containers:
        if stopped_only and not _leftover(container):
            continue
        try:
            container.remove(force=True)
            removed["containers"].append(str(container.name))
        except NotFound:
            pass
        except (APIError, RequestException, OSError):
            pass  # removal already in progress, or the engine went away with the container
    if images:
        for image in client.images.list(filters={"label": f"{MANAGED_LABEL}=true"}):
            try:
                client.images.remove(image.id, force=True)
                removed["images"].append(str(image.id))
            except (NotFound, APIError):
                pass  # still in use by a container another process runs, or already gone
    return removed


def _leftover(container: Any) -> bool:
    """A stopped container left by a dead run, not one a live fp16doctor has just created (and not yet
    started) or is reading back. Its owner decides where it can be asked; otherwise its age does
    (LEFTOVER_AFTER_S since it was created, or since it exited); an age it cannot read keeps it."""
    alive = owner_alive(dict(container.labels or {}))
    if alive is not None:
        return not alive
    attrs = container.attrs or {}
    state = attrs.get("State") or {}
    since = docker_time(state.get("FinishedAt")) if state.get("Status") in ("exited", "dead") else None
    since = since or docker_time(attrs.get("Created"))
    return since is not None and time.time() - since >= LEFTOVER_AFTER_S


def remove_orphans(docker_host: str | None) -> list[str]:
    """Remove the fp16doctor containers (running or not) whose owning process on this machine is gone.

    Returns their names. Another live fp16doctor's runs on the same engine are never touched.
    """
    client = client_for(docker_host)
    try:
        containers = client.containers.list(all=True, filters={"label": [f"{MANAGED_LABEL}=true"]})
    except (APIError, RequestException, OSError) as exc:
        forget_client(docker_host)
        raise DoctorError(f"cannot list the containers of {engine_label(docker_host)}: {short(exc)}",
                          hint="check that the engine is running") from exc
    removed: list[str] = []
    for container in containers:
        if not orphaned(dict(container.labels or {})):
            continue
        try:
            container.remove(force=True)
            removed.append(str(container.name))
        except NotFound:
            pass
        except (APIError, RequestException, OSError):
            pass  # removal already in progress, or the engine went away with the container
    return removed


# ----------------------------------------------------------------------------------- several engines

# nvidia-smi's CSV query; compute_cap needs driver 510 or newer (nvidia-smi --help-query-gpu).
_GPU_QUERY_FIELDS = ("index", "uuid", "name", "driver_version", "memory.total", "compute_cap")


def _any_image(client: Any) -> str | None:
    """An image the engine already has (ours first) to run nvidia-smi in; None on an empty engine."""
    for filters in ({"label": f"{MANAGED_LABEL}=true"}, {}):
        for image in client.images.list(filters=filters):
            if image.tags:
                return str(image.tags[0])
    return None


def engine_gpus(docker_host: str | None, image: str | None = None) -> list[dict[str, Any]] | None:
    """The NVIDIA GPUs this engine hands to containers, asked through the engine itself.

    Runs nvidia-smi (mounted by the NVIDIA container toolkit, so any glibc image works) in `image`
    or an image already on the engine, with every GPU requested. [] when the engine cannot give
    containers a GPU; None when it has no image to ask with, or nvidia-smi could not run in it.
    """
    client = client_for(docker_host)
    try:
        image = image or _any_image(client)
    except (APIError, RequestException, OSError) as exc:
        forget_client(docker_host)
        raise DoctorError(f"cannot list the images of {engine_label(docker_host)}: {short(exc)}",
                          hint="check that the engine is running") from exc
    if image is None:
        return None
    request = [DeviceRequest(count=-1, capabilities=[["gpu", "utility"]])]
    for fields in (_GPU_QUERY_FIELDS, _GPU_QUERY_FIELDS[:-1]):
        try:
            raw = client.containers.run(
                image, entrypoint=["nvidia-smi"],
                command=[f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                device_requests=request, environment={"NVIDIA_DRIVER_CAPABILITIES": "utility"},
                labels={MANAGED_LABEL: "true", RUN_ID_LABEL: RUN_ID, **owner_labels()}, network_mode="none",
                remove=True, stdout=True, stderr=False,
            )
        except docker.errors.ContainerError:
            continue  # an older driver rejects compute_cap: ask again without it
        except APIError as exc:
            if "device driver" in str(exc) or "nvidia" in str(exc).lower():
                return []  # "could not select device driver": no NVIDIA runtime on this engine
            raise DoctorError(f"cannot list the GPUs of {engine_label(docker_host)}: {short(exc)}",
                              hint="check that the engine can run containers") from exc
        except (RequestException, OSError) as exc:
            forget_client(docker_host)
            raise DoctorError(f"cannot list the GPUs of {engine_label(docker_host)}: {short(exc)}",
                              hint="check that the engine is running") from exc
        return parse_gpu_csv(raw.decode("utf-8", "replace"), fields)
    return None


def copy_image(source_host: str | None, target_host: str | None, tag: str, log: Log) -> str:
    """Stream an image from one engine into another (docker save | docker load, through the API).

    For engines that cannot build it themselves (no registry for the base image). Returns the tag.
    """
    source = client_for(source_host)
    target = client_for(target_host)
    log(f"copying {tag} from {engine_label(source_host)} to {engine_label(target_host)}")
    try:
        for chunk in target.api.load_image(source.api.get_image(tag)):
            if isinstance(chunk, dict) and chunk.get("error"):
                raise DoctorError(f"loading {tag} into {engine_label(target_host)} failed: {chunk['error']}",
                                  hint="check the target engine's disk space and logs")
    except (APIError, RequestException, OSError) as exc:
        raise DoctorError(f"copying {tag} to {engine_label(target_host)} failed: {short(exc)}",
                          hint="build the image on that engine instead (fp16doctor stacks build "
                               "--docker-host ...)") from exc
    if image_id(target_host, tag) is None:
        raise DoctorError(f"copying {tag} to {engine_label(target_host)} left no image there",
                          hint="check the target engine's logs")
    return tag
