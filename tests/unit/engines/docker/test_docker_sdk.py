"""The Docker engine with the SDK replaced by a fake: what a run records, and that nothing is left behind."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from fp16doctor.engines.docker import sdk
from fp16doctor.engines.spec import QUICK, RunSpec
from fp16doctor.errors import DoctorError
from fp16doctor.stacks import get_stack

IMAGE = "fp16doctor/cpu:0123456789ab"


def proto(event: str, **fields: Any) -> bytes:
    return ("@@fp16doctor " + json.dumps({"event": event, **fields}) + "\n").encode()


class FakeContainer:
    def __init__(self, client: FakeClient, name: str, labels: dict[str, str], stdout: list[bytes],
                 stderr: bytes, exit_code: int, oom: bool) -> None:
        self.client, self.name, self.labels = client, name, labels
        self.stdout, self.stderr, self.exit_code, self.oom = stdout, stderr, exit_code, oom
        self.attrs: dict[str, Any] = {"State": {"OOMKilled": oom, "Status": "running"}}
        self.removed = False

    def start(self) -> None:
        self.client.started.append(self.name)

    def logs(self, stream: bool = False, follow: bool = False, stdout: bool = True, stderr: bool = True,
             tail: int | str = "all") -> Any:
        if stream:
            return iter(self.stdout)
        return b"".join(self.stdout) + (self.stderr if stderr else b"")

    def wait(self) -> dict[str, Any]:
        return {"StatusCode": self.exit_code}

    def reload(self) -> None:
        pass

    def kill(self) -> None:
        pass

    def remove(self, force: bool = False) -> None:
        self.removed = True
        self.client.containers.live.pop(self.name, None)


class FakeContainers:
    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self.live: dict[str, FakeContainer] = {}
        self.created: list[dict[str, Any]] = []

    def create(self, image: str, **kwargs: Any) -> FakeContainer:
        self.created.append({"image": image, **kwargs})
        script = self.client.script
        container = FakeContainer(self.client, kwargs["name"], kwargs["labels"], script["stdout"],
                                  script.get("stderr", b""), script.get("exit_code", 0),
                                  script.get("oom", False))
        self.live[container.name] = container
        return container

    def list(self, all: bool = False, filters: dict[str, Any] | None = None) -> list[FakeContainer]:
        wanted = dict(f.split("=", 1) for f in (filters or {}).get("label", []))
        statuses = (filters or {}).get("status")
        return [c for c in self.live.values() if all and wanted.items() <= c.labels.items()
                and (statuses is None or c.attrs["State"]["Status"] in statuses)]


class FakeImage:
    def __init__(self, image_id: str) -> None:
        self.id = image_id


class FakeImages:
    def __init__(self) -> None:
        self.tags: dict[str, str] = {}

    def get(self, tag: str) -> FakeImage:
        if tag not in self.tags:
            raise sdk.ImageNotFound(tag)
        return FakeImage(self.tags[tag])


class FakeAPI:
    def __init__(self, client: FakeClient) -> None:
        self.client = client

    def build(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.client.build_calls.append(kwargs)
        yield {"stream": "Step 1/2 : FROM debian:bookworm-slim\n"}
        yield {"stream": " ---> Using cache\n"}
        if self.client.script.get("build_error"):
            yield {"error": self.client.script["build_error"]}
            return
        self.client.images.tags[kwargs["tag"]] = "sha256:built"
        yield {"aux": {"ID": "sha256:built"}}


class FakeClient:
    def __init__(self, script: dict[str, Any]) -> None:
        self.script = script
        self.started: list[str] = []
        self.build_calls: list[dict[str, Any]] = []
        self.containers = FakeContainers(self)
        self.images = FakeImages()
        self.api = FakeAPI(self)

    def ping(self) -> bool:
        return True

    def info(self) -> dict[str, Any]:
        return {"ServerVersion": "20.10.24", "OperatingSystem": "Debian", "NCPU": 2,
                "MemTotal": 8 << 30, "Runtimes": {"runc": {}, "nvidia": {}}}

    def close(self) -> None:
        pass


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    client = FakeClient({"stdout": []})
    monkeypatch.setattr(sdk, "_make_client", lambda host: client)
    monkeypatch.setattr(sdk, "_clients", {})
    return client


def spec(precision: str = "float16") -> RunSpec:
    return RunSpec("cpu", precision, "original", QUICK)


def test_successful_run_becomes_a_record_with_the_engine(fake: FakeClient) -> None:
    fake.script["stdout"] = [b"Using TensorFlow backend.\n", proto("phase", phase="train"),
                             proto("step", ms=120.0), proto("result", run={
                                 "status": "ok", "device": "cpu", "step_time_ms": {"median": 120.0, "n": 5},
                                 "software": {"python": "3.11.2", "tensorflow": "2.21.0"}})]
    events: list[dict[str, Any]] = []
    record = sdk.run_in_stack(spec(), get_stack("cpu"), "tcp://10.0.0.2:2376", None, events.append,
                                        image=IMAGE, run_id="run1")
    assert [e["event"] for e in events] == ["phase", "step", "result"]
    assert record["status"] == "ok" and record["step_time_ms"]["median"] == 120.0
    assert (record["stack"], record["precision"], record["device"]) == ("cpu", "float16", "cpu")
    assert record["engine"]["kind"] == "docker"
    assert record["engine"]["docker_host"] == "tcp://10.0.0.2:2376"
    assert record["engine"]["image"] == IMAGE and record["engine"]["gpu_uuid"] is None
    assert record["wall_s"] >= 0  # the container's whole life, as the host engine times its runs (the rounds' note)
    created = fake.containers.created[0]
    assert created["entrypoint"] == ["fp16doctor-python", "/opt/fp16doctor/workload/run_workload.py"]
    assert created["command"] == spec().workload_args()
    assert created["labels"][sdk.MANAGED_LABEL] == "true"
    assert created["labels"][sdk.RUN_ID_LABEL] == "run1"
    assert created["device_requests"] is None
    assert fake.containers.live == {}


def test_gpu_run_requests_the_one_gpu_with_compute_capabilities(fake: FakeClient) -> None:
    fake.script["stdout"] = [proto("result", run={"status": "ok", "device": "gpu:0"})]
    gpu = {"index": 3, "uuid": "GPU-abcd", "name": "NVIDIA H200"}
    record = sdk.run_in_stack(RunSpec("tf2.15-keras2", "mixed_float16", "original", QUICK),
                                        get_stack("tf2.15-keras2"), None, gpu, lambda e: None, image=IMAGE)
    created = fake.containers.created[0]
    request = created["device_requests"][0]
    assert request["DeviceIDs"] == ["GPU-abcd"]
    assert request["Capabilities"] == [["gpu", "compute", "utility"]]
    assert "compute" in created["environment"]["NVIDIA_DRIVER_CAPABILITIES"]
    assert record["device"] == "gpu:3" and record["engine"]["gpu_uuid"] == "GPU-abcd"


def test_cpu_run_of_a_gpu_stack_hides_the_gpus(fake: FakeClient) -> None:
    fake.script["stdout"] = [proto("result", run={"status": "ok", "device": "cpu"})]
    sdk.run_in_stack(RunSpec("tf2.15-keras2", "float32", "original", QUICK),
                               get_stack("tf2.15-keras2"), None, None, lambda e: None, image=IMAGE)
    assert fake.containers.created[0]["environment"]["NVIDIA_VISIBLE_DEVICES"] == "void"


def test_error_event_fails_the_run_with_the_classified_reason_and_tail(fake: FakeClient) -> None:
    fake.script.update(stdout=[proto("phase", phase="import"), proto(
        "error", status="failed",
        error="InternalError: no kernel image is available for execution on the device",
        traceback="Traceback...")], stderr=b"2018 E cuda_blas.cc failed\n", exit_code=1)
    record = sdk.run_in_stack(spec(), get_stack("cpu"), None, None, lambda e: None, image=IMAGE)
    assert record["status"] == "failed"
    assert record["failure_kind"] == "no_kernel_image"
    assert "no kernels for this GPU" in record["error"]
    assert any("cuda_blas" in line for line in record["log_tail"])
    assert fake.containers.live == {}


def test_nonzero_exit_without_result_is_a_failure_even_without_an_error_event(fake: FakeClient) -> None:
    fake.script.update(stdout=[proto("phase", phase="train")], exit_code=137, oom=True)
    record = sdk.run_in_stack(spec(), get_stack("cpu"), None, None, lambda e: None, image=IMAGE)
    assert record["status"] == "failed" and record["failure_kind"] == "host_oom"
    assert record["exit_code"] == 137


def test_skipped_by_the_workload_is_not_a_failure(fake: FakeClient) -> None:
    fake.script["stdout"] = [proto("error", status="skipped", error="no mixed precision in Keras 2.1.5")]
    record = sdk.run_in_stack(spec("mixed_float16"), get_stack("cpu"), None, None, lambda e: None,
                                        image=IMAGE)
    assert record["status"] == "skipped" and "Keras 2.1.5" in record["error"]


def test_interrupt_removes_the_container_and_propagates(fake: FakeClient) -> None:
    fake.script["stdout"] = [proto("step", ms=1.0), proto("step", ms=1.0)]

    def interrupt(event: dict[str, Any]) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sdk.run_in_stack(spec(), get_stack("cpu"), None, None, interrupt, image=IMAGE)
    assert fake.started and fake.containers.live == {}


def test_cleanup_removes_labelled_leftovers_only(fake: FakeClient) -> None:
    mine = FakeContainer(fake, "fp16doctor-a", {sdk.MANAGED_LABEL: "true",
                                                sdk.RUN_ID_LABEL: "r1"}, [], b"", 0, False)
    other = FakeContainer(fake, "postgres", {}, [], b"", 0, False)
    fake.containers.live.update({mine.name: mine, other.name: other})
    assert sdk.leftover_containers(None) == ["fp16doctor-a"]
    removed = sdk.cleanup(None, run_id="r1")
    assert removed["containers"] == ["fp16doctor-a"]
    assert list(fake.containers.live) == ["postgres"]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: no process has this pid now (until the kernel hands it out again)
    return child.pid


def test_containers_whose_fp16doctor_was_killed_are_removed_and_live_ones_kept(fake: FakeClient) -> None:
    here = socket.gethostname()
    managed = {sdk.MANAGED_LABEL: "true"}

    def container(name: str, **owner: str) -> None:
        fake.containers.live[name] = FakeContainer(fake, name, {**managed, **owner}, [], b"", 0, False)

    container("orphan", **{sdk.OWNER_HOST_LABEL: here, sdk.OWNER_PID_LABEL: str(_dead_pid())})
    container("mine", **sdk.owner_labels())
    container("other-machine", **{sdk.OWNER_HOST_LABEL: "elsewhere",
                                  sdk.OWNER_PID_LABEL: str(_dead_pid())})
    container("older-version")  # no owner labels: its owner cannot be judged
    fake.containers.live["postgres"] = FakeContainer(fake, "postgres", {}, [], b"", 0, False)

    assert sdk.remove_orphans(None) == ["orphan"]
    assert sorted(fake.containers.live) == ["mine", "older-version", "other-machine", "postgres"]


def _docker_stamp(seconds_ago: float) -> str:
    """A timestamp as the engine writes it: RFC 3339 in UTC with nanoseconds."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() - seconds_ago))
    return f"{stamp}.123456789Z"


