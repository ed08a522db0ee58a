"""`fp16doctor explain` for the terminal: the answer (textout/answer.py), then with --full the detail (the
prescription's measured table, the verdicts, the runs, the roofline, each ranked finding with its evidence and
fix). Data in, a rich renderable out.

Plain styled text rather than panels, so long evidence lines wrap in any terminal width (and soft-wrap
consoles) instead of being cut off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from fp16doctor.analysis import Diagnosis, RunRow
from fp16doctor.analysis.roofline import RooflineEstimate
from fp16doctor.analysis.values import fmt_ms
from fp16doctor.textout.answer import SEVERITY_STYLE, answer_sections
from fp16doctor.textout.prescription import prescriptions_text
from fp16doctor.textout.stack_compare import stack_comparisons_text


def _measured(rows: Sequence[RunRow]) -> Text | None:
    """Each run's step, and against float32 where the analysis paired it with a float32 run."""
    if not rows:
        return None
    lines = Text("Measured\n", style="bold")
    for row in rows:
        shown = f"{fmt_ms(row.step_ms)} a step" if row.step_ms is not None else row.status
        if row.ok and not row.is_baseline and row.speedup is not None:
            shown += f" ({row.versus_fp32} vs {row.versus_name})"
        lines.append(f"  {row.label} on {row.device or '?'}: {shown}\n")
        if row.ok and row.device_step is not None:
            lines.append(f"    {row.device_step.words()}\n", style="dim")
    return lines


def _best_case(estimates: Sequence[RooflineEstimate]) -> Text | None:
    known = [e for e in estimates if e.predicted_speedup is not None]
    if not known:
        return None
    text = Text("Best case on this GPU (roofline)\n", style="bold")
    seen = set()
    for e in known:
        if e.key() in seen:
            continue  # one line per precision and machine: the variants share the best case
        seen.add(e.key())
        kernels = e.kernels_words()
        text.append(f"  {e.stack} / {e.precision} on {e.gpu_name}: at most {e.predicted_times()} from "
                    f"fp16 ({fmt_ms(e.fp32_ms)} -> {fmt_ms(e.fp16_ms)} of kernels per step, {e.bound}-bound)"
                    + (f"; {kernels}" if kernels else f"; you measured {e.measured_words()}" if e.measured_speedup
                       else "") + "\n")
        text.append(f"    {e.note}\n", style="dim")
    return text


def _no_findings(diagnosis: Diagnosis) -> Text:
    return Text("No findings: no rule fired on these runs (the verdicts above are all they say)."
                if diagnosis.verdicts else
                "No findings: the results file holds too little to explain (add runs with step times).")


def verdicts_text(verdicts: Sequence[Mapping[str, Any]]) -> Text | None:
    """The analysis' verdict per 16-bit run, as it phrased it."""
    if not verdicts:
        return None
    text = Text("Verdict\n", style="bold")
    for verdict in verdicts:
        style = {"slower": "red", "faster": "green"}.get(str(verdict.get("outcome")), "")
        text.append(f"  {verdict.get('headline', '')}\n", style=style)
    return text


def findings_text(diagnosis: Diagnosis, full: bool = False) -> RenderableType:
    """The answer (answer.py: the bound, what to do, a line per precision, the notes, a line per finding); with
    `full`, then the detail: the prescription's measured table, the verdicts, measured runs, the roofline, and each
    finding with its evidence and recommendation, most important first."""
    findings = diagnosis.findings
    head, rest = answer_sections(diagnosis.answer, findings=not full, whole_code=full)
    parts: list[RenderableType] = [t for t in (head, rest) if t.plain]
    if not full:
        if not findings and not parts:
            parts.append(_no_findings(diagnosis))
        return Group(*parts)
    if parts:
        parts.append(Text("\nDetail", style="bold underline"))
    prescription = prescriptions_text(diagnosis.prescriptions)
    if prescription is not None:
        parts.append(prescription)
    headline = verdicts_text(diagnosis.verdicts)
    if headline is not None:
        parts.append(headline)
    between = stack_comparisons_text(diagnosis.stack_comparisons)
    if between is not None:
        parts.append(between)
    measured = _measured(diagnosis.runs)
    if measured is not None:
        parts.append(measured)
    best = _best_case(diagnosis.roofline)
    if best is not None:
        parts.append(best)
    if not findings:
        parts.append(_no_findings(diagnosis))
        return Group(*parts)
    for finding in findings:
        severity = str(finding.get("severity", "info"))
        text = Text()
        style = SEVERITY_STYLE.get(severity, "bold")
        text.append(f"{finding.get('rank', '-')}. {severity.upper()} ", style=style)
        text.append(f"{finding.get('id', '?')}", style="bold")
        text.append(f": {finding.get('title', '')} ")
        explains = finding.get("explains_ms")
        where = f" on {finding.get('stack')}" if diagnosis.answer is not None and diagnosis.answer.places > 1 else ""
        accounts = (f"explains {fmt_ms(float(explains))} of {finding.get('precision')}{where}, "
                    f"{str(finding.get('basis') or '').replace('_', ' ')}; "
                    if isinstance(explains, (int, float)) else "")
        text.append(f"({accounts}confidence {finding.get('confidence', '?')})\n", style="dim")
        for line in finding.get("evidence", []) or []:
            text.append(f"   - {line}\n")
        recommendation = finding.get("recommendation")
        if recommendation:
            text.append("   fix: ", style="bold green")
            text.append(str(recommendation).strip().replace("\n", "\n        ") + "\n")
        parts.append(text)
    return Group(*parts)
