"""A GPU trace's device time, each kernel and copy counted once, and its op rows, one meaning each
(attribution/device_time.py, torch_events.py), on a hand-written torch trace (tests/data/traces/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fp16doctor.attribution import build_device_time, build_ops
from fp16doctor.attribution.device_time import from_events, from_rows, one_row_each
from fp16doctor.attribution.passes import kernel_pass

TRACE = Path(__file__).parents[2] / "data" / "traces" / "torch-gpu-synthetic.json"
WINDOW = {"steps": 2, "wall_ms": 10.0, "kind": "after_timing"}


@pytest.fixture(scope="module")
def events() -> list[dict]:
    return json.loads(TRACE.read_text(encoding="utf-8"))


def test_busy_time_is_the_union_of_kernels_and_copies_each_counted_once(events):
    found = from_events(events, 2, 10.0)
    assert found is not None
    # 1.2 ms copy + 1.0 forward + 0.8 for the two overlapping gradient kernels + 0.2 pool: not their 3.8 ms sum, and
    # not CUPTI's 3 ms of buffer requests.
    assert found.busy_ms == pytest.approx(3.2)
    assert found.copies_ms == {"h2d": pytest.approx(1.2)}
    assert found.h2d_pageable is True
    assert found.busy_share == pytest.approx(0.32)
    assert found.host_ms == pytest.approx(6.8)


def test_build_device_time_gives_the_documents_shape_and_nothing_for_a_cpu_run(events):
    doc = build_device_time({"torch_events": events, "window": WINDOW, "device": "gpu:0"})
    assert doc is not None
    assert set(doc) >= {"busy_ms", "step_ms", "busy_share", "copies_ms", "h2d_pageable", "host_ms", "source"}
    assert doc["busy_ms"] == pytest.approx(3.2) and doc["step_ms"] == 10.0 and doc["source"] == "torch_profiler"
    assert build_device_time({"torch_events": events, "window": WINDOW, "device": "cpu"}) is None


def test_each_device_activity_has_one_row_and_the_input_row_holds_the_hosts_time(events):
    ops = build_ops({"torch_events": events, "window": WINDOW}, [{"name": "conv2d"}])
    assert ops is not None
    rows = {row["name"]: row for row in ops["items"]}
    # Claimed kernels and copies live in their op's row; CUPTI's bookkeeping is no op.
    assert "Memcpy HtoD (Pageable -> Device)" not in rows and "Activity Buffer Request" not in rows
    assert not any(name.startswith("sm90_xmma") for name in rows)
    assert rows["aten::copy_"]["pass"] == "input" and rows["aten::copy_"]["ms_per_step"] == pytest.approx(1.2)
    assert rows["aten::convolution_backward"]["pass"] == "backward_weights"
    assert rows["aten::convolution_backward"]["ms_per_step"] == pytest.approx(1.4)
    pool = next(row for name, row in rows.items() if "max_pool_backward" in name)
    assert pool["pass"] == "backward_data"  # an unclaimed kernel's pass, from its name
    loader = rows["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"]
    assert loader["time"] == "host" and loader["ms_per_step"] == pytest.approx(3.5)
    device_rows = sum(row["ms_per_step"] for row in ops["items"] if row.get("time") != "host")
    assert device_rows == pytest.approx(3.8)  # every kernel once; the union (3.2) is less where two overlap


def test_kernel_pass_reads_cudnn_and_aten_names():
    assert kernel_pass("sm80_xmma_wgrad_implicit_gemm_f16f16") == "backward_weights"
    assert kernel_pass("sm90_xmma_dgrad_implicit_gemm_f32f32") == "backward_data"
    assert kernel_pass("void at::native::max_pool_backward_nchw<float, float, int>(float const*)") == "backward_data"
    assert kernel_pass("Memcpy HtoD (Pageable -> Device)") == "input"
    assert kernel_pass("void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>") is None


def _recorded_rows() -> list[dict]:
    """Op rows as a release before this one recorded a GPU trace: the op rows with their kernels, and each kernel,
    copy, the DataLoader and CUPTI's requests as rows of their own."""
    copy, wgrad = "Memcpy HtoD (Pageable -> Device)", "sm90_xmma_wgrad_indexed_implicit_gemm_f32f32"
    pool = "void at::native::(anonymous namespace)::max_pool_backward_nchw<float, float, int>(float const*)"
    return [
        {"name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "pass": "input", "ms_per_step": 16.3},
        {"name": "aten::copy_", "pass": "layout", "impl": copy, "ms_per_step": 15.3, "kernels": [copy]},
        {"name": copy, "pass": "forward", "ms_per_step": 15.3},
        {"name": "Activity Buffer Request", "pass": "forward", "impl": copy, "ms_per_step": 5.4},
        {"name": "aten::convolution_backward", "layer": "conv2d_1", "pass": "backward_weights", "impl": wgrad,
         "ms_per_step": 2.0, "kernels": [wgrad]},
        {"name": wgrad, "pass": "forward", "ms_per_step": 2.0},
        {"name": pool, "pass": "forward", "ms_per_step": 0.7},
    ]


def test_a_recorded_documents_rows_are_read_with_each_kernel_once():
    rows = one_row_each(_recorded_rows())
    names = [row["name"] for row in rows]
    assert names == ["aten::copy_", "aten::convolution_backward",
                     "void at::native::(anonymous namespace)::max_pool_backward_nchw<float, float, int>(float const*)"]
    assert rows[0]["pass"] == "input" and rows[2]["pass"] == "backward_data"
    found = from_rows(_recorded_rows(), 295.0)
    assert found is not None and found.method == "kernel_sum"
    assert found.busy_ms == pytest.approx(15.3 + 2.0 + 0.7)
    assert sum(row["ms_per_step"] for row in rows) == pytest.approx(found.busy_ms)
    assert found.copies_ms["h2d"] == pytest.approx(15.3) and found.h2d_pageable
    assert one_row_each(rows) == rows  # rows already so pass through unchanged


XPLANE_TRACE = Path(__file__).parents[2] / "data" / "traces" / "xplane-gpu-trace-viewer-synthetic.json"


def test_a_jax_or_tensorflow_gpu_trace_counts_its_streams_once_and_not_the_derived_lines() -> None:
    from fp16doctor.attribution.device_time import from_activity
    from fp16doctor.attribution.xplane import device_activity

    activity = device_activity(json.loads(XPLANE_TRACE.read_text(encoding="utf-8")))
    # The host's events and the XLA Ops / XLA Modules / Steps lines are no device activity of their own.
    assert {name for name, _, _ in activity} == {
        "MemcpyH2D", "MemcpyD2H", "cutlass_80_tensorop_s1688gemm_f16_64x64_32x6_nn_align8",
        "sm90_xmma_wgrad_implicit_gemm_f16f16_f32f32_nhwckrsc_nhwc"}
    found = from_activity(activity, 2, 10.0, "jax_profiler")
    assert found is not None and found.source == "jax_profiler"
    # 2.9 ms in the first step (the copy back overlaps the gradient kernel) and 2.2 in the second.
    assert found.busy_ms == pytest.approx(2.55)
    assert found.copies_ms == {"h2d": pytest.approx(1.2), "d2h": pytest.approx(0.1)}
    assert found.h2d_pageable is None  # the trace does not say
    assert from_activity([], 2, 10.0, "jax_profiler") is None


def test_build_device_time_reads_an_xplane_runs_gpu_activity(monkeypatch: pytest.MonkeyPatch) -> None:
    from fp16doctor.attribution import build as build_module
    from fp16doctor.attribution.xplane import XplaneData, device_activity

    trace = json.loads(XPLANE_TRACE.read_text(encoding="utf-8"))
    monkeypatch.setattr(build_module, "xprof_available", lambda: True)
    monkeypatch.setattr(build_module, "read_xplane",
                        lambda path: XplaneData([], [], True, device_activity(trace)))
    doc = build_device_time({"xplane_path": "run.xplane.pb", "xplane_framework": "jax", "window": WINDOW,
                             "device": "gpu:0"})
    assert doc is not None and doc["source"] == "jax_profiler" and doc["busy_ms"] == pytest.approx(2.55)
    assert build_device_time({"xplane_path": "run.xplane.pb", "window": WINDOW, "device": "cpu"}) is None


def test_idle_time_is_split_into_data_wait_launch_gaps_and_the_rest():
    from fp16doctor.attribution.device_time import idle_split

    # One 10 ms step: the DataLoader runs 0-3 ms with the device idle, the copy 3-4 (its host side 3-4.2), kernels
    # 4-5 and 5.5-6 (a 0.5 ms gap with no host data span: a dispatch gap), then idle to the step's end.
    split = idle_split([(3.0, 4.0), (4.0, 5.0), (5.5, 6.0)], [(0.0, 3.0), (3.0, 4.2)], (0.0, 10.0), 1)
    assert split.waiting_on_data_ms == pytest.approx(3.0)
    assert split.launch_gaps_ms == pytest.approx(0.5)
    assert split.other_ms == pytest.approx(4.0)
    assert split.total_ms == pytest.approx(10.0 - 2.5)
    assert split.dominant == "other_ms"


def test_a_trace_with_timestamps_gives_its_idle_split_adding_up_to_its_idle_time(events):
    found = from_events(events, 2, 10.0)
    assert found is not None and found.idle is not None and found.host_ms is not None
    assert found.idle.total_ms == pytest.approx(found.host_ms, rel=0.10)
    assert found.idle.launch_gaps_ms is not None
    doc = found.to_dict()["idle"]
    assert set(doc) == {"waiting_on_data_ms", "launch_gaps_ms", "other_ms", "method"}


def test_the_idle_split_travels_in_the_document_and_back(events):
    from fp16doctor.attribution.device_time import DeviceTime

    doc = build_device_time({"torch_events": events, "window": WINDOW, "device": "gpu:0"})
    assert doc is not None and doc["idle"]["method"] == "trace_intervals"
    back = DeviceTime.from_dict(doc)
    assert back is not None and back.idle is not None
    assert back.idle.total_ms == pytest.approx(doc["host_ms"], rel=0.10)
