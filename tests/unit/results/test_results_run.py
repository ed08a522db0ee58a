"""results.Run: one typed view of a run record, made once, with one rule for a run that finished whole and one for
a run the slow-step bound cut."""

from __future__ import annotations

from typing import Any

import pytest

from fp16doctor.engines.spec import QUICK, RunSpec, with_slow_step_bound
from fp16doctor.results import Run, find_run


def record(precision: str = "float32", ms: Any = 120.0, **extra: Any) -> dict[str, Any]:
    return {"stack": "host", "precision": precision, "variant": "original", "device": "cpu", "status": "ok",
            "step_time_ms": {"median": ms, "p10": 110.0, "p90": 130.0, "n": 12}, **extra}


def test_a_record_is_read_once_into_its_fields() -> None:
    run = Run.of(record("float16", 300.0, first_step_ms=2500.0, input_time_ms={"median": 40.0},
                        software={"keras_backend": "jax"}, timing={"import_s": 4.5}, wall_s=20.0,
                        profile={"attribution_s": 0.8}, machine="host", timed_by="interleaved_rounds"))
    assert run.key == ("host", "float16", "original")
    assert (run.step_median_ms, run.step_p10_ms, run.step_p90_ms, run.step_n) == (300.0, 110.0, 130.0, 12)
    assert run.median_s == pytest.approx(0.3) and run.first_step_s == pytest.approx(2.5)
    assert (run.input_median_ms, run.keras_backend, run.import_s, run.wall_s, run.attribution_s) == (
        40.0, "jax", 4.5, 20.0, 0.8)
    assert run.made_by_rounds and not run.on_gpu and run.machine == "host"
    assert Run.of(record(device="gpu:0")).on_gpu


def test_a_record_missing_what_it_may_lack_reads_as_absent_never_as_an_error() -> None:
    run = Run.of({"stack": "host", "precision": "float16", "status": "failed", "step_time_ms": "?",
                  "software": None, "engine": [], "first_step_ms": "slow"})
    assert run.variant == "original" and run.step_median_ms is None and run.median_s is None
    assert run.first_step_s == 0.0 and run.engine == {} and run.keras_backend is None
    assert not run.ok and not run.usable and not run.cut


def test_one_rule_for_a_run_that_finished_whole_and_one_for_a_cut_run() -> None:
    whole, cut = Run.of(record()), Run.of(record("float16", 5000.0, bound=True))
    assert whole.usable and not whole.cut
    assert cut.cut and cut.ok and not cut.usable
    assert not Run.of(record(ms=0)).usable  # no step: nothing to pair with or to bound by
    assert not Run.of(record(status="failed")).usable and not Run.of(record(status="failed", bound=True)).cut


def test_find_run_takes_a_cut_run_only_where_it_is_not_asked_for_a_usable_one() -> None:
    runs = [record("float16", 5000.0, bound=True), record("float16", 900.0, variant="onednn_off"),
            record("float32", 120.0)]
    cut = find_run(runs, "host", "float16")
    assert cut is not None and cut.cut
    assert find_run(runs, "host", "float16", usable=True) is None
    changed = find_run(runs, "host", "float16", "onednn_off", usable=True)
    assert changed is not None and changed.step_median_ms == 900.0
    assert find_run(runs, "cpu", "float32") is None


def test_a_16_bit_run_is_bounded_by_the_float32_run_that_finished_whole() -> None:
    """The slow-step bound reads the same rule: a cut or failed float32 sets no bound; the setting's own float32
    comes first, else the original's."""
    spec = RunSpec("host", "float16", "onednn_off", QUICK)
    assert with_slow_step_bound(spec, [record(bound=True), record(status="failed")]).reference_ms is None
    original = with_slow_step_bound(spec, [record(ms=100.0, first_step_ms=900.0)])
    assert (original.reference_ms, original.reference_first_step_ms) == (100.0, 900.0)
    own = with_slow_step_bound(spec, [record(ms=100.0), record(ms=300.0, variant="onednn_off")])
    assert own.reference_ms == 300.0 and own.reference_first_step_ms is None
