"""Two real Docker engines on this machine: the default one (`bash .ci/docker-up.sh`) and a second
dockerd this module starts with its own socket, data root, exec root, pid file and bridge.

`fp16doctor diagnose --stack cpu --docker-host A --docker-host B` must spread the runs over both; a
second engine killed mid-run must fail only its run in flight, and --resume must complete it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from docker_env import ca_bundle, require_engine
from scale_second_engine import SecondEngine
from slow_path import forced_cut_env

from fp16doctor.engines.context import BuildOptions
from fp16doctor.engines.docker import sdk
from fp16doctor.engines.docker.build import ensure_image
from fp16doctor.errors import EXIT_OK, EXIT_PARTIAL
from fp16doctor.stacks import get_stack
from fp16doctor.workload.protocol import PREFIX

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FIRST = "unix:///var/run/docker.sock"


@pytest.fixture(scope="module")
def cpu_image() -> str:
    require_engine(FIRST)
    if os.geteuid() != 0 or shutil.which("dockerd") is None or shutil.which("ip") is None:
        pytest.skip("a second dockerd needs root, dockerd and ip")
    return ensure_image(get_stack("cpu"), FIRST, BuildOptions(docker_host=FIRST, ca_bundle=ca_bundle()),
                        lambda _line: None)


@pytest.fixture(scope="module")
def second(cpu_image: str) -> Iterator[SecondEngine]:
    engine = SecondEngine()
    try:
        engine.start()
        # No registry here: the image travels from the first engine through the API (save | load).
        sdk.copy_image(FIRST, engine.url, cpu_image, lambda _line: None)
        yield engine
    finally:
        sdk.forget_client(engine.url)
        engine.remove()


def _diagnose(out: Path, *extra: str, engines: list[str], cut: bool = False) -> subprocess.Popen[str]:
    # The precisions named and no experiments, so the matrix is the same on every CPU (bfloat16 CPUs add
    # mixed_bfloat16 by default; a CPU whose oneDNN runs float16's reference kernels gets oneDNN-off experiments).
    # The smoke size: what these tests check (where the runs went, which one an engine's death failed, what --resume
    # kept) does not depend on the steps' size. The kill waits for a run's framework import (_under_way), seconds
    # on any CPU at any size, not for its steps.
    command = [sys.executable, "-m", "fp16doctor", "diagnose", "--size", "smoke", "--stack", "cpu", "--no-host",
               "--precision", "float32", "--precision", "float16", "--precision", "mixed_float16",
               "--no-experiments", "--out", str(out), *extra]
    for url in engines:
        command += ["--docker-host", url]
    env = forced_cut_env() if cut else dict(os.environ)
    ca = ca_bundle()
    if ca is not None:
        env["FP16DOCTOR_CA_BUNDLE"] = str(ca)  # the same image tag the fixture built
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, err = proc.communicate(timeout=900)
    return proc.returncode, out + err


def _leftovers(url: str) -> list[Any]:
    client = docker.DockerClient(base_url=url)
    return list(client.containers.list(all=True, filters={"label": f"{sdk.MANAGED_LABEL}=true"}))


def test_one_diagnose_spreads_the_runs_over_two_engines(second: SecondEngine, tmp_path: Path) -> None:
    code, output = _finish(_diagnose(tmp_path, engines=[FIRST, second.url]))
    assert code == EXIT_OK, output[-3000:]

    doc = json.loads((tmp_path / "results.json").read_text())
    runs = doc["runs"]
    assert len(runs) == 3 and all(r["status"] == "ok" for r in runs), output[-3000:]
    assert {r["engine"]["docker_host"] for r in runs} == {FIRST, second.url}
    assert {e["docker_host"] for e in doc["engines"]} == {FIRST, second.url}
    assert _leftovers(FIRST) == [] and _leftovers(second.url) == []


def _own_median(run: dict[str, Any]) -> float:
    step = run["step_time_ms"]
    return float(step.get("single_process", step)["median"])


def _under_way(container: Any) -> bool:
    """The container's workload has reported that it loads the framework: a run is under way in it, its import, model
    and steps still to come. Its "import" phase, not its steps: the import takes seconds on any CPU, whatever the
    size, where a smoke run's steps, or a run cut by the slow-step bound, can end within moments."""
    try:
        logs: bytes = container.logs(stdout=True, stderr=False)
    except docker.errors.DockerException:
        return False
    events = [json.loads(line[len(PREFIX):]) for line in logs.decode("utf-8", "replace").splitlines()
              if line.startswith(PREFIX)]
    return any(e.get("event") == "phase" and e.get("phase") == "import" for e in events)


@pytest.mark.parametrize("cut", [False, True], ids=["as-measured", "16-bit-runs-cut"])
def test_an_engine_killed_mid_run_fails_its_run_and_resume_completes_it(
    second: SecondEngine, tmp_path: Path, cut: bool
) -> None:
    """The second engine is killed once a container on it reports that its run is under way (an event, not a guess
    at how long its runs take), also with every 16-bit run cut by the slow-step bound."""
    watcher = docker.DockerClient(base_url=second.url)
    killed = threading.Event()

    def kill_once_a_run_is_under_way() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                running = watcher.containers.list(filters={"label": f"{sdk.MANAGED_LABEL}=true"})
            except docker.errors.DockerException:
                return
            if any(_under_way(container) for container in running):
                second.kill()
                killed.set()
                return
            time.sleep(0.2)

    thread = threading.Thread(target=kill_once_a_run_is_under_way, daemon=True)
    thread.start()
    code, output = _finish(_diagnose(tmp_path, engines=[FIRST, second.url], cut=cut))
    thread.join(10)
    assert killed.is_set(), output[-3000:]
    assert code == EXIT_PARTIAL, output[-3000:]

    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    failed = [r for r in runs if r["status"] == "failed"]
    ok = [r for r in runs if r["status"] == "ok"]
    assert len(failed) == 1 and len(ok) == 2, output[-3000:]
    assert failed[0]["error"].startswith(f"engine {second.url} died during the run")
    assert failed[0]["engine"]["docker_host"] == second.url
    assert all(r["step_time_ms"]["median"] > 0 for r in ok)
    cell = f"{failed[0]['stack']} / {failed[0]['precision']} / {failed[0]['variant']}"
    assert f"1 run(s) failed ({cell})" in " ".join(output.split())
    assert _leftovers(FIRST) == []

    second.start()  # the machine is back; its leftover container is cleaned up below by the engine
    code, output = _finish(_diagnose(tmp_path, "--resume", engines=[FIRST, second.url], cut=cut))
    assert code == EXIT_OK, output[-3000:]
    assert "resuming: 2 of 3 runs already in" in output
    resumed = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert [r["status"] for r in resumed] == ["ok"] * 3
    # The measured runs were kept as they were: what their own processes measured (the rounds, timed again with the
    # resumed run, replace the step statistics and keep those under single_process).
    before = {(r["precision"], r["variant"]): _own_median(r) for r in ok}
    assert {(r["precision"], r["variant"]): _own_median(r) for r in resumed
            if (r["precision"], r["variant"]) in before} == before
    assert _leftovers(FIRST) == [] and _leftovers(second.url) == []
