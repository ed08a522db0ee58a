"""The answer: what the analysis says of one document, built once, in the order a reader needs it.

(a) what bounds the step (`bounds`): on a GPU the device's busy share of each profiled step, the rest idle; on a CPU
    the ops that take the time;
(b) what to do (`prescriptions`): each machine's prescription and what it was measured to be worth, the changes to
    the user's code first where they were measured;
(c) one line per 16-bit precision against float32 (`precisions`): its ratio, interval and cause with its number;
    then one line per change an experiment made to a run, against that run as written (`changes`);
(d) the detail: the findings (`findings`), each pointing at the prescription it defers to (`points_to`) instead of
    restating it, and the caveats many rows share said once each (`notes`), which rows refer to by id.

How a renderer uses it: lay out `bounds`, `prescriptions`, `precisions`, `changes`, then `findings` and `notes`, in
that order, each item's text as it stands, broken at words where it runs past MAX_LINE characters (a prescription's
`code` is a block to indent, never to break; kernel names are already short, short_line), with `[N1]`-style
references to the notes beside the rows that carry their ids. `where` is "" when the document has one machine and
stack (nothing to tell apart), else the words to show with the item. The full detail (every finding's evidence,
the op tables, the runs) stays in the Diagnosis; a full view prints it after this answer. A renderer picks no
verdict and composes no advice: it prints these texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from fp16doctor.analysis.finding import Finding
from fp16doctor.analysis.intervals import AACheck
from fp16doctor.analysis.ledger import UNPLACED, Ledger, moved_words, part_change, part_in_step, part_of_step
from fp16doctor.analysis.prescription import Against, MeasuredRow, Prescription
from fp16doctor.analysis.registry import spec
from fp16doctor.analysis.runs import RunRow
from fp16doctor.analysis.values import (
    NOT_COMPARED,
    ShownRatio,
    fmt_ms,
    fmt_pct,
    named_place,
    variant_words,
)
from fp16doctor.analysis.verdict import Verdict
from fp16doctor.analysis.words import (
    WHOLE_SCRIPT,
    change_words,
    cpu_ledger_line,
    in_memory_words,
    ledger_words,
    loop_step_note,
    not_in_rounds,
    pair_ledgers,
    parts_against,
    two_timings,
    whole_run,
    whole_run_note,
)
from fp16doctor.knowledge.kernels import SHORT_NAME_MAX, kernel_short_name

if TYPE_CHECKING:  # the Diagnosis holds its answer; the builder reads the Diagnosis
    from fp16doctor.analysis import Diagnosis

MAX_LINE = 200  # no line of the answer is longer (a code block aside)
# The headings of (c) and (c'), as every renderer prints them.
PRECISIONS_HEADING = "Each configuration against float32"
CHANGES_HEADING = "Each change against the configuration it changes"
DEVICE_PARTS = ("kernels", "copies")  # a GPU ledger's parts in which the device is busy
MOSTLY = 0.5  # a verdict's first cause explaining less of its difference than this is one part among several
# A finding whose remedy is a change the prescription measured (prescriptions[].user_changes[].kind).
CHANGE_OF_FINDING = {"input_pipeline_bound": "input_pipeline", "pageable_copies": "batch_bytes"}


@dataclass(frozen=True)
class Note:
    """A caveat many rows share, said once; rows carry its id."""

    id: str  # "N1"
    text: str


@dataclass(frozen=True)
class Bound:
    """(a) What bounds the step on one machine and stack: a head, one part per run (float32 first), a verdict."""

    where: str  # "" where the document has one machine and stack
    kind: str  # "device" (a GPU's step: the host's parts and the device's) or "cpu_ops" (a CPU's step and its ops)
    head: str  # what the verdict rests on: "the GPU is busy (kernels and copies) under half of each step"; or ""
    # Each run's ledger: "float16 (665 ms a step = host batch 638 ms + kernels 15 ms + ...): GPU busy 3 %"
    parts: tuple[str, ...]
    verdict: str  # "the host sets the pace", "the GPU's kernels set the pace", or ""

    @property
    def lines(self) -> tuple[str, ...]:
        """The bound's verdict first where it has one, then a line per run (its ledger)."""
        return ((f"{self.verdict}: {self.head}",) if self.verdict else ()) + self.parts


