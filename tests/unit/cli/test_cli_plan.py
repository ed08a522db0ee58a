"""`fp16doctor diagnose --plan` through the real entry point: the matrix, where, the images and the time after
every check; nothing runs (a spy on the engines) and nothing is created; a check that fails still fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_cli

from fp16doctor import probe
from fp16doctor.engines import host as host_engine
from fp16doctor.errors import EXIT_OK, EXIT_USAGE

CPU_HOST: dict[str, Any] = {
    "cpu": {"model": "AMD EPYC", "cores": 2, "flags": ["avx2"]}, "gpus": [], "nvml": {"error": "no driver"},
    "os": "Linux", "python": {"version": "3.11.7", "executable": "/usr/bin/python3"},
    "frameworks": {"keras": {"version": "3.15.1", "backend": "tensorflow"}, "tensorflow": {"version": "2.21.0"}},
}


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    ran: list[Any] = []
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(CPU_HOST)))
    monkeypatch.setattr("fp16doctor.diagnose.prepare.check_workload_imports", lambda *a, **k: None)
    monkeypatch.setattr(host_engine.HostEngine, "run", lambda self, spec, *a, **k: ran.append(spec))
    monkeypatch.setattr("fp16doctor.diagnose.run.run_matrix", lambda *a, **k: ran.append(a) or [])
    return ran


def test_plan_prints_the_matrix_and_the_time_and_creates_nothing(tmp_path: Path, spy: list[Any]) -> None:
    out = tmp_path / "out"
    done = run_cli("diagnose", "--plan", "-p", "float32", "-p", "float16", "-o", str(out))
    assert done.code == EXIT_OK, done.stderr
    assert "diagnose would run 2 cell(s) at size quick; nothing was run or created" in done.stdout
    assert "host / float16 / original" in done.stdout and "90 s" in done.stdout
    assert spy == [] and not out.exists()


def test_plan_as_json(tmp_path: Path, spy: list[Any]) -> None:
    done = run_cli("diagnose", "--plan", "--json", "--stack", "cpu", "--no-host", "-o", str(tmp_path / "o"))
    assert done.code == EXIT_OK, done.stderr
    plan = json.loads(done.stdout)
    assert plan["cells"][0] == "cpu / float32 / original" and plan["images"][0].startswith("fp16doctor/cpu:")
    assert spy == [] and not (tmp_path / "o").exists()


def test_plan_runs_every_check_first(tmp_path: Path, spy: list[Any]) -> None:
    done = run_cli("diagnose", "--plan", "--docker-host", "tcp://gpu-box:2375", "-o", str(tmp_path / "o"))
    assert done.code == EXIT_USAGE and "--docker-host without --stack" in done.stderr
    assert spy == [] and not (tmp_path / "o").exists()
