"""The analysis: a results document in, ranked findings and verdicts out. Pure: no I/O, no framework import.

Three stages, each reading the one typed view of the document (context.py):
1. rules (analysis/rules/, registered in registry.py) read the evidence and each say at most one finding;
2. the accounting (causes.py) splits each 16-bit run's difference against its float32 partner over causes,
   measured ops first, then experiments, then estimates;
3. speed findings are issued per pair with the time they explain, and one verdict per pair names the cause
   that explains the most (verdicts.py);
4. one prescription per machine and stack names the fastest measured safe configuration (prescribe.py), and every
   finding that recommends a configuration is held to what was measured of it there.
The Diagnosis is built once per document and handed to every output (report, markdown, terminal): with the run
rows (each run beside the float32 partner it was paired with, runs.py) and "where the time went" (op_compare.py),
an output renders what is here and never reads a run, pairs runs or phrases a verdict itself.
Ranking: the finding behind a prescription first, then by the time measured (explained or saved), then critical
before warning before info, the registry's order and confidence.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from fp16doctor.analysis.advice import slow_kernel_advice, slow_kernel_ideas
from fp16doctor.analysis.answer import Answer, Section, build_answer
from fp16doctor.analysis.busy import Contention, busiest
from fp16doctor.analysis.causes import Accounting, Share, account
from fp16doctor.analysis.context import build_context
from fp16doctor.analysis.detail import build_detail, detail_text
from fp16doctor.analysis.experiments import experiment_evidence, setting_findings
from fp16doctor.analysis.failed import drop_failed_untested
from fp16doctor.analysis.finding import Finding
from fp16doctor.analysis.fixes import attach_fixes
from fp16doctor.analysis.hold import hold_advice
from fp16doctor.analysis.ledger import Ledger, ledgers
from fp16doctor.analysis.machine import MachineFacts, machines
from fp16doctor.analysis.op_compare import OpComparison, comparisons_of
from fp16doctor.analysis.prescribe import prescribe
from fp16doctor.analysis.prescription import Prescription
from fp16doctor.analysis.registry import RANK, RECOMMENDS, REGISTRY, REMEDIES, SEVERITY_RANK, SPEED_CAUSES, rules
from fp16doctor.analysis.roofline import RooflineEstimate, estimate_context
from fp16doctor.analysis.rules.common import make_finding
from fp16doctor.analysis.rules.numerics import drop_rounding_untested
from fp16doctor.analysis.runs import RunRow, run_rows
from fp16doctor.analysis.stack_compare import DocumentComparison, StackComparison, compare_documents, stack_comparisons
from fp16doctor.analysis.values import BASIS_WORDS, as_list, fmt_ms, on
from fp16doctor.analysis.verdict import Verdict
from fp16doctor.analysis.verdicts import complete_saved, share_of_difference, unlisted_devices, verdicts

Draft = dict[str, Any]  # a finding while the analysis makes it; the Diagnosis holds it frozen (finding.py)


@dataclass(frozen=True)
class Diagnosis:
    """What the analysis decided of one document; every output renders this and only this."""

    findings: tuple[Finding, ...]
    verdicts: tuple[Verdict, ...]
    prescriptions: tuple[Prescription, ...] = ()
    runs: list[RunRow] = field(default_factory=list)  # every run, each 16-bit one beside its float32 partner
    comparisons: list[OpComparison] = field(default_factory=list)  # where the time went, per pair with ops
    roofline: list[RooflineEstimate] = field(default_factory=list)  # the best case on each float16 run's GPU
    findings_source: str = "analysis"  # "analysis" (computed now), "results" (as the file saved them) or "none"
    stack_comparisons: list[StackComparison] = field(default_factory=list)  # one machine and precision, two stacks
    # A file's own findings where its runs were analysed again: shown at most as "written by version X", never mixed.
    saved_findings: tuple[Finding, ...] = ()
    saved_by: str | None = None  # the fp16doctor version that wrote the file
    ledgers: tuple[Ledger, ...] = ()  # each timed configuration's step, split into parts that add up to it
    busy: Contention | None = None  # the busiest rounds process's contention, where the machine was busy (busy.py)
    machines: tuple[MachineFacts, ...] = ()  # each machine the runs ran on, named and described (machine.py)

    @cached_property
    def answer(self) -> Answer:
        """The answer every output lays out, in its order: the bound, the prescription, a line per precision, then
        the findings pointing at them (answer.py); built once, from this diagnosis only."""
        return build_answer(self)

    @cached_property
    def detail(self) -> tuple[Section, ...]:
        """What a full view shows after the answer, in its order: the measured tables, the verdicts, the runs, the
        best case, each finding with its evidence and fix (detail.py); built once, from this diagnosis only."""
        return build_detail(self)

    def to_dict(self) -> dict[str, Any]:
        """What `explain --json` prints and results.json keeps of the analysis: the decisions, each configuration's
        ledger and the answer every output lays out."""
        return {"findings": [f.to_dict() for f in self.findings], "verdicts": [v.to_dict() for v in self.verdicts],
                "prescriptions": [p.to_dict() for p in self.prescriptions],
                "stack_comparisons": [c.to_dict() for c in self.stack_comparisons],
                "ledgers": [ledger.to_dict() for ledger in self.ledgers],
                "answer": {**self.answer.to_dict(), "detail": {"order": [s.id for s in self.detail],
                                                               "sections": [s.to_dict() for s in self.detail],
                                                               "text": detail_text(self.detail)}}}


# Titles and fixes for causes that only the accounting finds (no document-level rule of their own).
_ACCOUNTED_ADVICE = {
    "slow_fp16_kernels": ("critical", ""),  # in the words of the run's framework: advice.slow_kernel_advice
    "fast_16bit_kernels": ("info", "Its 16-bit kernels took less device time than float32's: this part of the "
                                   "difference is theirs; the verdict names the rest."),
    "smaller_16bit_batches": ("info", "A 16-bit batch is half the bytes to build on the host and to copy to the "
                                      "device: this part of the difference is the batch's, not the kernels'."),
    "slow_16bit_compute": (
        "warning",
        "These ops ran regular kernels in 16 bits and still took longer than in float32: the framework's 16-bit "
        "path (kernels and conversions) is slower here; another framework release or backend may differ. The "
        "device's own facts are listed as findings of their own.",
    ),
    "framework_setting": ("warning", "Re-check the switch after framework upgrades."),
}


# Titles for causes the accounting names from measured ops when the cause's own rule did not fire (the
# registry's title states the rule's threshold, e.g. that input takes a large share of the step).
_ACCOUNTED_TITLES = {
    "input_pipeline_bound": "Producing batches on the host took longer in {precision} than in float32",
}
MINOR_SHARE = 0.10  # of a run's difference: below this, a cause the accounting names is information


def _speed_finding(acc: Accounting, share: Share, base: Draft | None) -> Draft:
    pair = acc.pair
    reduced = pair.reduced
    spec = REGISTRY[share.cause]
    between = (f" between {reduced.precision} ({fmt_ms(pair.interval.other_ms)}) and {pair.fp32.precision} "
               f"({fmt_ms(pair.interval.fp32_ms)}){on(reduced.place)} ({BASIS_WORDS[share.basis]})")
    summary = f"accounts for {share_of_difference(acc, share, between)}"
    if base is not None:
        finding = copy.deepcopy(base)
        finding["evidence"] = [summary, *share.evidence, *[e for e in base.get("evidence", [])
                                                           if e not in share.evidence]]
    else:
        severity, recommendation = _ACCOUNTED_ADVICE.get(share.cause, ("warning", ""))
        ideas: list[dict[str, str]] = []
        if share.cause == "slow_fp16_kernels":
            recommendation = slow_kernel_advice(reduced.software, reduced.on_gpu, tried=bool(share.confirmed_by))
            ideas = slow_kernel_ideas(reduced.software, reduced.on_gpu, reduced.precision)
        # Only the accounting names this cause (its rule did not fire): say what was measured, and a small
        # share is no warning.
        title = _ACCOUNTED_TITLES.get(share.cause, spec.title).format(precision=reduced.precision)
        if share.ms < MINOR_SHARE * acc.magnitude_ms:
            severity = "info"
        title = share.title(reduced.precision) or title
        finding = make_finding(share.cause, title, severity, 0.9 if share.basis != "estimate" else 0.6,
                               [summary, *share.evidence], recommendation)
        if ideas:
            finding["remedy_ideas"] = ideas
    if share.evidence:
        # The line that states what was measured of its share (an op's two times, an experiment's two steps, the
        # host batch's two times, the best case's saving): each share's evidence opens with it.
        finding["measured_line"] = share.evidence[0]
    finding.update(
        explains_ms=round(share.ms, 3),
        basis=share.basis,
        machine=reduced.machine,
        stack=reduced.stack,
        variant=reduced.variant,
        precision=reduced.precision,
    )
    if share.ops:
        finding["ops"] = share.ops[:10]
    if share.confirmed_by:
        finding["confirmed_by"] = share.confirmed_by
        if share.experiment:
            finding["recommendation"] = (f"Measured on this machine: {share.experiment}. "
                                         + str(finding.get("recommendation", "")))
    return finding


def _held_back_finding(acc: Accounting, share: Share, base: Draft | None) -> Draft:
    """A cause an experiment showed holding back a faster 16-bit step's gain: measured, and no share of the
    difference (`explains_ms` null); `holds_back_ms` is what the change saved."""
    reduced = acc.pair.reduced
    spec = REGISTRY[share.cause]
    summary = (f"{reduced.precision} is faster than {acc.pair.fp32.precision}{on(reduced.place)}, "
               f"and {fmt_ms(share.ms)} more of its step was left on the "
               f"table: {share.experiment}")
    finding = copy.deepcopy(base) if base is not None else make_finding(
        share.cause, spec.title, "info", 0.9, [],
        f"Keep what the {share.confirmed_by} run changed: it measured {fmt_ms(share.ms)} less per step.")
    finding["evidence"] = [summary, *finding.get("evidence", [])]
    finding.update(explains_ms=None, basis="experiment", holds_back_ms=round(share.ms, 3), machine=reduced.machine,
                   stack=reduced.stack, variant=reduced.variant, precision=reduced.precision,
                   confirmed_by=share.confirmed_by)
    return finding


def measured_time_ms(finding: Draft) -> float:
    """The time a finding was measured to account for (explains_ms on measured ops or an experiment) or to save
    (saves_ms: its recommended configuration measured faster); 0 for what rests on an estimate or on facts."""
    explained = finding.get("explains_ms") if finding.get("basis") in ("measured_ops", "experiment") else None
    values = [v for v in (explained, finding.get("saves_ms")) if isinstance(v, (int, float))]
    return max(values, default=0.0)


def _rank(findings: list[Draft]) -> list[Draft]:
    """The prescription's evidence first, then by the time measured, then severity, registry order, confidence."""
    findings.sort(key=lambda f: (0 if f.get("prescribed") else 1, 0 if measured_time_ms(f) > 0 else 1,
                                 -measured_time_ms(f), SEVERITY_RANK.get(f.get("severity", ""), 3),
                                 RANK.get(str(f.get("id")), 99), -float(f.get("confidence") or 0)))
    for rank, finding in enumerate(findings, start=1):
        finding["rank"] = rank
    return findings


