"""The planner's replay of the H200 recording (docs/examples/gpu-h200-keras-torch-full): this release's default
diagnose on that machine, priced from the document's measured phases, fits the full size's GPU budget and keeps the
comparisons the current verdicts rest on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document
from fp16doctor.diagnose import rounds
from fp16doctor.diagnose.replay import own_process_runs, replay
from fp16doctor.diagnose.rounds import ProcessExperiment
from fp16doctor.engines.spec import FULL, GPU_WALL_BUDGET_S, MIN_ROUNDS, RunSpec, on_gpu

H200 = Path(__file__).parents[3] / "docs" / "examples" / "gpu-h200-keras-torch-full" / "results.json"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return json.loads(H200.read_text())


def test_the_h200_default_diagnose_is_planned_within_the_gpu_budget(doc: dict[str, Any]) -> None:
    replayed = replay(doc)
    assert replayed.plan.budget_s == GPU_WALL_BUDGET_S["full"]
    assert replayed.plan.fits, "\n".join(replayed.plan.lines())
    assert replayed.plan.rounds >= MIN_ROUNDS
    # One process of its own (float32's, whose step sets the bound), every other cell in the one rounds process.
    assert [(s.precision, s.variant) for s in replayed.own] == [("float32", "original")]


def test_the_replay_keeps_every_comparison_the_verdicts_rest_on(doc: dict[str, Any]) -> None:
    replayed = replay(doc)
    labels = set(replayed.rounds_labels())
    diagnosis = diagnose_document(doc)
    for verdict in diagnosis.to_dict()["verdicts"]:
        v = verdict if isinstance(verdict, dict) else verdict.to_dict()
        # Both sides of every verdict's pair are timed in the same rounds process (the A/A control beside float32).
        suffix = "" if v["variant"] == "original" else f"+{v['variant']}"
        assert {f"float32{suffix}", f"{v['precision']}{suffix}"} <= labels, v
        for cause in v.get("causes") or []:
            if cause.get("basis") == "measured_ops":  # both windows profiled
                assert {("float32", v["variant"]), (v["precision"], v["variant"])} <= replayed.profiled_cells()
            if cause.get("basis") == "experiment":
                assert (cause.get("precision", v["precision"]), cause.get("variant")) in replayed.planned_cells()
    assert {"float32", "float16", "mixed_float16", "mixed_bfloat16"} <= labels
    assert {f"{p}+synthetic_input" for p in ("float32", "float16", "mixed_float16", "mixed_bfloat16")} <= labels


def test_the_replay_says_what_does_not_fit_with_its_price(doc: dict[str, Any]) -> None:
    replayed = replay(doc)
    planned = {f"experiment {', '.join(s.precision for s in u)} {u[0].variant}" for u in replayed.experiments}
    shown = {p.name for p in replayed.plan.phases} | {p.name for p in replayed.plan.skipped}
    assert planned <= shown  # every planned experiment either runs or is said skipped
    assert all(p.seconds > 0 for p in replayed.plan.skipped)


def test_a_process_experiment_is_priced_beside_the_budget_or_inside_it(doc: dict[str, Any]) -> None:
    backend = ProcessExperiment("backend jax", ("float32+synthetic_input", "mixed_bfloat16+synthetic_input"),
                                import_s=5.0)
    beside = replay(doc, (backend,))
    inside = replay(doc, (backend,), extra_inside=True)
    assert [p.name for p in beside.plan.beside] == ["backend jax"]
    assert beside.plan.total_s == pytest.approx(replay(doc).plan.total_s)
    assert "backend jax" in {p.name for p in inside.plan.phases}
    # One price, inside or beside; inside, it takes the rounds' room first (the minimum rounds still run).
    price = {p.name: p.seconds for p in inside.plan.phases}["backend jax"]
    assert price == pytest.approx(beside.plan.beside[0].seconds)
    assert inside.plan.rounds <= beside.plan.rounds
    assert inside.plan.total_s > beside.plan.total_s


def test_the_pricing_matches_the_recorded_rounds_process(doc: dict[str, Any]) -> None:
    """The recorded rounds process (thirteen configurations, six rounds, no profiled one), priced from the runs it
    followed, lands within 15 % of its measured wall time: the GPU priors are the machine's, not wishes."""
    runs = [r for r in own_process_runs(doc) if r.get("variant") == "original"]
    size = on_gpu(FULL)
    changed = (*(RunSpec("host", p, "synthetic_input", size) for p in ("float32", "float16", "mixed_float16",
                                                                          "mixed_bfloat16")),
               RunSpec("host", "float16", "float32_batches", size),
               *(RunSpec("host", p, "channels_padded", size) for p in ("float16", "mixed_float16", "mixed_bfloat16")))
    recorded = doc["timing_rounds"][0]
    one_round = rounds.round_s(runs, "host", (), changed)
    startup = rounds.rounds_process_s(runs, "host", size, (), changed, minimum=True) - MIN_ROUNDS * one_round
    priced = startup + len(recorded["order"]) * one_round
    assert priced == pytest.approx(recorded["wall_s"], rel=0.15)


def test_the_full_size_on_a_cpu_keeps_no_budget() -> None:
    assert FULL.budget_s is None and FULL.rounds_precision is None
    assert on_gpu(FULL).budget_s == GPU_WALL_BUDGET_S["full"]
    from fp16doctor.engines.spec import QUICK

    assert on_gpu(QUICK) == QUICK  # quick keeps its 90 s on any device