def test_the_sweep_on_connect_leaves_a_live_fp16doctors_created_container(fake: FakeClient) -> None:
    # Another fp16doctor has created its container and not yet started it when this one connects.
    here = socket.gethostname()
    managed = {sdk.MANAGED_LABEL: "true"}
    old = sdk.LEFTOVER_AFTER_S + 60

    def container(name: str, status: str, created_s_ago: float, finished_s_ago: float | None = None,
                  **owner: str) -> None:
        made = FakeContainer(fake, name, {**managed, **owner}, [], b"", 0, False)
        made.attrs = {"Created": _docker_stamp(created_s_ago),
                      "State": {"Status": status, "FinishedAt": (_docker_stamp(finished_s_ago)
                                if finished_s_ago is not None else "0001-01-01T00:00:00Z")}}
        fake.containers.live[name] = made

    live_owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = {sdk.OWNER_HOST_LABEL: here, sdk.OWNER_PID_LABEL: str(live_owner.pid)}
        dead = {sdk.OWNER_HOST_LABEL: here, sdk.OWNER_PID_LABEL: str(_dead_pid())}
        elsewhere = {sdk.OWNER_HOST_LABEL: "elsewhere", sdk.OWNER_PID_LABEL: "4242"}
        container("live-created", "created", 1, **live)
        container("live-exited", "exited", 30, 2, **live)  # its owner still copying the profile out
        container("own-created", "created", 1, **sdk.owner_labels())
        container("dead-created", "created", 1, **dead)
        container("dead-exited", "exited", 30, 20, **dead)
        container("elsewhere-created", "created", 5, **elsewhere)
        container("elsewhere-created-long-ago", "created", old, **elsewhere)
        container("elsewhere-exited-just-now", "exited", old, 5, **elsewhere)
        container("elsewhere-exited-long-ago", "exited", old + 60, old, **elsewhere)
        container("older-version-created", "created", 5)
        container("older-version-dead", "dead", old, old)
        container("dead-running", "running", 30, **dead)  # remove_orphans' business, not the sweep's

        swept = sdk.cleanup(None, stopped_only=True)["containers"]
    finally:
        live_owner.kill()
        live_owner.wait()
    assert sorted(swept) == ["dead-created", "dead-exited", "elsewhere-created-long-ago",
                             "elsewhere-exited-long-ago", "older-version-dead"]
    assert sorted(fake.containers.live) == ["dead-running", "elsewhere-created", "elsewhere-exited-just-now",
                                            "live-created", "live-exited", "older-version-created",
                                            "own-created"]


