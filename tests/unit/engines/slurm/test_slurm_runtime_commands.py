"""Container runtimes on Slurm nodes (engines/slurm/runtimes.py): the exact command lines each runtime gets,
how a node's runtime is found, and the sweep of containers whose job ended. Apptainer and Enroot have
no Debian 12 package, so their commands are checked here, not run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.engines.slurm import runtimes
from fp16doctor.engines.slurm.runtimes import ContainerPlan
from fp16doctor.errors import DoctorError

PLAN = ContainerPlan(stack="cpu", image="fp16doctor/cpu:8a9bb30c6272", context_dir="/shared/w/r1/context/cpu",
                     image_dir="/shared/w/images", build_args=(("BASE_IMAGE", "debian:bookworm-slim"),
                                                               ("STACK", "cpu")))
GPU_PLAN = ContainerPlan(stack="tf2.15-gpu", image="fp16doctor/tf2.15-gpu:0123456789ab", context_dir="/c",
                         image_dir="/shared/w/images", gpu=True, registry="registry.example.org:5000/team")
RUN = {"name": "fp16doctor-77_0-cpu-float16-original", "job_id": "77_0", "env": {"KERAS_BACKEND": "tensorflow"},
       "binds": ["/tmp/fp16doctor-run-x", "/shared/w/cache"], "args": ["--precision", "float16"]}


def _which(*present: str) -> Any:
    return lambda name: f"/usr/bin/{name}" if name in present else None


def test_docker_and_podman_build_the_staged_context_on_the_node_with_the_stacks_build_args() -> None:
    for runtime in ("docker", "podman"):
        assert runtimes.prepare_commands(PLAN, runtime) == [[
            runtime, "build", "--tag", "fp16doctor/cpu:8a9bb30c6272",
            "--build-arg", "BASE_IMAGE=debian:bookworm-slim", "--build-arg", "STACK=cpu",
            "--label", "org.fp16doctor.managed=true", "--label", "org.fp16doctor.stack=cpu",
            "/shared/w/r1/context/cpu"]]


def test_with_a_registry_the_nodes_pull_and_keep_the_tag_every_engine_uses() -> None:
    ref = "registry.example.org:5000/team/fp16doctor/tf2.15-gpu:0123456789ab"
    assert runtimes.prepare_commands(GPU_PLAN, "podman") == [["podman", "pull", ref],
                                                             ["podman", "tag", ref, GPU_PLAN.image]]
    sif = "/shared/w/images/fp16doctor+tf2.15-gpu+0123456789ab.sif"
    assert runtimes.prepare_commands(GPU_PLAN, "apptainer") == [
        ["apptainer", "build", "--force", sif + ".partial", "docker://" + ref], ["mv", "-f", sif + ".partial", sif]]
    sqsh = "/shared/w/images/fp16doctor+tf2.15-gpu+0123456789ab.sqsh"
    # Enroot separates the registry from the path with '#'.
    assert runtimes.prepare_commands(GPU_PLAN, "pyxis") == [
        ["enroot", "import", "--output", sqsh + ".partial",
         "docker://registry.example.org:5000#team/fp16doctor/tf2.15-gpu:0123456789ab"],
        ["mv", "-f", sqsh + ".partial", sqsh]]


def test_without_a_registry_a_sif_is_converted_once_from_the_image_the_nodes_docker_built() -> None:
    sif = "/shared/w/images/fp16doctor+cpu+8a9bb30c6272.sif"
    convert = [["apptainer", "build", "--force", sif + ".partial", "docker-daemon://fp16doctor/cpu:8a9bb30c6272"],
               ["mv", "-f", sif + ".partial", sif]]
    assert runtimes.prepare_commands(PLAN, "apptainer", have_docker_image=True) == convert
    assert runtimes.prepare_commands(PLAN, "apptainer") == [*runtimes.prepare_commands(PLAN, "docker"), *convert]
    sqsh = "/shared/w/images/fp16doctor+cpu+8a9bb30c6272.sqsh"
    assert runtimes.prepare_commands(PLAN, "pyxis", have_docker_image=True) == [
        ["enroot", "import", "--output", sqsh + ".partial", "dockerd://fp16doctor/cpu:8a9bb30c6272"],
        ["mv", "-f", sqsh + ".partial", sqsh]]


def test_a_docker_run_is_labelled_with_its_job_and_gets_only_the_jobs_gpus() -> None:
    cpu = runtimes.run_command(PLAN, "docker", gpus=[], **RUN)
    assert cpu == ["docker", "run", "--rm", "--name", "fp16doctor-77_0-cpu-float16-original",
                   "--label", "org.fp16doctor.managed=true", "--label", "org.fp16doctor.slurm-job=77_0",
                   "--label", f"org.fp16doctor.slurm-user={os.getuid()}",
                   "--label", "org.fp16doctor.stack=cpu", "--network", "none", "--shm-size", "1g",
                   "--volume", "/tmp/fp16doctor-run-x:/tmp/fp16doctor-run-x",
                   "--volume", "/shared/w/cache:/shared/w/cache",
                   "--env", "KERAS_BACKEND=tensorflow", "fp16doctor/cpu:8a9bb30c6272", "--precision", "float16"]
    gpu = runtimes.run_command(GPU_PLAN, "docker", gpus=["GPU-a", "GPU-b"], user="1000:1000", **RUN)
    assert gpu[gpu.index("--gpus") + 1] == '"device=GPU-a,GPU-b"'
    assert gpu[gpu.index("--user") + 1] == "1000:1000"


def test_podman_gets_the_jobs_gpus_as_cdi_devices() -> None:
    cmd = runtimes.run_command(GPU_PLAN, "podman", gpus=["GPU-a", "GPU-b"], **RUN)
    assert cmd[:2] == ["podman", "run"] and "--gpus" not in cmd
    assert [cmd[i + 1] for i, part in enumerate(cmd) if part == "--device"] == ["nvidia.com/gpu=GPU-a",
                                                                              "nvidia.com/gpu=GPU-b"]
    assert "org.fp16doctor.slurm-job=77_0" in cmd


def test_apptainer_runs_the_shared_sif_with_nv_for_the_jobs_gpus() -> None:
    assert runtimes.run_command(GPU_PLAN, "apptainer", gpus=["0", "1"], **RUN) == [
        "apptainer", "exec", "--cleanenv", "--no-home", "--containall", "--writable-tmpfs",
        "--bind", "/tmp/fp16doctor-run-x,/shared/w/cache", "--env", "KERAS_BACKEND=tensorflow",
        "--nv", "--env", "CUDA_VISIBLE_DEVICES=0,1",
        "/shared/w/images/fp16doctor+tf2.15-gpu+0123456789ab.sif",
        "fp16doctor-python", "/opt/fp16doctor/workload/run_workload.py", "--precision", "float16"]
    assert "--nv" not in runtimes.run_command(PLAN, "apptainer", gpus=[], **RUN)


def test_pyxis_runs_each_cell_as_a_job_step_in_the_squashfs() -> None:
    assert runtimes.run_command(GPU_PLAN, "pyxis", gpus=["0"], **RUN) == [
        "srun", "--ntasks=1", "--nodes=1",
        "--container-image=/shared/w/images/fp16doctor+tf2.15-gpu+0123456789ab.sqsh",
        "--no-container-mount-home", "--container-remap-root", "--container-workdir=/opt/fp16doctor",
        "--container-mounts=/tmp/fp16doctor-run-x:/tmp/fp16doctor-run-x,/shared/w/cache:/shared/w/cache",
        "--export=ALL,KERAS_BACKEND=tensorflow",
        "fp16doctor-python", "/opt/fp16doctor/workload/run_workload.py", "--precision", "float16"]


def test_a_nodes_runtime_is_detected_daemon_first() -> None:
    assert runtimes.detect(_which("podman", "docker")) == "docker"
    assert runtimes.detect(_which("podman", "apptainer")) == "podman"
    assert runtimes.detect(_which("apptainer")) == "apptainer"
    assert runtimes.detect(_which()) is None


def test_a_runtime_not_on_path_is_a_one_line_error_with_a_hint() -> None:
    with pytest.raises(DoctorError) as raised:
        runtimes.require("apptainer", _which("docker"))
    assert raised.value.message == "--runtime apptainer needs apptainer on PATH, and this machine has none"
    assert "leave --runtime out" in raised.value.hint
    with pytest.raises(DoctorError) as unknown:
        runtimes.require("singularity-ce", _which("docker"))
    assert "docker, podman, apptainer, pyxis" in unknown.value.hint
    runtimes.require("podman", _which("podman"))


def test_the_sweep_removes_only_containers_whose_job_slurm_no_longer_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def fake_run(args: list[str], timeout_s: float = 0.0) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        out = "fp16doctor-5_0-cpu-float16-original 5_0\nfp16doctor-9_1-cpu-float32-original 9_1\n" \
            if args[1] == "ps" else ""
        return subprocess.CompletedProcess(args, 0, out, "")

    monkeypatch.setattr(runtimes, "_run", fake_run)
    asked: list[list[str]] = []

    def active(ids: list[str]) -> set[str]:
        asked.append(ids)
        return {"9_1"}

    assert runtimes.sweep("podman", active) == ["fp16doctor-5_0-cpu-float16-original"]
    assert asked == [["5_0", "9_1"]]
    # Only this user's: where Slurm hides other users' jobs, theirs would look ended.
    assert calls[0][:7] == ["podman", "ps", "--all", "--filter", "label=org.fp16doctor.slurm-job",
                            "--filter", f"label=org.fp16doctor.slurm-user={os.getuid()}"]
    assert calls[-1] == ["podman", "rm", "--force", "fp16doctor-5_0-cpu-float16-original"]
    calls.clear()
    assert runtimes.sweep("podman", lambda ids: None) == []  # squeue did not answer: nothing is judged
    assert [c[1] for c in calls] == ["ps"]


def test_a_plan_travels_to_the_job_as_json_and_back() -> None:
    import json

    assert ContainerPlan.from_dict(json.loads(json.dumps(PLAN.to_dict()))) == PLAN
    assert PLAN.image_file("pyxis") == Path("/shared/w/images/fp16doctor+cpu+8a9bb30c6272.sqsh")


def test_a_cell_runs_in_the_container_with_its_scratch_and_the_cache_bound_and_its_profile_there(
        tmp_path: Path) -> None:
    from fp16doctor.engines.slurm.job import ContainerEngine
    from fp16doctor.engines.spec import QUICK, RunSpec

    engine = ContainerEngine(PLAN, "podman", "77_0", [], "sha256:abc", tmp_path / "cache", None, None)
    spec = RunSpec("cpu", "float16", "original", QUICK, extra_env={"TF_ENABLE_ONEDNN_OPTS": "0"})
    cmd = engine.command(spec, tmp_path / "scratch", tmp_path / "scratch" / "profile")
    assert cmd[:2] == ["podman", "run"] and engine.container == "fp16doctor-77_0-cpu-float16-original"
    scratch, cache = tmp_path / "scratch", tmp_path / "cache"
    assert f"{scratch}:{scratch}" in cmd and f"{cache}:{cache}" in cmd
    assert "TF_ENABLE_ONEDNN_OPTS=0" in cmd  # an experiment's change reaches the workload inside
    args = cmd[cmd.index(PLAN.image) + 1:]
    assert args[:4] == ["--precision", "float16", "--variant", "original"]
    assert args[-2:] == ["--profile-dir", str(tmp_path / "scratch" / "profile")]


@pytest.mark.parametrize(("argv", "message"), [
    (["--runtime", "docker"], "--runtime applies to Slurm jobs"),
    (["--slurm", "--runtime", "docker"], "--runtime runs a stack's container, and no --stack was given"),
    (["--slurm", "--stack", "cpu", "--docker-host", "unix:///x.sock"], "--docker-host does not combine"),
])
def test_runtime_options_out_of_place_are_one_line_errors(tmp_path: Path, argv: list[str], message: str) -> None:
    import sys

    proc = subprocess.run([sys.executable, "-m", "fp16doctor", "diagnose", "--out", str(tmp_path / "o"), *argv],
                          capture_output=True, text=True, timeout=120)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode not in (0, None) and len(errors) == 1 and message in errors[0], proc.stderr
    assert "hint:" in proc.stderr and "Traceback" not in proc.stderr


def test_a_container_gets_the_jobs_gpus_by_uuid_else_by_slurms_indices() -> None:
    from fp16doctor.engines.slurm.job import granted_gpu_ids

    assert granted_gpu_ids([{"index": 2, "uuid": "GPU-c"}], {"SLURM_JOB_GPUS": "2"}) == ["GPU-c"]
    assert granted_gpu_ids([], {"SLURM_JOB_GPUS": "1,3", "CUDA_VISIBLE_DEVICES": "0,1"}) == ["1", "3"]
    assert granted_gpu_ids([], {"CUDA_VISIBLE_DEVICES": "0"}) == ["0"]
    assert granted_gpu_ids([], {}) == []
