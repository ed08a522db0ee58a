"""The engine calls scale-out adds: GPUs asked through the engine, images copied between engines."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import docker.errors
import pytest

from fp16doctor.engines.docker import sdk
from fp16doctor.errors import DoctorError

CSV_NEW = b"0, GPU-aaa, NVIDIA H200, 560.35.03, 143771, 9.0\n1, GPU-bbb, NVIDIA H200, 560.35.03, 143771, 9.0\n"
CSV_OLD = b"0, GPU-ccc, NVIDIA TITAN V, 390.77, 12066\n"


class Image:
    def __init__(self, tag: str) -> None:
        self.tags = [tag]
        self.id = "sha256:" + tag


class Images:
    def __init__(self, tags: list[str]) -> None:
        self.by_tag = {t: Image(t) for t in tags}

    def list(self, filters: dict[str, Any] | None = None) -> list[Image]:
        return list(self.by_tag.values())

    def get(self, tag: str) -> Image:
        if tag not in self.by_tag:
            raise docker.errors.ImageNotFound(tag)
        return self.by_tag[tag]


class Containers:
    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.calls: list[dict[str, Any]] = []

    def run(self, image: str, **kwargs: Any) -> bytes:
        self.calls.append({"image": image, **kwargs})
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, bytes)
        return answer


class API:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.loaded: list[bytes] = []

    def get_image(self, tag: str) -> Iterator[bytes]:
        yield b"layer-1"
        yield b"layer-2"

    def load_image(self, data: Iterator[bytes]) -> Iterator[dict[str, Any]]:
        self.loaded = list(data)
        if self.client.load_error:
            yield {"error": self.client.load_error}
            return
        self.client.images.by_tag["fp16doctor/cpu:abc"] = Image("fp16doctor/cpu:abc")
        yield {"stream": "Loaded image: fp16doctor/cpu:abc\n"}


class Client:
    def __init__(self, tags: list[str], answers: list[Any] | None = None, load_error: str = "") -> None:
        self.images = Images(tags)
        self.containers = Containers(answers or [])
        self.api = API(self)
        self.load_error = load_error

    def ping(self) -> bool:
        return True


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> dict[str, Client]:
    table: dict[str, Client] = {}
    monkeypatch.setattr(sdk, "_clients", {})
    monkeypatch.setattr(sdk, "_make_client", lambda host: table[host])
    return table


def test_gpus_come_from_nvidia_smi_run_through_the_engine(clients: dict[str, Client]) -> None:
    clients["tcp://h200:2376"] = Client(["fp16doctor/cpu:abc"], [CSV_NEW])
    gpus = sdk.engine_gpus("tcp://h200:2376")
    assert gpus == [
        {"index": 0, "uuid": "GPU-aaa", "name": "NVIDIA H200", "driver_version": "560.35.03",
         "memory_total_mib": 143771, "compute_capability": "9.0"},
        {"index": 1, "uuid": "GPU-bbb", "name": "NVIDIA H200", "driver_version": "560.35.03",
         "memory_total_mib": 143771, "compute_capability": "9.0"},
    ]
    call = clients["tcp://h200:2376"].containers.calls[0]
    assert call["image"] == "fp16doctor/cpu:abc" and call["network_mode"] == "none" and call["remove"]


def test_an_old_driver_without_compute_cap_is_asked_again(clients: dict[str, Client]) -> None:
    refused = docker.errors.ContainerError("c", 2, "nvidia-smi", "img", b'Field "compute_cap" is not valid')
    clients["tcp://titan:2376"] = Client(["debian:bookworm-slim"], [refused, CSV_OLD])
    gpus = sdk.engine_gpus("tcp://titan:2376")
    assert gpus == [{"index": 0, "uuid": "GPU-ccc", "name": "NVIDIA TITAN V", "driver_version": "390.77",
                     "memory_total_mib": 12066}]
    assert "compute_cap" not in clients["tcp://titan:2376"].containers.calls[1]["command"][0]


def test_an_engine_without_the_nvidia_runtime_has_no_gpus(clients: dict[str, Client]) -> None:
    no_driver = docker.errors.APIError('could not select device driver "" with capabilities: [[gpu utility]]')
    clients["tcp://cpu:2376"] = Client(["debian:bookworm-slim"], [no_driver])
    assert sdk.engine_gpus("tcp://cpu:2376") == []


def test_an_empty_engine_cannot_be_asked_yet(clients: dict[str, Client]) -> None:
    clients["tcp://empty:2376"] = Client([])
    assert sdk.engine_gpus("tcp://empty:2376") is None


def test_an_image_is_copied_between_engines_through_the_api(clients: dict[str, Client]) -> None:
    clients["tcp://a:2376"] = Client(["fp16doctor/cpu:abc"])
    clients["tcp://b:2376"] = Client([])
    lines: list[str] = []
    assert sdk.copy_image("tcp://a:2376", "tcp://b:2376", "fp16doctor/cpu:abc", lines.append) \
        == "fp16doctor/cpu:abc"
    assert clients["tcp://b:2376"].api.loaded == [b"layer-1", b"layer-2"]
    assert lines == ["copying fp16doctor/cpu:abc from tcp://a:2376 to tcp://b:2376"]


def test_a_failed_copy_says_where_and_why(clients: dict[str, Client]) -> None:
    clients["tcp://a:2376"] = Client(["fp16doctor/cpu:abc"])
    clients["tcp://b:2376"] = Client([], load_error="no space left on device")
    with pytest.raises(DoctorError, match="loading fp16doctor/cpu:abc into tcp://b:2376 failed: no space left"):
        sdk.copy_image("tcp://a:2376", "tcp://b:2376", "fp16doctor/cpu:abc", lambda _line: None)