def test_docker_timestamps_are_read_on_python_3_10() -> None:
    assert sdk.docker_time("1970-01-01T00:01:40.123456789Z") == pytest.approx(100.123456)
    assert sdk.docker_time("1970-01-01T01:01:40+01:00") == 100.0
    assert sdk.docker_time("0001-01-01T00:00:00Z") is None  # never started, never finished
    assert sdk.docker_time(None) is None


def test_every_run_container_names_its_owner(fake: FakeClient) -> None:
    fake.script["stdout"] = [proto("result", run={"status": "ok", "device": "cpu"})]
    sdk.run_in_stack(spec(), get_stack("cpu"), None, None, lambda e: None, image=IMAGE)
    labels = fake.containers.created[0]["labels"]
    assert labels[sdk.OWNER_PID_LABEL] == str(os.getpid())
    assert labels[sdk.OWNER_HOST_LABEL] == socket.gethostname()


def test_build_streams_progress_and_reports_errors(fake: FakeClient) -> None:
    lines: list[str] = []
    image_id, cached = sdk.build_image(None, io.BytesIO(b""), "fp16doctor/cpu:x", {"STACK": "cpu"},
                                                 {sdk.MANAGED_LABEL: "true"}, lines.append)
    assert image_id == "sha256:built" and not cached
    assert "Step 1/2 : FROM debian:bookworm-slim" in lines
    assert fake.build_calls[0]["labels"][sdk.MANAGED_LABEL] == "true"
    _, cached_again = sdk.build_image(None, io.BytesIO(b""), "fp16doctor/cpu:x", {}, {},
                                                lines.append)
    assert cached_again
    fake.script["build_error"] = "ERROR: No matching distribution found for keras==9.9.9"
    with pytest.raises(DoctorError) as caught:
        sdk.build_image(None, io.BytesIO(b""), "fp16doctor/cpu:y", {}, {}, lines.append)
    assert "keras==9.9.9" in caught.value.message


