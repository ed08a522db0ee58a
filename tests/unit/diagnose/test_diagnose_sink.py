"""Where an engine's records go during a diagnose: a rounds process's record into the runs it timed, with what the
rounds cost said even where the engine (a container, a Slurm job) did not time its process itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from progress_recorder import Recorder

from fp16doctor.diagnose import sink as sink_module
from fp16doctor.diagnose.sink import RoundsSink
from fp16doctor.engines.rounds import AA_CONTROL
from fp16doctor.engines.spec import QUICK, RunSpec
from fp16doctor.results import ResultsWriter, new_document


def _run(precision: str, ms: float) -> dict[str, Any]:
    return {"stack": "cpu", "precision": precision, "variant": "original", "status": "ok", "device": "cpu",
            "step_time_ms": {"median": ms, "p10": ms * 0.9, "p90": ms * 1.1, "n": 5}}


def _rounds_record(**extra: Any) -> dict[str, Any]:
    return {"stack": "cpu", "status": "ok", "order": [["float16", "float32", AA_CONTROL]] * 3,
            "rounds": {"float32": [960.0, 970.0, 950.0], "float16": [1600.0, 1590.0, 1610.0],
                       AA_CONTROL: [965.0, 955.0, 960.0]}, **extra}


@pytest.mark.parametrize(("timed", "said", "wall_s"), [(None, "3 rounds in 51 s", 51.0),
                                                       (12.4, "3 rounds in 12 s", 12.4)])
def test_the_rounds_note_says_what_they_cost_where_the_engine_did_not_time_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timed: float | None, said: str, wall_s: float) -> None:
    record = _rounds_record() if timed is None else _rounds_record(wall_s=timed)  # the host engine times its own
    writer = ResultsWriter(tmp_path / "results.json", new_document({"gpus": []}))
    for run in (_run("float32", 964.0), _run("float16", 1600.0)):
        writer.add_run(run)
    progress = Recorder()
    sink = RoundsSink(writer, progress, alone="each run's own process", measure_load=False)
    clock = iter([100.0, 151.0])
    monkeypatch.setattr(sink_module.time, "monotonic", lambda: next(clock))
    spec = RunSpec("cpu", "float32", "original", QUICK, rounds_of=("float32", "float16"))
    sink.start_run(spec)
    sink.finish_run(record)
    assert any(note == f"cpu: interleaved rounds: {said}" for note in progress.notes), progress.notes
    assert writer.doc["timing_rounds"][0]["wall_s"] == wall_s