@dataclass(frozen=True)
class Change:
    """A change to the user's code a prescription measured: its words with its worth, how to make it, its cost."""

    words: str  # "input pipeline: 303 ms -> 82 ms a step (3.7x faster), measured with batches in memory"
    code: str  # how to make it: a prose line, then a code block (indent it, never break it); "" when none
    cost: str  # what it costs (another backend's caveats); "" when nothing


@dataclass(frozen=True)
class PrescriptionLine:
    """(b) One machine's prescription: its headline, the changes measured and what they were worth."""

    id: str  # "P1"
    where: str
    headline: str
    faster: bool  # it recommends something other than float32 as written
    changes: tuple[Change, ...]  # largest first
    in_memory: tuple[str, ...]  # each precision with the first change made (batches in memory)
    how: str  # how to set the recommended configuration
    untested: tuple[tuple[str, str], ...]  # (what nobody measured and why, the command that measures it or "")

    @property
    def headline_lines(self) -> tuple[str, ...]:
        """The headline, a sentence a line."""
        sentences = [s.strip() for s in self.headline.replace(". ", ".\n").splitlines() if s.strip()]
        return tuple(short_line(s) for s in sentences)

@dataclass(frozen=True)
class PrecisionLine:
    """(c) One 16-bit configuration against float32: its ratio, interval and cause with its number."""

    where: str
    label: str  # "float16", "float16, batches in memory", "float16 with batch_dtype=float32"
    versus: str  # "2.2x slower (1.9-2.5x)", "same speed (0.9-1.1x)", ">= 6.8x slower": the verdict's figure
    steps: str  # "665 ms vs 303 ms"
    cause: str  # "host-side preprocessing runs in float16 (362 ms of 362 ms): measured host batch time ..."; or ""
    notes: tuple[str, ...] = ()  # the ids of the shared notes that apply
    # Where its ledger changed against the baseline's, part by part, adding up to the step's difference; or ""
    parts: str = ""
    failed: bool = False  # a run that failed: `versus` says where ("failed at train.py:31 (`...`)"), no steps

    @property
    def text(self) -> str:
        """The line without its cause, which goes on a line of its own below it."""
        return f"{self.label}: {self.versus}" if self.failed else f"{self.label}: {self.versus}, {self.steps}"


@dataclass(frozen=True)
class FindingLine:
    """(d) One finding in a line: what it is, what it explains, and where its fix is."""

    id: str
    rank: int
    severity: str
    title: str
    explains: str  # "explains 362 ms of float16" or ""
    points_to: str  # the prescription's id its fix defers to, or ""
    fix: str  # its own fix's first sentence where it does not defer to a prescription, else ""


@dataclass(frozen=True)
class AnswerLine:
    """One line of the answer as every output lays it out: the fact it says (`ref`, an id of the answer's), its text,
    how far in it stands and what kind of line it is (a renderer styles by `kind`, and never breaks a "code" or
    "command" line)."""

    ref: str  # "B1" (a bound), "P1" (a prescription), "C1" (a configuration), "X1" (a change), "N1", "F1" (a finding)
    text: str
    kind: str  # "bound", "headline", "headline_faster", "change", "cost", "row", "cause", "prose", "code", "how",
    # "untested", "command", "note", "finding", "fix", "more"
    indent: int = 2
    hang: int = 2  # how much further in a broken line's continuation stands

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "text": self.text, "kind": self.kind, "indent": self.indent}


@dataclass(frozen=True)
class Section:
    """One section of the answer: its id, its heading, its lines; every output shows the sections in one order."""

    id: str  # one of SECTION_ORDER
    heading: str
    lines: tuple[AnswerLine, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "heading": self.heading, "lines": [line.to_dict() for line in self.lines]}


# The one order of the answer, for every output: the bound, what to do, each configuration, each change, how, the
# notes, the findings.
SECTION_ORDER = ("bound", "what_to_do", "precisions", "changes", "between", "how", "notes", "findings")
SECTION_HEADINGS = {"bound": "What bounds the step", "what_to_do": "What to do", "precisions": PRECISIONS_HEADING,
                    "changes": CHANGES_HEADING, "between": "Between stacks", "how": "How", "notes": "Notes",
                    "findings": "Findings (fp16doctor explain --full prints each one's evidence)"}