def test_unreachable_engine_is_a_doctor_error_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(host: str | None) -> Any:
        raise sdk.DockerException("Error while fetching server API version: Connection refused")

    monkeypatch.setattr(sdk, "_make_client", refuse)
    monkeypatch.setattr(sdk, "_clients", {})
    with pytest.raises(DoctorError) as caught:
        sdk.client_for("tcp://10.9.9.9:2375")
    assert "tcp://10.9.9.9:2375" in caught.value.message
    assert "docker-up.sh" in caught.value.hint


def test_engine_facts_report_the_nvidia_runtime(fake: FakeClient) -> None:
    facts = sdk.engine_facts("unix:///run/other.sock")
    assert facts.nvidia_runtime is True and facts.ncpu == 2
    assert facts.to_dict()["docker_host"] == "unix:///run/other.sock"


def test_each_docker_host_gets_its_own_client(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str | None] = []

    def make(host: str | None) -> FakeClient:
        made.append(host)
        return FakeClient({"stdout": []})

    monkeypatch.setattr(sdk, "_make_client", make)
    monkeypatch.setattr(sdk, "_clients", {})
    a = sdk.client_for("unix:///var/run/docker.sock")
    b = sdk.client_for("unix:///var/run/docker-2.sock")
    assert a is not b and sdk.client_for("unix:///var/run/docker.sock") is a
    assert made == ["unix:///var/run/docker.sock", "unix:///var/run/docker-2.sock"]


