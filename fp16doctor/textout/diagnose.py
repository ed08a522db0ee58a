"""The summary `fp16doctor diagnose` prints when it is done."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fp16doctor.textout.prescription import prescriptions_text


class DiagnoseOutcome(Protocol):
    """What the summary reads of diagnose's outcome (diagnose.DiagnoseOutcome has it; diagnose sits above)."""

    @property
    def document(self) -> dict[str, Any]: ...
    @property
    def results_path(self) -> Path: ...
    @property
    def report_path(self) -> Path | None: ...
    @property
    def failed(self) -> list[dict[str, Any]]: ...


SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def runs_table(runs: list[dict]) -> Table:
    """One row per run; fits an 80-column terminal, so a failed run's reason goes below (run_notes)."""
    # No column rules, so at 80 columns the characters go to the values; a long run name wraps at its
    # space rather than push the table past the terminal's width.
    table = Table(title="Runs", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, 1), collapse_padding=True)
    table.add_column("run", overflow="fold")
    table.add_column("input", overflow="fold")
    table.add_column("device", overflow="fold")
    table.add_column("ms/step", justify="right", overflow="fold")
    table.add_column("p10-p90", justify="right", overflow="fold")
    table.add_column("vs f32", justify="right", overflow="fold")
    table.add_column("status", overflow="fold")
    baseline = {
        (r["stack"], r.get("variant", "original")): r["step_time_ms"]["median"]
        for r in runs if r.get("status") == "ok" and r.get("precision") == "float32"
    }
    for r in runs:
        variant = r.get("variant", "original")
        name = f"{r['stack']} {r['precision']}"
        source = "in memory" if variant == "synthetic_input" else variant
        if r.get("status") == "ok":
            step = r["step_time_ms"]
            base = baseline.get((r["stack"], variant))
            ratio = f"{base / step['median']:.2f}x" if base else "–"
            # --resume keeps runs from an earlier file, where p10/p90 may be null.
            p10, p90 = step.get("p10"), step.get("p90")
            spread = f"{p10:.0f}-{p90:.0f}" if p10 is not None and p90 is not None else "–"
            table.add_row(name, source, r.get("device", ""), f"{step['median']:.1f}", spread, ratio,
                          Text("ok", style="green"))
        else:
            status = Text(f"{r.get('status')}", style="red" if r.get("status") == "failed" else "yellow")
            table.add_row(name, source, r.get("device", ""), "–", "–", "–", status)
    return table


def run_notes(runs: list[dict]) -> list[Text]:
    """Why each run that did not finish did not, one paragraph per run below the table; wrapped by the
    terminal, so a long error never widens the table."""
    lines: list[Text] = []
    for r in runs:
        if r.get("status") == "ok":
            continue
        label = f"{r['stack']} / {r['precision']} / {r.get('variant', 'original')}"
        style = "red" if r.get("status") == "failed" else "yellow"
        lines.append(Text.assemble((f"{r.get('status')}: ", style), (label, "bold"),
                                   f": {' '.join(str(r.get('error') or r.get('status')).split())}"))
    return lines


def diagnose_summary_text(outcome: DiagnoseOutcome) -> RenderableType:
    doc = outcome.document
    parts: list[RenderableType] = [runs_table(doc.get("runs", []))]
    notes = run_notes(doc.get("runs", []))
    if notes:
        parts += [Text(""), *notes]
    findings = doc.get("findings") or []
    from fp16doctor.textout.ops import time_went_text  # the verdicts, then each 16-bit run's top op differences

    prescription = prescriptions_text([p for p in doc.get("prescriptions") or [] if isinstance(p, dict)])
    if prescription is not None:
        prescription.rstrip()  # the verdicts below bring their own blank line
        parts += [Text(""), prescription]
    went = time_went_text(doc)
    if went is not None:
        parts += [Text(""), went]
    if findings:
        parts.append(Text("\nFindings", style="bold"))
        for f in findings[:6]:
            style = SEVERITY_STYLE.get(f.get("severity", "info"), "")
            parts.append(Text.assemble((f"  [{f.get('severity')}] ", style), (f.get("title", f["id"]), "bold"),
                                       (f"  ({f['id']})", "dim")))
            for line in (f.get("evidence") or [])[:2]:
                parts.append(Text(f"      {line}"))
    parts.append(Text(f"\nresults: {outcome.results_path}"))
    if outcome.report_path:
        parts.append(Text(f"report:  {outcome.report_path}"))
    return Group(*parts)


def failed_runs_message(outcome: DiagnoseOutcome) -> tuple[str, str] | None:
    """(message, hint) for stderr when some runs failed (diagnose then exits non-zero), else None."""
    if not outcome.failed:
        return None
    names = ", ".join(f"{r['stack']} / {r['precision']} / {r.get('variant', 'original')}"
                      for r in outcome.failed[:6]) + (", ..." if len(outcome.failed) > 6 else "")
    return (f"{len(outcome.failed)} run(s) failed ({names}); the others are in {outcome.results_path}",
            "each failed run's error is in the results and the report; run the same command with --resume "
            "to retry only those")