CODE_LINES = 6  # a longer program is named in the terse answer and printed whole by `explain --full` and the report


@dataclass(frozen=True)
class Answer:
    """The whole answer, in its order; see the module's docstring for how a renderer lays it out."""

    bounds: tuple[Bound, ...] = ()
    prescriptions: tuple[PrescriptionLine, ...] = ()
    precisions: tuple[PrecisionLine, ...] = ()
    # (c') each change an experiment made to a run, against that run as written: what the one change did
    changes: tuple[PrecisionLine, ...] = ()
    findings: tuple[FindingLine, ...] = ()
    notes: tuple[Note, ...] = ()
    places: int = 1  # how many machines and stacks the document tells apart
    # (c'') each comparison of one machine's precision between two stacks, in the analysis' sentence
    # (stack_compare.py); its op changes are detail (`explain --full`, the report)
    between: tuple[str, ...] = ()

    def sections(self, findings: bool = True, top: int | None = None, whole_code: bool = True) -> tuple[Section, ...]:
        """The answer as lines, in SECTION_ORDER, each section only where it has lines: what every output lays out.
        `findings`: with the findings' section; `top`: its first `top` findings and a line naming the rest;
        `whole_code`: each program whole, else (a longer one) its first line and where the rest is."""
        built = {"bound": self._bound_lines(), "what_to_do": self._what_to_do_lines(),
                 "precisions": self._row_lines(self.precisions, "C"), "changes": self._row_lines(self.changes, "X"),
                 "between": tuple(AnswerLine(f"S{n}", line, "between", hang=2)
                                  for n, line in enumerate(self.between, start=1)),
                 "how": self._how_lines(whole_code), "notes": tuple(AnswerLine(n.id, f"[{n.id}] {n.text}", "note",
                                                                              hang=5) for n in self.notes),
                 "findings": self._finding_lines(top) if findings else ()}
        return tuple(Section(key, SECTION_HEADINGS[key], built[key]) for key in SECTION_ORDER if built[key])

    def _bound_lines(self) -> tuple[AnswerLine, ...]:
        return tuple(AnswerLine(f"B{n}", f"{bound.where + ': ' if bound.where else ''}{line}", "bound")
                     for n, bound in enumerate(self.bounds, start=1) for line in bound.lines)

    def _what_to_do_lines(self) -> tuple[AnswerLine, ...]:
        many = len(self.prescriptions) > 1
        lines = []
        for p in self.prescriptions:
            kind = "headline_faster" if p.faster else "headline"
            lines += [AnswerLine(p.id, f"{p.id + ': ' if many and not i else ''}{sentence}", kind)
                      for i, sentence in enumerate(p.headline_lines)]
            for i, change in enumerate(p.changes):
                lines.append(AnswerLine(p.id, f"{'first' if i == 0 else 'also'}: {change.words}", "change", 4))
                if change.cost:
                    lines.append(AnswerLine(p.id, f"what it costs: {change.cost}", "cost", 6))
        return tuple(lines)

    @staticmethod
    def _row_lines(rows: Sequence[PrecisionLine], prefix: str) -> tuple[AnswerLine, ...]:
        lines = []
        for n, row in enumerate(rows, start=1):
            where = f" on {row.where}" if row.where else ""
            refs = f"  [{', '.join(row.notes)}]" if row.notes else ""
            lines.append(AnswerLine(f"{prefix}{n}", f"{row.text}{where}{refs}", "row"))
            if row.cause:
                lines.append(AnswerLine(f"{prefix}{n}", row.cause, "cause", 4, hang=4))
            if row.parts:
                lines.append(AnswerLine(f"{prefix}{n}", row.parts, "parts", 4, hang=4))
        return tuple(lines)

    def _how_lines(self, whole_code: bool) -> tuple[AnswerLine, ...]:
        many = len(self.prescriptions) > 1
        lines = []
        for p in self.prescriptions:
            if not (p.how or p.changes or p.untested):
                continue
            label = f"{p.id}: " if many else ""
            codes = [c.code for c in p.changes if c.code]
            for code in codes:  # a prose line (broken at words), then a code block: indented, never broken
                prose, _, block = _code(code, whole_code).partition("\n")
                lines.append(AnswerLine(p.id, f"{label}{prose}", "prose"))
                if block:
                    lines.append(AnswerLine(p.id, block, "code", 4))
            if p.how:
                lines.append(AnswerLine(p.id, f"{label}{'then ' if codes else ''}{p.how}", "how"))
            for idea, command in p.untested:
                lines.append(AnswerLine(p.id, f"untested: {idea}{':' if command else ''}", "untested", hang=4))
                if command:  # a command: on a line of its own, never broken
                    lines.append(AnswerLine(p.id, command, "command", 4))
        return tuple(lines)

    def _finding_lines(self, top: int | None) -> tuple[AnswerLine, ...]:
        shown = self.findings[:top] if top is not None else self.findings
        lines = []
        for f in shown:
            explains = f" ({f.explains})" if f.explains else ""
            pointer = (("see the prescription" if len(self.prescriptions) == 1 else f"see prescription {f.points_to}")
                       if f.points_to else f.fix)
            said = f"{f.rank}. {f.severity.upper()} {f.id}: {f.title}{explains}"
            ref = f"F{f.rank}"
            if pointer and len(said) + len(pointer) + 9 <= MAX_LINE:
                said, pointer = f"{said}; fix: {pointer}", ""
            lines.append(AnswerLine(ref, said, "finding", hang=3))
            if pointer:
                lines.append(AnswerLine(ref, f"fix: {pointer}", "fix", 5, hang=5))
        if len(shown) < len(self.findings):
            rest = ", ".join(dict.fromkeys(f.id for f in self.findings[len(shown):]))
            lines.append(AnswerLine("", f"and {len(self.findings) - len(shown)} more: {rest}", "more"))
        return tuple(lines)

    def text(self, findings: bool = True, whole_code: bool = True) -> str:
        """The answer as plain lines (unbroken), in its order, before the breaking of lines: with `whole_code` each
        program whole (`explain --full`, the report), else a longer one named (what `explain` prints)."""
        out = []
        for section in self.sections(findings, whole_code=whole_code):
            out.append(section.heading)
            out += [" " * line.indent + line.text.replace("\n", "\n" + " " * line.indent) for line in section.lines]
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        """The answer as data (`explain --json`'s `answer`): its order, its sections with every line and the fact
        each says, the facts themselves, and the text every output lays out."""
        sections = self.sections()
        return {"order": [s.id for s in sections], "sections": [s.to_dict() for s in sections],
                "facts": {"bounds": [asdict(b) for b in self.bounds],
                          "prescriptions": [asdict(p) for p in self.prescriptions],
                          "precisions": [{"id": f"C{n}", **asdict(r)} for n, r in enumerate(self.precisions, 1)],
                          "changes": [{"id": f"X{n}", **asdict(r)} for n, r in enumerate(self.changes, 1)],
                          "findings": [{"ref": f"F{f.rank}", **asdict(f)} for f in self.findings],
                          "notes": [asdict(n) for n in self.notes],
                          "between": [{"id": f"S{n}", "text": t} for n, t in enumerate(self.between, 1)]},
                "places": self.places, "text": self.text(), "terse_text": self.text(whole_code=False)}


