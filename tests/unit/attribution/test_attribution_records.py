"""Overlap-true op times: each op's wall-clock share where ops ran at once, on hand-made intervals and on the
recordings (a Sapphire Rapids Xeon whose float16 ops ran 44.9 s of thread time in a 24.5 s window)."""

from __future__ import annotations

import json

import pytest
from attribution_data import RECORDINGS, XEON, artifacts, model_layers

from fp16doctor.attribution import build_ops
from fp16doctor.attribution.records import OpRecord, overlap_wall_ms, self_segments


def _record(name: str, *intervals: tuple[float, float]) -> OpRecord:
    return OpRecord(name, "forward", sum(hi - lo for lo, hi in intervals), len(intervals), intervals=list(intervals))


def test_two_ops_at_once_share_the_instants_they_overlap() -> None:
    # 0-10 and 5-15: 5 ms alone each, 5 ms together (2.5 each); a record without intervals has no wall share.
    walls = overlap_wall_ms([_record("a", (0, 10)), _record("b", (5, 15)), OpRecord("c", "other", 3.0, 1)])
    assert walls == [7.5, 7.5, None]


def test_an_op_twice_at_once_counts_for_both_of_its_runs() -> None:
    walls = overlap_wall_ms([_record("a", (0, 10), (0, 10)), _record("b", (0, 10))])
    assert walls == pytest.approx([20 / 3, 10 / 3])


def test_a_nested_span_owns_its_instants_and_its_caller_keeps_the_rest() -> None:
    own = self_segments([(0.0, 10.0, "conv2d"), (2.0, 8.0, "convolution"), (3.0, 7.0, "mkldnn_convolution")])
    totals: dict[str, float] = {}
    for lo, hi, key in own:
        totals[key] = totals.get(key, 0.0) + hi - lo
    assert totals == {"conv2d": 4.0, "convolution": 2.0, "mkldnn_convolution": 4.0}


@pytest.mark.parametrize("precision", ["float32", "float16"])
def test_recorded_wall_shares_add_up_to_the_covered_window(precision: str) -> None:
    """Xeon, TF 2.21: the listed ops' self times add up to more than the window (they overlap); their wall shares
    add up to the covered part of it."""
    pytest.importorskip("xprof")
    ops = build_ops(artifacts(XEON, precision), model_layers(precision))
    assert ops is not None
    steps, window_ms = ops["window"]["steps"], ops["window"]["wall_ms"]
    thread_ms = sum(i["ms_per_step"] for i in ops["items"])
    wall_ms = sum(i["wall_ms_per_step"] for i in ops["items"])
    assert thread_ms > 1.3 * window_ms  # TensorFlow ran ops at once
    assert wall_ms == pytest.approx(ops["coverage"] * window_ms, rel=1e-3, abs=0.01 * steps)
    assert all(i["wall_ms_per_step"] <= i["ms_per_step"] + 1e-3 for i in ops["items"])


def test_torch_ops_on_one_thread_keep_their_self_time_as_wall_time() -> None:
    """Keras 3 on torch 2.13 (2-core EPYC): one thread runs nested aten ops; each op's wall share is its self
    time, where its whole span would count its callees' time again."""
    data = json.loads((RECORDINGS / "cpu-epyc-torch2.13-keras3" / "float16.torch_events.json").read_text())
    ops = build_ops({"window": data["window"], "torch_events": data["torch_events"]}, data["model_layers"])
    assert ops is not None
    for item in ops["items"]:
        assert item["wall_ms_per_step"] == pytest.approx(item["ms_per_step"], abs=1e-3)


def test_a_source_without_timestamps_lists_no_wall_share() -> None:
    ops = build_ops({"onednn_lines": artifacts(XEON, "float16")["onednn_lines"]}, model_layers("float16"))
    assert ops is not None and "no timestamps" in ops["coverage_note"]
    assert not [i for i in ops["items"] if "wall_ms_per_step" in i]


