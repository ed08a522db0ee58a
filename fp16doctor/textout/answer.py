"""The answer for the terminal (`explain`, diagnose's summary): the analysis' Answer laid out in its order, the bound,
what to do, a line per precision, how, the shared notes, then a line per finding. Data in, a renderable out: every
text here is the analysis'; this module only places it, breaking a line at words where it runs past MAX_LINE."""

from __future__ import annotations

import textwrap

from rich.text import Text

from fp16doctor.analysis.answer import (
    CHANGES_HEADING,
    MAX_LINE,
    PRECISIONS_HEADING,
    Answer,
    FindingLine,
    PrecisionLine,
)

SEVERITY_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "bold cyan"}
FULL_HINT = "fp16doctor explain --full prints each one's evidence"
CODE_LINES = 6  # a longer program is named in the terse answer and printed whole by `explain --full` and the report


def _put(text: Text, indent: int, line: str, style: str = "", hang: int = 2) -> None:
    """`line` at `indent`, broken at words into lines of at most MAX_LINE characters, continuations `hang` further
    in; nothing is cut."""
    pad = " " * indent
    lines = textwrap.wrap(line, width=MAX_LINE, initial_indent=pad, subsequent_indent=pad + " " * hang,
                          break_long_words=False, break_on_hyphens=False) or [pad]
    text.append("\n".join(lines) + "\n", style=style)


def _refs(line: PrecisionLine) -> str:
    return f"  [{', '.join(line.notes)}]" if line.notes else ""


def _pointer(finding: FindingLine, answer: Answer) -> str:
    if finding.points_to:
        return "see the prescription" if len(answer.prescriptions) == 1 else f"see prescription {finding.points_to}"
    return finding.fix


def _code(code: str, whole: bool) -> str:
    """A program as printed: whole, or (terse) its first line and where the rest is."""
    lines = code.splitlines()
    if whole or len(lines) <= CODE_LINES:
        return code
    return (f"{lines[0]}\n# and {len(lines) - 1} more lines: "
            "fp16doctor explain --full prints the program (so does the report)")


def answer_text(answer: Answer, findings: bool = True, top: int | None = None, whole_code: bool = True) -> Text:
    """(a) the bound, (b) what to do, (c) a line per configuration, how, the notes, then (with `findings`) a line per
    finding, the first `top` of them where given."""
    head, rest = answer_sections(answer, findings, top, whole_code)
    if head.plain and rest.plain:
        head.append("\n")
    head.append_text(rest)
    return head


def answer_sections(answer: Answer, findings: bool = True, top: int | None = None,
                    whole_code: bool = True) -> tuple[Text, Text]:
    """answer_text in two pieces: (a) to (c), then how, the notes and the findings; what a caller adds to (c) (the
    comparison between stacks) goes between them."""
    text = Text()
    if answer.bounds:
        text.append("What bounds the step\n", style="bold")
        for bound in answer.bounds:
            for i, line in enumerate(bound.lines):
                _put(text, 2, f"{bound.where + ': ' if bound.where and not i else ''}{line}")
    many = len(answer.prescriptions) > 1
    if answer.prescriptions:
        text.append("What to do\n", style="bold")
        for p in answer.prescriptions:
            style = "bold green" if p.faster else "bold"
            for i, sentence in enumerate(p.headline_lines):
                _put(text, 2, f"{p.id + ': ' if many and not i else ''}{sentence}", style)
            for i, change in enumerate(p.changes):
                _put(text, 4, f"{'first' if i == 0 else 'also'}: {change.words}")
                if change.cost:
                    _put(text, 6, f"what it costs: {change.cost}", "dim")
    for heading, rows in ((PRECISIONS_HEADING, answer.precisions), (CHANGES_HEADING, answer.changes)):
        if rows:
            text.append(f"{heading}\n", style="bold")
        for row in rows:
            where = f" on {row.where}" if row.where else ""
            _put(text, 2, f"{row.text}{where}{_refs(row)}")
            if row.cause:
                _put(text, 4, row.cause, hang=4)
    text.rstrip()
    head, text = text, Text()
    how = [p for p in answer.prescriptions if p.how or p.changes or p.untested]
    if how:
        text.append("How\n", style="bold")
        for p in how:
            label = f"{p.id}: " if many else ""
            codes = [c.code for c in p.changes if c.code]
            for code in codes:  # a prose line (broken at words), then a code block: indented, never broken
                prose, _, block = _code(code, whole_code).partition("\n")
                _put(text, 2, f"{label}{prose}", hang=2)
                if block:
                    text.append("    " + block.replace("\n", "\n    ") + "\n")
            if p.how:
                _put(text, 2, f"{label}{'then ' if codes else ''}{p.how}")
            for idea, command in p.untested:
                _put(text, 2, f"untested: {idea}{':' if command else ''}", "yellow", hang=4)
                if command:  # a command: on a line of its own, never broken
                    text.append(f"    {command}\n")
    if answer.notes:
        text.append("Notes\n", style="bold")
        for note in answer.notes:
            _put(text, 2, f"[{note.id}] {note.text}", hang=5)
    if findings and answer.findings:
        text.append(f"Findings ({FULL_HINT})\n", style="bold")
        shown = answer.findings[:top] if top is not None else answer.findings
        for f in shown:
            explains = f" ({f.explains})" if f.explains else ""
            pointer = _pointer(f, answer)
            said = f"{f.rank}. {f.severity.upper()} {f.id}: {f.title}{explains}"
            if pointer and len(said) + len(pointer) + 9 <= MAX_LINE:
                said, pointer = f"{said}; fix: {pointer}", ""
            _put(text, 2, said, hang=3)
            if pointer:
                _put(text, 5, f"fix: {pointer}", hang=5)
        if len(shown) < len(answer.findings):
            _put(text, 2, f"and {len(answer.findings) - len(shown)} more: "
                          f"{', '.join(dict.fromkeys(f.id for f in answer.findings[len(shown):]))}", "dim")
    text.rstrip()
    return head, text


__all__ = ["SEVERITY_STYLE", "answer_sections", "answer_text"]
