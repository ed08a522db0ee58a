"""A diagnose over two stacks on one engine writes `stack_comparisons` into results.json, as the analysis made them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleet_fakes import Fleet, RecordingProgress

from fp16doctor import probe
from fp16doctor.diagnose import DiagnoseOptions, run_diagnose
from fp16doctor.engines.docker.options import DockerOptions

A = "tcp://node-a:2376"


def test_two_stacks_on_one_engine_are_compared_in_results_json(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe, "probe_host", lambda python=None: {"gpus": [], "cpu": {"cores": 2}})
    fleet.add(A)
    outcome = run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="quick", stacks=["tf2.10-cpu", "cpu"],
                                           include_host=False, engines=(DockerOptions(docker_hosts=(A,)),),
                                           experiments=False), progress)
    saved = json.loads((tmp_path / "results.json").read_text())["stack_comparisons"]
    assert saved == [c.to_dict() for c in outcome.diagnosis.stack_comparisons]
    # The fake engine times float16 alike in both stacks: compared, and no change to explain.
    assert {(c["precision"], c["from"], c["to"]) for c in saved} >= {("float16", "tf2.10-cpu", "cpu")}
    assert all(not c["significant"] and c["explained_share"] == 0.0 for c in saved)
