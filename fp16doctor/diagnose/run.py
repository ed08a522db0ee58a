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

from fp16doctor.diagnose.budget import (
    analysis_s,
    attribution_per_window_s,
    repeat_fits,
    rounds_budget_s,
    rounds_end_s,
    rounds_overrun_note,
    unit_cost_s,
    within_budget,
)
from fp16doctor.diagnose.plan import (
    experiment_specs,
    experiment_units,
    plan_experiments,
    profiled_in_rounds,
    script_experiments,
)
from fp16doctor.diagnose.prepare import Prepared, prepare
from fp16doctor.diagnose.sink import DocumentSink, RoundsSink
from fp16doctor.engines.spec import (
    HOST_STACK,
    SLOW_STEP_MULTIPLE_ENV,
    ExperimentUnit,
    RunSpec,
    comparison_groups,
    is_host_stack,
)
from fp16doctor.errors import EXIT_OK, EXIT_PARTIAL, DoctorError
from fp16doctor.options import DiagnoseOptions, Progress
from fp16doctor.results import HOST_MACHINE, Document, ResultsWriter, run_key
from fp16doctor.workload.paired import MIN_ROUNDS
from fp16doctor.workload.protocol import MODEL_VARIANTS, ROUNDS_VARIANTS, VARIANT_ENV

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
                         prepared.results_path, prepared.router, tuple(prepared.backend_trials))


def run_diagnose(options: DiagnoseOptions, progress: Progress) -> DiagnoseOutcome:
    prepared = prepare(options, progress)
    writer = ResultsWriter(prepared.results_path, prepared.doc)
    # Where the wall time went, phase by phase (the checks and the probe are "prepare"), kept in results.json.
    phases: dict[str, float] = {"prepare": round(time.monotonic() - prepared.started, 1)}
    writer.doc["invocation"]["phases_s"] = phases
    in_rounds = _profiled_in_rounds(prepared)
    steps: list[tuple[str, Callable[[], None]]] = [
        ("matrix", partial(run_matrix, prepared, [s for s in prepared.todo if s not in in_rounds], writer)),
        ("rounds", partial(time_in_rounds, prepared, writer, options.experiments, in_rounds))]
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
    """The cells timed and profiled in the host's interleaved rounds alone (diagnose/plan.py profiled_in_rounds):
    only where the size's budget binds the host's engine (it runs here, unqueued), and not where a slow-step
    multiple is set by hand (SLOW_STEP_MULTIPLE_ENV asks for the bound on every 16-bit run: none is taken for
    free of the pathology it is there for)."""
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


