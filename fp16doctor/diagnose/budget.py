"""The quick size's wall budget (runplan.QUICK_BUDGET_S): what the interleaved rounds get, and which experiments
fit in what is left. An engine whose runs wait in a queue is not bound by it (its `queued` trait)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from fp16doctor.engines.rounds import FULL_ROUNDS_BUDGET_S, ROUNDS_MIN_BUDGET_S, stack_rounds_budget_s
from fp16doctor.engines.spec import RunSpec, WorkloadSize
from fp16doctor.options import Progress
from fp16doctor.runplan import QUICK_BUDGET_S


def rounds_budget_s(size: WorkloadSize, stack: str, runs: list[dict[str, Any]], deadline: float | None) -> float:
    """The rounds' budget for one stack: the full size's fixed budget; at the quick size, what the wall budget
    has left after the rounds process's own start-up where the budget binds (`deadline`: the engine runs here,
    unqueued, the budget's clock is its own), else the minimum (a container stack already cost more than the
    budget; a queued job's wait is not the budget's)."""
    if size.name != "quick":
        return FULL_ROUNDS_BUDGET_S
    if deadline is None:
        return stack_rounds_budget_s(size)
    return max(ROUNDS_MIN_BUDGET_S, deadline - time.monotonic() - _rounds_startup_s(runs, stack))


def within_budget(planned: list[RunSpec], runs: list[dict[str, Any]], deadline: float,
                   progress: Progress) -> list[RunSpec]:
    """The experiments that fit what is left of the quick budget, each costing what the run it changes took;
    the others are skipped, and said (run them with --variant, outside --quick's budget)."""
    left = deadline - time.monotonic()
    kept = []
    for spec in planned:
        base = next((r for r in runs if r.get("stack") == spec.stack and r.get("precision") == spec.precision
                     and r.get("variant", "original") == "original"), None)
        cost = float((base or {}).get("wall_s") or 0.0)
        if cost > left:
            progress.note(f"experiment {spec.precision} {spec.variant} skipped: it would take about {cost:.0f} s "
                          f"and {max(left, 0):.0f} s of the {QUICK_BUDGET_S:.0f} s quick budget are left (run it "
                          f"with --precision {spec.precision} --variant original --variant {spec.variant})")
            continue
        left -= cost
        kept.append(spec)
    return kept


def _rounds_startup_s(all_runs: list[dict[str, Any]], stack: str) -> float:
    """What the rounds process spends besides its budget: importing the framework, each model's first steps
    (tracing) and warm-up, float32's twice (its A/A control), and the round that starts just before the budget
    ends (the loop checks the clock between rounds)."""
    runs = [r for r in all_runs if r.get("stack") == stack and r.get("status") == "ok"
            and r.get("variant", "original") == "original" and not r.get("bound")]
    import_s = max((float((r.get("timing") or {}).get("import_s") or 0.0) for r in runs), default=3.0)
    total = import_s
    one_round = 0.0
    for run in runs:
        copies = 2 if run.get("precision") == "float32" else 1
        median_s = float((run.get("step_time_ms") or {}).get("median") or 0.0) / 1000.0
        total += copies * (float(run.get("first_step_ms") or 0.0) / 1000.0 + 2 * median_s + _script_setup_s(run))
        one_round += copies * 3 * median_s
    return total + one_round


def _script_setup_s(run: Mapping[str, Any]) -> float:
    """What a script did before its first training step (reading data, building the model): the rounds run it
    again for each model. 0 for the built-in workload."""
    timing = run.get("timing") or {}
    if (run.get("workload") or {}).get("name") != "script" or not isinstance(timing.get("script_s"), (int, float)):
        return 0.0
    warmup = run.get("warmup_step_ms") or [float(run.get("first_step_ms") or 0.0)]  # the first step is in it
    steps_ms = sum(warmup) + sum(run.get("step_ms_all") or [])
    return max(0.0, float(timing["script_s"]) - float(timing.get("import_s") or 0.0) - steps_ms / 1000.0)
