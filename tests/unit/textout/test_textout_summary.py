"""The table diagnose prints when it is done."""

from __future__ import annotations

import io

from rich.console import Console

from fp16doctor.analysis import RunRow, diagnose_document
from fp16doctor.textout.diagnose import run_notes, runs_table


def _rows(runs: list[dict]) -> list[RunRow]:
    return diagnose_document({"runs": runs}).runs


def _render(runs: list[dict]) -> str:
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(runs_table(_rows(runs)))
    return out.getvalue()


def test_runs_kept_by_resume_with_null_percentiles_still_print() -> None:
    runs = [
        {"stack": "host", "precision": "float32", "device": "cpu", "status": "ok",
         "step_time_ms": {"median": 400.0, "p10": 390.0, "p90": 420.0}},
        {"stack": "host", "precision": "float16", "device": "cpu", "status": "ok",
         "step_time_ms": {"median": 800.0, "p10": None, "p90": None}},
    ]
    text = _render(runs)
    assert "390-420" in text
    assert "host float16" in text and "800.0" in text and "2.00x slower" in text


def test_the_table_fits_80_columns_and_a_failed_runs_reason_goes_below_it() -> None:
    error = ("InternalError: no kernel image is available for execution on the device (compute capability 3.5 "
             "is below what this TensorFlow build targets)")
    runs = [
        {"stack": "tf1.15-ngc23.03", "precision": "float32", "variant": "synthetic_input", "device": "gpu:0",
         "status": "ok", "step_time_ms": {"median": 123.4, "p10": 120.0, "p90": 130.0}},
        {"stack": "tf1.15-ngc23.03", "precision": "float16", "variant": "synthetic_input", "device": "gpu:0",
         "status": "ok", "step_time_ms": {"median": 23456.7, "p10": 23000.0, "p90": 24000.0}},
        {"stack": "tf1.15-ngc23.03", "precision": "mixed_float16", "variant": "original", "device": "gpu:0",
         "status": "failed", "error": error},
        {"stack": "tf1.7-cuda9.0", "precision": "mixed_float16", "variant": "original", "device": "cpu",
         "status": "skipped", "error": "Keras 2.1.5 has no mixed-precision dtype policy"},
    ]
    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None)
    console.print(runs_table(_rows(runs)))
    for note in run_notes(_rows(runs)):
        console.print(note)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "…" not in text, text  # nothing was cut to fit
    assert "23456.7" in text and "23000-24000" in text and "190x slower" in text and "0.01x" not in text
    table, below = text.split("skipped: ", 1)
    assert "InternalError" not in table and "Keras 2.1.5" not in table
    assert " ".join(below.split()).startswith("tf1.7-cuda9.0 / mixed_float16 / original: Keras 2.1.5 has no")
    # The failed run's reason is a line of the answer, said once there, not again below the table.
    assert "InternalError" not in below
    answer = diagnose_document({"runs": runs}).answer
    assert [line.text for line in answer.precisions if line.failed] == ["mixed_float16: failed"]
    assert [line.cause for line in answer.precisions if line.failed] == [error]


def test_a_short_run_row_stays_on_one_line_at_80_columns() -> None:
    runs = [{"stack": "host", "precision": "mixed_float16", "variant": "synthetic_input", "device": "cpu",
             "status": "ok", "step_time_ms": {"median": 22000.0, "p10": 21900.0, "p90": 22100.0}}]
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(runs_table(_rows(runs)))
    assert any("host mixed_float16" in line and "22000.0" in line for line in out.getvalue().splitlines())


def test_the_summary_says_where_the_wall_time_went() -> None:
    from dataclasses import dataclass
    from pathlib import Path
    from typing import Any

    from fp16doctor.textout.diagnose import diagnose_summary_text

    runs = [{"stack": "host", "precision": p, "device": "cpu", "status": "ok", "step_time_ms": {"median": ms}}
            for p, ms in (("float32", 400.0), ("float16", 800.0))]
    document: dict[str, Any] = {"runs": runs, "invocation": {"elapsed_s": 88.4, "phases_s": {
        "prepare": 3.1, "matrix": 52.4, "rounds": 21.0, "experiments": 9.7, "analysis": 2.2}}}

    @dataclass
    class Outcome:
        document: dict[str, Any]
        results_path: Path = Path("out/results.json")
        report_path: Path | None = None

        @property
        def diagnosis(self) -> Any:
            return diagnose_document(self.document)

    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(diagnose_summary_text(Outcome(document)))
    assert "88 s in all: prepare 3 s, matrix 52 s, rounds 21 s, experiments 10 s, analysis 2 s" in out.getvalue()
