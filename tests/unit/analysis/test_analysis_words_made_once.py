"""Words made once: what `explain` and `explain --full` print and what the report's first screen, its machine cards and
its environment card show are the answer's sentences and its detail's (Answer.text, detail.py; `explain --json`'s
answer), and the captions the analysis' table types word, laid out, never composed again by a renderer. Checked on
every example document: each sentence of 40 characters or more found in the answer's text (headings aside)."""

from __future__ import annotations

import html.parser
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from fp16doctor.analysis import saved_diagnosis
from fp16doctor.textout.findings import findings_text
from fp16doctor.textout.stack_compare import TOP_CHANGES

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
DOCS = sorted(EXAMPLES.glob("*/results.json"))
MIN_SENTENCE = 40


def _sentences(text: str) -> list[str]:
    """A rendering's sentences and line pieces of MIN_SENTENCE characters or more, whitespace made single."""
    pieces = re.split(r"(?<=[.;:])\s+|\n|\s{2,}", text)
    return [" ".join(p.split()) for p in pieces if len(" ".join(p.split())) >= MIN_SENTENCE]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _unpunctuated(text: str) -> str:
    """Without the layout's separators: a table's cells, and note references ([N1, N2] or [N1] [N2])."""
    return _flat(re.sub(r"[:,]", " ", re.sub(r"\[N[0-9, N]*\]", " ", text)))


class _AnswerCard(html.parser.HTMLParser):
    """The text of the report's answer cards (`<section class="card answer" ...>`), its SVG charts aside."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.skip = 0
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.depth:
            self.depth += tag == "section"
            self.skip += tag in ("svg", "figure", "summary")
        elif tag == "section" and "answer" in (dict(attrs).get("class") or "").split():
            self.depth = 1

    def handle_endtag(self, tag: str) -> None:
        if self.depth:
            self.skip -= tag in ("svg", "figure", "summary")
            self.depth -= tag == "section"
            self.text.append("\n" if tag in ("p", "li", "tr", "div", "h3") else " ")

    def handle_data(self, data: str) -> None:
        if self.depth and not self.skip:
            self.text.append(data)


@pytest.mark.parametrize("path", DOCS, ids=[p.parent.name for p in DOCS])
def test_every_sentence_explain_prints_is_the_answers(path: Path) -> None:
    diagnosis = saved_diagnosis(json.loads(path.read_text(encoding="utf-8")))
    answer = _flat(diagnosis.answer.text(whole_code=False))
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(findings_text(diagnosis))
    headings = {section.heading for section in diagnosis.answer.sections()}
    missing = [s for s in _sentences(out.getvalue()) if s not in answer and s not in headings]
    assert not missing, missing[:5]


def _time_tables(diagnosis: Any) -> str:
    """What heads and follows where the time went, as op_compare words it: how to read the tables, each table's
    title, caption and caveats."""
    from fp16doctor.analysis.op_compare import OPS_READING

    return "\n".join([OPS_READING, *(line for c in diagnosis.comparisons
                                      for line in (c.title, c.caption(), *c.caveats))])


def _between_sides(diagnosis: Any) -> str:
    """What heads the op tables between stacks, as StackComparison words it: each side's line, and how the ops are
    matched."""
    from fp16doctor.analysis.stack_compare import StackComparison

    return "\n".join([StackComparison.MATCHING, *(side.line() for c in diagnosis.stack_comparisons
                                                   for side in (c.from_, c.to))])


@pytest.mark.parametrize("path", DOCS, ids=[p.parent.name for p in DOCS])
def test_every_sentence_explain_full_prints_is_the_answers_or_its_details(path: Path) -> None:
    """`explain --full`: the answer, then its detail (detail.py), both in `explain --json`; the op tables between
    stacks are table data laid out in cells, with their caption (StackComparison.caption)."""
    diagnosis = saved_diagnosis(json.loads(path.read_text(encoding="utf-8")))
    said = diagnosis.to_dict()["answer"]
    known = _flat(f"{said['text']}\n{said['detail']['text']}\n"
                  + "\n".join(c.caption(TOP_CHANGES, "in the report") for c in diagnosis.stack_comparisons)
                  + "\n" + _between_sides(diagnosis) + "\n" + _time_tables(diagnosis))
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(findings_text(diagnosis, full=True))
    headings = {s.heading for s in (*diagnosis.answer.sections(), *diagnosis.detail)}
    missing = [s for s in _sentences(out.getvalue()) if s not in known and s not in headings
               and any(c.isalpha() for c in s)]  # a table's rule is no sentence
    assert not missing, missing[:5]
    assert said["detail"]["order"] == [s.id for s in diagnosis.detail]


@pytest.mark.parametrize("path", DOCS, ids=[p.parent.name for p in DOCS])
def test_every_sentence_of_the_reports_first_screen_is_the_answers(path: Path) -> None:
    report = path.parent / "report.html"
    if not report.exists():
        pytest.skip("no report rendered for this example")
    diagnosis = saved_diagnosis(json.loads(path.read_text(encoding="utf-8")))
    # A configuration's line is laid out in table cells (label, figure, steps): its separators are the layout's.
    answer = _unpunctuated(diagnosis.answer.text())
    card = _AnswerCard()
    card.feed(report.read_text(encoding="utf-8"))
    shown = "".join(card.text)
    assert shown.strip(), "no answer card in the report"
    missing = [s for s in _sentences(shown) if _unpunctuated(s) not in answer]
    assert not missing, missing[:5]


def test_an_untested_idea_is_said_in_one_form_by_every_output() -> None:
    """The answer, `explain --full`, the markdown and the report say an untested configuration as UntestedIdea words
    it: the configuration and why, then the command that measures it or why diagnose cannot."""
    from fp16doctor.report import render_html, render_markdown

    path = EXAMPLES / "cpu-epyc-avx2-three-stacks-quick" / "results.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    diagnosis = saved_diagnosis(doc)
    ideas = [u.idea for p in diagnosis.prescriptions for u in p.untested]
    assert any(u.command for u in ideas) and any(not u.command for u in ideas)
    out = io.StringIO()
    Console(file=out, width=400, color_system=None).print(findings_text(diagnosis, full=True))
    full = _flat(out.getvalue())
    answer = _flat(diagnosis.answer.text())
    markdown, report = _flat(render_markdown([doc])), _flat(render_html([doc]))
    for u in ideas:
        assert _flat(u.sentence()) in full
        assert _flat(u.idea) in answer and _flat(u.measure) in answer
        assert u.config in markdown and (u.command or u.no_command) in markdown
        assert (u.command or u.no_command).replace("'", "&#39;") in report


def test_a_change_diagnose_cannot_make_to_a_script_says_how_without_naming_the_built_in_workload() -> None:
    """A script's answer never speaks of "the seed workload": a variant that changes only the built-in model or data
    says so in the user's terms, with what to do instead."""
    from fp16doctor.analysis.advice import variant_applies
    from fp16doctor.analysis.context import Software

    said = variant_applies("float32_batches", Software.from_run({"software": {"keras": "3.15.1"}}), script=True)
    assert said is not None and "seed workload" not in said
    assert "fp16doctor's built-in model or data, not your script's" in said and "diagnose it again" in said


