"""`fp16doctor diagnose`, as its phases: prepare (checks, probe, engines, plan), the matrix, the interleaved
rounds, the experiments, then the analysis and the report. Every finished run is written to results.json at
once, so an interrupted diagnose keeps what it measured."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fp16doctor.diagnose.budget import within_budget
from fp16doctor.diagnose.plan import experiment_specs, experiment_units, plan_experiments, script_experiments
from fp16doctor.diagnose.prepare import Prepared, prepare
from fp16doctor.diagnose.rounds import profiled_in_rounds, time_in_rounds, time_setting_in_rounds, try_backends
from fp16doctor.diagnose.sink import DocumentSink
from fp16doctor.engines.spec import HOST_STACK, SLOW_STEP_MULTIPLE_ENV, RunSpec, comparison_groups
from fp16doctor.errors import EXIT_OK, EXIT_PARTIAL, DoctorError
from fp16doctor.options import DiagnoseOptions, Progress
from fp16doctor.redaction import redact_home_paths
from fp16doctor.results import Document, ResultsWriter, Run, run_key

if TYPE_CHECKING:
    from fp16doctor.analysis import Diagnosis
    from fp16doctor.runplan import DiagnosePlan


@dataclass
class DiagnoseOutcome:
    document: Document
    results_path: Path
    report_path: Path | None
    exit_code: int
    failed: list[dict[str, Any]]
    diagnosis: Diagnosis  # made once, written to results.json and rendered by the report and the summary


def plan_diagnose(options: DiagnoseOptions, progress: Progress) -> DiagnosePlan:
    """`diagnose --plan`: every check of a real diagnose, then what it would run, where, and about how long;
    nothing runs and nothing is created (no --out folder, no results, no container, no job)."""
    from fp16doctor.runplan import describe_plan

    prepared = prepare(replace(options, plan=True), progress)
    return describe_plan(prepared.todo, len(prepared.specs) - len(prepared.todo), prepared.size, options,
                         prepared.results_path, prepared.router, tuple(prepared.backend_trials),
                         tuple(_profiled_in_rounds(prepared)))


def run_diagnose(options: DiagnoseOptions, progress: Progress) -> DiagnoseOutcome:
    prepared = prepare(options, progress)
    writer = ResultsWriter(prepared.results_path, prepared.doc)
    # Where the wall time went, phase by phase (the checks and the probe are "prepare"), kept in results.json.
    phases: dict[str, float] = {"prepare": round(time.monotonic() - prepared.started, 1)}
    writer.doc["invocation"]["phases_s"] = phases
    in_rounds = _profiled_in_rounds(prepared)
    steps: list[tuple[str, Callable[[], None]]] = [
        ("matrix", partial(run_matrix, prepared, [s for s in prepared.todo if s not in in_rounds], writer)),
        ("rounds", partial(_rounds, prepared, writer, options.experiments, in_rounds))]
    if options.experiments:
        steps.append(("experiments", partial(run_experiments, prepared, writer)))
    if prepared.backend_trials:
        steps.append(("backends", partial(try_backends, prepared, writer)))
    interrupted = False
    try:
        for name, step in steps:
            with _timed(phases, name):
                step()
    except KeyboardInterrupt:
        interrupted = True
    return analyse_and_report(prepared, options, writer, interrupted)


def _profiled_in_rounds(prepared: Prepared) -> list[RunSpec]:
    """The cells the matrix leaves to the host's interleaved rounds, timed and profiled there alone
    (rounds.profiled_in_rounds): only where the size's budget binds the host's engine (it runs here, unqueued), and
    not where a slow-step multiple is set by hand (SLOW_STEP_MULTIPLE_ENV asks for the bound on every 16-bit run:
    none is taken for free of the pathology it is there for)."""
    host = prepared.router.engine_class(RunSpec(HOST_STACK, "float32", "original", prepared.size))
    budgeted_here = prepared.deadline is not None and host.runs_here and not host.queued
    if prepared.script is not None or os.environ.get(SLOW_STEP_MULTIPLE_ENV):
        return []
    return profiled_in_rounds(prepared.todo, prepared.host, budgeted_here, prepared.backend)


@contextmanager
def _timed(phases: dict[str, float], name: str) -> Iterator[None]:
    began = time.monotonic()
    try:
        yield
    finally:
        phases[name] = round(time.monotonic() - began, 1)


def run_matrix(prepared: Prepared, specs: list[RunSpec], writer: ResultsWriter) -> None:
    """The cells on their engines, in the router's order (the host's before the containers'); each record is
    written as it finishes, and what each engine knows of itself goes into the document."""
    sink = DocumentSink(writer, prepared.progress, len(specs))
    for engine, cells in prepared.router.route(specs):
        try:
            engine.run_groups(comparison_groups(cells), sink)
        finally:
            writer.doc.update(engine.describe())
            writer.save()


def _rounds(prepared: Prepared, writer: ResultsWriter, experiments: bool, in_rounds: list[RunSpec]) -> None:
    """The interleaved rounds (diagnose/rounds.py), leaving room for the experiments the runs so far ask for and
    timing those that change a model or its input; then, each in a process of its own, the cells they were to make
    records of and did not."""
    unmade = time_in_rounds(prepared, writer, experiments_coming(prepared, writer.doc) if experiments else [],
                            in_rounds)
    if unmade:
        run_matrix(prepared, unmade, writer)


def run_experiments(prepared: Prepared, writer: ResultsWriter) -> None:
    """The one-change runs the analysis asks for after the matrix; at a size with a budget, those that fit it.
    The precisions of one environment switch are timed together in that setting's own interleaved rounds,
    float32 beside them (its records made from the rounds); the rest run on their own, as do a setting's when
    its rounds fail (a change to a model planned before the rounds was timed in them: rounds.time_in_rounds)."""
    progress, doc = prepared.progress, writer.doc
    units = experiment_units(_experiments_planned(prepared, doc, progress))
    if prepared.deadline is not None:
        units = within_budget(units, doc["runs"], prepared.deadline, prepared.size, progress)
    if not units:
        return
    progress.note(f"{sum(len(u) for u in units)} experiment(s), each changing one thing: "
                  + ", ".join(f"{s.precision} {s.variant}" for u in units for s in u))
    alone = [unit[0] for unit in units if len(unit) == 1]
    for unit in (u for u in units if len(u) > 1):
        if not time_setting_in_rounds(prepared, writer, unit):
            progress.note(f"{unit[0].variant}: each experiment runs in a process of its own instead")
            alone += list(unit)
    if alone:
        run_matrix(prepared, alone, writer)


def experiments_coming(prepared: Prepared, doc: Document) -> list[RunSpec]:
    """The experiments the runs so far ask for, asked before the rounds only to leave them room (and to time those
    that change a model or its input there): the experiments phase plans them again, and says why any is skipped."""
    return _experiments_planned(prepared, doc, _Unsaid())


def _experiments_planned(prepared: Prepared, doc: Document, progress: Progress) -> list[RunSpec]:
    """The experiment runs the analysis asks for now, as specs (a script's: those it can take unchanged)."""
    planned = experiment_specs(plan_experiments(doc, progress), prepared.stacks, prepared.size, prepared.data_dir,
                               {run_key(r) for r in doc["runs"]})
    if prepared.script is not None:
        planned = script_experiments(planned, prepared.script, progress)
    return planned


class _Unsaid:
    """A Progress that says nothing: the rounds ask which experiments are coming only to leave them room; the
    experiments phase plans them again, and says why any is skipped."""

    def note(self, message: str) -> None:
        pass

    def start_run(self, spec: RunSpec, total: int, index: int) -> None:
        pass

    def event(self, event: dict[str, Any]) -> None:
        pass

    def finish_run(self, record: dict[str, Any]) -> None:
        pass


def analyse_and_report(prepared: Prepared, options: DiagnoseOptions, writer: ResultsWriter,
                       interrupted: bool) -> DiagnoseOutcome:
    from fp16doctor.analysis import diagnose_document
    from fp16doctor.report import write_report

    doc, progress, script = writer.doc, prepared.progress, prepared.script
    doc["invocation"]["elapsed_s"] = round(time.monotonic() - prepared.started, 1)
    analysed = time.monotonic()
    findings = [f for engine in prepared.router.engines() for f in engine.findings()]
    # What only the pre-flight knows is stored as data a rule reads, so every re-analysis says it again.
    doc["preflight"] = [{"stack": f.get("stack"), "ok": False, "reasons": f.get("evidence", []),
                         "alternatives": f.get("alternatives", []), "forced": options.force} for f in findings]
    # Analysed as results.json keeps it (a path into --out relative to it, homes as ~): what `explain` of the file
    # says, the summary and the report say, and no reason quotes this machine's paths.
    diagnosis = diagnose_document(redact_home_paths(doc, relative_to={os.path.abspath(options.out_dir),
                                                                     str(options.out_dir.resolve())}))
    writer.set_findings([f.to_dict() for f in diagnosis.findings], [v.to_dict() for v in diagnosis.verdicts],
                        [p.to_dict() for p in diagnosis.prescriptions],
                        [c.to_dict() for c in diagnosis.stack_comparisons],
                        [ledger.to_dict() for ledger in diagnosis.ledgers])
    diagnosis = replace(diagnosis, findings_source="results")  # written to results.json with the runs
    report_path: Path | None = options.out_dir / "report.html"
    try:
        write_report([doc], options.out_dir / "report.html", "html", [diagnosis])
    except DoctorError as exc:
        progress.note(f"report not written: {exc.message}")
        report_path = None
    phases = doc["invocation"].get("phases_s")
    if isinstance(phases, dict):
        phases["analysis"] = round(time.monotonic() - analysed, 1)  # and the report
        doc["invocation"]["elapsed_s"] = round(time.monotonic() - prepared.started, 1)
        writer.save()
    if interrupted:
        raise KeyboardInterrupt
    if script is not None:
        from fp16doctor.user_script import run_notes, script_failure

        for note in run_notes(doc["runs"]):
            progress.note(note)
        error = script_failure(doc["runs"], script)
        if error is not None:
            raise error  # results.json and the report keep what did run
    failed = [r for r in doc["runs"] if Run.of(r).status == "failed"]
    exit_code = EXIT_PARTIAL if failed else EXIT_OK
    return DiagnoseOutcome(doc, prepared.results_path, report_path, exit_code, failed, diagnosis)
