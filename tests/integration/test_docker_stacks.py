"""The cpu stack on a real Docker engine: build through the CLI, a cached rebuild, runs in containers,
and no container left behind. CI starts the engine with `bash .ci/docker-up.sh`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from typing import Any

import pytest
from docker_env import ca_bundle, require_engine

from fp16doctor.engines.context import BuildOptions
from fp16doctor.engines.docker import sdk
from fp16doctor.engines.docker.build import build_stack, ensure_image
from fp16doctor.engines.spec import QUICK, SMOKE, RunSpec
from fp16doctor.stacks import get_stack

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def engine() -> None:
    require_engine()


@pytest.fixture(scope="module")
def cpu_image(engine: None) -> str:
    command = [sys.executable, "-m", "fp16doctor", "stacks", "build", "cpu"]
    ca = ca_bundle()
    if ca is not None:
        command += ["--ca-bundle", str(ca)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    found = re.search(r"built (fp16doctor/cpu:[0-9a-f]{12})", result.stdout)
    assert found, result.stdout
    return found.group(1)


def test_unchanged_rebuild_is_cached(cpu_image: str) -> None:
    lines: list[str] = []
    result = build_stack("cpu", BuildOptions(ca_bundle=ca_bundle()), lines.append)
    assert result.image == cpu_image
    assert result.cached  # how long that takes is measured in docs/stacks.md, not asserted here
    assert any("Using cache" in line for line in lines)


def test_ensure_image_reuses_the_built_image(cpu_image: str) -> None:
    started = time.perf_counter()
    tag = ensure_image(get_stack("cpu"), None, BuildOptions(ca_bundle=ca_bundle()), lambda _line: None)
    assert tag == cpu_image
    assert time.perf_counter() - started < 10


def test_runs_in_a_container_and_leaves_nothing_behind(cpu_image: str) -> None:
    events: list[dict[str, Any]] = []
    run_id = f"it{os.getpid()}"
    record = sdk.run_in_stack(RunSpec("cpu", "float32", "original", SMOKE), get_stack("cpu"),
                                        None, None, events.append, image=cpu_image, run_id=run_id)
    assert record["status"] == "ok", record.get("error")
    assert record["step_time_ms"]["median"] > 0 and record["step_time_ms"]["n"] >= SMOKE.min_steps
    assert record["engine"]["kind"] == "docker" and record["engine"]["image"] == cpu_image
    assert record["software"]["python"].startswith("3.11")
    assert record["software"]["tensorflow"] == get_stack("cpu").tensorflow
    assert any(e["event"] == "result" for e in events)
    assert sdk.leftover_containers(None, run_id) == []


def test_a_container_that_cannot_start_fails_cleanly(engine: None) -> None:
    run_id = f"itfail{os.getpid()}"
    # The bare base image has no fp16doctor-python: the start fails, the record says why.
    record = sdk.run_in_stack(RunSpec("cpu", "float32", "original", SMOKE), get_stack("cpu"),
                                        None, None, lambda _e: None, image="debian:bookworm-slim",
                                        run_id=run_id)
    assert record["status"] == "failed"
    assert "fp16doctor-python" in record["error"] or "fp16doctor-python" in " ".join(record["log_tail"])
    assert sdk.leftover_containers(None, run_id) == []


def _require_debian() -> None:
    if sdk.image_id(None, "debian:bookworm-slim") is None:
        pytest.fail("debian:bookworm-slim is missing: run `bash .ci/docker-up.sh`")


# A stand-in fp16doctor: starts a labelled container as run_in_stack does (with "created", only creates it),
# says its name, then waits.
OWNER_SCRIPT = """
import sys, time
from fp16doctor.engines.docker import sdk
client = sdk.client_for(None)
labels = {sdk.MANAGED_LABEL: "true", sdk.RUN_ID_LABEL: sys.argv[1],
          **sdk.owner_labels()}
make = client.containers.create if sys.argv[2:] == ["created"] else client.containers.run
container = make("debian:bookworm-slim", ["sleep", "300"], labels=labels, detach=True,
                 network_mode="none", name="fp16doctor-" + sys.argv[1])
