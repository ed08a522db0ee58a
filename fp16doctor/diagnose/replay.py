"""What this release's planner would plan, and what it would cost, on the machine that made a results document:
the document's measured phases (each run's import, first step, steps, input time, profiled window; its prepare
phase) fed through the same planning and pricing a diagnose uses (plan.py, rounds.py, budget.py), priced as a
diagnose runs them (price_diagnose). Pure: a document in, a PricedPlan out; nothing runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fp16doctor.diagnose.budget import analysis_s, experiment_cost_s, fit_units, unit_cost_s
from fp16doctor.diagnose.plan import experiment_specs, experiment_units, plan_runs
from fp16doctor.diagnose.rounds import (
    ProcessExperiment,
    after_rounds_s,
    attribution_per_window_s,
    process_experiment_cost_s,
    profiled_in_rounds,
    round_s,
    rounds_process_s,
    rounds_runs,
)
from fp16doctor.engines.spec import HOST_STACK, WORKLOAD_SIZES, ExperimentUnit, RunSpec, WorkloadSize, on_gpu
from fp16doctor.results import Run
from fp16doctor.workload.paired import MIN_ROUNDS
from fp16doctor.workload.protocol import MODEL_VARIANTS

# The prepare phase where a document does not say how long its took (invocation.phases_s.prepare).
PREPARE_PRIOR_S = 5.0


@dataclass(frozen=True)
class PricedPhase:
    """One phase of a priced diagnose: its name, its seconds, and what it holds."""

    name: str
    seconds: float
    what: str = ""


@dataclass(frozen=True)
class PricedPlan:
    """A diagnose priced before it runs (price_diagnose): its phases within the budget, the rounds they leave room
    for, what does not fit (with its price), and what is priced beside the budget."""

    budget_s: float | None
    phases: tuple[PricedPhase, ...]
    rounds: int
    skipped: tuple[PricedPhase, ...] = ()
    beside: tuple[PricedPhase, ...] = ()

    @property
    def total_s(self) -> float:
        return sum(phase.seconds for phase in self.phases)

    @property
    def fits(self) -> bool:
        return self.budget_s is None or self.total_s <= self.budget_s + 1e-6

    def lines(self) -> list[str]:
        """The plan as text, phase by phase."""
        out = [f"{p.seconds:6.1f} s  {p.name}" + (f" ({p.what})" if p.what else "") for p in self.phases]
        budget = f" of the {self.budget_s:.0f} s budget" if self.budget_s is not None else ""
        out.append(f"{self.total_s:6.1f} s  in all{budget}, with {self.rounds} interleaved rounds")
        out += [f"skipped: {p.name}, about {p.seconds:.0f} s ({p.what})" for p in self.skipped]
        out += [f"beside the budget: {p.name}, about {p.seconds:.0f} s" + (f" ({p.what})" if p.what else "")
                for p in self.beside]
        return out


def price_diagnose(size: WorkloadSize, stack: str, runs: list[dict[str, Any]], own: Sequence[RunSpec],
                   profiled: tuple[str, ...], changed: tuple[RunSpec, ...], reserved: Sequence[ExperimentUnit],
                   later: Sequence[ExperimentUnit], prepare_s: float,
                   extra: Sequence[ProcessExperiment] = (), extra_inside: bool = False,
                   later_runs: list[dict[str, Any]] | None = None) -> PricedPlan:
    """Pure: a diagnose of one stack priced as diagnose runs it where its size's budget binds, from `runs` (the
    records its prices rest on: float32's own run at least, as measured on this machine or a recording of it):
    `prepare_s`, the cells with a process of their own (`own`, each at experiment_cost_s), one rounds process
    (its import, builds, warm-ups, the windows of the `profiled` labels, the `changed` configurations, MIN_ROUNDS
    rounds and one more for every whole round the budget leaves after `reserved`, the experiments planned before
    the rounds), the experiments that fit (`reserved`, then `later`, those planned after the rounds, in the plan's
    order: fit_units, priced from `later_runs` where given: the records the rounds make), the windows' attribution
    and the analysis. `extra`: experiments in fresh processes of their
    own (a backend's), inside the budget where `extra_inside`, else priced beside it."""
    phases = [PricedPhase("prepare", prepare_s, "checks, probe, plan")]
    phases += [PricedPhase(f"{spec.precision} {spec.variant}", experiment_cost_s(spec, runs),
                           "a process of its own") for spec in own]
    startup_s = rounds_process_s(runs, stack, size, profiled, changed, minimum=True)
    one_round_s = round_s(runs, stack, profiled, changed)
    after_s = after_rounds_s(len(profiled), attribution_per_window_s(runs, stack)) + analysis_s(runs)
    extras = [PricedPhase(f"{e.label}", process_experiment_cost_s(e, runs, stack, size),
                          ", ".join(e.configurations)) for e in extra]
    used = sum(p.seconds for p in phases) + startup_s + after_s + sum(
        p.seconds for p in extras if extra_inside)
    reserve_s = sum(unit_cost_s(unit, runs) for unit in reserved)
    more = 0
    if size.budget_s is not None and one_round_s > 0:
        more = max(0, int((size.budget_s - used - reserve_s) // one_round_s))
    rounds_s = startup_s + more * one_round_s
    configurations = len(rounds_runs(runs, stack)) + len(profiled) + len(changed)
    phases.append(PricedPhase("interleaved rounds", rounds_s,
                              f"{configurations} configurations and float32's A/A control in one process, "
                              f"{len(profiled)} of them profiled; {MIN_ROUNDS + more} rounds of "
                              f"{one_round_s:.1f} s"))
    left = (size.budget_s - used - more * one_round_s) if size.budget_s is not None else float("inf")
    priced_by = later_runs if later_runs is not None else runs
    kept, skipped = fit_units([*reserved, *later], priced_by, left)
    for unit in kept:
        phases.append(PricedPhase(f"experiment {', '.join(s.precision for s in unit)} {unit[0].variant}",
                                  unit_cost_s(unit, priced_by), "a rounds process" if len(unit) > 1 else
                                  "a process of its own"))
    if extra_inside:
        phases += extras
    phases.append(PricedPhase("attribution and analysis", after_s,
                              f"{len(profiled)} windows of the rounds, the analysis and the report"))
    return PricedPlan(size.budget_s, tuple(phases), MIN_ROUNDS + more,
                      tuple(PricedPhase(f"experiment {', '.join(s.precision for s in unit)} {unit[0].variant}", cost,
                                        f"{max(left_s, 0):.0f} s left") for unit, cost, left_s in skipped),
                      () if extra_inside else tuple(extras))


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
        if Run.of(run).made_by_rounds:
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
    own_cells = {(s.stack, s.precision, s.variant) for s in own}
    known = [r for r in recorded if Run.of(r).key in own_cells]
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
