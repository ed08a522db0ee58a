"""A short markdown summary, fit to paste into a GitHub issue or a forum post.

The answer first, in the order every output lays it out (analysis/answer.py: what bounds the step, what to do, each
configuration against float32 with its cause, how, the shared notes), then the detail: the measured table, GPU and
stack, the verdicts, one table of the runs, where the time went (measured ops), the top findings and the command
that reproduces it.
Text from results files is escaped so it renders as text: no HTML, no links, no broken tables.
"""

from __future__ import annotations

import re
import textwrap

from fp16doctor.analysis.answer import Answer
from fp16doctor.analysis.values import fmt_ms, fmt_pct, fmt_rate, fmt_signed_ms
from fp16doctor.report.viewmodel import (
    DocumentView,
    MachineView,
    PrescriptionView,
    ReportView,
    RunRow,
    TimeTableView,
)

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


def first_sentence(text: str, limit: int = 240) -> str:
    """The summary keeps the first sentence of a recommendation; the HTML report has the rest."""
    sentence = re.split(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+(?=[A-Z(])", text.strip(), maxsplit=1)[0].rstrip(":;, ")
    if len(sentence) > limit:
        cut = sentence[: limit - 1]
        command = cut.rfind("fp16doctor ")
        if command > 0 and len(sentence) > limit - 1:  # half a command is one nobody can run: cut before it
            cut = cut[:command]
        sentence = cut.rstrip(" :;,`") + "…"
    elif not sentence.endswith((".", "!", "?", ")")):
        sentence += "."
    return sentence


def _spread(row: RunRow) -> str:
    if row.p10_ms is None or row.p90_ms is None:
        return "—"
    return f"{fmt_ms(row.p10_ms)} – {fmt_ms(row.p90_ms)}"


def _status(row: RunRow) -> str:
    if row.ok:
        return "ok" + (" (NaN loss)" if row.loss_nan else "")
    detail = f": {row.error}" if row.error else ""
    if len(detail) > 120:
        detail = detail[:119] + "…"
    return md_text(row.status + detail)


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


def _time_table(table: TimeTableView) -> list[str]:
    """"Where the time went" for one 16-bit run: float32 beside it per layer and pass, biggest first."""
    bound = " (cut short: at least this long)" if table.bound else ""
    source = md_code(table.source) + (f", coverage {table.coverage:.0%}" if table.coverage is not None else "")
    out = [
        f"**Where the time went, {md_text(table.title)}:** {md_text(table.precision)} step "
        f"{fmt_ms(table.step_ms)}{bound}, float32 {fmt_ms(table.fp32_step_ms)}; ops from {source}; window: "
        f"{md_text(table.window)}.",
        "",
    ]
    for note in table.notes:
        out += [f"> {md_text(note)}", ""]
    tc = table.show_tensor_cores
    out += [
        f"| layer | pass | float32 | {md_text(table.precision)} | difference | implementation |"
        + (" Tensor Cores |" if tc else ""),
        "| --- | --- | --: | --: | --: | --- |" + (" --- |" if tc else ""),
    ]
    rows = [r for r in table.rows if not r.is_rest]
    shown, hidden = rows[:TOP_OPS_MD], rows[TOP_OPS_MD:] + [r for r in table.rows if r.is_rest]
    for row in shown:
        impl = md_code(row.impl) if row.impl else "—"
        if row.fp32_impl and row.fp32_impl == row.impl:
            impl += " (same in float32)"
        elif row.fp32_impl:
            impl += f" (float32: {md_code(row.fp32_impl)})"
        out.append(
            f"| {md_code(row.layer)} | {md_text(row.pass_label)} | {fmt_ms(row.fp32_ms)} | {fmt_ms(row.reduced_ms)} "
            f"| {fmt_signed_ms(row.difference_ms)} | {impl} |" + (f" {row.tensor_cores or '—'} |" if tc else "")
        )
    if hidden:
        def total(values: list[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return sum(known) if known else None

        diff = total([r.difference_ms for r in hidden])
        out.append(
            f"| {sum(r.rows for r in hidden)} more, summed | | {fmt_ms(total([r.fp32_ms for r in hidden]))} "
            f"| {fmt_ms(total([r.reduced_ms for r in hidden]))} | {fmt_signed_ms(diff)} | |" + (" |" if tc else "")
        )
    out.append("")
    return out


def _answer(answer: Answer) -> list[str]:
    """The answer, laid out as it is built (Answer.sections, the order and lines every output shows): each section
    a bold heading and its lines as list items, a program as a code block and a command as code; nothing here
    decides or phrases. The findings stay in their own section below, with their evidence."""
    out: list[str] = []
    for section in answer.sections(findings=False):
        out += [f"**{md_text(section.heading)}:**", ""]
        for line in section.lines:
            if line.kind == "code":
                out += ["```python", textwrap.dedent(line.text).strip("\n").replace("```", "` ` `"), "```"]
            elif line.kind == "command":
                out.append(f"  {md_code(line.text)}")
            else:
                pad = "  " * max(0, (line.indent - 2) // 2)
                out.append(f"{pad}- {md_text(line.text)}")
        out.append("")
    return out


def _prescriptions(view: ReportView, answered: bool) -> list[str]:
    """The analysis' prescription per machine and stack, in its own words, first; after the answer (`answered`),
    only the measured table and the untested configurations it was chosen from."""
    out: list[str] = []
    for p in view.prescriptions:
        if answered:  # the answer said each measured configuration and what nobody measured (its "How")
            continue
        out.append(f"**Prescription:** {md_text(p.headline)}")
        for i, change in enumerate(p.changes):  # measured changes beyond a precision, largest first
            out.append(f"{'First' if i == 0 else 'Also'}: {md_text(change.words)}"
                       + "".join(f"; in memory, {md_text(m)}" for m in change.in_memory))
            if change.how:
                out.append(f"How: {md_code(change.how)}")
            if change.cost:
                out.append(f"What it costs: {md_text(change.cost)}")
        if p.how:
            out.append(f"How: {md_code(p.how)}")
        out += _measured_table(p)
    return out


def _measured_table(p: PrescriptionView) -> list[str]:
    """The table the prescription was chosen from, as the HTML and the terminal list it, and what nobody measured."""
    out: list[str] = []
    if p.measured:
        out += ["", "| measured | ms/step | vs float32 | note |", "| --- | ---: | --- | --- |"]
        out += [f"| {md_text(m.config)}{' ✓' if m.recommended else ''} | {md_text(m.step)} | "
                f"{md_text(m.versus_fp32)} | {md_text(m.note) or '—'} |" for m in p.measured]
        out += [""] if p.untested else []
    return out + _untested(p)


def _untested(p: PrescriptionView) -> list[str]:
    out: list[str] = []
    for u in p.untested:
        measure = md_code(u.command) if u.command else md_text(u.measure)
        out.append(f"Untested: {md_text(u.idea)}: {measure}")
    return [*out, ""] if out else []


def _stack_changes(view: ReportView) -> list[str]:
    """Between stacks: the analysis' sentence per machine and precision, and its biggest op changes."""
    out: list[str] = []
    for change in view.sections.get("stack_changes", []):
        out += [f"**Between stacks, {md_text(change.title)}:** {md_text(change.sentence)}.", ""]
        if change.rows:
            out += [f"| layer and pass | {md_text(change.sides[0][0])} | {md_text(change.sides[1][0])} | change |",
                    "| --- | --- | --- | --: |"]
            out += [f"| {md_text(r.where)}{' (the other way)' if r.against else ''} | {md_code(r.impl_from)} "
                    f"{r.ms_from} | {md_code(r.impl_to)} {r.ms_to} | {r.difference} |"
                    for r in change.rows[:TOP_OPS_MD]]
            out.append("")
    return out


def _document(doc: DocumentView, many: bool) -> list[str]:
    out: list[str] = []
    for machine in doc.machines:
        out.append(f"### {md_text(machine.name)}" if many else f"**GPU / device:** {md_text(machine.name)}")
        if machine.details:
            out.append("")
            out.append(md_text(" · ".join(machine.details)))
        out.append("")
        for verdict in machine.verdicts:
            out.append(f"**Verdict:** {md_text(verdict.sentence)}")
            out.append("")
        out += _machine_table(machine) if machine.rows else ["No runs in this results file."]
        out.append("")
        for table in machine.time_tables:
            out += _time_table(table)
    software = [sw for sw in doc.environment.software if any(sw.values.values())]
    if software:
        stacks = []
        for sw in software:
            v = sw.values
            bits = [
                f"{label} {v[key]}"
                for key, label in (
                    ("python", "Python"),
                    ("tensorflow", "TF"),
                    ("keras", "Keras"),
                    ("cuda", "CUDA"),
                    ("cudnn", "cuDNN"),
                )
                if v.get(key)
            ]
            described = f" ({sw.description})" if sw.description else ""
            stacks.append(f"{sw.stack}{described}: {', '.join(bits)}" if bits else sw.stack + described)
        out += ["**Stacks:** " + md_text("; ".join(dict.fromkeys(stacks))), ""]
    if doc.findings:
        out.append("**Why (top findings):**")
        out.append("")
        for i, finding in enumerate(doc.findings[:TOP_FINDINGS], 1):
            plain_id = re.fullmatch(r"[A-Za-z0-9_.-]+", finding.id)
            ident = md_code(finding.id) if plain_id else md_text(finding.id)
            line = f"{i}. **{md_text(finding.title)}** ({ident}, {md_text(finding.severity)})"
            if finding.explains_ms is not None:
                basis = f", {finding.basis}" if finding.basis else ""
                scope = f" of {md_text(finding.scope)}" if finding.scope else ""
                line += f" — accounts for {fmt_ms(finding.explains_ms)} per step{scope}{basis}"
            if finding.recommendation:
                line += f" — {md_text(first_sentence(finding.recommendation))}"
            out.append(line)
        if len(doc.findings) > TOP_FINDINGS:
            out.append(f"{TOP_FINDINGS + 1}. … and {len(doc.findings) - TOP_FINDINGS} more in the HTML report")
        out.append("")
    out += ["Reproduce:", "", "```sh", doc.reproduce.command.replace("```", "` ` `"), "```", ""]
    return out


def markdown_from_view(view: ReportView) -> str:
    machines = [m for d in view.documents for m in d.machines]
    many = len(machines) > 1
    lines = [f"## {md_text(view.title)}", ""]
    if many:
        lines += ["Machines compared: " + md_text(", ".join(m.name for m in machines)), ""]
    lines += [f"> {md_text(d.title)}: {md_text(d.busy)}\n" for d in view.documents if d.busy]
    answers = [d.answer for d in view.documents if d.answer is not None]
    for answer in answers:
        lines += _answer(answer)
    lines += _prescriptions(view, answered=bool(answers))
    lines += _stack_changes(view)
    for doc in view.documents:
        lines += _document(doc, many)
    lines.append(f"<sub>{md_text(view.generator)} · secrets redacted</sub>")
    return "\n".join(lines).rstrip() + "\n"