print(container.name, flush=True)
time.sleep(300)
"""


def test_a_killed_fp16doctors_running_container_is_removed_by_the_next(engine: None) -> None:
    _require_debian()
    run_id = f"itorphan{os.getpid()}"
    owner = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, run_id], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        name = owner.stdout.readline().strip()
        assert name == f"fp16doctor-{run_id}"
        # A live owner's container is left alone.
        assert name not in sdk.remove_orphans(None)
        owner.kill()  # SIGKILL: no cleanup runs, the container keeps running under containerd-shim
        owner.wait(timeout=30)
        running = sdk.client_for(None).containers.list(filters={"name": name})
        assert [c.name for c in running] == [name]
        assert name in sdk.remove_orphans(None)
        assert sdk.leftover_containers(None, run_id) == []
    finally:
        if owner.poll() is None:
            owner.kill()
        sdk.cleanup(None, run_id=run_id)


def test_a_live_fp16doctors_created_container_survives_the_next_ones_sweep(engine: None) -> None:
    _require_debian()
    run_id = f"itcreated{os.getpid()}"
    owner = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, run_id, "created"], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert owner.stdout is not None
        name = owner.stdout.readline().strip()
        assert name == f"fp16doctor-{run_id}"
        # The sweep a second fp16doctor makes on connecting (here kept to this test's run id, so other
        # users' containers on the engine are not touched): the owner is alive, so the container stays.
        assert sdk.cleanup(None, run_id=run_id, stopped_only=True)["containers"] == []
        assert sdk.leftover_containers(None, run_id) == [name]
        owner.kill()
        owner.wait(timeout=30)
        assert sdk.cleanup(None, run_id=run_id, stopped_only=True)["containers"] == [name]
        assert sdk.leftover_containers(None, run_id) == []
    finally:
        if owner.poll() is None:
            owner.kill()
        sdk.cleanup(None, run_id=run_id)


def test_a_step_past_the_bound_is_ended_inside_a_container_with_the_running_kernel_named(cpu_image: str) -> None:
    """The step watchdog in a container, as on the host (tests/integration/test_host_diagnose.py): float32 with
    TensorFlow's oneDNN ops on (any x86 CPU), its bound at half its own steady step. The container's run ends inside
    that step, the record says so, and its ops come from oneDNN's lines up to the cut."""
    onednn_on = {"TF_ENABLE_ONEDNN_OPTS": "1"}
    run_id = f"itcut{os.getpid()}"
    reference = sdk.run_in_stack(RunSpec("cpu", "float32", "original", QUICK, extra_env=onednn_on),
                                 get_stack("cpu"), None, None, lambda _e: None, image=cpu_image, run_id=run_id)
    assert reference["status"] == "ok", reference.get("error")
    # The bound is 50x the reference (engines/spec.py): half of float32's own step lands inside its convolutions.
    spec = RunSpec("cpu", "float32", "original", QUICK, extra_env=onednn_on,
                   reference_ms=reference["step_time_ms"]["median"] / 100,
                   reference_first_step_ms=reference["first_step_ms"])
    record = sdk.run_in_stack(spec, get_stack("cpu"), None, None, lambda _e: None, image=cpu_image, run_id=run_id)
    assert record["status"] == "ok", record.get("error")
    assert record["cut_in_step"] is True and record["bound_on"] == "steady_step"
    assert record["step_time_ms"]["censored"] is True and record["step_time_ms"]["n"] == 1
    window = record["profile"]["window"]
    assert window["kind"] == "bound_step" and window["cut_in_step"] is True
    ops = record.get("ops")
    assert ops is not None, record.get("ops_error")
    assert ops["source"] == "onednn_verbose"  # no trace: TensorFlow writes one only when the profiler stops
    # A primitive created and not executed by the cut is the kernel still running, at most the window's time (the cut
    # may also fall between two primitives, where none is in flight), as on the host.
    for item in ops["items"]:
        if item.get("in_flight"):
            assert item["layer"] is not None and 0 < item["ms_per_step"] <= window["wall_ms"], item
    assert sdk.leftover_containers(None, run_id) == []
