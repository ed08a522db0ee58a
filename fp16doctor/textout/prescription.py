"""The prescription for the terminal: what to use on each machine and stack, as the analysis decided it, then what
was measured there and what nobody measured yet (with the command that measures it). Data in, a renderable out."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from fp16doctor.analysis.prescription import MeasuredRow, Prescription
from fp16doctor.analysis.values import fmt_ms
from fp16doctor.analysis.words import change_words, in_memory_words


def _measured_line(row: MeasuredRow) -> str:
    note = f"  [{'; '.join(row.notes)}]" if row.notes else ""
    return f"{row.config:<34} {fmt_ms(row.step_ms):>8}  {row.versus()}{note}"


def prescriptions_text(prescriptions: Sequence[Prescription]) -> Text | None:
    """'Prescription' and one block per machine and stack; None when nothing was measured to prescribe from."""
    if not prescriptions:
        return None
    text = Text("Prescription\n", style="bold")
    for p in prescriptions:
        text.append(f"  {p.headline}\n", style="bold green" if p.recommended.changes_something else "bold")
        for i, change in enumerate(p.user_changes):
            text.append(f"    {'first' if i == 0 else 'also'}: {change_words(change.facts)}\n")
            for entry in change.in_memory:
                text.append(f"      in memory, {in_memory_words(entry)}\n", style="dim")
            if change.how:
                text.append("      " + change.how.replace("\n", "\n      ") + "\n", style="dim")
            if change.cost:
                text.append(f"      what it costs: {change.cost}\n", style="dim")
        if p.recommended.how:
            text.append(f"    how: {p.recommended.how}\n")
        if p.measured:
            text.append("    measured here, fastest first:\n", style="dim")
            for row in p.measured:
                text.append(f"      {_measured_line(row)}\n", style="dim")
        for idea in p.untested:
            text.append(f"    {idea.idea.sentence()}\n", style="yellow")
    return text


__all__ = ["prescriptions_text"]