def time_in_rounds(prepared: Prepared, writer: ResultsWriter, experiments: bool = True,
                   in_rounds: list[RunSpec] | None = None) -> None:
    """Each stack's precisions timed again, together, in interleaved rounds (engines/rounds.py), on the engine
    and hardware their runs used, one rounds process per process setting the matrix ran (the original, and an
    environment switch asked for with --variant); a script's in one process too, each precision's model from its
    own run of the script (workload/script_rounds.py). Where a budget binds, the original's rounds leave room for
    the experiments the runs so far ask for (cheapest evidence first: they test the cause, more rounds only
    narrow an interval); another setting's rounds get their minimum. The experiments planned so far that change a
    model or its input (protocol.MODEL_VARIANTS: the in-memory input control, float32 batches, padded channels,
    XLA) are timed in the original's rounds beside the precision they change, their records made from them; one
    the rounds did not make is planned again with the other experiments. `in_rounds`: cells with no run of their
    own, which their stack's rounds time and profile and make records of; any the rounds did not make runs in a
    process of its own after all."""
    from fp16doctor.engines.rounds import mark_left_out, rounds_plan, stack_rounds_budget_s

    progress, runs = prepared.progress, writer.doc["runs"]
    # A cell the rounds time and profile (a GPU's in-memory control among them) is no experiment to plan again.
    planned_here = {(s.stack, s.precision, s.variant) for s in in_rounds or ()}
    coming = [s for s in (_experiments_planned(prepared, writer.doc, _Unsaid()) if experiments else [])
              if (s.stack, s.precision, s.variant) not in planned_here]
    # The experiments that change a model or its input: timed in the original's rounds, beside what they change.
    changing = [s for s in coming if s.variant in MODEL_VARIANTS] if prepared.script is None else []
    reserve = experiment_units(coming) if experiments and prepared.deadline is not None else []
    moved: list[RunSpec] = []
    planned: list[RunSpec] = []
    repeats: dict[tuple[str, str], float] = {}  # (stack, setting): the experiments' reserve, where a 2nd process fits
    for stack in prepared.stacks:
        engine_class = prepared.router.engine_class(RunSpec(stack, "float32", "original", prepared.size))
        # The size's budget clock binds only what runs here, unqueued; the others get the minimum.
        deadline = prepared.deadline if engine_class.runs_here and not engine_class.queued else None
        for variant in ROUNDS_VARIANTS:
            if not any(s.stack == stack and s.variant == variant for s in prepared.specs):
                continue
            mine = [s for s in in_rounds or () if s.stack == stack and s.rounds_setting == variant]
            profiled = tuple(s.rounds_label for s in mine)
            # The matrix's changes to a model or its input with no run of their own (a GPU's in-memory controls).
            controls = tuple(s for s in mine if s.variant != variant)
            changed = tuple(s for s in changing if s.stack == stack)
            plan = rounds_plan(runs, stack, prepared.size, variant, profiled, changed + controls,
                               builds_changes=prepared.script is None)
            inside = tuple(s for s in changed if plan.spec is not None and s.rounds_label in plan.spec.rounds_of)
            moved += inside
            end_s = None
            prefix = "".join(f"{part}: " for part in (stack, variant) if part not in (HOST_STACK, "original"))
            if variant == "original":
                reserve_s = sum(unit_cost_s(unit, runs) for unit in reserve
                                if unit[0].stack == stack and not all(u in inside for u in unit)) + analysis_s(runs)
                # A second rounds process, where the budget has room for it beside the experiments: the ratio's
                # variation between processes is then measured, not left out of its interval.
                repeat_s = repeat_fits(prepared.size, stack, runs, deadline, reserve_s, profiled, inside)
                if repeat_s is not None and plan.spec is not None:
                    repeats[(stack, variant)] = reserve_s
                    reserve_s += repeat_s
                budget = rounds_budget_s(prepared.size, stack, runs, deadline, reserve_s, profiled, inside)
                if deadline is not None and prepared.script is None:
                    end_s = rounds_end_s(deadline, reserve_s, len(profiled), attribution_per_window_s(runs, stack))
                    overrun = rounds_overrun_note(prepared.size, stack, runs, deadline, profiled, inside)
                    if overrun is not None:
                        progress.note(prefix + overrun)
            else:
                budget = stack_rounds_budget_s(prepared.size)
            for note in plan.messages():
                progress.note(prefix + note)
            if mark_left_out(runs, stack, plan, variant):
                writer.save()
            if plan.spec is None:
                continue
            spec = replace(plan.spec, data_dir=prepared.data_dir if is_host_stack(stack) else None,
                           script=prepared.script, rounds_budget_s=budget, rounds_end_s=end_s)
            if engine_class.runs_here:
                until = (f"until {end_s:.0f} s after it starts" if end_s is not None else f"about {budget:.0f} s")
                progress.note(f"{prefix}interleaved rounds of {', '.join(spec.rounds_of)} in one process, each "
                              f"round in a new order ({until}, at least {MIN_ROUNDS} rounds)")
            planned.append(spec)
    for engine, cells in prepared.router.route(planned):
        # What these rounds make records of: the precisions they profile, and the changes timed in them.
        creates = [s for s in [*(in_rounds or ()), *moved] if any(
            s.stack == c.stack and s.rounds_setting == c.variant and s.rounds_label in c.rounds_of for c in cells)]
        sink = RoundsSink(writer, progress, alone=engine.one_run, measure_load=engine.runs_here, creates=creates)
        engine.run_groups([[cell] for cell in cells], sink)
    for spec in planned:
        if (spec.stack, spec.variant) in repeats:
            _repeat_rounds(prepared, writer, spec, repeats[(spec.stack, spec.variant)], moved)
    made = {run_key(r) for r in writer.doc["runs"]}
    unmade = [s for s in in_rounds or () if (s.stack, s.precision, s.variant) not in made]
    if unmade:
        progress.note(f"{', '.join(s.precision for s in unmade)}: not timed in the interleaved rounds, so each runs "
                      "in a process of its own")
        run_matrix(prepared, unmade, writer)


def _repeat_rounds(prepared: Prepared, writer: ResultsWriter, first: RunSpec, reserve_s: float,
                   changed: list[RunSpec]) -> None:
    """The configurations `first`'s rounds process timed, timed again in a fresh process (no profiled window: the
    first made them), their rounds added to the same runs (engines/rounds.merge_rounds `repeat_of`), with what the
    budget has left after `reserve_s` for the experiments: two processes' means let the analysis estimate how far
    the ratios move between processes (workload/paired.py between_processes) and widen each interval by it."""
    doc, progress, runs = writer.doc, prepared.progress, writer.doc["runs"]
    entries = [(i, e) for i, e in enumerate(doc.get("timing_rounds") or []) if e.get("stack") == first.stack
               and e.get("variant", "original") == first.variant and e.get("repeat_of") is None]
    if not entries or prepared.deadline is None:
        return
    group, entry = entries[-1]
    labels = tuple(str(p) for p in entry.get("precisions") or [])
    timed = {(r.get("step_time_ms") or {}).get("group") for r in runs if r.get("stack") == first.stack}
    if len(labels) < 2 or "float32" not in labels or group not in timed:
        return  # the first process failed, or paired nothing with float32
    inside = tuple(s for s in changed if s.stack == first.stack and s.rounds_label in labels)
    end_s = None
    if prepared.script is None:
        end_s = rounds_end_s(prepared.deadline, reserve_s, 0, attribution_per_window_s(runs, first.stack))
    budget = rounds_budget_s(prepared.size, first.stack, runs, prepared.deadline, reserve_s, (), inside)
    spec = replace(first, rounds_of=labels, rounds_profiled=(), rounds_budget_s=budget, rounds_end_s=end_s)
    prefix = "" if first.stack == HOST_STACK else f"{first.stack}: "
    progress.note(f"{prefix}interleaved rounds of {', '.join(labels)} again in a fresh process, so each interval "
                  "holds the variation between processes")
    for engine, cells in prepared.router.route([spec]):
        sink = RoundsSink(writer, progress, alone=engine.one_run, measure_load=engine.runs_here, repeat_of=group)
        engine.run_groups([[cell] for cell in cells], sink)


