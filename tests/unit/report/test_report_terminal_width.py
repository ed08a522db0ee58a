"""The terminal's tables stay readable at 80 columns: no line wider, and the columns a reader needs keep their
values (never folded or cut down to nothing)."""

from __future__ import annotations

import io

from report_helpers import load_fixture
from rich.console import Console, RenderableType

from fp16doctor.analysis import diagnose_document
from fp16doctor.diagnose import DiagnoseOutcome
from fp16doctor.stacks import all_stacks
from fp16doctor.textout.diagnose import diagnose_summary_text, runs_table
from fp16doctor.textout.findings import findings_text
from fp16doctor.textout.ops import where_time_went
from fp16doctor.textout.stacks import stacks_table


def _lines(renderable: RenderableType | None) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(renderable)
    return out.getvalue().splitlines()


def test_every_terminal_output_fits_80_columns() -> None:
    from pathlib import Path

    for name in ("cpu-xeon-ops", "synthetic-two-stacks", "cpu-cut-short", "seed"):
        doc = load_fixture(name)
        diagnosis = diagnose_document(doc)
        outcome = DiagnoseOutcome(doc, Path("out/results.json"), None, 0, [], diagnosis)
        for renderable in (runs_table(diagnosis.runs), where_time_went(diagnosis), findings_text(diagnosis),
                           diagnose_summary_text(outcome), stacks_table(all_stacks())):
            lines = _lines(renderable)
            assert max(len(line) for line in lines) <= 80, (name, "\n".join(lines))


def test_the_runs_table_keeps_each_runs_step_and_ratio_at_80_columns() -> None:
    diagnosis = diagnose_document(load_fixture("synthetic-two-stacks"))
    lines = _lines(runs_table(diagnosis.runs))
    for row in diagnosis.runs:
        if not row.ok:
            continue
        # A long run name wraps at its space; its numbers stay on its first line, whole.
        assert any(line.startswith(row.stack) and f"{row.step_ms:.1f}" in line and row.versus_fp32 in line
                   for line in lines), "\n".join(lines)


def test_the_ops_table_keeps_its_numbers_at_80_columns() -> None:
    diagnosis = diagnose_document(load_fixture("cpu-xeon-ops"))
    lines = _lines(where_time_went(diagnosis))
    rows = [line for line in lines if line.startswith("conv2d ")]
    assert rows and all(" ms" in line or " s " in line or line.rstrip().endswith(" s") for line in rows), rows
    assert all(line.split()[-1] not in ("", "…") for line in rows), rows  # the implementation keeps a name