_MD_ESCAPE = re.compile(r"\\([\\`*\[\]|~])")


def _markdown_text(markdown: str) -> tuple[str, list[str]]:
    """The markdown's text as a reader reads it, markup undone (bold, code spans, backslash escapes, entities, list
    and quote markers), and its table cells, each apart; headings (a line of its own: `## ...`, `**...:**`) and the
    command that measures it again (the ```sh block after "Reproduce", the document's invocation) left out."""
    out: list[str] = []
    cells: list[str] = []
    fence = ""
    for line in markdown.splitlines():
        if line.startswith("```"):
            fence = "" if fence else line[3:] or "text"
            continue
        if fence == "sh" or re.fullmatch(r"#+ .*|\*\*[^*]+\*\*|<sub>.*", line.strip()):
            continue
        if fence:  # a program, as it stands
            out.append(line)
            continue
        text = html.unescape(_MD_ESCAPE.sub(r"\1", line.replace("**", "").replace("`", "")))
        if line.startswith("|"):
            cells += [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            continue
        out.append(re.sub(r"^\s*(?:[-*>]|[0-9]+\.)?\s*", "", text))
    return "\n".join(out), cells


# The markdown summary: every document on a GPU and on CPUs, and at least these three (a GPU's with every kind of
# section, a CPU's with AMX, a CPU's with bfloat16 instructions).
MARKDOWN_DOCS = ["gpu-h200-keras-torch-full", "cpu-xeon-amx-quick", "cpu-epyc-avx512bf16-quick"]


def test_the_markdown_lays_out_every_example() -> None:
    assert set(MARKDOWN_DOCS) <= {p.parent.name for p in DOCS}


@pytest.mark.parametrize("path", DOCS, ids=[p.parent.name for p in DOCS])
def test_every_sentence_the_markdown_prints_is_the_answers_or_its_details(path: Path) -> None:
    """The markdown summary lays out the answer (with its first findings) and its detail, the sentences `explain
    --json` carries (`answer.text`, `answer.detail.text`); its tables are table data, laid out in cells, under the
    captions and caveats their analysis types word (OpComparison.caption and .caveats, op_compare.OPS_READING,
    StackComparison.caption)."""
    from fp16doctor.analysis.op_compare import OPS_READING
    from fp16doctor.report import render_markdown
    from fp16doctor.report.markdown import REST_IN, TOP_FINDINGS, TOP_OPS_MD

    doc = json.loads(path.read_text(encoding="utf-8"))
    diagnosis = saved_diagnosis(doc)
    said = diagnosis.to_dict()["answer"]
    captions = [c.caption(TOP_OPS_MD, REST_IN) for c in diagnosis.stack_comparisons] + [_between_sides(diagnosis)]
    captions += [line for c in diagnosis.comparisons for line in (c.caption(), *c.caveats)]
    captions += [OPS_READING] if diagnosis.comparisons else []  # how to read the time tables, said once above them
    busy = [diagnosis.busy.document_words()] if diagnosis.busy is not None else []
    # The answer's findings as the summary keeps them: its first TOP_FINDINGS and its line naming the rest.
    more = [line.text for s in diagnosis.answer.sections(top=TOP_FINDINGS) for line in s.lines if line.kind == "more"]
    known = _flat("\n".join([said["text"], said["detail"]["text"], *captions, *busy, *more]))
    text, cells = _markdown_text(render_markdown([doc], [diagnosis]))
    headings = {s.heading for s in (*diagnosis.answer.sections(), *diagnosis.detail)}
    missing = [s for s in _sentences(text) if s not in known and s not in headings]
    assert not missing, missing[:5]
    # A cell is a value or a name (a layer, a kernel, a status), never a sentence of the renderer's.
    prose = [c for c in cells if len(c) >= MIN_SENTENCE and re.search(r"[.;:] ", c) and _flat(c) not in known]
    assert not prose, prose[:5]


class _Page(html.parser.HTMLParser):
    """The text of the report's page as a reader reads it: the text between cells (`text`), and each table cell and
    each value of a key-value list apart (`cells`). Left out: the SVG charts, the page's head, its headings (a card's
    title, a summary's label), its footer (how the file carries its data, the page's own chrome), programs and
    commands (`<pre>`: values, whole, each the answer's or the document's invocation), and a name in code inside a
    cell (a layer, a kernel, an error) as the value it is."""

    CELLS = ("td", "th", "dt", "dd")
    LEFT_OUT = ("svg", "head", "script", "style", "footer", "h1", "h2", "h3", "h4", "summary", "pre")

    def __init__(self) -> None:
        super().__init__()
        self.skip = 0
        self.cell = 0
        self.code = 0
        self.text: list[str] = []
        self.cells: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.skip += tag in self.LEFT_OUT
        self.code += tag == "code" and bool(self.cell)
        if tag in self.CELLS:
            self.cell += 1
            self.cells.append("")

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in self.LEFT_OUT
        self.code -= tag == "code" and bool(self.code)
        self.cell -= tag in self.CELLS
        self.text.append("\n" if tag in ("p", "li", "tr", "div", "section", "figcaption") else " ")

    def handle_data(self, data: str) -> None:
        if self.skip or self.code:
            return
        if self.cell:
            self.cells[-1] += data
        else:
            self.text.append(data)


def _reports_own_words(diagnosis: Any) -> str:
    """What the report may say besides the answer and the detail: the captions and caveats of the tables and charts,
    as the analysis types that define them word them."""
    from fp16doctor.analysis.op_compare import OPS_READING
    from fp16doctor.analysis.runs import CHART_CAPTIONS
    from fp16doctor.report.sections.stack_changes import TOP_CHANGES_HTML

    said = diagnosis.to_dict()["answer"]
    between = [c.caption(min(TOP_CHANGES_HTML, len(c.changes)), "summed in the last row")
               for c in diagnosis.stack_comparisons]
    return "\n".join([said["text"], said["detail"]["text"], OPS_READING, *CHART_CAPTIONS.values(),
                      _between_sides(diagnosis), *between,
                      *(line for c in diagnosis.comparisons for line in (c.title, c.caption(), *c.caveats))])


@pytest.mark.parametrize("path", DOCS, ids=[p.parent.name for p in DOCS])
def test_every_sentence_of_the_whole_report_is_the_analysis(path: Path) -> None:
    """The whole page, every card (the answer, what to do in detail, the verdicts, between stacks, each machine's
    facts, runs, time tables and charts, the findings, the environment, how to reproduce): it lays out the answer's
    and the detail's sentences and the captions their analysis types word (op_compare.OPS_READING,
    OpComparison.title, .caption and .caveats, runs.CHART_CAPTIONS, StackComparison.caption and .MATCHING,
    StackSide.line); a table cell or a listed value is a value or a name, never a sentence of the report's."""
    report = path.parent / "report.html"
    if not report.exists():
        pytest.skip("no report rendered for this example")
    diagnosis = saved_diagnosis(json.loads(path.read_text(encoding="utf-8")))
    known = _unpunctuated(_reports_own_words(diagnosis))
    page = _Page()
    page.feed(report.read_text(encoding="utf-8"))
    shown = "".join(page.text)
    assert len(_sentences(shown)) > 20, "the page's text was not read"
    missing = [s for s in _sentences(shown) if _unpunctuated(s) not in known]
    assert not missing, missing[:5]
    prose = [c for c in map(_flat, page.cells)
             if len(c) >= MIN_SENTENCE and re.search(r"[.;:] ", c) and _unpunctuated(c) not in known]
    assert not prose, prose[:5]
