"""Planning the matrix, and the results file written as runs finish."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fp16doctor.diagnose import HOST_STACK, plan_runs
from fp16doctor.engines.spec import FULL, QUICK
from fp16doctor.results import ResultsWriter, new_document

WORKLOAD_DIR = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"
sys.path.insert(0, str(WORKLOAD_DIR))  # the workload's modules import each other from beside themselves


def test_quick_plan_runs_every_precision_as_written_and_leaves_the_input_control_to_the_evidence() -> None:
    """The in-memory input control runs at a budgeted size only where a run's batch time says it could show
    something (analysis/experiments.py plans it then)."""
    specs = plan_runs([HOST_STACK], ["float32", "float16", "mixed_float16"], QUICK, None, None)
    cells = [(s.precision, s.variant) for s in specs]
    assert cells == [("float32", "original"), ("float16", "original"), ("mixed_float16", "original")]


def test_full_plan_isolates_compute_for_every_precision_and_stack() -> None:
    specs = plan_runs([HOST_STACK, "cpu"], ["float32", "float16"], FULL, None, "/data/train")
    synth = [(s.stack, s.precision) for s in specs if s.variant == "synthetic_input"]
    assert synth == [("host", "float32"), ("host", "float16"), ("cpu", "float32"), ("cpu", "float16")]
    # The user's own data lives on this host: containers use their synthetic set.
    assert {s.data_dir for s in specs if s.stack == "host" and s.variant == "original"} == {"/data/train"}
    assert {s.data_dir for s in specs if s.stack == "cpu"} == {None}


def test_results_are_on_disk_after_every_run_and_a_rerun_replaces_its_cell(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    writer = ResultsWriter(path, new_document({"gpus": []}))
    assert json.loads(path.read_text())["runs"] == []
    writer.add_run({"stack": "host", "precision": "float32", "variant": "original", "status": "failed",
                    "device": "cpu", "error": "killed"})
    assert len(json.loads(path.read_text())["runs"]) == 1
    writer.add_run({"stack": "host", "precision": "float32", "variant": "original", "status": "ok",
                    "device": "cpu", "step_time_ms": {"median": 90.0}})
    runs = json.loads(path.read_text())["runs"]
    assert [r["status"] for r in runs] == ["ok"]
    assert not list(tmp_path.glob(".tmp-*"))
