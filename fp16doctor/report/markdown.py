"""A short markdown summary, fit to paste into a GitHub issue or a forum post.

Every sentence is the analysis': the answer first, in the order every output lays it out (analysis/answer.py: what
bounds the step, what to do, each configuration against float32 with its cause, the changes, how, the shared notes,
the first findings), then its detail as `explain --full` has it (analysis/detail.py: the measured tables, batches in
memory, the verdicts, the software, the best case), the table data between them (the op changes between stacks, the
runs, where the time went, each under the analysis' caption) and the command that measures it again. This module
only lays them out.
Text from results files is escaped so it renders as text: no HTML, no links, no broken tables.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

from fp16doctor.analysis.answer import Section
from fp16doctor.analysis.detail import BETWEEN_AFTER, DETAIL_ORDER
from fp16doctor.analysis.op_compare import OPS_HEADING, OPS_READING
from fp16doctor.analysis.values import fmt_ms, fmt_pct, fmt_rate, fmt_signed_ms
from fp16doctor.report.sections.stack_changes import StackChangeView
from fp16doctor.report.viewmodel import DocumentView, MachineView, ReportView, RunRow, TimeTableView

TOP_FINDINGS = 3
# What could turn text into markup inside a line or a table cell (GFM leaves intraword _ alone).
_SPECIAL = re.compile(r"([\\`*\[\]|~])")


def md_text(text: str) -> str:
    """Inline markdown that shows exactly `text`: HTML is entity-escaped, markup characters backslashed."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _SPECIAL.sub(r"\\\1", text)
    return " ".join(text.split())  # newlines would end a table row or a list item


def md_code(text: str) -> str:
    """Inline code that cannot be closed early by backticks inside it."""
    text = " ".join(text.split())
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _spread(row: RunRow) -> str:
    if row.p10_ms is None or row.p90_ms is None:
        return "—"
    return f"{fmt_ms(row.p10_ms)} – {fmt_ms(row.p90_ms)}"


def _status(row: RunRow) -> str:
    """The run's status as the analysis recorded it (a failed run's reason is its line in the answer)."""
    return "ok" + (" (NaN loss)" if row.loss_nan else "") if row.ok else md_text(row.status)


