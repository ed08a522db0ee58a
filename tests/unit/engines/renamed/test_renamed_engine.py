"""A fourth engine is one module and one registry row: a diagnose runs through it end to end, and nothing above the
engines asks which engine it was."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from renamed_engine import RenamedEngine  # noqa: E402

import fp16doctor.probe as probe  # noqa: E402
from fp16doctor.diagnose import DiagnoseOptions, run_diagnose  # noqa: E402
from fp16doctor.engines import registry  # noqa: E402

HOST = {"gpus": [], "cpu": {"model": "AMD EPYC", "flags": ["avx2", "f16c"]},
        "frameworks": {"keras": {"version": "3.15.1", "backend": "tensorflow"}, "tensorflow": {"version": "2.21.0"},
                       "numpy": {"version": "2.0"}, "pillow": {"version": "11.0"}}}


class Notes:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.started: list[str] = []

    def note(self, message: str) -> None:
        self.notes.append(message)

    def start_run(self, spec: object, total: int, index: int) -> None:
        self.started.append(str(getattr(spec, "label", spec)))

    def event(self, event: dict) -> None: ...
    def finish_run(self, record: dict) -> None: ...


def test_a_diagnose_runs_through_a_fourth_engine_added_with_one_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RenamedEngine, "workload_dir", tmp_path)
    monkeypatch.setattr(registry, "ENGINES", (RenamedEngine, *registry.ENGINES))  # the one row
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(HOST)))
    progress = Notes()
    outcome = run_diagnose(DiagnoseOptions(out_dir=tmp_path / "out", size="quick", precisions=["float32", "float16"],
                                           experiments=False, argv=["fp16doctor", "diagnose"]), progress)
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    runs = [r for r in doc["runs"] if r["variant"] == "original"]
    assert {r["precision"] for r in runs} == {"float32", "float16"} and all(r["status"] == "ok" for r in runs)
    assert all(r["engine"]["kind"] == "renamed" and r["engine"]["label"] == "renamed" for r in doc["runs"])
    assert all(r["machine"] == "host" for r in doc["runs"])
    (verdict,) = [v for v in outcome.diagnosis.verdicts if v["precision"] == "float16"]
    assert verdict["outcome"] == "slower" and verdict["ratio"] == pytest.approx(100.0 / 250.0)
    assert (tmp_path / "out" / "report.html").is_file() and outcome.exit_code == 0
