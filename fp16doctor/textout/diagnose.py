"""The summary `fp16doctor diagnose` prints when it is done."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fp16doctor.analysis import Diagnosis, RunRow
from fp16doctor.textout.answer import answer_sections
from fp16doctor.workload.protocol import variant_parts

NAMED = 3  # failed runs named in the one-line error (each is a line of the answer above it)
MAX_ERROR_LINE = 190  # the one-line error, "error: " before it: a line of at most 200 characters
SUMMARY_FINDINGS = 6  # the summary's findings, most important first; the rest are named, explain prints them


class DiagnoseOutcome(Protocol):
    """What the summary reads of diagnose's outcome (diagnose.DiagnoseOutcome has it; diagnose sits above)."""

    @property
    def diagnosis(self) -> Diagnosis: ...
    @property
    def results_path(self) -> Path: ...
    @property
    def report_path(self) -> Path | None: ...
    @property
    def document(self) -> Mapping[str, Any]: ...


def runs_table(rows: Sequence[RunRow]) -> Table:
    """One row per run, each 16-bit one against the float32 run the analysis paired it with; fits an 80-column
    terminal, so a failed run's reason goes below (run_notes)."""
    # No column rules, so at 80 columns the characters go to the values; a long run name wraps at its
    # space rather than push the table past the terminal's width.
    table = Table(title="Runs", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, 1), collapse_padding=True)
    table.add_column("run", overflow="fold")
    table.add_column("input", overflow="fold")
    table.add_column("device", overflow="fold")
    # Its step (the rounds' geometric mean where rounds timed it, as every verdict quotes it), p10-p90 beside it.
    table.add_column("step ms", justify="right", overflow="fold")
    table.add_column("p10-p90", justify="right", overflow="fold")
    table.add_column("vs f32", justify="right", overflow="fold")
    table.add_column("status", overflow="fold")
    for r in rows:
        name = f"{r.stack} {r.precision}"
        # Each change of a combined variant: "in memory, xla" (its "vs f32" is against float32 in memory).
        source = ", ".join("in memory" if p == "synthetic_input" else p for p in variant_parts(r.variant)) or r.variant
        if r.ok:
            # --resume keeps runs from an earlier file, where p10/p90 may be null.
            spread = f"{r.p10_ms:.0f}-{r.p90_ms:.0f}" if r.p10_ms is not None and r.p90_ms is not None else "–"
            # A custom loop's figure is the whole script's, timed once: said in its status, not as a step.
            table.add_row(name, source, r.device, f"{r.step_ms:.1f}", spread, r.versus_fp32,
                          Text("ok, whole script" if r.whole_run else "ok", style="green"))
        else:
            status = Text(r.status, style="red" if r.status == "failed" else "yellow")
            table.add_row(name, source, r.device, "–", "–", "–", status)
    return table


def run_notes(rows: Sequence[RunRow]) -> list[Text]:
    """Why each run that did not finish did not, one paragraph per run below the table; wrapped by the
    terminal, so a long error never widens the table. A failed run is a line of the answer above (where the user's
    code raised, why, what to change, its log: analysis/failed.py), said once there."""
    lines: list[Text] = []
    for r in rows:
        if r.status == "ok" or r.failure is not None:
            continue
        label = f"{r.stack} / {r.precision} / {r.variant}"
        style = "red" if r.status == "failed" else "yellow"
        lines.append(Text.assemble((f"{r.status}: ", style), (label, "bold"),
                                   f": {' '.join((r.error or r.status).split())}"))
    return lines


def diagnose_summary_text(outcome: DiagnoseOutcome) -> RenderableType:
    """The answer (answer.py, in its order: the bound, what to do, each configuration, how, notes, findings), then
    the detail the terminal has room for: the runs table, why a run failed, where the time was spent, the paths.
    The op tables and each finding's evidence are in the report and `explain --full`."""
    diagnosis = outcome.diagnosis
    head, rest = answer_sections(diagnosis.answer, top=SUMMARY_FINDINGS, whole_code=False)
    parts: list[RenderableType] = [t for t in (head, rest) if t.plain]
    if parts:
        parts.append(Text(""))
    parts.append(runs_table(diagnosis.runs))
    notes = run_notes(diagnosis.runs)
    if notes:
        parts += [Text(""), *notes]
    invocation = outcome.document.get("invocation") or {}
    phases, elapsed = invocation.get("phases_s"), invocation.get("elapsed_s")
    if isinstance(phases, dict) and isinstance(elapsed, (int, float)):
        spent = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in phases.items()
                          if isinstance(seconds, (int, float)))
        parts.append(Text(f"\n{elapsed:.0f} s in all: {spent}", style="dim"))
    parts.append(Text(f"\nresults: {outcome.results_path}"))
    if outcome.report_path:
        parts.append(Text(f"report:  {outcome.report_path}"))
    return Group(*parts)


def failed_runs_message(outcome: DiagnoseOutcome) -> tuple[str, str] | None:
    """(message, hint) for stderr when some runs failed (diagnose then exits non-zero), else None."""
    failed = [r for r in outcome.diagnosis.runs if r.status == "failed"]
    if not failed:
        return None
    def named(rows: Sequence[RunRow], places: bool = True) -> str:
        return ", ".join(f"{r.stack} / {r.precision} / {r.variant}"
                         + (f" at {r.failure.file}:{r.failure.line}" if places and r.failure is not None
                            and r.failure.file and r.failure.line is not None else "") for r in rows[:NAMED]) + (
            ", ..." if len(rows) > NAMED else "")

    # A script's own fault under a precision fails the same way again: what to change is said, not a retry.
    again = [r for r in failed if r.failure is None or not r.failure.deterministic]
    message = f"{len(failed)} run(s) failed ({named(failed)}); the others are in {outcome.results_path}"
    if len(message) > MAX_ERROR_LINE:  # each one's place is on its line of the answer above
        message = f"{len(failed)} run(s) failed ({named(failed, places=False)}); the others are in " \
                  f"{outcome.results_path}"
    if not again:
        return (message, "each failed where the script itself raised under that precision, and would again: its "
                         "line above says what to change in the script; --resume does not retry it")
    hint = f"run the same command with --resume to retry {'only those' if len(again) == len(failed) else named(again)}"
    if len(again) < len(failed):
        hint += "; the others failed in the script itself under that precision: their lines above say what to change"
    return message, hint
