"""The table diagnose prints when it is done."""

from __future__ import annotations

import io

from rich.console import Console

from fp16doctor.textout.diagnose import runs_table


def _render(runs: list[dict]) -> str:
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(runs_table(runs))
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
    assert "host float16" in text and "800.0" in text and "0.50x" in text
