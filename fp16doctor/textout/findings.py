"""Ranked findings for the terminal (`fp16doctor explain`): data in, a rich renderable out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def _measured_lines(doc: Mapping[str, Any]) -> list[str]:
    lines = []
    runs = doc.get("runs")
    for run in runs if isinstance(runs, list) else []:
        if not isinstance(run, Mapping):
            continue
        step = run.get("step_time_ms")
        median = step.get("median") if isinstance(step, Mapping) else None
        status = run.get("status", "?")
        shown = (
            f"{median:.1f} ms/step"
            if isinstance(median, (int, float)) and not isinstance(median, bool)
            else str(status)
        )
        variant = run.get("variant", "original")
        lines.append(
            f"  {run.get('stack', '?')} / {run.get('precision', '?')}"
            f"{'' if variant == 'original' else ' / ' + str(variant)} on {run.get('device', '?')}: {shown}"
        )
    return lines


def findings_text(doc: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> RenderableType:
    """Measured runs, then each finding with its evidence and recommendation, most important first."""
    parts: list[RenderableType] = []
    measured = _measured_lines(doc)
    if measured:
        parts.append(Text("Measured\n" + "\n".join(measured)))
    if not findings:
        parts.append(
            Text("No findings: the results file holds too little to explain (add runs with step times).")
        )
        return Group(*parts)
    for finding in findings:
        severity = str(finding.get("severity", "info"))
        style = SEVERITY_STYLE.get(severity, "")
        body = Text()
        for line in finding.get("evidence", []) or []:
            body.append("• ")
            body.append(str(line))
            body.append("\n")
        recommendation = finding.get("recommendation")
        if recommendation:
            body.append("→ ", style="bold")
            body.append(str(recommendation))
        title = (
            f"[{style}]{escape(severity.upper())}[/] {escape(str(finding.get('id', '?')))}: "
            f"{escape(str(finding.get('title', '')))} [dim](confidence {finding.get('confidence', '?')})[/]"
        )
        parts.append(Panel(body, title=title, title_align="left", border_style=style or "white"))
    return Group(*parts)
