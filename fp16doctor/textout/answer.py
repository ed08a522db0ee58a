"""The answer for the terminal (`explain`, diagnose's summary): the analysis' Answer laid out in its order, the bound,
what to do, a line per precision, how, the shared notes, then a line per finding. Data in, a renderable out: every
text here is the analysis'; this module only places it, breaking a line at words where it runs past MAX_LINE."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rich.text import Text

from fp16doctor.analysis.answer import MAX_LINE, SECTION_ORDER, Answer, Section

SEVERITY_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "bold cyan"}


def _put(text: Text, indent: int, line: str, style: str = "", hang: int = 2) -> None:
    """`line` at `indent`, broken at words into lines of at most MAX_LINE characters, continuations `hang` further
    in; nothing is cut."""
    pad = " " * indent
    lines = textwrap.wrap(line, width=MAX_LINE, initial_indent=pad, subsequent_indent=pad + " " * hang,
                          break_long_words=False, break_on_hyphens=False) or [pad]
    text.append("\n".join(lines) + "\n", style=style)


# How each kind of the answer's lines is styled; a "code" or "command" line is printed as it stands, never broken.
KIND_STYLE = {"headline": "bold", "headline_faster": "bold green", "cost": "dim", "untested": "yellow", "more": "dim",
              "slower": "red", "faster": "green", "dim": "dim", "table_row": "dim", **SEVERITY_STYLE}
UNBROKEN = ("code", "command")


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
    """answer_text in two pieces: (a) to (c'') (the bound to the comparisons between stacks), then how, the notes and
    the findings; what a caller adds to (c'') goes between them. Every line is the answer's (Answer.sections); this
    places it."""
    sections = answer.sections(findings, top, whole_code)
    cut = SECTION_ORDER.index("between")
    head = sections_text([s for s in sections if SECTION_ORDER.index(s.id) <= cut])
    rest = sections_text([s for s in sections if SECTION_ORDER.index(s.id) > cut])
    return head, rest


def sections_text(sections: Sequence[Section]) -> Text:
    """Sections of the answer or of its detail, laid out: each heading, then its lines as they stand, broken at words
    (a "code" or "command" line never)."""
    text = Text()
    for section in sections:
        text.append(f"{section.heading}\n", style="bold")
        for line in section.lines:
            if line.kind in UNBROKEN:
                pad = " " * line.indent
                text.append(pad + line.text.replace("\n", "\n" + pad) + "\n")
            else:
                _put(text, line.indent, line.text, KIND_STYLE.get(line.kind, ""), line.hang)
    text.rstrip()
    return text


__all__ = ["SEVERITY_STYLE", "answer_sections", "answer_text", "sections_text"]
