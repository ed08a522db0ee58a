"""A fourth engine is one module and its rows in the two tables: a diagnose runs through it end to end, and nothing
above the engines asks which engine it was. Its option is one field: diagnose's --help shows it, the command line
and its variable set it, the invocation check knows it, and the engine's tool gets it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))
from cli_helpers import run_cli  # noqa: E402
from renamed_engine import RenamedEngine, RenamedOptions  # noqa: E402

import fp16doctor.probe as probe  # noqa: E402
from fp16doctor.diagnose import DiagnoseOptions, run_diagnose  # noqa: E402
from fp16doctor.engines import option_table, registry  # noqa: E402
from fp16doctor.errors import EXIT_USAGE  # noqa: E402
from fp16doctor.invocation import check_diagnose_argv  # noqa: E402

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
    monkeypatch.setattr(registry, "ENGINES", (RenamedEngine, *registry.ENGINES))  # the one row of each table
    monkeypatch.setattr(option_table, "ENGINE_OPTIONS", (RenamedOptions, *option_table.ENGINE_OPTIONS))
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(HOST)))
    progress = Notes()
    outcome = run_diagnose(DiagnoseOptions(out_dir=tmp_path / "out", size="quick", precisions=["float32", "float16"],
                                           experiments=False, argv=["fp16doctor", "diagnose"]), progress)
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    runs = [r for r in doc["runs"] if r["variant"] == "original"]
    assert {r["precision"] for r in runs} == {"float32", "float16"} and all(r["status"] == "ok" for r in runs)
    assert all(r["engine"]["kind"] == "renamed" and r["engine"]["label"] == "renamed" for r in doc["runs"])
    assert all(r["machine"] == "host" for r in doc["runs"])
    (verdict,) = [v for v in outcome.diagnosis.to_dict()["verdicts"] if v["precision"] == "float16"]
    assert verdict["outcome"] == "slower" and verdict["ratio"] == pytest.approx(100.0 / 250.0)
    assert (tmp_path / "out" / "report.html").is_file() and outcome.exit_code == 0


@pytest.fixture
def renamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The renamed engine added to a diagnose by its two rows, on a host the probe describes without running."""
    monkeypatch.setattr(RenamedEngine, "workload_dir", tmp_path)
    monkeypatch.setattr(registry, "ENGINES", (RenamedEngine, *registry.ENGINES))
    monkeypatch.setattr(option_table, "ENGINE_OPTIONS", (RenamedOptions, *option_table.ENGINE_OPTIONS))
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(HOST)))
    for name in [n for n in os.environ if n.startswith("FP16DOCTOR_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path


def test_the_engines_option_is_one_field_that_the_help_lists_with_its_variable(renamed: Path) -> None:
    assert [o.flag for o in RenamedOptions.declared()] == ["--renamed-float16-ms"]  # the one field
    done = run_cli("diagnose", "--help")
    assert done.code == 0
    (line,) = [line for line in done.stdout.splitlines() if "--renamed-float16-ms" in line]
    assert "The stand-in workload's float16 step, in ms." in line and "FP16DOCTOR_RENAMED_FLOAT16_MS" in line
    assert "Renamed" in done.stdout.split("--renamed-float16-ms")[0].rsplit("╭", 1)[1]  # in its engine's panel


def test_the_invocation_check_knows_the_option_only_while_its_engine_is_declared(
        renamed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    command = ["fp16doctor", "diagnose", "--renamed-float16-ms", "400"]
    assert check_diagnose_argv(command) is None
    assert check_diagnose_argv([*command[:2], "--renamed-float16-ms=400", "--quick"]) is None
    monkeypatch.setattr(option_table, "ENGINE_OPTIONS", option_table.ENGINE_OPTIONS[1:])
    refused = check_diagnose_argv(command)
    assert refused is not None and refused.message == "diagnose has no option '--renamed-float16-ms'"


def _float16_ratio(out: Path) -> float:
    doc = json.loads((out / "results.json").read_text())
    (verdict,) = [v for v in doc["verdicts"] if v["precision"] == "float16"]
    return float(verdict["ratio"])


def test_the_option_reaches_the_engines_tool_from_the_command_line_and_from_its_variable(
        renamed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["diagnose", "--quick", "-p", "float32", "-p", "float16", "--no-experiments"]
    done = run_cli(*args, "-o", str(renamed / "typed"), "--renamed-float16-ms", "400")
    assert done.code == 0, done.stderr
    assert _float16_ratio(renamed / "typed") == pytest.approx(100.0 / 400.0)  # the stand-in got --float16-ms=400
    monkeypatch.setenv("FP16DOCTOR_RENAMED_FLOAT16_MS", "200")
    assert run_cli(*args, "-o", str(renamed / "variable")).code == 0
    assert _float16_ratio(renamed / "variable") == pytest.approx(100.0 / 200.0)
    done = run_cli(*args, "-o", str(renamed / "bad"), "--renamed-float16-ms", "slow")
    assert done.code == EXIT_USAGE and "--renamed-float16-ms" in done.stderr  # its type, checked by the parser