def _code(code: str, whole: bool) -> str:
    """A program as printed: whole, or (terse) its first line and where the rest is."""
    lines = code.splitlines()
    if whole or len(lines) <= CODE_LINES:
        return code
    return (f"{lines[0]}\n# and {len(lines) - 1} more lines: "
            "fp16doctor explain --full prints the program (so does the report)")


def short_line(text: str) -> str:
    """One line with its long kernel names shortened (kernel_short_name); a renderer breaks it at words to fit."""
    def short(word: str) -> str:
        if len(word) <= SHORT_NAME_MAX:
            return word
        core = word.lstrip("(").rstrip(":;,.)")  # the name without the punctuation around it
        start = word.index(core) if core else 0
        return word[:start] + kernel_short_name(core) + word[start + len(core):]

    return " ".join(short(word) for word in " ".join(str(text).split()).split(" "))


def failed_control(aa: AACheck | None, outcome: str | None) -> str | None:
    """The A/A control's own words where it could not tell a comparison from two identical models (one note for
    every row it is held against); None where it passed, or for the baseline."""
    if aa is None or aa.passed or outcome == "baseline":
        return None
    return aa.control or aa.reason


def note_texts(control: str | None, notes: Sequence[str] = ()) -> list[str]:
    """A row's notes as the answer words them: the A/A control's words (`failed_control`), then the row's other
    caveats."""
    texts = [f"Not measurable: {control}"] if control else []
    for note in notes:
        if note.startswith("not measurable"):
            continue  # the control's note above says it
        texts.append(note[0].upper() + note[1:])
    return [" ".join(t.split()) for t in texts]


