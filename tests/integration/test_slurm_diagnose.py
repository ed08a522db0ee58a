"""`fp16doctor diagnose --slurm` through a real Slurm cluster (`bash .ci/slurm-up.sh`: one node on this
machine, no accounting), with real TensorFlow on the node's CPU.

Each diagnose runs two comparison groups (float32 + float16 on the original workload, and on synthetic input):
two exclusive CPU jobs of one array, one after the other on this one node.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from interrupt import ctrl_c_reaches_it
from slow_path import assert_cut_and_said, forced_cut_env

from fp16doctor.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# The input control asked for by name: a budgeted diagnose runs it only where a run's batch time asks for it.
CHEAP = ["--slurm", "--precision", "float32", "--precision", "float16", "--variant", "original", "--variant",
         "synthetic_input", "--no-experiments"]
# The smoke size: what these tests check (where the runs ran, what a cancel or Ctrl-C ends, what --resume keeps) does
# not depend on the steps' size. A test that acts while a run is under way waits for an event of that run that comes
# before its framework loads (seconds on any CPU at any size), so the act lands inside the run, never timed.
SMOKE = ("--size", "smoke")
JOB_ID = re.compile(r"^\d+(_\d+)?$")


def _cluster_node() -> str:
    """The node's name, or skip when no cluster answers here."""
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        pytest.skip("no Slurm here (sbatch not on PATH); CI starts one with `bash .ci/slurm-up.sh`")
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    if "UP" not in ping.stdout:
        pytest.skip(f"slurmctld does not answer ({(ping.stdout + ping.stderr).strip()}); "
                    "CI starts one with `bash .ci/slurm-up.sh`")
    nodes = subprocess.run(["sinfo", "--noheader", "--format=%n|%t"], capture_output=True, text=True, timeout=30)
    idle = [line.split("|")[0] for line in nodes.stdout.split() if line.split("|")[-1] in ("idle", "mix", "alloc")]
    if not idle:
        pytest.skip(f"no Slurm node is up: {nodes.stdout.strip()}")
    return idle[0]


@pytest.fixture(scope="module")
def node() -> str:
    return _cluster_node()


