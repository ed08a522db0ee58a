"""The quick budget: an experiment is costed at its own expected step, not at the run it changes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.diagnose.budget import (
    ONEDNN_OFF_FLOAT32_PRIOR,
    UNBOUND_16BIT_STEP_PRIOR,
    WINDOW_HOLD_STEPS,
    experiment_cost_s,
    experiment_rounds_cost_s,
    unit_cost_s,
    within_budget,
)
from fp16doctor.diagnose.plan import experiment_specs, experiment_units, plan_experiments
from fp16doctor.engines.spec import FULL, QUICK, SMOKE, RunSpec

QUICK_BUDGET = QUICK.budget_s or 0.0
XEON = Path(__file__).resolve().parents[2] / "data" / "recordings" / "cpu-xeon-quick-diagnose"
EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


class Notes:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, message: str) -> None:
        self.notes.append(message)


@pytest.mark.parametrize("document", ["first-run.results.json", "third-rerun.results.json"])
def test_on_the_xeon_the_onednn_off_experiment_fits_what_the_old_costing_spent_on_one_cut_run(document: str) -> None:
    """Recorded quick diagnoses of a Xeon where float16 ran 24-35 s a step: the experiment that tests the cause
    (oneDNN off) was costed at the cut run's 57-90 s and never ran. At its own expected step it costs seconds."""
    doc: dict[str, Any] = json.loads((XEON / document).read_text())
    notes = Notes()
    planned = experiment_specs(plan_experiments(doc, notes), ["host"], QUICK, None, set())  # type: ignore[arg-type]
    assert {(s.precision, s.variant) for s in planned} >= {("float32", "onednn_off"), ("float16", "onednn_off")}
    float16 = next(s for s in planned if s.precision == "float16")
    cut = next(r for r in doc["runs"] if r["precision"] == "float16" and r["variant"] == "original")
    assert cut["bound"] and cut["wall_s"] > 50
    cost = experiment_cost_s(float16, doc["runs"])
    fp32_step_s = next(r for r in doc["runs"] if r["precision"] == "float32")["step_time_ms"]["median"] / 1000
    # Its steps are priced at the prior's multiple of float32's, twelve of them at most at the quick size (the
    # first, the warm-up, five timed, two held back before the window, the window's two).
    assert cost < cut["wall_s"] / 2 and cost < 15 + 12 * UNBOUND_16BIT_STEP_PRIOR * fp32_step_s
    units = experiment_units(planned)
    total = sum(unit_cost_s(u, doc["runs"]) for u in units)
    kept = within_budget(units, doc["runs"], time.monotonic() + total + 1.0, QUICK, notes)  # type: ignore[arg-type]
    assert kept == units and not any("quick budget are left" in n for n in notes.notes)


def test_an_experiment_that_does_not_fit_is_skipped_with_the_command_that_runs_it() -> None:
    doc: dict[str, Any] = json.loads((XEON / "first-run.results.json").read_text())
    notes = Notes()
    planned = experiment_specs(plan_experiments(doc, notes), ["host"], QUICK, None, set())  # type: ignore[arg-type]
    units = experiment_units(planned)
    assert within_budget(units, doc["runs"], time.monotonic() + 1.0, QUICK, notes) == []  # type: ignore[arg-type]
    # One setting's experiments are skipped together, with the one command that runs them.
    assert any("experiment float32, float16, mixed_float16 onednn_off skipped" in n and "--precision float32 "
               "--precision float16 --precision mixed_float16 --variant original --variant onednn_off" in n
               for n in notes.notes)
    said = [n for n in notes.notes if "quick budget are left" in n]
    assert said and all("--variant original --variant onednn_off" in n for n in said)