def row_note_texts(row: MeasuredRow | Against) -> list[str]:
    return note_texts(failed_control(row.aa_check, row.outcome), row.notes)


def notes_of(answer: Answer, row: MeasuredRow) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A measured configuration's notes beside the answer: (the ids of those the answer already says, the rest)."""
    ids = {n.text: n.id for n in answer.notes}
    texts = row_note_texts(row)
    return (tuple(dict.fromkeys(ids[t] for t in texts if t in ids)),
            tuple(t for t in texts if t not in ids))


class _Notes:
    """The shared notes as the rows name them: each text once, numbered in the order first met."""

    def __init__(self) -> None:
        self.by_text: dict[str, str] = {}

    def ref(self, text: str) -> str:
        text = " ".join(text.split())
        if text not in self.by_text:
            self.by_text[text] = f"N{len(self.by_text) + 1}"
        return self.by_text[text]

    def refs(self, texts: Sequence[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.ref(t) for t in texts))

    def notes(self) -> tuple[Note, ...]:
        return tuple(Note(i, t) for t, i in self.by_text.items())


def places_of(diagnosis: Diagnosis) -> list[tuple[str, str]]:
    """The machines and stacks a document tells apart, in the order its runs and prescriptions name them."""
    seen = [(r.machine, r.stack) for r in diagnosis.runs]
    seen += [(p.machine, p.stack) for p in diagnosis.prescriptions]
    return list(dict.fromkeys(seen))


def _label(precision: str, variant: str) -> str:
    words = variant_words(variant)
    return f"{precision}, {words}" if words else precision


def _device_bound(rows: Sequence[RunRow], verdicts: Sequence[Verdict],
                  ledgers: Sequence[Ledger]) -> Bound | None:
    profiled = {(r.precision, r.variant) for r in rows if r.ok and r.device_step is not None
                and r.variant == "original"}
    shown = [led for led in ledgers if (led.precision, led.variant) in profiled]
    if not shown:
        return None
    parts = []
    for led in sorted(shown, key=lambda led: led.precision != "float32"):
        busy = sum(p.ms for p in led.parts if p.name in DEVICE_PARTS)
        parts.append(f"{led.precision} ({ledger_words(led)}): GPU busy {fmt_pct(busy / led.step_ms)}")
    bound_by = [v.bound_by for v in verdicts if v.bound_by and v.variant == "original"]
    verdict, head = "", ""
    if bound_by and all(b == "host" for b in bound_by):
        verdict, head = "the host sets the pace", "the GPU is busy (kernels and copies) under half of each step"
    elif bound_by and all(b == "device" for b in bound_by):
        verdict, head = "the GPU's kernels set the pace", "the GPU is busy most of each step"
    return Bound("", "device", head, tuple(parts), verdict)


def _cpu_bound(ledgers: Sequence[Ledger]) -> Bound | None:
    original = sorted((led for led in ledgers if led.variant == "original" and led.parts),
                      key=lambda led: led.precision != "float32")
    return Bound("", "cpu_ops", "", tuple(cpu_ledger_line(led) for led in original), "") if original else None


