"""The workload's torch profiler export, on stand-ins shaped like torch's FunctionEvent (the real thing is
exercised by the recordings under tests/data/recordings/cpu-epyc-torch2.13-keras3, made with it)."""

from __future__ import annotations

from types import SimpleNamespace

from fp16doctor.workload.profile_export import LAYER_PREFIX, export_torch_events


def _event(name, parent=None, sequence_nr=-1, self_cpu=1.0, kernels=()):
    return SimpleNamespace(name=name, cpu_parent=parent, sequence_nr=sequence_nr, self_cpu_time_total=self_cpu,
                           self_device_time_total=sum(k.duration for k in kernels), thread=1,
                           time_range=SimpleNamespace(start=0.0, end=10.0), input_shapes=[[2, 3, 8, 8]],
                           input_dtypes=["c10::Half"], kernels=list(kernels))


def test_backward_ops_inherit_the_layer_of_their_forward_op():
    label = _event(LAYER_PREFIX + "conv2d")
    forward = _event("aten::convolution", parent=label, sequence_nr=7)
    engine = _event("autograd::engine::evaluate_function: ConvolutionBackward0")
    node = _event("ConvolutionBackward0", parent=engine, sequence_nr=7)
    kernel = SimpleNamespace(name="sm80_xmma_wgrad_implicit_gemm_f16f16", duration=12.5)
    backward = _event("aten::convolution_backward", parent=node, kernels=[kernel])
    prof = SimpleNamespace(events=lambda: [label, forward, engine, node, backward])
    exported = {e["name"]: e for e in export_torch_events(prof)}
    assert LAYER_PREFIX + "conv2d" not in exported and engine.name not in exported
    assert exported["aten::convolution"]["layer"] == "conv2d" and not exported["aten::convolution"]["backward"]
    grad = exported["aten::convolution_backward"]
    assert grad["layer"] == "conv2d" and grad["backward"] and grad["dtypes"] == ["c10::Half"]
    assert grad["kernels"] == [{"name": "sm80_xmma_wgrad_implicit_gemm_f16f16", "device_us": 12.5}]
    assert grad["self_device_us"] == 12.5