def test_an_unbound_runs_experiment_is_costed_at_that_runs_step() -> None:
    runs = [{"stack": "host", "precision": p, "variant": "original", "status": "ok", "first_step_ms": 1300.0,
             "step_time_ms": {"median": ms}, "timing": {"import_s": 3.0, "total_s": 10.0}, "wall_s": 11.0}
            for p, ms in (("float32", 450.0), ("float16", 1000.0))]
    from fp16doctor.engines.spec import RunSpec

    def steps_s(step_s: float) -> float:
        # A window of one step for a step of a second or more, of the size's profile_steps below that.
        window = 1 if step_s >= 1.0 else QUICK.profile_steps
        return ((1.3 - 0.45 + step_s) + (QUICK.warmup_steps - 1 + WINDOW_HOLD_STEPS + window) * step_s
                + max(3 * step_s, min(QUICK.max_measure_s, QUICK.min_steps * step_s)))

    # Each priced at its own run's step (float32's times the prior for its own kernels), plus the import and what
    # the run spent besides its import and its steps (11 s of wall, 3 s of import, a 1.3 s first step).
    sixteen = experiment_cost_s(RunSpec("host", "float16", "onednn_off", QUICK), runs)
    assert sixteen == pytest.approx(3.0 + steps_s(1.0) + (11.0 - 3.0 - 1.3))
    thirty_two = experiment_cost_s(RunSpec("host", "float32", "onednn_off", QUICK), runs)
    assert thirty_two == pytest.approx(3.0 + steps_s(0.45 * ONEDNN_OFF_FLOAT32_PRIOR) + (11.0 - 3.0 - 1.3))


def test_a_run_cut_after_its_first_step_prices_its_experiment_at_the_prior_not_its_first_step() -> None:
    """The first-step bound: float16's one step (27.6 s) is its first, tracing included; like a run cut at a later
    step it is no guide to its experiment's step, which is priced at the prior's multiple of float32's."""
    fp32 = {"stack": "host", "precision": "float32", "variant": "original", "status": "ok", "first_step_ms": 1400.0,
            "step_time_ms": {"median": 150.0}, "timing": {"import_s": 3.0, "total_s": 10.0}, "wall_s": 12.0}
    cut = {"stack": "host", "precision": "float16", "variant": "original", "status": "ok", "first_step_ms": 27600.0,
           "step_time_ms": {"median": 27600.0, "n": 1}, "warmup_step_ms": [27600.0], "bound": True,
           "bound_on": "first_step", "stop_reason": "slow_step_bound", "timing": {"import_s": 3.0, "total_s": 33.0},
           "wall_s": 60.0}
    from fp16doctor.engines.spec import RunSpec

    cost = experiment_cost_s(RunSpec("host", "float16", "onednn_off", QUICK), [fp32, cut])
    step_s = 0.150 * UNBOUND_16BIT_STEP_PRIOR
    # float32's run stands for what the cut run spent besides its import and steps: 12 s of wall, 3 s of import,
    # its 1.4 s first step.
    assert cost == pytest.approx(3.0 + (1.4 - 0.15 + step_s)
                                 + (QUICK.warmup_steps - 1 + WINDOW_HOLD_STEPS + 1) * step_s  # a 1-step window
                                 + max(3 * step_s, min(QUICK.max_measure_s, QUICK.min_steps * step_s))
                                 + (12.0 - 3.0 - 1.4))


def test_the_smoke_size_keeps_a_budget_of_its_own() -> None:
    deadline = time.monotonic() + 1.0  # a second of the smoke budget left
    doc: dict[str, Any] = json.loads((XEON / "first-run.results.json").read_text())
    notes = Notes()
    planned = experiment_specs(plan_experiments(doc, notes), ["host"], SMOKE, None, set())  # type: ignore[arg-type]
    assert within_budget(experiment_units(planned), doc["runs"], deadline, SMOKE, notes) == []  # type: ignore[arg-type]
    assert any("of the 45 s smoke budget are left" in n for n in notes.notes)
    assert FULL.budget_s is None and QUICK.budget_s == 90.0


def test_on_the_xeon_the_plan_fits_the_quick_budget_with_the_experiment_that_tests_the_cause() -> None:
    """The Xeon's quick diagnose once its 16-bit first steps are cut inside (docs/examples/cpu-xeon-amx-quick): with
    the phases it spent before the experiments (prepare, the matrix, the rounds at their minimum), the planner keeps
    float16's oneDNN-off experiment with its float32 partner, timed together in one rounds process of that
    setting, and their expected cost keeps the whole within 90 s."""
    doc: dict[str, Any] = json.loads((EXAMPLES / "cpu-xeon-amx-quick" / "results.json").read_text())
    phases = doc["invocation"]["phases_s"]
    before = phases["prepare"] + phases["matrix"] + phases["rounds"]
    matrix = [r for r in doc["runs"] if not r.get("experiment")]
    notes = Notes()
    planned = experiment_specs(plan_experiments({**doc, "runs": matrix}, notes), ["host"], QUICK, None,
                               set())  # type: ignore[arg-type]
    units = experiment_units(planned)
    setting = next(u for u in units if u[0].variant == "onednn_off")
    assert [s.precision for s in setting] == ["float32", "float16", "mixed_float16"]
    deadline = time.monotonic() - before + QUICK_BUDGET
    kept = within_budget(units, matrix, deadline, QUICK, notes)  # type: ignore[arg-type]
    # float32 and float16 at least (the setting's rounds keep what fits, in order, the rest said with its command).
    assert [u[:2] for u in kept] == [setting[:2]]
    assert before + sum(unit_cost_s(u, matrix) for u in kept) <= QUICK_BUDGET
    # One process, float32 beside float16 in rounds, costs less than the two processes that example ran.
    own = sum(r["wall_s"] for r in doc["runs"] if r.get("variant") == "onednn_off")
    assert experiment_rounds_cost_s(setting[:2], matrix) < own