def _bounds(diagnosis: Diagnosis, places: list[tuple[str, str]]) -> tuple[Bound, ...]:
    bounds: list[Bound] = []
    for machine, stack in places:
        rows = [r for r in diagnosis.runs if (r.machine, r.stack) == (machine, stack)]
        verdicts = [v for v in diagnosis.verdicts if (v.machine, v.stack) == (machine, stack)]
        ledgers = [led for led in diagnosis.ledgers if (led.machine, led.stack) == (machine, stack)]
        found = _device_bound(rows, verdicts, ledgers) or _cpu_bound(ledgers)
        if found is not None:
            bounds.append(replace(found, where=named_place(places, machine, stack)))
    return tuple(bounds)


def _prescriptions(prescriptions: Sequence[Prescription],
                   places: list[tuple[str, str]]) -> tuple[PrescriptionLine, ...]:
    lines = []
    for index, p in enumerate(prescriptions, start=1):
        first = p.user_changes[0].in_memory if p.user_changes else ()
        lines.append(PrescriptionLine(
            id=f"P{index}",
            where=named_place(places, p.machine, p.stack),
            headline=p.headline,
            faster=p.recommended.changes_something,
            changes=tuple(Change(change_words(c.facts), c.how, c.cost) for c in p.user_changes),
            in_memory=tuple(in_memory_words(e) for e in first),
            how=p.recommended.how,
            untested=tuple((u.idea + ("" if u.command else f": {u.measure}"), u.command)
                           for u in (entry.idea for entry in p.untested))))
    return tuple(lines)


def _cause(verdict: Verdict, findings: Sequence[Finding], ledgers: Sequence[Ledger] = ()) -> str:
    """The verdict's cause, in its finding's title, with what it explains and the finding's first measured number:
    where its figure is a ledger part's change, in the words of the parts line below it."""
    cause = verdict.cause
    finding = _finding_of(verdict, findings, cause) if cause else None
    share = next((c for c in verdict.causes if c.id == cause), None)
    if finding is None or cause is None or share is None:
        return ""
    title = _title_words(finding, cause)
    explains, difference = share.ms, verdict.difference_ms
    mine, base = pair_ledgers(verdict, ledgers)
    part = ""
    if share.part is not None and mine is not None and base is not None:
        part = f" ({part_in_step(share.part, mine, base)})"
    elif explains is not None and difference is not None:
        part = f" ({fmt_ms(abs(explains))} of {fmt_ms(abs(difference))})"
    others = _other_causes(verdict, findings, mine, base)
    if others and explains is not None and difference is not None and abs(explains) < MOSTLY * abs(difference):
        # No part is most of it: each named part with its size, then what the trace could not place.
        return f"causes: {title}{part}; {'; '.join(others)}{_unplaced(verdict, mine, base)}"
    number = finding.measured_line or ""
    if number.split(" ")[:3] == title.split(" ")[:3]:  # the number's line names the op the title names
        return f"cause{part}: {number}"
    return f"cause: {title}{part}" + (f": {number}" if number else "")


def _other_causes(verdict: Verdict, findings: Sequence[Finding], mine: Ledger | None = None,
                  base: Ledger | None = None) -> list[str]:
    """The verdict's causes after its first, each as its finding's title with what it explains (its ledger part's
    change, where its figure is one)."""
    words = []
    for share in verdict.causes[1:]:
        finding = _finding_of(verdict, findings, share.id)
        if finding is None or share.ms is None:
            continue
        figure = (part_of_step(share.part, mine, base, step=False)
                  if share.part is not None and mine is not None and base is not None else fmt_ms(abs(share.ms)))
        words.append(f"{_title_words(finding, share.id)} ({figure})")
    return words


def _finding_of(verdict: Verdict, findings: Sequence[Finding], cause: str) -> Finding | None:
    """The finding of one of a verdict's causes: its id, for the verdict's precision and variant."""
    return next((f for f in findings if f.id == cause and f.precision == verdict.precision
                 and (f.variant or "original") == verdict.variant), None)


def _title_words(finding: Finding, fallback: str) -> str:
    """A finding's title inside a sentence: its first letter lower-cased, unless it starts an acronym."""
    title = finding.title or fallback
    return title[0].lower() + title[1:] if title[:2] != title[:2].upper() else title


