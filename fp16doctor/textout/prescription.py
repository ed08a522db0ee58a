"""The prescription for the terminal: what to use on each machine and stack, as the analysis decided it, then what
was measured there and what nobody measured yet (with the command that measures it). Data in, a renderable out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from fp16doctor.analysis.values import UntestedIdea, fmt_config, fmt_ms
from fp16doctor.analysis.words import change_words, entry_notes, entry_versus, in_memory_words


def _measured_line(entry: Mapping[str, Any]) -> str:
    notes = entry_notes(entry)
    note = f"  [{'; '.join(notes)}]" if notes else ""
    return f"{fmt_config(entry):<34} {fmt_ms(entry.get('step_ms')):>8}  {entry_versus(entry)}{note}"


def prescriptions_text(prescriptions: Sequence[Mapping[str, Any]]) -> Text | None:
    """'Prescription' and one block per machine and stack; None when nothing was measured to prescribe from."""
    if not prescriptions:
        return None
    text = Text("Prescription\n", style="bold")
    for p in prescriptions:
        recommended = p.get("recommended") or {}
        faster = recommended.get("precision") != "float32" or recommended.get("setting")
        text.append(f"  {p.get('headline', '')}\n", style="bold green" if faster else "bold")
        for i, change in enumerate(p.get("user_changes") or []):
            text.append(f"    {'first' if i == 0 else 'also'}: {change_words(change)}\n")
            for entry in change.get("in_memory") or []:
                text.append(f"      in memory, {in_memory_words(entry)}\n", style="dim")
            if change.get("how"):
                text.append("      " + str(change["how"]).replace("\n", "\n      ") + "\n", style="dim")
            if change.get("cost"):
                text.append(f"      what it costs: {change['cost']}\n", style="dim")
        if recommended.get("how"):
            text.append(f"    how: {recommended['how']}\n")
        measured = [m for m in p.get("measured") or [] if isinstance(m, Mapping)]
        if measured:
            text.append("    measured here, fastest first:\n", style="dim")
            for entry in measured:
                text.append(f"      {_measured_line(entry)}\n", style="dim")
        for idea in p.get("untested") or []:
            text.append(f"    {UntestedIdea.of(idea).sentence()}\n", style="yellow")
    return text


__all__ = ["prescriptions_text"]