def diagnose_document(doc: Mapping[str, Any]) -> Diagnosis:
    """Ranked findings and per-pair verdicts for one results document (any optional key may be missing)."""
    ctx = build_context(doc)
    by_rule: dict[str, Draft] = {}
    for fid, rule in rules():
        found = rule(ctx)
        if found is not None:
            by_rule[fid] = found
    books = ledgers(ctx)
    accountings = account(ctx, by_rule, books)
    findings: list[Draft] = []
    accounted: set[str] = set()
    for acc in accountings:
        for share in acc.shares:
            if share.cause in SPEED_CAUSES:
                findings.append(_speed_finding(acc, share, by_rule.get(share.cause)))
                accounted.add(share.cause)
        for share in acc.against:
            if share.confirmed_by and share.cause not in accounted:
                findings.append(_held_back_finding(acc, share, by_rule.get(share.cause)))
                accounted.add(share.cause)
    for fid, finding in by_rule.items():
        if fid in accounted:
            continue
        # A finding that explains no measured time still stands as evidence; it is no cause of speed.
        finding.setdefault("explains_ms", None)
        finding.setdefault("basis", None)
        findings.append(finding)
    findings += [f for f in setting_findings(ctx) if not any(
        g["id"] == "framework_setting" and g.get("stack") == f["stack"] and g.get("precision") == f["precision"]
        for g in findings)]
    tried = experiment_evidence(ctx)
    for finding in findings:
        # A confirmed cause already quotes its experiment.
        lines = [] if finding.get("confirmed_by") else tried.get(str(finding.get("id")), [])
        finding["evidence"] = [*finding.get("evidence", []), *[line for line in lines
                                                              if line not in finding.get("evidence", [])]]
        if finding.get("basis") == "estimate" and not finding.get("confirmed_by"):
            finding["recommendation"] = ("Unconfirmed (estimated, no experiment changed this one thing): "
                                         + str(finding.get("recommendation", "")))
    prescriptions = prescribe(ctx, by_rule)
    hold_advice(ctx, findings, prescriptions, RECOMMENDS, REMEDIES)
    drop_failed_untested(as_list(doc.get("runs")), prescriptions)
    drop_rounding_untested(findings, prescriptions)
    roofline = estimate_context(ctx)
    judged = verdicts(accountings, findings, roofline, unlisted_devices(ctx))
    attach_fixes(findings, ctx.runs, judged)
    rows = run_rows(ctx)
    return Diagnosis(tuple(Finding.of(f) for f in _rank(findings)), judged,
                     tuple(Prescription.of(p) for p in prescriptions), rows,
                     comparisons_of(ctx), roofline, "analysis" if findings else "none",
                     stack_comparisons=stack_comparisons(ctx, judged), ledgers=books, busy=busiest(doc),
                     machines=machines(doc, rows))