def test_cleanup_on_an_engine_that_stopped_answering_is_a_doctor_error(
    fake: FakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Diagnose sweeps engines at start and on Ctrl-C; a dropped connection must not end in a traceback.
    def refuse(all: bool = False, filters: dict[str, Any] | None = None) -> list[FakeContainer]:
        raise sdk.RequestException("Connection aborted")

    monkeypatch.setattr(fake.containers, "list", refuse)
    with pytest.raises(DoctorError, match="cannot list the containers of .*Connection aborted"):
        sdk.cleanup(None, stopped_only=True)


def test_gpu_listing_on_an_engine_that_stopped_answering_is_a_doctor_error(
    fake: FakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(image: str, **kwargs: Any) -> bytes:
        raise sdk.RequestException("Connection aborted")

    monkeypatch.setattr(fake.containers, "run", refuse, raising=False)
    with pytest.raises(DoctorError, match="cannot list the GPUs of .*Connection aborted"):
        sdk.engine_gpus(None, IMAGE)


def test_an_engine_slow_to_answer_does_not_hold_up_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    # Scale-out: while one engine's connection hangs until its timeout, runs on the others go on.
    answer = threading.Event()

    class SlowClient(FakeClient):
        def ping(self) -> bool:
            answer.wait(10)
            return True

    def make(host: str | None) -> FakeClient:
        return SlowClient({"stdout": []}) if host == "tcp://slow:2376" else FakeClient({"stdout": []})

    monkeypatch.setattr(sdk, "_make_client", make)
    monkeypatch.setattr(sdk, "_clients", {})
    slow = threading.Thread(target=sdk.client_for, args=("tcp://slow:2376",), daemon=True)
    slow.start()
    time.sleep(0.1)  # the slow engine is being pinged now
    started = time.monotonic()
    sdk.client_for("tcp://fast:2376")
    waited = time.monotonic() - started
    answer.set()
    slow.join(5)
    assert waited < 2


def test_a_container_that_hangs_is_killed_at_the_time_limit(fake: FakeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    killed = threading.Event()

    class HangingContainer(FakeContainer):
        def logs(self, stream: bool = False, **kwargs: Any) -> Any:
            if stream:
                def silent() -> Iterator[bytes]:
                    yield proto("phase", phase="train")
                    killed.wait(10)  # a hung driver call: nothing more until the container dies

                return silent()
            return b""

        def wait(self) -> dict[str, Any]:
            return {"StatusCode": 137}

        def kill(self) -> None:
            killed.set()

    create = fake.containers.create

    def create_hanging(image: str, **kwargs: Any) -> FakeContainer:
        plain = create(image, **kwargs)
        hanging = HangingContainer(fake, plain.name, plain.labels, [], b"", 137, False)
        fake.containers.live[plain.name] = hanging
        return hanging

    monkeypatch.setattr(fake.containers, "create", create_hanging)
    record = sdk.run_in_stack(spec(), get_stack("cpu"), None, None, lambda e: None, image=IMAGE,
                                        timeout_s=0.2)
    assert killed.is_set()
    assert record["status"] == "failed" and record["failure_kind"] == "timeout"
    assert record["error"].startswith("the run exceeded its") and "was killed" in record["error"]
    assert fake.containers.live == {}


def test_engine_facts_from_an_engine_that_stopped_answering_are_a_doctor_error(
    fake: FakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Asked from a connect thread: anything but a DoctorError would end as a traceback, the engine half-known.
    def refuse() -> dict[str, Any]:
        raise sdk.RequestException("Read timed out")

    monkeypatch.setattr(fake, "info", refuse)
    with pytest.raises(DoctorError, match="cannot ask the Docker engine at .*Read timed out"):
        sdk.engine_facts(None)


def test_image_lookup_on_an_engine_that_stopped_answering_is_a_doctor_error(
    fake: FakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(tag: str) -> FakeImage:
        raise sdk.RequestException("Connection aborted")

    monkeypatch.setattr(fake.images, "get", refuse)
    with pytest.raises(DoctorError, match="cannot look up fp16doctor/cpu:0123456789ab on .*Connection aborted"):
        sdk.image_id(None, IMAGE)
