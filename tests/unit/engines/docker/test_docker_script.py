"""A user's script in a stack container (SDK replaced by the fakes of test_engines_docker): what
of the host the container sees, where the script's output ends up, and what is refused."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from test_docker_sdk import IMAGE, FakeClient, proto

from fp16doctor.engines.docker import sdk
from fp16doctor.engines.spec import QUICK, RunSpec, ScriptSpec
from fp16doctor.stacks import get_stack


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    client = FakeClient({"stdout": []})
    monkeypatch.setattr(sdk, "_make_client", lambda host: client)
    monkeypatch.setattr(sdk, "_clients", {})
    return client


def script_spec(tmp_path: Path) -> RunSpec:
    script = ScriptSpec(path="/home/ada/proj/train.py", args=("/data/train", "--epochs", "3"), sha256="ab" * 32,
                        steps=20, log_dir=str(tmp_path / "logs"), read_only_dirs=("/home/ada/proj", "/data"))
    (tmp_path / "logs").mkdir(exist_ok=True)
    return RunSpec("cpu", "float16", "original", QUICK, script=script)


def test_mounts_are_the_scripts_folder_and_data_read_only_and_a_writable_scratch(tmp_path: Path) -> None:
    options = sdk.script_container_options(script_spec(tmp_path), "/tmp/fp16doctor-script-x", "1000:1000")
    assert options["volumes"] == {
        "/home/ada/proj": {"bind": "/home/ada/proj", "mode": "ro"},
        "/data": {"bind": "/data", "mode": "ro"},
        "/tmp/fp16doctor-script-x": {"bind": "/tmp/fp16doctor-script-x", "mode": "rw"},
    }
    assert options["working_dir"] == "/tmp/fp16doctor-script-x" and options["user"] == "1000:1000"
    assert options["entrypoint"] == ["fp16doctor-python", "/opt/fp16doctor/workload/script_runner.py"]
    command = options["command"]
    assert command[command.index("--log") + 1] == "/tmp/fp16doctor-script-x/cpu-float16.log"
    assert command[command.index("--workdir") + 1] == "/tmp/fp16doctor-script-x/work"
    assert command[command.index("--") + 1:] == ["/home/ada/proj/train.py", "/data/train", "--epochs", "3"]


def _write_log_when_created(client: FakeClient, text: str) -> list[str]:
    """The container writes its log into the scratch mount, as the runner would."""
    scratches: list[str] = []
    create = client.containers.create

    def create_and_log(image: str, **kwargs: Any) -> Any:
        command = kwargs["command"]
        Path(command[command.index("--log") + 1]).write_text(text)
        scratches.append(kwargs["working_dir"])
        return create(image, **kwargs)

    client.containers.create = create_and_log  # type: ignore[method-assign]
    return scratches


def test_script_run_keeps_its_output_and_removes_the_scratch(tmp_path: Path, engine: FakeClient) -> None:
    engine.script["stdout"] = [proto("result", run={"status": "ok", "device": "cpu",
                                                  "step_time_ms": {"median": 50.0, "n": 20},
                                                  "workload": {"name": "script"}})]
    scratches = _write_log_when_created(engine, "Epoch 1/3\n")
    record = sdk.run_in_stack(script_spec(tmp_path), get_stack("cpu"), None, None, lambda e: None,
                                        image=IMAGE)
    assert record["status"] == "ok" and record["workload"]["name"] == "script"
    assert Path(record["script_log"]).read_text() == "Epoch 1/3\n"
    assert record["script_log"] == str(tmp_path / "logs" / "cpu-float16.log")
    created = engine.containers.created[0]
    assert created["network_mode"] == "none" and set(created["volumes"]) == {"/home/ada/proj", "/data",
                                                                             scratches[0]}
    assert not os.path.exists(scratches[0]) and engine.containers.live == {}


def test_a_failing_script_keeps_its_failure_details(tmp_path: Path, engine: FakeClient) -> None:
    failure = {"kind": "keras2_arguments", "arguments": ["lr"], "keras": "3.15.1", "output_tail": "building"}
    engine.script.update(stdout=[proto("error", status="failed", error="ValueError: Argument(s) not recognized",
                                     script_failure=failure)], exit_code=1)
    _write_log_when_created(engine, "building\n")
    record = sdk.run_in_stack(script_spec(tmp_path), get_stack("cpu"), None, None, lambda e: None,
                                        image=IMAGE)
    assert record["status"] == "failed" and record["script_failure"] == failure
    assert "not recognized" in record["error"] and Path(record["script_log"]).exists()


@pytest.mark.parametrize("url", ["tcp://10.0.0.2:2376", "ssh://gpu-box"])
def test_a_remote_engine_is_refused_for_scripts(tmp_path: Path, engine: FakeClient, url: str) -> None:
    record = sdk.run_in_stack(script_spec(tmp_path), get_stack("cpu"), url, None, lambda e: None,
                                        image=IMAGE)
    assert record["status"] == "failed" and "on this machine" in record["error"]
    assert engine.containers.created == []
