"""The Slurm engine on plain data: the job script, squeue / scontrol output recorded on a real cluster
(Slurm 22.05, .ci/slurm-up.sh), the state a job's runs fail with, and the engine's reading of a job's
progress file with the Slurm calls replaced."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.engines.slurm import engine as slurm_engine
from fp16doctor.engines.slurm import tools as slurm
from fp16doctor.engines.slurm.engine import SlurmEngine
from fp16doctor.engines.slurm.job import allocated_gpus, job_id_from_env
from fp16doctor.engines.slurm.options import SlurmOptions
from fp16doctor.engines.slurm.tools import JobState
from fp16doctor.engines.spec import (
    QUICK,
    RoundsRequest,
    RunSpec,
    comparison_groups,
    spec_from_dict,
    spec_to_dict,
)
from fp16doctor.errors import DoctorError

RECORDED = Path(__file__).resolve().parents[3] / "data" / "recordings" / "slurm"


def _recorded(name: str) -> str:
    return (RECORDED / name).read_text()


# ----------------------------------------------------------------------------------- parsing


def test_squeue_lists_each_array_task_with_its_reason_and_node() -> None:
    states = slurm.parse_squeue("5_0|RUNNING|None|vm\n5_1|PENDING|Resources|\n")
    assert states == [JobState("5_0", "RUNNING", "", "vm"), JobState("5_1", "PENDING", "Resources", "")]
    recorded = slurm.parse_squeue(_recorded("squeue-array-pending.txt"))
    assert [(s.job_id, s.state, s.reason) for s in recorded] == [("5_0", "PENDING", "Resources"),
                                                                ("5_1", "PENDING", "Resources")]
    assert not any(s.node for s in recorded) and all(s.active for s in recorded)
    # After scancel of task 0: only task 1 is listed, running on the node.
    assert slurm.parse_squeue(_recorded("squeue-array-after-cancel.txt")) == [JobState("9_1", "RUNNING", "", "vm")]


def test_scontrol_names_array_tasks_as_sbatch_does_and_keeps_their_end_state() -> None:
    cancelled = {s.job_id: s for s in slurm.parse_scontrol_jobs(_recorded("scontrol-array-cancelled.txt"))}
    assert cancelled["9_0"].state == "CANCELLED" and not cancelled["9_0"].active
    assert cancelled["9_0"].node == "vm"  # NodeList, not ReqNodeList=(null)
    assert cancelled["9_1"].state == "RUNNING" and cancelled["9_1"].active
    timeout = slurm.parse_scontrol_jobs(_recorded("scontrol-array-timeout.txt"))
    assert {s.job_id: s.state for s in timeout} == {"5_0": "TIMEOUT", "5_1": "TIMEOUT"}
    # Tasks still pending together are one line ("ArrayTaskId=0-1"): each task is named.
    pending = slurm.parse_scontrol_jobs(_recorded("scontrol-array-pending.txt"))
    assert [(s.job_id, s.state) for s in pending] == [("5_0", "PENDING"), ("5_1", "PENDING")]


def test_a_plain_job_keeps_its_own_id() -> None:
    line = ("JobId=4711 JobName=fp16doctor-x UserId=me(1) JobState=NODE_FAIL Reason=None "
            "ArrayJobId=N/A NodeList=gpu-a100-03 ExitCode=0:0")
    assert slurm.parse_scontrol_jobs(line) == [JobState("4711", "NODE_FAIL", "", "gpu-a100-03", "0:0")]


def test_min_job_age_comes_from_the_controllers_config() -> None:
    assert slurm.parse_min_job_age_s(_recorded("scontrol-show-config.txt")) == 300.0
    assert slurm.parse_min_job_age_s("SLURM_VERSION = 22.05.8\n") is None


@pytest.mark.parametrize(("state", "kind"), [
    ("CANCELLED", "CANCELLED"), ("CANCELLED by 0", "CANCELLED"), ("NODE_FAIL", "NODE_FAIL"),
    ("TIMEOUT", "TIMEOUT"), ("PREEMPTED", "PREEMPTED"), ("OUT_OF_MEMORY", "OUT_OF_MEMORY"),
    ("COMPLETED", "FAILED"), ("", "LOST"),
])
def test_the_runs_a_job_lost_fail_with_slurms_state(state: str, kind: str) -> None:
    assert slurm.failure_kind(state) == kind


# --------------------------------------------------------------------------------- the script


def test_sbatch_gets_what_the_user_asked_on_its_command_line() -> None:
    options = SlurmOptions(partition="gpu", gres="gpu:a100:1", constraint="a100", account="proj", qos="short",
                           time="00:30:00", extra_args=("--mem=16G",))
    assert options.sbatch_args() == ["--partition=gpu", "--gres=gpu:a100:1", "--constraint=a100",
                                     "--account=proj", "--qos=short", "--time=00:30:00", "--mem=16G"]
    assert SlurmOptions(gres="2").sbatch_args() == ["--gres=gpu:2"] and SlurmOptions(gres="2").gpu
    assert SlurmOptions().sbatch_args() == [] and not SlurmOptions().gpu


def test_the_job_script_starts_from_an_empty_environment_and_runs_the_nodes_python(tmp_path: Path) -> None:
    script = slurm.job_script(python="/shared/venvs/tf 2/bin/python", runner_module="fp16doctor.engines.slurm.job",
                              lib_dir=tmp_path / "lib", batch_dir=tmp_path / "array-0",
                              env={"HOME": "/home/me", "KERAS_BACKEND": "tensorflow"}, exclusive=True,
                              version="0.1.0")
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    directives = [line for line in lines if line.startswith("#SBATCH")]
    # Defaults as directives, so SBATCH_* variables and sbatch's command line override them.
    assert directives == ["#SBATCH --export=NONE", "#SBATCH --no-requeue", "#SBATCH --nodes=1",
                          "#SBATCH --ntasks=1", "#SBATCH --exclusive"]
    assert f"export PYTHONPATH={tmp_path / 'lib'}" in lines and "export KERAS_BACKEND=tensorflow" in lines
    assert lines[-1] == ("exec '/shared/venvs/tf 2/bin/python' -m fp16doctor.engines.slurm.job "
                         f"{tmp_path / 'array-0'}/\"${{SLURM_ARRAY_TASK_ID:-0}}\"")
    gpu = slurm.job_script(python="/p", runner_module="m", lib_dir=tmp_path, batch_dir=tmp_path, env={},
                           exclusive=False, version="0.1.0")
    assert "--exclusive" not in gpu
    checked = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert checked.returncode == 0, checked.stderr


def test_a_workdir_under_tmp_or_on_tmpfs_looks_node_local(tmp_path: Path) -> None:
    mounts = "/dev/sda1 / ext4 rw 0 0\nnfs:/home /home nfs4 rw 0 0\ntmpfs /scratch tmpfs rw 0 0\n"
    assert "tmpfs" in (slurm.node_local_reason(Path("/scratch/me/run"), mounts) or "")
    assert "/tmp" in (slurm.node_local_reason(Path("/tmp/x"), mounts) or "")
    assert slurm.node_local_reason(Path("/home/me/fp16doctor-out"), mounts) is None


def test_no_sbatch_on_path_is_an_error_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(DoctorError) as raised:
        slurm.require_tools()
    assert "sbatch" in raised.value.message and "login node" in raised.value.hint


# ------------------------------------------------------------------------------- on the node


def test_a_job_finds_its_gpus_by_uuid_or_by_slurms_indices() -> None:
    gpus = [{"index": i, "uuid": f"GPU-{i}", "name": "NVIDIA A100"} for i in range(4)]
    assert allocated_gpus(gpus, {"CUDA_VISIBLE_DEVICES": "GPU-2"}) == [gpus[2]]
    assert allocated_gpus(gpus, {"CUDA_VISIBLE_DEVICES": "0", "SLURM_JOB_GPUS": "3"}) == [gpus[3]]
    assert allocated_gpus(gpus[:1], {"CUDA_VISIBLE_DEVICES": "0", "SLURM_JOB_GPUS": "3"}) == gpus[:1]
    assert allocated_gpus(gpus, {}) == []
    assert job_id_from_env({"SLURM_JOB_ID": "12", "SLURM_ARRAY_JOB_ID": "9", "SLURM_ARRAY_TASK_ID": "2"}) == "9_2"
    assert job_id_from_env({"SLURM_JOB_ID": "12"}) == "12"


def test_a_spec_travels_to_the_job_as_json_and_back() -> None:
    spec = RunSpec("host", "float16", "original", QUICK, reference_ms=120.0, reference_first_step_ms=900.0,
                   experiment={"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}, "tests": None})
    assert spec_from_dict(json.loads(json.dumps(spec_to_dict(spec)))) == spec


def test_a_rounds_spec_travels_as_one_field_and_a_job_file_written_with_flat_rounds_keys_still_reads() -> None:
    rounds = RoundsRequest(("float32", "float16", "float32+synthetic_input"), profiled=("float16",), budget_s=5.0,
                           end_s=41.5)
    spec = RunSpec("host", "float32", "original", QUICK, rounds=rounds)
    data = json.loads(json.dumps(spec_to_dict(spec)))
    assert data["rounds"]["of"] == list(rounds.of) and "rounds_of" not in data
    assert spec_from_dict(data) == spec and spec_from_dict(data).rounds_args() == spec.rounds_args()
    flat = {k: v for k, v in data.items() if k != "rounds"}
    old = {**flat, "rounds_of": list(rounds.of), "rounds_profiled": ["float16"], "rounds_budget_s": 5.0,
           "rounds_end_s": 41.5}
    assert spec_from_dict(old) == spec
    plain = {**flat, "rounds_of": [], "rounds_profiled": [], "rounds_budget_s": None, "rounds_end_s": None}
    assert spec_from_dict(plain).rounds is None and spec_from_dict(plain).rounds_args() == []


def test_comparison_groups_keep_a_stack_and_variant_together_float32_first() -> None:
    specs = [RunSpec("host", p, v, QUICK) for v, p in (("original", "float16"), ("synthetic_input", "float32"),
                                                        ("original", "float32"), ("original", "mixed_float16"))]
    groups = comparison_groups(specs)
    assert [[(s.variant, s.precision) for s in g] for g in groups] == [
        [("original", "float32"), ("original", "float16"), ("original", "mixed_float16")],
        [("synthetic_input", "float32")]]


# ----------------------------------------------------------------------- the engine, Slurm faked


class Sink:
    def __init__(self, runs: list[dict[str, Any]] | None = None) -> None:
        self.records: list[dict[str, Any]] = list(runs or [])
        self.notes: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.started: list[str] = []

    def runs(self) -> list[dict[str, Any]]:
        return list(self.records)

    def note(self, message: str) -> None:
        self.notes.append(message)

    def start_run(self, spec: RunSpec) -> None:
        self.started.append(spec.label)

    def event(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def finish_run(self, record: dict[str, Any]) -> None:
        self.records = [r for r in self.records
                        if (r["precision"], r["variant"]) != (record["precision"], record["variant"])]
        self.records.append(record)


class FakeSlurm:
    """sbatch, squeue and scontrol as one cluster would answer: the job 'runs' by writing its progress
    file on the first poll, then leaves the queue in `end_state`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, end_state: str, finished: int) -> None:
        self.end_state = end_state
        self.finished = finished  # how many of the group's runs the job finishes before it ends
        self.submitted: list[tuple[Path, list[str]]] = []
        self.cancelled: list[str] = []
        self.polls = 0
        monkeypatch.setattr(slurm, "require_tools", lambda: None)
        monkeypatch.setattr(slurm, "min_job_age_s", lambda: 300.0)
        monkeypatch.setattr(slurm, "submit", self.submit)
        monkeypatch.setattr(slurm, "queued", self.queued)
        monkeypatch.setattr(slurm, "shown", self.shown)
        monkeypatch.setattr(slurm, "named", lambda name: [])
        monkeypatch.setattr(slurm, "cancel", lambda ids: self.cancelled.extend(ids))
        monkeypatch.setattr(slurm_engine, "POLL_S", 0.0)

    def submit(self, script: Path, args: list[str]) -> str:
        self.submitted.append((script, args))
        self.group = json.loads((script.parent / "0" / "group.json").read_text())
        return "77"

    def queued(self, ids: Any) -> list[JobState]:
        self.polls += 1
        if self.polls == 1:
            return [JobState("77_0", "PENDING", "Resources")]
        if self.polls == 2:
            self._run_job()
            return [JobState("77_0", "RUNNING", "", "gpu-03")]
        return []

    def shown(self, job_id: str) -> list[JobState]:
        return [JobState("77_0", self.end_state, "", "gpu-03")]

    def _run_job(self) -> None:
        script, _ = self.submitted[0]
        task = script.parent / "0"
        group = json.loads((task / "group.json").read_text())
        lines = [{"kind": "job", "job_id": "77_0", "node": "gpu-03", "gpus": []}]
        for spec in group["specs"][: self.finished]:
            lines.append({"kind": "event", "run": "x", "event": {"event": "phase", "phase": "train"}})
            lines.append({"kind": "record", "record": {
                "stack": spec["stack"], "precision": spec["precision"], "variant": spec["variant"], "status": "ok",
                "step_time_ms": {"median": 100.0}, "machine": "gpu-03",
                "engine": {"kind": "slurm", "job_id": "77_0", "node": "gpu-03"}}})
        if self.finished == len(group["specs"]):
            lines.append({"kind": "end"})
        (task / "progress.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


GROUP = [RunSpec("host", "float32", "original", QUICK), RunSpec("host", "float16", "original", QUICK)]


def test_a_job_cancelled_mid_group_keeps_its_finished_run_and_fails_the_rest_with_cancelled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm(monkeypatch, "CANCELLED", finished=1)
    sink = Sink()
    SlurmEngine(SlurmOptions(partition="cpu"), tmp_path, python="/usr/bin/python3", run_id="abc").run_groups(
        [GROUP], sink)
    runs = {r["precision"]: r for r in sink.records}
    assert runs["float32"]["status"] == "ok"
    lost = runs["float16"]
    assert lost["status"] == "failed" and lost["failure_kind"] == "CANCELLED"
    assert lost["engine"] == {"kind": "slurm", "runtime": "host", "job_id": "77_0", "node": "gpu-03",
                              "name": "gpu-03", "label": "slurm gpu-03", "rerun": ["--slurm"]}
    assert "--resume" in lost["error"] and lost["machine"] == "gpu-03"
    _, args = fake.submitted[0]
    assert "--job-name=fp16doctor-abc" in args and "--comment=fp16doctor run abc" in args
    assert "--array=0-0" in args and "--partition=cpu" in args
    # Live progress per group: pending with Slurm's reason, running where, how it ended.
    assert [n for n in sink.notes if n.startswith("host")] == ["host / original: job 77_0 pending in Slurm (Resources)",
                              "host / original: job 77_0 running on gpu-03",
                              "host / original: job 77_0 ended CANCELLED on gpu-03"]
    assert {"event": "placed", "run": "host / float16 / original", "where": "gpu-03 (job 77_0)"} in sink.events
    assert (tmp_path / "slurm" / "abc").is_dir() and not (tmp_path / "slurm" / "abc" / "lib").exists()


def test_a_completed_job_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeSlurm(monkeypatch, "COMPLETED", finished=2)
    sink = Sink()
    SlurmEngine(SlurmOptions(), tmp_path, python="/usr/bin/python3", run_id="abc").run_groups([GROUP], sink)
    assert [r["status"] for r in sink.records] == ["ok", "ok"]
    assert sink.notes[-1] == "host / original: job 77_0 done on gpu-03"
    assert not (tmp_path / "slurm" / "abc").exists()


def test_resume_sends_a_groups_missing_cell_to_its_node_bounded_by_its_float32(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm(monkeypatch, "COMPLETED", finished=1)
    measured = {"stack": "host", "precision": "float32", "variant": "original", "status": "ok",
                "step_time_ms": {"median": 130.0}, "first_step_ms": 900.0,
                "engine": {"kind": "slurm", "job_id": "70_0", "node": "gpu-07"}}
    sink = Sink([measured])
    SlurmEngine(SlurmOptions(), tmp_path, python="/usr/bin/python3", run_id="abc").run_groups([GROUP[1:]], sink)
    _, args = fake.submitted[0]
    assert "--nodelist=gpu-07" in args
    group = fake.group
    assert group["specs"][0]["reference_ms"] == 130.0 and group["specs"][0]["reference_first_step_ms"] == 900.0


def test_ctrl_c_cancels_by_the_recorded_job_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm(monkeypatch, "COMPLETED", finished=2)

    def interrupted(ids: Any) -> list[JobState]:
        if fake.cancelled:
            return []
        raise KeyboardInterrupt

    monkeypatch.setattr(slurm, "queued", interrupted)
    with pytest.raises(KeyboardInterrupt):
        SlurmEngine(SlurmOptions(), tmp_path, python="/usr/bin/python3", run_id="abc").run_groups([GROUP], Sink())
    assert fake.cancelled == ["77"]


def test_a_stack_is_staged_as_its_build_context_with_the_tag_a_docker_engine_gives_it(tmp_path: Path) -> None:
    from fp16doctor.engines import context as build
    from fp16doctor.stacks import get_stack

    engine = SlurmEngine(SlurmOptions(runtime="podman"), tmp_path, python=sys.executable, run_id="abc")
    engine.prepare("cpu")
    plan = engine.plans["cpu"]
    options = build.BuildOptions(ca_bundle=build.default_ca_bundle())
    files = build.context_files(get_stack("cpu"), options)
    assert plan.image == build.image_tag(get_stack("cpu"), build.context_hash(files, build.build_args(get_stack("cpu"),
                                                                                                   options)))
    context = Path(plan.context_dir)
    assert (context / "Dockerfile").read_bytes() == files["Dockerfile"]
    assert (context / "fp16doctor" / "workload" / "run_workload.py").is_file()
    assert plan.runtime == "podman" and dict(plan.build_args)["BASE_IMAGE"] == "debian:bookworm-slim"
    assert plan.image_dir == str(tmp_path / "slurm" / "images")  # shared by every invocation, like the cache


def test_a_jobs_records_name_the_job_the_node_and_its_gpu(tmp_path: Path) -> None:
    from fp16doctor.engines.slurm.job import FileSink

    fields = {"job_id": "77_1", "node": "gpu-03", "name": "gpu-03", "gpu_uuid": "GPU-2", "gpu_name": "NVIDIA A100"}
    sink = FileSink(tmp_path / "progress.jsonl", fields, "gpu-03")
    sink.finish_run({"stack": "host", "precision": "float16", "variant": "original", "status": "ok",
                     "device": "gpu:0", "engine": {"kind": "host", "python": "/p"}})
    sink.finish_run({"stack": "host", "precision": "float32", "variant": "synthetic_input", "status": "ok",
                     "device": "cpu", "engine": {"kind": "host", "python": "/p"}})
    written = [json.loads(line)["record"] for line in (tmp_path / "progress.jsonl").read_text().splitlines()]
    gpu, cpu = written
    assert gpu["engine"] == {"kind": "slurm", "runtime": "host", "python": "/p", **fields, "label": "slurm gpu-03",
                             "rerun": ["--slurm"]}
    assert gpu["machine"] == cpu["machine"] == "gpu-03"
    assert "gpu_uuid" not in cpu["engine"] and cpu["engine"]["job_id"] == "77_1"


def test_a_cell_the_stack_cannot_run_is_recorded_skipped_instead_of_costing_a_job(tmp_path: Path) -> None:
    class Sink:
        def __init__(self) -> None:
            self.runs: list[dict[str, Any]] = []

        def finish_run(self, record: dict[str, Any]) -> None:
            self.runs.append(record)

    sink = Sink()
    engine = slurm_engine.SlurmEngine(SlurmOptions(), tmp_path)
    specs = [RunSpec("tf2.10-cpu", "float32", "original", QUICK), RunSpec("tf2.10-cpu", "bfloat16", "original", QUICK),
             RunSpec("host", "bfloat16", "original", QUICK)]
    kept = engine._runnable(specs, sink)  # type: ignore[arg-type]  (a sink that keeps records)
    assert [(s.stack, s.precision) for s in kept] == [("tf2.10-cpu", "float32"), ("host", "bfloat16")]
    [skipped] = sink.runs
    assert skipped["status"] == "skipped" and "refuses floatx bfloat16" in skipped["error"]
    assert skipped["engine"] == {"kind": "slurm"}


def test_the_package_is_staged_whole_where_the_job_runs_its_runner_module(tmp_path: Path) -> None:
    """The job runs `python -m fp16doctor.engines.slurm.job` with the staged copy first on its path: the copy
    must be the whole package, the runner and the workload in it."""
    engine = slurm_engine.SlurmEngine(SlurmOptions(workdir=tmp_path / "shared"), tmp_path)
    engine.prepare("host")
    lib = engine.run_dir / "lib"
    runner = lib / Path(*slurm_engine.RUNNER_MODULE.split(".")).with_suffix(".py")
    assert runner.is_file() and (lib / "fp16doctor" / "workload" / "run_workload.py").is_file()
    assert not list(lib.rglob("__pycache__"))
    done = subprocess.run([sys.executable, "-c", f"import {slurm_engine.RUNNER_MODULE} as m; print(m.__file__)"],
                          cwd=tmp_path, env={"PYTHONPATH": str(lib)}, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip().startswith(str(lib)), done.stderr