def _unplaced(verdict: Verdict, mine: Ledger | None = None, base: Ledger | None = None) -> str:
    """"; unplaced −22 ms, host time no op in the trace places": what the verdict's trace could not place, where
    it went the difference's way, as the parts line says it where the pair has ledgers (else the verdict's own size,
    "; 22 ms more is host time ..."); "" otherwise."""
    unplaced, difference = verdict.unplaced_host_ms, verdict.difference_ms
    if unplaced is None or difference is None:
        return ""
    if mine is not None and base is not None:
        moved = part_change(mine, base, UNPLACED)
        return f"; {moved_words(UNPLACED, moved)}, host time no op in the trace places" if moved * difference > 0 \
            else ""
    if unplaced * difference <= 0:
        return ""
    return f"; {fmt_ms(abs(unplaced))} more is host time no op in the trace accounts for"


def _figure(speedup: Any, interval: Any, outcome: Any, method: Any, bound: Any, refused: Any = None,
            aa: Any = None) -> str:
    """"2.2x slower (1.9-2.5x)", "same speed (0.9-1.1x)", ">= 6.8x slower": the figure every output prints
    (ShownRatio), then its interval; "not compared" where the comparison was refused (timed apart, its note says
    why): no figure, not even "same speed"."""
    if refused:
        return NOT_COMPARED
    shown = ShownRatio.of(speedup, interval, outcome, method=method, bound=bound, aa=aa)
    if shown is None:
        return ""
    spread = shown.interval_text()
    return shown.figure() + (f" ({spread})" if spread else "")


def _row_figure(row: MeasuredRow | Against) -> str:
    """A measured row's figure against its baseline, or a change's against the run it changes (`_figure`)."""
    return _figure(row.speedup, row.speedup_interval, row.outcome, row.interval_method, row.bound,
                   row.comparison_refused, {"passed": row.aa_check.passed} if row.aa_check is not None else None)


def _precisions(diagnosis: Diagnosis, notes: _Notes, places: list[tuple[str, str]]) -> tuple[PrecisionLine, ...]:
    lines = []
    for v in diagnosis.verdicts:
        versus = _figure(v.ratio, v.ratio_interval, v.outcome, v.interval_method, v.bound, v.comparison_refused,
                         {"passed": v.aa_check.passed} if v.aa_check is not None else None) \
            or v.figure or v.outcome or ""
        refs = notes.refs(note_texts(failed_control(v.aa_check, v.outcome)))
        lines.append(PrecisionLine(
            where=named_place(places, v.machine, v.stack),
            label=_label(v.precision, v.variant),
            versus=versus,
            steps=(f"{WHOLE_SCRIPT} " if whole_run(v, diagnosis.runs) else "")
            + f"{fmt_ms(v.step_ms)} vs {fmt_ms(v.fp32_step_ms)}",
            cause=short_line(_cause(v, diagnosis.findings, diagnosis.ledgers)),
            notes=refs, parts=parts_against(v, diagnosis.ledgers)))
    for p in diagnosis.prescriptions:  # the configurations only an experiment measured: no verdict of their own
        for m in p.measured:
            if m.variant in ("original", "synthetic_input") or m.is_baseline or m.against is not None:
                continue
            lines.append(PrecisionLine(
                where=named_place(places, p.machine, p.stack),
                label=m.config, steps=f"{fmt_ms(m.step_ms)}", cause="", versus=_row_figure(m),
                notes=notes.refs(row_note_texts(m))))
    judged = len(diagnosis.verdicts)
    for said in (two_timings, not_in_rounds, whole_run_note, loop_step_note):
        lines = [replace(line, notes=(*line.notes, notes.ref(text))) if (text := said(v, diagnosis.runs))
                 else line for line, v in zip(lines, diagnosis.verdicts, strict=False)] + lines[judged:]
    # Pure float16's numerics and the other caveats of a measured precision as written: one note each, on its line.
    caveats = {m.precision: notes.refs(note_texts(None, m.notes))
               for p in diagnosis.prescriptions for m in p.measured if m.variant == "original"}
    return tuple(replace(line, notes=tuple(dict.fromkeys([*line.notes, *caveats[line.label]])))
                 if line.label in caveats else line for line in lines)


