"""What this release's planner would plan, and what it would cost, on the machine that made a results document:
the document's measured phases (each run's import, first step, steps, input time, profiled window; its prepare
phase) fed through the same planning and pricing a diagnose uses (plan.py, budget.py). Pure: a document in, a
PricedPlan out; nothing runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fp16doctor.diagnose.budget import PricedPlan, ProcessExperiment, price_diagnose
from fp16doctor.diagnose.plan import experiment_specs, experiment_units, plan_runs, profiled_in_rounds
from fp16doctor.engines.spec import HOST_STACK, WORKLOAD_SIZES, ExperimentUnit, RunSpec, on_gpu
from fp16doctor.workload.protocol import MODEL_VARIANTS

# The prepare phase where a document does not say how long its took (invocation.phases_s.prepare).
PREPARE_PRIOR_S = 5.0


@dataclass(frozen=True)
class Replay:
    """A document's diagnose planned again: the cells with a process of their own, those the rounds time and
    profile, the changes timed in the rounds, the experiments, and the priced plan."""

    own: tuple[RunSpec, ...]
    in_rounds: tuple[RunSpec, ...]
    changed: tuple[RunSpec, ...]
    experiments: tuple[ExperimentUnit, ...]
    plan: PricedPlan

    def rounds_labels(self) -> tuple[str, ...]:
        """Every configuration the rounds process times (float32's own run is timed there again)."""
        return tuple(dict.fromkeys(["float32", *(s.rounds_label for s in (*self.in_rounds, *self.changed))]))

    def planned_cells(self) -> set[tuple[str, str]]:
        """(precision, variant) of every cell the plan measures, in any process, the experiments that fit included."""
        kept = {(s.precision, s.variant) for unit in self.experiments for s in unit
                if any(p.name.startswith("experiment ") and s.variant in p.name for p in self.plan.phases)}
        return {(s.precision, s.variant) for s in (*self.own, *self.in_rounds, *self.changed)} | kept

    def profiled_cells(self) -> set[tuple[str, str]]:
        """(precision, variant) of every cell with a profiled window: the own runs', and the rounds' profiled ones."""
        return {(s.precision, s.variant) for s in (*self.own, *self.in_rounds)}


def own_process_runs(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The document's runs with processes of their own, each with its own process's step statistics (what the
    interleaved rounds replaced is under step_time_ms.single_process)."""
    runs = []
    for run in doc.get("runs") or []:
        if run.get("timed_by") == "interleaved_rounds":
            continue
        step = run.get("step_time_ms") or {}
        single = step.get("single_process") if isinstance(step, Mapping) else None
        runs.append({**run, "step_time_ms": dict(single)} if isinstance(single, Mapping) else dict(run))
    return runs


def replay(doc: Mapping[str, Any], extra: tuple[ProcessExperiment, ...] = (), extra_inside: bool = False) -> Replay:
    """The default diagnose of the document's host and size, planned and priced by this release from the document's
    measured phases: at each decision only what a diagnose would know by then (float32's own run before the rounds;
    the runs the rounds would have made, as the document measured them, for the experiments after them)."""
    from fp16doctor.analysis.experiments import plan_experiments

    host = doc.get("host") or {}
    invocation = doc.get("invocation") or {}
    size = WORKLOAD_SIZES[str(invocation.get("size") or "full")]
    if host.get("gpus"):
        size = on_gpu(size)
    precisions = [str(p) for p in invocation.get("precisions") or ["float32"]]
    specs = plan_runs([HOST_STACK], precisions, size, None, None)
    keras = ((host.get("frameworks") or {}).get("keras") or {})
    in_rounds = profiled_in_rounds(specs, host, size.budget_s is not None, keras.get("backend"))
    own = [s for s in specs if s not in in_rounds]
    recorded = own_process_runs(doc)
    known = [r for r in recorded if r.get("stack") == HOST_STACK
             and any(r.get("precision") == s.precision and r.get("variant", "original") == s.variant for s in own)]
    made = {(s.stack, s.precision, s.variant) for s in specs}

    def planned(runs: list[dict[str, Any]], done: set[tuple[str, str, str]]) -> list[RunSpec]:
        items = plan_experiments({**doc, "runs": runs})
        return experiment_specs(items, [HOST_STACK], size, None, done)

    coming = planned(known, made)
    changed = tuple(s for s in coming if s.variant in MODEL_VARIANTS)
    reserved = experiment_units([s for s in coming if s.variant not in MODEL_VARIANTS])
    done = made | {(s.stack, s.precision, s.variant) for s in coming}
    later = experiment_units(planned(recorded, done))
    prepare_s = float((invocation.get("phases_s") or {}).get("prepare") or PREPARE_PRIOR_S)
    priced = price_diagnose(size, HOST_STACK, known, own, tuple(s.rounds_label for s in in_rounds), changed,
                            reserved, later, prepare_s, extra, extra_inside, later_runs=recorded)
    return Replay(tuple(own), tuple(in_rounds), changed, (*reserved, *later), priced)