def compare_results(before: Mapping[str, Any], after: Mapping[str, Any],
                    labels: tuple[str, str]) -> DocumentComparison:
    """`fp16doctor compare`: two documents of one machine, each diagnosed as it stands, then set side by side."""
    return compare_documents((build_context(before), diagnose_document(before).verdicts, labels[0]),
                             (build_context(after), diagnose_document(after).verdicts, labels[1]))


def saved_diagnosis(doc: Mapping[str, Any]) -> Diagnosis:
    """The diagnosis of a results file, as `explain` makes it: the current release's analysis of its runs (what
    only diagnose knew, its pre-flight, is in the document as data the rules read). The file's own findings are
    never mixed with fresh verdicts: they stand only where the file has no runs to analyse, and are kept apart
    otherwise (`saved_findings`, written by `saved_by`)."""
    own = [f for f in as_list(doc.get("findings")) if isinstance(f, dict)]
    saved_verdicts = [v for v in as_list(doc.get("verdicts")) if isinstance(v, dict)]
    saved_prescriptions = [p for p in as_list(doc.get("prescriptions")) if isinstance(p, dict)]
    tool = doc.get("tool") if isinstance(doc.get("tool"), Mapping) else {}
    version = str(tool.get("version")) if isinstance(tool, Mapping) and tool.get("version") else None
    if not any(isinstance(r, Mapping) for r in as_list(doc.get("runs"))) and (
            own or saved_verdicts or saved_prescriptions):
        return Diagnosis(tuple(Finding.of(f) for f in own),
                         tuple(Verdict.of(complete_saved(v, own)) for v in saved_verdicts),
                         tuple(Prescription.of(p) for p in saved_prescriptions),
                         findings_source="results" if own else "none", saved_by=version,
                         machines=machines(doc, []))
    return replace(diagnose_document(doc), saved_findings=tuple(Finding.of(f) for f in own), saved_by=version)


def analyse(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Ranked findings only, as results.json keeps them."""
    return [f.to_dict() for f in diagnose_document(doc).findings]


__all__ = ["SEVERITY_RANK", "Answer", "Diagnosis", "DocumentComparison", "Finding", "Prescription", "RunRow",
           "StackComparison", "Verdict", "analyse", "compare_results", "diagnose_document", "saved_diagnosis"]