def _failed(diagnosis: Diagnosis, places: list[tuple[str, str]]) -> tuple[PrecisionLine, ...]:
    """(c) Each run that failed, after the measured lines: where the user's code raised, why, what to change and where
    its log is (analysis/failed.py), so a failed precision is a line of the answer, never left out."""
    return tuple(PrecisionLine(
        where=named_place(places, r.machine, r.stack), label=_label(r.precision, r.variant),
        versus=short_line(r.failure.failed_at), steps="", cause=short_line(r.failure.why) + r.failure.log_words,
        failed=True)
        for r in diagnosis.runs if r.failure is not None)


def _changes(diagnosis: Diagnosis, notes: _Notes, places: list[tuple[str, str]]) -> tuple[PrecisionLine, ...]:
    """(c') Each change against the run it changes as written (`measured[].against`), in the measured order."""
    lines = []
    for p in diagnosis.prescriptions:
        for m in p.measured:
            against = m.against
            if against is None:
                continue
            lines.append(PrecisionLine(
                where=named_place(places, p.machine, p.stack), label=m.config, versus=_row_figure(against),
                steps=f"{fmt_ms(against.step_ms)} vs {fmt_ms(against.base_step_ms)}",
                cause="", notes=notes.refs(row_note_texts(against))))
    return tuple(lines)


def _points_to(finding: Finding, prescriptions: Sequence[PrescriptionLine], raw: Sequence[Prescription]) -> str:
    """The id of the prescription a finding's fix defers to: the one it recommends a configuration from, or the one
    whose measured change (user_changes) is the finding's own remedy."""
    for machine, stack, recommends in finding.remedy_places:
        for line, p in zip(prescriptions, raw, strict=False):
            if (p.machine, p.stack) != (machine, stack):
                continue
            if recommends or CHANGE_OF_FINDING.get(finding.id) in {c.kind for c in p.user_changes}:
                return line.id
    return ""


def _first_sentence(text: str) -> str:
    text = " ".join(str(text).split())
    if text.startswith("On ") and ": " in text[:60]:  # "On host: ...": the place is the answer's to say
        text = text.split(": ", 1)[1]
    end = text.find(". ")
    return short_line(text[:end + 1] if end > 0 else text)


def _findings(diagnosis: Diagnosis, prescriptions: tuple[PrescriptionLine, ...],
              places: list[tuple[str, str]]) -> tuple[FindingLine, ...]:
    """A line per finding, but for the outcomes ("float16 is 1.8x faster than float32"): each is a configuration's
    line in (c) already, and is said once (a full view keeps them, with their evidence)."""
    lines = []
    for f in diagnosis.findings:
        found = spec(f.id)
        if found is not None and found.family == "outcome":
            continue
        points = _points_to(f, prescriptions, diagnosis.prescriptions)
        lines.append(FindingLine(
            id=f.id, rank=f.rank or 0, severity=f.severity, title=short_line(f.title),
            explains=f.explains_words(f.place(places)),
            points_to=points,
            fix="" if points else _first_sentence(f.recommendation)))
    return tuple(lines)


def build_answer(diagnosis: Diagnosis) -> Answer:
    """The answer of one diagnosis (pure: reads only the Diagnosis)."""
    places = places_of(diagnosis)
    notes = _Notes()
    prescriptions = _prescriptions(diagnosis.prescriptions, places)
    precisions = _precisions(diagnosis, notes, places) + _failed(diagnosis, places)
    changes = _changes(diagnosis, notes, places)
    return Answer(bounds=_bounds(diagnosis, places), prescriptions=prescriptions, precisions=precisions,
                  changes=changes, findings=_findings(diagnosis, prescriptions, places), notes=notes.notes(),
                  places=len(places), between=tuple(c.headline for c in diagnosis.stack_comparisons))


__all__ = ["CHANGES_HEADING", "MAX_LINE", "PRECISIONS_HEADING", "SECTION_ORDER", "Answer", "AnswerLine", "Bound",
           "Change", "FindingLine", "Note", "PrecisionLine", "PrescriptionLine", "Section", "build_answer", "notes_of",
           "places_of", "short_line"]