def run_experiments(prepared: Prepared, writer: ResultsWriter) -> None:
    """The one-change runs the analysis asks for after the matrix; at a size with a budget, those that fit it.
    The precisions of one environment switch are timed together in that setting's own interleaved rounds,
    float32 beside them (its records made from the rounds); the rest run on their own, as do a setting's when
    its rounds fail (a change to a model planned before the rounds was timed in them: time_in_rounds)."""
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
        if not _time_setting_in_rounds(prepared, writer, unit):
            progress.note(f"{unit[0].variant}: each experiment runs in a process of its own instead")
            alone += list(unit)
    if alone:
        run_matrix(prepared, alone, writer)


def try_backends(prepared: Prepared, writer: ResultsWriter) -> None:
    """The other Keras backends that see the GPU, after everything else (diagnose/plan.py backend_trials): float32
    and the precision prescribed for the configured backend so far, with batches in memory where the matrix measured
    them (the device-side answer; a script runs as written), timed together in one interleaved rounds process per
    backend (a backend cannot change inside one), as the configured backend's in-memory runs were, their records made
    from the rounds. The analysis names a backend only where it measured much faster (prescribe.BACKEND_MIN_SPEEDUP)."""
    from fp16doctor.analysis import diagnose_document
    from fp16doctor.engines.rounds import stack_rounds_budget_s

    doc, progress = writer.doc, prepared.progress
    prescribed = next((p for p in diagnose_document(doc).prescriptions
                       if p.get("machine") == HOST_MACHINE and p.get("stack") == HOST_STACK), None)
    precision = str(((prescribed or {}).get("recommended") or {}).get("precision") or "float32")
    in_memory = prepared.script is None and any(
        s.stack == HOST_STACK and s.variant == "synthetic_input" for s in prepared.specs)
    variant = "synthetic_input" if in_memory else "original"
    done = {run_key(r) for r in doc["runs"]}
    for stack in prepared.backend_trials:
        cells = [RunSpec(stack, p, variant, prepared.size, data_dir=None if prepared.script else prepared.data_dir,
                         script=prepared.script) for p in dict.fromkeys(["float32", precision])
                 if (stack, p, variant) not in done]
        if not cells:
            continue
        spec = replace(cells[0], precision="float32", variant="original", rounds_of=tuple(
            c.rounds_label for c in cells), rounds_budget_s=stack_rounds_budget_s(prepared.size))
        progress.note(f"{stack}: another Keras backend that sees the GPU: {', '.join(spec.rounds_of)} timed together "
                      "in interleaved rounds, in one process of its own")
        for engine, rounds in prepared.router.route([spec]):
            sink = RoundsSink(writer, progress, alone=engine.one_run, measure_load=engine.runs_here, creates=cells,
                              makes_all=True)
            engine.run_groups([rounds], sink)


def _time_setting_in_rounds(prepared: Prepared, writer: ResultsWriter, unit: ExperimentUnit) -> bool:
    """One setting's experiments timed in its own rounds process, float32 first; whether they were (the rounds
    made their records)."""
    from fp16doctor.engines.rounds import stack_rounds_budget_s

    first = unit[0]
    spec = RunSpec(first.stack, "float32", first.variant, first.size, data_dir=first.data_dir,
                   experiment=first.experiment, script=first.script,
                   rounds_of=tuple(s.precision for s in unit), rounds_budget_s=stack_rounds_budget_s(first.size))
    setting = " ".join(f"{k}={v}" for k, v in VARIANT_ENV.get(first.variant, {}).items()) or first.variant
    prefix = "" if first.stack == HOST_STACK else f"{first.stack}: "
    prepared.progress.note(f"{prefix}{first.variant}: {', '.join(spec.rounds_of)} timed together in interleaved "
                           f"rounds, in one process with {setting}")
    made = False
    for engine, cells in prepared.router.route([spec]):
        sink = RoundsSink(writer, prepared.progress, alone=engine.one_run, measure_load=engine.runs_here,
                          creates=list(unit))
        engine.run_groups([[cell] for cell in cells], sink)
        made = sink.made
    return made


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
    diagnosis = diagnose_document(doc)
    writer.set_findings(diagnosis.findings, diagnosis.verdicts, diagnosis.prescriptions,
                        [c.to_dict() for c in diagnosis.stack_comparisons])
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
    failed = [r for r in doc["runs"] if r.get("status") == "failed"]
    exit_code = EXIT_PARTIAL if failed else EXIT_OK
    return DiagnoseOutcome(doc, prepared.results_path, report_path, exit_code, failed, diagnosis)