def _diagnose(out: Path, *extra: str, cut: bool = False) -> subprocess.Popen[str]:
    """`cut`: the slow-step bound forced (slow_path.py); the job inherits the environment, as sbatch's default
    --export=ALL passes it."""
    return subprocess.Popen([sys.executable, "-m", "fp16doctor", "diagnose", *SMOKE, *CHEAP, "--out", str(out),
                             *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=forced_cut_env() if cut else None, preexec_fn=ctrl_c_reaches_it)


def _own_step(run: dict[str, Any]) -> dict[str, Any]:
    """A run's own process's step statistics: under `single_process` once rounds replaced them."""
    step: dict[str, Any] = run["step_time_ms"]
    return step.get("single_process", step)


CUT = pytest.mark.parametrize("cut", [False, True], ids=["as-measured", "float16-cut"])


def _runs(out: Path) -> dict[tuple[str, str], dict[str, Any]]:
    doc = json.loads((out / "results.json").read_text())
    return {(r["precision"], r["variant"]): r for r in doc["runs"]}


def _our_jobs(out: Path) -> list[str]:
    """Queued jobs of the invocations that wrote to `out` (named fp16doctor-<run id>, each with its folder under
    out/slurm): another fp16doctor's jobs on the same cluster are none of this test's business."""
    names = {f"fp16doctor-{folder.name}" for folder in (out / "slurm").glob("*") if folder.is_dir()}
    proc = subprocess.run(["squeue", "--noheader", "--format=%i %j"], capture_output=True, text=True, timeout=30)
    return [line for line in proc.stdout.splitlines() if len(line.split()) == 2 and line.split()[1] in names]


def _job_progress(out: Path) -> list[list[dict[str, Any]]]:
    """What each job of the invocations that wrote to `out` wrote to its progress file so far, one list a job."""
    jobs: list[list[dict[str, Any]]] = []
    for path in sorted(out.glob("slurm/*/array-*/*/progress.jsonl")):
        entries: list[dict[str, Any]] = []
        for line in path.read_text().splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:
                pass  # a line still being written
        jobs.append(entries)
    return jobs


def _progress_lines(out: Path) -> list[dict[str, Any]]:
    return [entry for entries in _job_progress(out) for entry in entries]


def _wait_for(predicate: Any, proc: subprocess.Popen[str], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            pytest.fail(f"diagnose ended (status {proc.returncode}) before {what}: {proc.stderr.read()[-2000:]}")
        time.sleep(0.5)
    proc.kill()
    pytest.fail(f"no {what} within {timeout_s:.0f} s")


@pytest.fixture
def no_leftover_jobs(tmp_path: Path) -> Iterator[None]:
    yield
    for line in _our_jobs(tmp_path):
        subprocess.run(["scancel", line.split()[0]], check=False)


@CUT
def test_the_matrix_runs_as_slurm_jobs_each_run_carrying_its_job_and_node(
        node: str, tmp_path: Path, no_leftover_jobs: None, cut: bool) -> None:
    proc = _diagnose(tmp_path, cut=cut)
    _, stderr = proc.communicate(timeout=900)
    assert proc.returncode == EXIT_OK, stderr[-3000:]
    runs = _runs(tmp_path)
    assert set(runs) == {("float32", "original"), ("float16", "original"), ("float32", "synthetic_input"),
                         ("float16", "synthetic_input")}
    for run in runs.values():
        assert run["status"] == "ok", run.get("error")
        engine = run["engine"]
        assert engine["kind"] == "slurm" and engine["node"] == node and run["machine"] == node
        assert JOB_ID.match(engine["job_id"]), engine["job_id"]
        assert run["step_time_ms"]["median"] > 0 and run.get("ops") is not None, run.get("ops_error")
    # One job per comparison group: the two precisions of a group share a job, the groups do not.
    assert runs[("float32", "original")]["engine"]["job_id"] == runs[("float16", "original")]["engine"]["job_id"]
    assert runs[("float32", "original")]["engine"]["job_id"] != runs[("float32", "synthetic_input")]["engine"]["job_id"]
    # float32 ran first in its job, and its step (its own process's, before the rounds) set float16's bound.
    assert runs[("float16", "original")]["slow_step_bound"]["float32_step_ms"] == \
        _own_step(runs[("float32", "original")])["median"]
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["verdicts"] and doc["machines"][node]
    if cut:
        assert_cut_and_said(runs[("float16", "original")])
    left_out = runs[("float16", "original")].get("rounds_left_out")
    if left_out:
        # Cut by the bound (a CPU running oneDNN's reference kernels), or its steps too slow for three rounds here
        # now: nothing pairs with float32, no rounds job, and the run and the terminal say why.
        assert "timing_rounds" not in doc and f"float16 left out of the interleaved rounds: {left_out}" in stderr
        assert not _our_jobs(tmp_path)
        return
    # Then one more job timed float32 and float16 together in interleaved rounds, on the node the runs used.
    for precision in ("float32", "float16"):
        step = runs[(precision, "original")]["step_time_ms"]
        assert step["design"] == "interleaved" and len(step["rounds"]) >= 3, step
    assert len(runs[("float32", "original")]["step_time_ms"]["aa_rounds"]) >= 3
    rounds, = doc["timing_rounds"]
    # Each input control beside its precision, in the same job.
    assert rounds["precisions"] == ["float16", "float16+synthetic_input", "float32", "float32+synthetic_input"]
    assert rounds["engine"]["node"] == node, rounds
    assert all(runs[(p, "synthetic_input")]["step_time_ms"]["design"] == "interleaved" for p in ("float32", "float16"))
    verdict, = [v for v in doc["verdicts"] if v["variant"] == "original"]
    assert verdict["interval_method"] == "paired_rounds" and verdict["repeats"] >= 3
    assert re.search(r"interleaved rounds: \d+ rounds in", stderr), stderr[-3000:]
    # The live progress said where each group was.
    assert re.search(r"host / original: job \d+_0 running on " + re.escape(node), stderr), stderr[-3000:]
    assert "host / synthetic_input: job" in stderr and "done on" in stderr
    assert not _our_jobs(tmp_path)


@CUT
def test_a_job_cancelled_mid_run_fails_its_run_with_cancelled_and_resume_completes(
        node: str, tmp_path: Path, no_leftover_jobs: None, cut: bool) -> None:
    proc = _diagnose(tmp_path, cut=cut)
    job: list[str] = []

    def float16_under_way() -> bool:
        # Read from the job's own progress file (results.json follows it a poll later): float32's record, which names
        # the job, and float16's framework import under way after it, seconds of work on any CPU before its steps, so
        # the cancel lands inside the run at the smoke size too, and where float16 is cut by the bound.
        for entries in _job_progress(tmp_path):
            float32 = [e["record"] for e in entries if e.get("kind") == "record"
                       and (e["record"].get("precision"), e["record"].get("variant")) == ("float32", "original")]
            importing = any(e.get("kind") == "event" and e.get("run") == "host / float16 / original"
                            and e["event"].get("phase") == "import" for e in entries)
            if float32 and importing:
                job[:] = [float32[0]["engine"]["job_id"]]
                return True
        return False

    _wait_for(float16_under_way, proc, 600, "float16 run under way, float32's record written")
    job_id, = job
    subprocess.run(["scancel", job_id], check=True)
    _, stderr = proc.communicate(timeout=900)
    assert proc.returncode == EXIT_PARTIAL, stderr[-3000:]
    assert "--resume" in stderr
    runs = _runs(tmp_path)
    cancelled = runs[("float16", "original")]
    assert cancelled["status"] == "failed" and cancelled["failure_kind"] == "CANCELLED", cancelled
    assert cancelled["engine"]["job_id"] == job_id and "--resume" in cancelled["error"]
    # The runs the cancel did not touch are kept: float32 before it in the job, the other group's job.
    assert runs[("float32", "original")]["status"] == "ok"
    assert runs[("float32", "synthetic_input")]["status"] == runs[("float16", "synthetic_input")]["status"] == "ok"
    kept = runs[("float32", "original")]["step_time_ms"]["median"]

    resumed = _diagnose(tmp_path, "--resume", cut=cut)
    _, stderr = resumed.communicate(timeout=900)
    assert resumed.returncode == EXIT_OK, stderr[-3000:]
    assert "resuming: 3 of 4 runs already" in stderr
    runs = _runs(tmp_path)
    assert all(r["status"] == "ok" for r in runs.values()), [r.get("error") for r in runs.values()]
    redone = runs[("float16", "original")]
    # Only the missing cell ran again, in a new job on the node its group measured on, bounded by the
    # float32 step measured before.
    assert redone["engine"]["job_id"] != job_id and redone["engine"]["node"] == node
    # float32 did not run again: its own figure is the one kept, now beside the rounds the resume timed.
    float32_step = runs[("float32", "original")]["step_time_ms"]
    assert _own_step(runs[("float32", "original")])["median"] == kept
    assert float32_step.get("design") == (None if redone.get("rounds_left_out") else "interleaved")
    assert redone["slow_step_bound"]["float32_step_ms"] == kept


@CUT
def test_ctrl_c_cancels_this_invocations_jobs_and_leaves_another_job_alone(
        node: str, tmp_path: Path, no_leftover_jobs: None, cut: bool) -> None:
    """Ctrl-C while one of its jobs is known to run a workload (an event from a run), never timed against how long
    the diagnose takes: its jobs are cancelled, another user's job (queued before it, held until later so it never
    takes the node) is left alone."""
    other = subprocess.run(["sbatch", "--parsable", "--job-name=not-fp16doctor", "--begin=now+1hour",
                            f"--output={tmp_path}/other.out", "--wrap", "sleep 300"],
                           capture_output=True, text=True, check=True).stdout.strip()
    try:
        proc = _diagnose(tmp_path, cut=cut)
        _wait_for(lambda: any(e.get("kind") == "event" for e in _progress_lines(tmp_path)), proc, 300,
                  "a run under way in a job")
        assert _our_jobs(tmp_path)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == EXIT_INTERRUPTED, stderr[-3000:]
        assert "interrupted" in stderr and "--resume" in stderr
        assert not _our_jobs(tmp_path)
        left = subprocess.run(["squeue", "--noheader", f"--jobs={other}", "--format=%i %T"],
                              capture_output=True, text=True, timeout=30)
        assert left.stdout.split()[:1] == [other] and left.stdout.split()[1] in ("PENDING", "RUNNING"), left
        # No workload of that invocation runs on.
        time.sleep(2)
        leftover = subprocess.run(["pgrep", "-f", f"fp16doctor.engines.slurm.job {tmp_path}"], capture_output=True)
        assert leftover.returncode == 1, leftover.stdout
    finally:
        subprocess.run(["scancel", other], check=False)


def test_slurm_without_sbatch_is_a_one_line_error(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "fp16doctor", "diagnose", "--slurm", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode not in (0, None) and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "sbatch" in errors[0], proc.stderr
    assert "hint:" in proc.stderr
