"""Where an engine's records go during a diagnose: a rounds process's record into the runs it timed, with what the
rounds cost as the engine timed it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from progress_recorder import Recorder

from fp16doctor.diagnose.rounds import RoundsSink
from fp16doctor.engines.rounds import AA_CONTROL
from fp16doctor.engines.spec import QUICK, RoundsRequest, RunSpec
from fp16doctor.results import ResultsWriter, new_document


def _run(precision: str, ms: float) -> dict[str, Any]:
    return {"stack": "cpu", "precision": precision, "variant": "original", "status": "ok", "device": "cpu",
            "step_time_ms": {"median": ms, "p10": ms * 0.9, "p90": ms * 1.1, "n": 5}}


def _rounds_record(**extra: Any) -> dict[str, Any]:
    return {"stack": "cpu", "status": "ok", "order": [["float16", "float32", AA_CONTROL]] * 3,
            "rounds": {"float32": [960.0, 970.0, 950.0], "float16": [1600.0, 1590.0, 1610.0],
                       AA_CONTROL: [965.0, 955.0, 960.0]}, **extra}


def _rounds_taken(tmp_path: Path, record: dict[str, Any]) -> tuple[ResultsWriter, Recorder]:
    """A rounds process of float32 and float16 on the `cpu` stack, its `record` handed to the sink."""
    writer = ResultsWriter(tmp_path / "results.json", new_document({"gpus": []}))
    for run in (_run("float32", 964.0), _run("float16", 1600.0)):
        writer.add_run(run)
    progress = Recorder()
    sink = RoundsSink(writer, progress, alone="each run's own process", measure_load=False)
    sink.start_run(RunSpec("cpu", "float32", "original", QUICK, rounds=RoundsRequest(("float32", "float16"))))
    sink.finish_run(record)
    return writer, progress


@pytest.mark.parametrize(("wall_s", "said"), [(51.0, "3 rounds in 51 s"), (12.4, "3 rounds in 12 s")])
def test_the_rounds_note_says_what_the_engine_timed_them_at(tmp_path: Path, wall_s: float, said: str) -> None:
    """Every engine times its process (the host's, a container's whole life, a job's cells on the node): the note
    and the document's timing_rounds say that time."""
    writer, progress = _rounds_taken(tmp_path, _rounds_record(wall_s=wall_s))
    assert any(note == f"cpu: interleaved rounds: {said}" for note in progress.notes), progress.notes
    assert writer.doc["timing_rounds"][0]["wall_s"] == wall_s


def test_rounds_that_stopped_early_say_how_well_they_knew_every_ratio_and_the_document_keeps_it(
        tmp_path: Path) -> None:
    # As an engine hands it over: the spec's precision (float32) beside the workload's own keys.
    writer, progress = _rounds_taken(tmp_path, _rounds_record(wall_s=31.0, precision="float32", stop_reason="precision",
                                                              stop_precision={"target": 0.05, "widest": 0.042}))
    assert "cpu: interleaved rounds: 3 rounds in 31 s, every ratio known to within 5 % either way" in progress.notes
    assert writer.doc["timing_rounds"][0]["stop_precision"] == {"target": 0.05, "widest": 0.042}


def test_the_rounds_process_has_a_live_row_saying_what_it_is_timing_ended_without_a_line(tmp_path: Path) -> None:
    """A rounds process may run for most of the quick budget: its row says which configuration it warms up or times
    in which round, and ends with no line of its own (the runs it made or timed print theirs)."""
    import io

    from rich.console import Console

    from fp16doctor.progress import LiveProgress

    writer = ResultsWriter(tmp_path / "results.json", new_document({"gpus": []}))
    for run in (_run("float32", 964.0), _run("float16", 1600.0)):
        writer.add_run(run)
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, width=200), enabled=True)
    sink = RoundsSink(writer, progress, alone="each run's own process", measure_load=False)
    spec = RunSpec("cpu", "float32", "original", QUICK, rounds=RoundsRequest(("float32", "float16")))
    sink.start_run(spec)
    sink.event({"event": "step", "phase": "warmup", "config": "float16", "ms": 1612.4})
    assert progress.rows[spec.label].status == "warm-up: float16 1612 ms"
    sink.event({"event": "step", "phase": "round", "index": 2, "config": "float32_aa", "ms": 961.0})
    assert progress.rows[spec.label].status == "round 3: float32_aa 961 ms"
    sink.finish_run(_rounds_record(wall_s=40.0))
    assert progress.rows == {} and "✓" not in out.getvalue()
