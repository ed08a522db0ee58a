"""`fp16doctor diagnose --slurm --stack cpu --runtime docker|podman` through real sbatch on the one-node
cluster (`bash .ci/slurm-up.sh`), with the `cpu` stack's container run by the node's Docker or podman.

Each diagnose is one comparison group (float32 + float16 on the original workload): one exclusive job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_env import ca_bundle, require_engine
from test_slurm_diagnose import _cluster_node, _progress_lines, _wait_for

from fp16doctor.engines import context as build
from fp16doctor.engines.slurm import runtimes
from fp16doctor.errors import EXIT_OK, EXIT_PARTIAL
from fp16doctor.stacks import get_stack

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

CHEAP = ["--slurm", "--stack", "cpu", "--no-host", "--precision", "float32", "--precision", "float16",
         "--variant", "original", "--no-experiments"]


def _image() -> str:
    """The tag the nodes build from the staged context (the same a Docker engine gives it)."""
    stack = get_stack("cpu")
    options = build.BuildOptions(ca_bundle=ca_bundle())
    return build.image_tag(stack, build.context_hash(build.context_files(stack, options),
                                                     build.build_args(stack, options)))


def _diagnose(out: Path, runtime: str, *extra: str) -> subprocess.Popen[str]:
    """The smoke size: the runtimes' tests check where and how the runs ran, and what a cancel leaves."""
    ca = ca_bundle()  # pip inside the node's build goes through this machine's TLS proxy
    return subprocess.Popen([sys.executable, "-m", "fp16doctor", "diagnose", "--size", "smoke", *CHEAP, "--runtime",
                             runtime, "--out", str(out), *(["--ca-bundle", str(ca)] if ca else []), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _job_containers(runtime: str) -> list[str]:
    proc = subprocess.run([runtime, "ps", "--all", "--filter", f"label={runtimes.JOB_LABEL}", "--format",
                           "{{.Names}}"], capture_output=True, text=True, timeout=60)
    return [line for line in proc.stdout.split() if line]


@pytest.fixture(scope="module")
def node() -> str:
    return _cluster_node()


@pytest.fixture
def docker_runtime(node: str) -> Iterator[str]:
    require_engine()
    yield "docker"
    assert _job_containers("docker") == []


@pytest.fixture
def podman_runtime(node: str) -> Iterator[str]:
    if shutil.which("podman") is None:
        pytest.skip("no podman here; CI installs Debian's (.ci/run)")
    tag = _image()
    if subprocess.run(["podman", "image", "exists", tag], timeout=60).returncode != 0:
        # The node's podman has no layer cache of its own here: give it the image Docker built (as a
        # registry would), so the test times the run, not a TensorFlow download.
        require_engine()
        if subprocess.run(["docker", "image", "inspect", tag], capture_output=True, timeout=60).returncode != 0:
            pytest.skip(f"{tag} is not built yet (the docker runtime test builds it on the node)")
        save = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE)
        subprocess.run(["podman", "load"], stdin=save.stdout, check=True, capture_output=True, timeout=1200)
        assert save.wait(timeout=60) == 0
    yield "podman"
    assert _job_containers("podman") == []


def _check_runs(out: Path, node: str, runtime: str) -> list[dict[str, Any]]:
    doc = json.loads((out / "results.json").read_text())
    runs = doc["runs"]
    assert {(r["stack"], r["precision"]) for r in runs} == {("cpu", "float32"), ("cpu", "float16")}
    for run in runs:
        assert run["status"] == "ok", run.get("error")
        engine = run["engine"]
        assert engine["kind"] == "slurm" and engine["runtime"] == runtime and engine["node"] == node
        assert engine["image"] == _image() and str(engine["image_digest"]).startswith("sha256:")
        assert "python" not in engine  # the stack's interpreter ran, not the node's
        # Inside the image: the stack's own pins.
        assert run["software"]["tensorflow"] == get_stack("cpu").tensorflow
        assert run["step_time_ms"]["median"] > 0
    assert doc["slurm"]["runtime"] == runtime and doc["verdicts"]
    return runs


@pytest.mark.docker
def test_the_cpu_stack_runs_in_docker_in_a_slurm_job(docker_runtime: str, node: str, tmp_path: Path) -> None:
    proc = _diagnose(tmp_path, docker_runtime)
    _, stderr = proc.communicate(timeout=1800)
    assert proc.returncode == EXIT_OK, stderr[-3000:]
    _check_runs(tmp_path, node, "docker")
    assert f"runs {_image()} with docker" in stderr


@pytest.mark.podman
def test_the_cpu_stack_runs_in_podman_in_a_slurm_job(podman_runtime: str, node: str, tmp_path: Path) -> None:
    proc = _diagnose(tmp_path, podman_runtime)
    _, stderr = proc.communicate(timeout=1800)
    assert proc.returncode == EXIT_OK, stderr[-3000:]
    _check_runs(tmp_path, node, "podman")


@pytest.mark.docker
def test_a_job_cancelled_mid_run_leaves_no_container(docker_runtime: str, node: str, tmp_path: Path) -> None:
    proc = _diagnose(tmp_path, docker_runtime)

    def float16_under_way() -> bool:
        # Its framework loading in the container: seconds on any CPU at any size, its steps still to come.
        return any(e.get("kind") == "event" and e.get("run") == "cpu / float16 / original"
                   and e["event"].get("phase") == "import" for e in _progress_lines(tmp_path))

    _wait_for(float16_under_way, proc, 1200, "float16 run under way")
    assert _job_containers("docker"), "the float16 run's container is not running"
    job = next(e["job_id"] for e in _progress_lines(tmp_path) if e.get("kind") == "job")
    subprocess.run(["scancel", job.split("_")[0]], check=True)
    _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == EXIT_PARTIAL, stderr[-3000:]
    runs = {r["precision"]: r for r in json.loads((tmp_path / "results.json").read_text())["runs"]}
    assert runs["float32"]["status"] == "ok"
    assert runs["float16"]["failure_kind"] == "CANCELLED" and runs["float16"]["engine"]["runtime"] == "docker"
    deadline = time.monotonic() + 30
    while _job_containers("docker") and time.monotonic() < deadline:
        time.sleep(1)
    assert _job_containers("docker") == []


@pytest.mark.docker
def test_the_sweep_removes_a_container_whose_job_has_ended(docker_runtime: str) -> None:
    from fp16doctor.engines.slurm import job as slurm_job

    name = "fp16doctor-999999_0-left-behind"
    subprocess.run(["docker", "run", "--detach", "--name", name, "--label", f"{runtimes.JOB_LABEL}=999999_0",
                    "--label", f"{runtimes.USER_LABEL}={os.getuid()}",
                    "--network", "none", "--entrypoint", "sleep", "debian:bookworm-slim", "300"],
                   check=True, capture_output=True)
    try:
        assert runtimes.sweep("docker", slurm_job._active_jobs) == [name]
        assert name not in _job_containers("docker")
    finally:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True)
