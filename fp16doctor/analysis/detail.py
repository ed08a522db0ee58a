"""The detail: what a full view shows after the answer (`explain --full`, `explain --json`'s `answer.detail`), composed
once, here, as the answer's own sections and lines (answer.Section, answer.AnswerLine) in DETAIL_ORDER.

(e) the measured table each prescription was chosen from, fastest first, each row's notes by the answer's ids; each
    precision with batches in memory, where a change to the input pipeline was measured;
(f) each verdict as the analysis phrased it;
(g) where it ran: each machine's name and facts (machine.py); each run's step, against the float32 run it was paired
    with, and its device split where profiled; the software each stack's runs reported;
(h) the best case a GPU allows a 16-bit type (roofline), or why there is none for a GPU's run;
(i) each finding with its evidence and its whole fix, most important first.

Pure: the Diagnosis and its answer in, sections out. The comparisons between stacks keep their op tables as table
data (stack_compare.StackComparison), which a renderer lays out in cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from fp16doctor.analysis.answer import Answer, AnswerLine, Section, notes_of, places_of
from fp16doctor.analysis.finding import Finding
from fp16doctor.analysis.machine import MachineFacts
from fp16doctor.analysis.prescription import Prescription
from fp16doctor.analysis.roofline import RooflineEstimate
from fp16doctor.analysis.runs import RunRow
from fp16doctor.analysis.values import fmt_ms
from fp16doctor.analysis.verdict import Verdict

if TYPE_CHECKING:  # the Diagnosis holds its detail; the builder reads the Diagnosis
    from fp16doctor.analysis import Diagnosis

DETAIL_ORDER = ("measured", "in_memory", "verdicts", "machine", "runs", "software", "best_case", "finding_detail")
DETAIL_HEADINGS = {"measured": "Measured here, fastest first", "in_memory": "With batches in memory",
                   "verdicts": "Verdicts", "machine": "Where it ran", "runs": "Runs",
                   "software": "Software, as the runs reported it",
                   "best_case": "Best case on this GPU (roofline)", "finding_detail": "Findings, with their evidence"}
# The comparisons between stacks, op by op (table data a renderer lays out in cells), stand after this section.
BETWEEN_AFTER = "verdicts"
PRESCRIBED = " (prescribed)"  # beside the measured row the prescription chose


def _measured(prescriptions: Sequence[Prescription], answer: Answer) -> tuple[AnswerLine, ...]:
    """(e) Each prescription's measured table: the configuration, its step and its ratio, the notes the answer says
    by id and any other in words; the recommended row marked."""
    lines = []
    many = len(prescriptions) > 1
    for line, p in zip(answer.prescriptions, prescriptions, strict=False):
        if not p.measured:
            continue
        if many:
            lines.append(AnswerLine(line.id, f"{line.id}: {line.where or p.stack}", "label"))
        chosen = (p.recommended.precision, p.recommended.variant)
        configs = [row.config + (PRESCRIBED if (row.precision, row.variant) == chosen else "") for row in p.measured]
        width = max(len(c) for c in configs)  # the steps line up
        for row, config in zip(p.measured, configs, strict=True):
            ids, rest = notes_of(answer, row)
            notes = "".join(f"  [{', '.join(ids)}]" if ids else "") + (f"  [{'; '.join(rest)}]" if rest else "")
            lines.append(AnswerLine(line.id, f"{config:<{width}} {fmt_ms(row.step_ms):>8}  {row.versus()}{notes}",
                                    "table_row", 4, hang=6))
    return tuple(lines)


def _in_memory(answer: Answer) -> tuple[AnswerLine, ...]:
    """(e') Each precision's ratio with batches in memory, as the control that measured a change made it."""
    many = len(answer.prescriptions) > 1
    return tuple(AnswerLine(line.id, f"{line.id + ': ' if many else ''}{words}", "row")
                 for line in answer.prescriptions for words in line.in_memory)


def no_verdict_words(statuses: Sequence[str]) -> str:
    """A machine on which no 16-bit run could be paired with a float32 run, its runs' `statuses` said."""
    failed = [s for s in statuses if s != "ok"]
    why = f" ({len(failed)} of {len(statuses)} runs did not complete)" if failed else ""
    return f"No float32 run and 16-bit run both completed, so there is no ratio to report{why}."


def _verdicts(verdicts: Sequence[Verdict], rows: Sequence[RunRow]) -> tuple[AnswerLine, ...]:
    """(f) Each verdict's sentence, its tone its outcome; each machine whose runs gave none, why."""
    tone = {"slower": "slower", "faster": "faster"}
    lines = [AnswerLine(f"V{n}", v.headline, tone.get(v.outcome or "", "verdict"))
             for n, v in enumerate(verdicts, start=1) if v.headline]
    judged = {v.machine for v in verdicts}
    machines = list(dict.fromkeys(row.machine for row in rows))
    for machine in machines:
        if machine not in judged:
            where = f"{machine}: " if len(machines) > 1 else ""
            lines.append(AnswerLine("", where + no_verdict_words([r.status for r in rows if r.machine == machine]),
                                    "verdict"))
    return tuple(lines)


def _machines(machines: Sequence[MachineFacts]) -> tuple[AnswerLine, ...]:
    """(g) Each machine the runs ran on: its name and its facts (GPUs, CPU, OS), as the report's machine cards show
    them."""
    return tuple(AnswerLine("", machine.line, "row", hang=4) for machine in machines)


def _runs(rows: Sequence[RunRow]) -> tuple[AnswerLine, ...]:
    """(g) Each run's step, against float32 where the analysis paired it with a float32 run."""
    lines = []
    for row in rows:
        shown = f"{fmt_ms(row.step_ms)} a step" if row.step_ms is not None else row.status
        if row.ok and not row.is_baseline and row.speedup is not None:
            shown += f" ({row.versus_fp32} vs {row.versus_name})"
        ref = f"R{row.index + 1}"
        lines.append(AnswerLine(ref, f"{row.label} on {row.device or '?'}: {shown}", "run"))
        if row.ok and row.device_step is not None:
            lines.append(AnswerLine(ref, row.device_step.words(), "dim", 4))
    return tuple(lines)


def _software(rows: Sequence[RunRow]) -> tuple[AnswerLine, ...]:
    """(g') Each stack's software as its runs reported it (each different report once), the stack's own description
    beside it where the catalogue gave one; the machine named where the document has more than one."""
    machines = len({row.machine for row in rows}) > 1
    lines = []
    for row in rows:
        sw = row.software
        if sw is None or not any((sw.tensorflow, sw.keras, sw.torch, sw.jax, sw.cuda, sw.cudnn, sw.python)):
            continue  # a run that failed before reporting its software
        where = (f"{row.machine} / " if machines else "") + row.stack
        described = f" ({row.stack_description})" if row.stack_description else ""
        lines.append(AnswerLine("", f"{where}{described}: {sw.label()}", "row", hang=4))
    return tuple(dict.fromkeys(lines))


def _best_case(estimates: Sequence[RooflineEstimate]) -> tuple[AnswerLine, ...]:
    """(h) One line per precision and GPU (the variants share the best case), with the table's note."""
    lines = []
    seen = set()
    for e in estimates:
        if e.key() in seen:
            continue
        seen.add(e.key())
        if e.predicted_speedup is None:
            if e.missing_words():  # a GPU's run the table of peak figures or the model cannot bound
                lines.append(AnswerLine("", e.missing_words(), "row"))
            continue
        kernels = e.kernels_words()
        measured = f"; you measured {e.measured_words()}" if e.measured_speedup else ""
        lines.append(AnswerLine("", f"{e.stack} / {e.precision} on {e.gpu_name}: at most {e.predicted_times()} from "
                                    f"fp16 ({fmt_ms(e.fp32_ms)} -> {fmt_ms(e.fp16_ms)} of kernels per step, "
                                    f"{e.bound}-bound)" + (f"; {kernels}" if kernels else measured), "row"))
        lines.append(AnswerLine("", e.note, "dim", 4))
    return tuple(lines)


def _finding(finding: Finding, places: Sequence[tuple[str, str]]) -> tuple[AnswerLine, ...]:
    """(i) A finding: its rank, severity, id and title with what it explains and its confidence; its evidence; its
    whole fix (a program as a block, never broken)."""
    ref = f"F{finding.rank or ''}"
    explains = finding.explains_words(finding.place(places), basis=True)
    accounts = f"{explains}; " if explains else ""
    confidence = finding.confidence if finding.confidence is not None else "?"
    lines = [AnswerLine(ref, f"{finding.rank or '-'}. {finding.severity.upper()} {finding.id}: {finding.title} "
                             f"({accounts}confidence {confidence})", finding.severity, hang=3)]
    lines += [AnswerLine(ref, f"- {line}", "evidence", 3, hang=2) for line in finding.evidence]
    recommendation = finding.recommendation.strip()
    if recommendation:
        prose, _, block = recommendation.partition("\n")
        lines.append(AnswerLine(ref, f"fix: {prose}", "fix", 3, hang=5))
        if block.strip():
            lines.append(AnswerLine(ref, block, "code", 8))
    code = finding.fix_code
    if code:
        lines.append(AnswerLine(ref, f"for {finding.fix_flavour}:", "fix", 3))
        lines.append(AnswerLine(ref, code, "code", 8))
    return tuple(lines)


def _provenance(diagnosis: Diagnosis) -> tuple[AnswerLine, ...]:
    """(i') Where the findings come from, where they are not the file's own, or that there are none."""
    lines = []
    if diagnosis.findings_source == "analysis":
        if diagnosis.saved_findings:
            by = f"fp16doctor {diagnosis.saved_by}" if diagnosis.saved_by else "an unknown fp16doctor version"
            lines.append(AnswerLine("", "These come from this release's analysis of the file's runs; the findings "
                                        f"the file itself carries were written by {by} and are not shown.", "dim"))
        elif diagnosis.runs:
            lines.append(AnswerLine("", "This results file carried no findings; these come from fp16doctor's "
                                        "analysis of its numbers.", "dim"))
    if not diagnosis.findings:
        lines.append(AnswerLine("", "No findings: no rule fired on these runs (the verdicts are all they say)."
                                if diagnosis.verdicts else
                                "No findings: the results file holds too little to explain (add runs with step "
                                "times).", "dim"))
    return tuple(lines)


def findings_about(detail: Sequence[Section]) -> tuple[AnswerLine, ...]:
    """The detail's lines on the findings as a whole (where they come from, or that there are none), which no
    finding's id refers to."""
    return tuple(line for s in detail if s.id == "finding_detail" for line in s.lines if not line.ref)


def build_detail(diagnosis: Diagnosis) -> tuple[Section, ...]:
    """The detail of one diagnosis, in DETAIL_ORDER, each section only where it has lines."""
    answer = diagnosis.answer
    built = {"measured": _measured(diagnosis.prescriptions, answer),
             "in_memory": _in_memory(answer), "verdicts": _verdicts(diagnosis.verdicts, diagnosis.runs),
             "machine": _machines(diagnosis.machines), "runs": _runs(diagnosis.runs),
             "software": _software(diagnosis.runs),
             "best_case": _best_case(diagnosis.roofline),
             "finding_detail": _provenance(diagnosis) + tuple(line for f in diagnosis.findings
                                                              for line in _finding(f, places_of(diagnosis)))}
    return tuple(Section(key, DETAIL_HEADINGS[key], built[key]) for key in DETAIL_ORDER if built[key])


def detail_text(sections: Sequence[Section]) -> str:
    """The detail as plain lines (unbroken), as Answer.text lays out the answer."""
    out = []
    for section in sections:
        out.append(section.heading)
        out += [" " * line.indent + line.text.replace("\n", "\n" + " " * line.indent) for line in section.lines]
    return "\n".join(out)


__all__ = ["BETWEEN_AFTER", "DETAIL_HEADINGS", "DETAIL_ORDER", "build_detail", "detail_text"]