def test_a_settings_rounds_are_priced_from_its_models_steps() -> None:
    """Import, then per model (float32's twice, the A/A control) its first step, its warm-up and the minimum
    rounds' blocks (at least BLOCK_TARGET_S, plus the block's dropped step), and one more round."""
    runs: list[dict[str, Any]] = [
        {"stack": "host", "precision": "float32", "variant": "original", "status": "ok", "first_step_ms": 1100.0,
         "step_time_ms": {"median": 100.0}, "timing": {"import_s": 4.0}},
        {"stack": "host", "precision": "float16", "variant": "original", "status": "ok", "first_step_ms": 2000.0,
         "step_time_ms": {"median": 900.0}}]
    unit = (RunSpec("host", "float32", "onednn_off", QUICK), RunSpec("host", "float16", "onednn_off", QUICK))
    f32 = 0.1 * ONEDNN_OFF_FLOAT32_PRIOR
    block32, block16 = max(f32, 0.4) + f32, 0.9 + 0.9
    per_model32 = (1.0 + f32) + (QUICK.warmup_steps - 1) * f32 + 3 * block32
    per_model16 = (1.0 + 0.9) + (QUICK.warmup_steps - 1) * 0.9 + 3 * block16
    expected = 4.0 + 2 * per_model32 + per_model16 + 2 * block32 + block16
    assert experiment_rounds_cost_s(unit, runs) == pytest.approx(expected)
    assert unit_cost_s(unit, runs) == pytest.approx(expected) and unit_cost_s(unit[1:], runs) == pytest.approx(
        experiment_cost_s(unit[1], runs))


def test_the_budgets_clock_starts_with_the_commands_own_process() -> None:
    """What a process did before the budget's clock is read (an interpreter's start-up, its imports; here a 0.3 s
    sleep) is counted, as the user's wall clock counts it."""
    code = ("import time; time.sleep(0.3); now = time.monotonic()\n"
            "from fp16doctor.diagnose.budget import command_started\n"
            "print(now - command_started())")
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert 0.25 < age < 30.0


def test_compiling_on_keras_torch_backend_is_priced_on_the_first_step() -> None:
    from fp16doctor.diagnose.budget import TORCH_COMPILE_PRIOR_S

    def runs(backend: str) -> list[dict[str, Any]]:
        return [{"stack": "host", "precision": "float32", "variant": "original", "status": "ok",
                 "first_step_ms": 1300.0, "step_time_ms": {"median": 450.0}, "software": {"keras_backend": backend},
                 "timing": {"import_s": 3.0, "total_s": 10.0}, "wall_s": 11.0}]

    spec = RunSpec("host", "float32", "xla", QUICK)
    # torch.compile compiles on the first step; TensorFlow's XLA within the tracing float32's first step paid.
    torch, tensorflow = experiment_cost_s(spec, runs("torch")), experiment_cost_s(spec, runs("tensorflow"))
    assert torch - tensorflow == pytest.approx(TORCH_COMPILE_PRIOR_S)
    # Compiled with batches in memory (synthetic_input+xla) too.
    combined = RunSpec("host", "float32", "synthetic_input+xla", QUICK)
    assert experiment_cost_s(combined, runs("torch")) - experiment_cost_s(combined, runs("tensorflow")) \
        == pytest.approx(TORCH_COMPILE_PRIOR_S)
    assert experiment_cost_s(RunSpec("host", "float32", "tf32_off", QUICK), runs("torch")) < tensorflow + 1.0