def _machine_table(machine: MachineView) -> list[str]:
    head = ["stack", "precision"]
    if machine.show_variant:
        head.append("variant")
    if machine.show_engine:
        head.append("engine")
    head += ["step", "p10–p90", "images/s", "vs float32", "input share", "status"]
    numeric = {"step", "p10–p90", "images/s", "vs float32", "input share"}
    align = ["--:" if name in numeric else "---" for name in head]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    for row in machine.rows:
        cells = [md_text(row.stack), md_text(row.precision)]
        if machine.show_variant:
            cells.append(md_text(row.variant))
        if machine.show_engine:
            cells.append(md_text(row.engine))
        cells += [
            fmt_ms(row.step_ms),
            _spread(row),
            fmt_rate(row.images_per_s),
            row.versus_fp32,
            fmt_pct(row.input_share),
            _status(row),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


TOP_OPS_MD = 8  # the summary keeps the biggest differences; the HTML report lists more


def _code_cell(name: str) -> str:
    """A name (a kernel, an op) in a cell, as code; a dash where there is none."""
    return md_code(name) if name and name != "—" else "—"


def _time_table(table: TimeTableView) -> list[str]:
    """"Where the time went" for one 16-bit run: float32 beside it per layer and pass, biggest first, under the
    analysis' caption and caveats (OpComparison.caption, .caveats)."""
    out = [f"**{OPS_HEADING}, {md_text(table.title)}:**", "", md_text(table.caption), ""]
    for note in table.notes:
        out += [f"> {md_text(note)}", ""]
    tc = table.show_tensor_cores
    out += [
        f"| layer | pass | float32 | {md_text(table.precision)} | difference | implementation "
        "| float32's implementation |" + (" Tensor Cores |" if tc else ""),
        "| --- | --- | --: | --: | --: | --- | --- |" + (" --- |" if tc else ""),
    ]
    rows = [r for r in table.rows if not r.is_rest]
    shown, hidden = rows[:TOP_OPS_MD], rows[TOP_OPS_MD:] + [r for r in table.rows if r.is_rest]
    for row in shown:
        fp32_impl = "same" if row.fp32_impl and row.fp32_impl == row.impl else _code_cell(row.fp32_impl)
        out.append(
            f"| {md_code(row.layer)} | {md_text(row.pass_label)} | {fmt_ms(row.fp32_ms)} | {fmt_ms(row.reduced_ms)} "
            f"| {fmt_signed_ms(row.difference_ms)} | {_code_cell(row.impl)} | {fp32_impl} |"
            + (f" {row.tensor_cores or '—'} |" if tc else "")
        )
    if hidden:
        def total(values: list[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return sum(known) if known else None

        diff = total([r.difference_ms for r in hidden])
        out.append(
            f"| {sum(r.rows for r in hidden)} more, summed | | {fmt_ms(total([r.fp32_ms for r in hidden]))} "
            f"| {fmt_ms(total([r.reduced_ms for r in hidden]))} | {fmt_signed_ms(diff)} | | |" + (" |" if tc else "")
        )
    out.append("")
    return out


ORDERED = re.compile(r"[0-9]+\. ")  # a finding's line: "1. WARNING ...", an item of an ordered list


def _sections(sections: Sequence[Section]) -> list[str]:
    """Sections of the answer or of its detail, laid out as they are built: each a bold heading and its lines as
    list items (a finding's line an item of an ordered list, a deeper line nested), a program as a code block and a
    command as code; nothing here decides or phrases."""
    out: list[str] = []
    for section in sections:
        out += [f"**{md_text(section.heading)}:**", ""]
        base = min(line.indent for line in section.lines)
        ordered = False
        for line in section.lines:
            level = max(0, (line.indent - base) // 2)
            pad = ("   " if ordered else "  ") * min(level, 1) + "  " * max(0, level - 1)
            if line.kind == "code":
                out += ["```python", textwrap.dedent(line.text).strip("\n").replace("```", "` ` `"), "```"]
            elif line.kind == "command":
                out.append(f"{pad}{md_code(line.text)}")
            elif not level and ORDERED.match(line.text):
                ordered = True
                out.append(md_text(line.text))
            else:
                ordered = ordered and bool(level)
                out.append(f"{pad}- {md_text(line.text)}")
        out.append("")
    return out


def _stack_changes(changes: Sequence[StackChangeView]) -> list[str]:
    """Between stacks, op by op: the biggest op changes of each comparison (the analysis' sentence is the answer's),
    under the analysis' caption (StackComparison.caption)."""
    out: list[str] = [md_text(changes[0].matching), ""] if any(c.rows for c in changes) else []
    for change in changes:
        out += [f"**Between stacks, {md_text(change.title)}:**", ""]
        out += [f"- {md_text(line)}" for line in change.side_lines] + ([""] if change.side_lines else [])
        if change.rows:
            out += [f"| layer and pass | {md_text(change.sides[0])} | ms | {md_text(change.sides[1])} | ms "
                    "| change | the other way |", "| --- | --- | --: | --- | --: | --: | --- |"]
            out += [f"| {md_text(r.where)} | {_code_cell(r.impl_from)} | {r.ms_from} | {_code_cell(r.impl_to)} "
                    f"| {r.ms_to} | {r.difference} | {'yes' if r.against else ''} |" for r in change.rows[:TOP_OPS_MD]]
            out += ["", md_text(change.comparison.caption(TOP_OPS_MD, REST_IN)), ""]
    return out


REST_IN = "in the HTML report"  # where the rows a table leaves out are


def _document(doc: DocumentView, changes: Sequence[StackChangeView], many: bool) -> list[str]:
    """One document: its answer (with its first findings), its detail (the measured tables, the verdicts, the
    software, the best case; each finding's evidence stays in the HTML report), between the verdicts and the rest
    the op changes between stacks; each machine's runs and where the time went, as table data; the command that
    measures it again."""
    out: list[str] = [f"### {md_text(doc.title)}", ""] if many else []
    if doc.answer is not None:
        out += _sections(doc.answer.sections(top=TOP_FINDINGS))
    detail = [s for s in doc.detail if s.id not in MARKDOWN_LEAVES]
    cut = sum(DETAIL_ORDER.index(s.id) <= DETAIL_ORDER.index(BETWEEN_AFTER) for s in detail)
    out += _sections(detail[:cut])
    out += _stack_changes(changes)
    out += _sections([s for s in detail[cut:] if s.id == "machine"])  # where it ran, above its runs
    for machine in (m for m in doc.machines if m.rows):
        out += [f"**Runs{', ' + md_text(machine.name) if many else ''}:**", "", *_machine_table(machine), ""]
    out += _sections([s for s in detail[cut:] if s.id != "machine"])
    tables = [table for machine in doc.machines for table in machine.time_tables]
    if tables:  # how to read them, once, the analysis' words (op_compare.OPS_READING)
        out += [md_text(OPS_READING), ""]
    for table in tables:
        out += _time_table(table)
    out += ["**Reproduce:**", "", "```sh", doc.reproduce.command.replace("```", "` ` `"), "```", ""]
    return out


# The detail's sections the summary leaves to the HTML report: the runs (their table stands here instead) and each
# finding's evidence (the answer's line per finding says it).
MARKDOWN_LEAVES = ("runs", "finding_detail")


def markdown_from_view(view: ReportView) -> str:
    many = len(view.documents) > 1 or sum(len(d.machines) for d in view.documents) > 1
    lines = [f"## {md_text(view.title)}", ""]
    lines += [f"> {md_text(d.title)}: {md_text(d.busy)}\n" for d in view.documents if d.busy]
    changes: list[StackChangeView] = view.sections.get("stack_changes", [])
    for index, doc in enumerate(view.documents):
        lines += _document(doc, [c for c in changes if c.document == index], many)
    lines.append(f"<sub>{md_text(view.generator)} · secrets redacted</sub>")
    return "\n".join(lines).rstrip() + "\n"
