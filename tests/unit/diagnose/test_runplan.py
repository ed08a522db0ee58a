"""`diagnose --plan`: every check of a real diagnose, then the matrix, where, the images and the time; nothing
runs (a spy on the engines) and nothing is created (no --out folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fp16doctor import probe
from fp16doctor.diagnose import DiagnoseOptions, plan_diagnose
from fp16doctor.engines import host as host_engine
from fp16doctor.engines.docker.options import DockerOptions
from fp16doctor.errors import DoctorError

CPU_HOST: dict[str, Any] = {
    "cpu": {"model": "AMD EPYC", "cores": 2, "flags": ["avx2"]}, "gpus": [], "nvml": {"error": "no driver"},
    "os": "Linux", "python": {"version": "3.11.7", "executable": "/usr/bin/python3"},
    "frameworks": {"keras": {"version": "3.15.1", "backend": "tensorflow"}, "tensorflow": {"version": "2.21.0"}},
}


class Notes:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, message: str) -> None:
        self.notes.append(message)

    def start_run(self, *args: Any) -> None:
        raise AssertionError("a plan starts no run")

    def event(self, event: dict[str, Any]) -> None:
        raise AssertionError("a plan starts no run")

    def finish_run(self, record: dict[str, Any]) -> None:
        raise AssertionError("a plan starts no run")


@pytest.fixture
def no_runs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """This host as probed, its workload's imports fine, and a spy on everything that would run a cell."""
    ran: list[Any] = []
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(CPU_HOST)))
    monkeypatch.setattr("fp16doctor.diagnose.prepare.check_workload_imports", lambda *a, **k: None)
    monkeypatch.setattr(host_engine.HostEngine, "run", lambda self, spec, *a, **k: ran.append(spec))
    monkeypatch.setattr("fp16doctor.diagnose.run.run_matrix", lambda *a, **k: ran.append(a))
    return ran


def test_a_plan_lists_the_matrix_where_and_how_long_and_creates_nothing(tmp_path: Path, no_runs: list[Any]) -> None:
    out = tmp_path / "not" / "yet" / "out"
    plan = plan_diagnose(DiagnoseOptions(out_dir=out, stacks=["cpu"]), Notes())
    assert not out.exists() and not (tmp_path / "not").exists()
    assert no_runs == []
    assert plan.size == "quick"  # no GPU here
    assert plan.cells[:3] == ("host / float32 / original", "host / float16 / original",
                              "host / mixed_float16 / original")
    assert "cpu / float32 / original" in plan.cells
    assert any(e.startswith("this host's Python") for e in plan.engines) and any("Docker" in e for e in plan.engines)
    assert len(plan.images) == 1 and plan.images[0].startswith("fp16doctor/cpu:")
    assert "90 s" in plan.estimate and "build" in plan.estimate
    assert plan.results_path == str(out / "results.json")


def test_a_plan_fails_the_same_checks_a_diagnose_fails(tmp_path: Path, no_runs: list[Any]) -> None:
    with pytest.raises(DoctorError, match="unknown precision"):
        plan_diagnose(DiagnoseOptions(out_dir=tmp_path / "o", precisions=["float8"]), Notes())
    with pytest.raises(DoctorError, match="--docker-host without --stack"):
        plan_diagnose(DiagnoseOptions(out_dir=tmp_path / "o", engines=(DockerOptions(docker_hosts=("tcp://a:2376",)),)),
                      Notes())
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(DoctorError, match="is a file, not a folder"):
        plan_diagnose(DiagnoseOptions(out_dir=blocker / "out"), Notes())
    assert no_runs == [] and not (tmp_path / "o").exists()


def test_a_plan_for_a_script_makes_no_log_folder(tmp_path: Path, no_runs: list[Any]) -> None:
    script = tmp_path / "train.py"
    script.write_text("import keras\n")
    out = tmp_path / "out"
    plan = plan_diagnose(DiagnoseOptions(out_dir=out, script=script, precisions=["float32", "float16"]), Notes())
    assert not out.exists()
    assert plan.cells == ("host / float32 / original", "host / float16 / original")


def test_resume_plans_only_the_missing_cells(tmp_path: Path, no_runs: list[Any]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    done = {"stack": "host", "precision": "float32", "variant": "original", "status": "ok", "device": "cpu",
            "size": "quick", "step_time_ms": {"median": 100.0}, "workload": {"data": "synthetic"},
            "engine": {"kind": "host", "python": None}, "software": {"keras_backend": "tensorflow"}}
    (out / "results.json").write_text(json.dumps({"schema_version": 1, "host": CPU_HOST, "runs": [done]}))
    before = (out / "results.json").read_text()
    plan = plan_diagnose(DiagnoseOptions(out_dir=out, resume=True), Notes())
    assert (out / "results.json").read_text() == before
    assert plan.kept == 1 and "host / float32 / original" not in plan.cells
    assert plan.cells[0] == "host / float16 / original"
