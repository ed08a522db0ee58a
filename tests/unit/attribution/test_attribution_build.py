"""build_ops on real recordings: the Xeon (AVX512-FP16, AMX-BF16) where float16 weight gradients run oneDNN's
reference kernel, this project's AVX2-only AMD EPYC, a Keras 3 on torch profile, TF1 step stats and a public
GPU trace."""

from __future__ import annotations

import gzip
import json

import pytest
from attribution_data import EPYC, PUBLIC, RECORDINGS, XEON, artifacts, model_layers

from fp16doctor.attribution import build, build_ops
from fp16doctor.knowledge.kernels import is_reference_impl

CONV_LAYERS = ("conv2d", "conv2d_1", "conv2d_2", "conv2d_3")
pytest.importorskip("xprof", reason="the TensorFlow profiler traces need the profile extra (xprof)")


def _items(ops, layer, pass_name):
    return [item for item in ops["items"] if item["layer"] == layer and item["pass"] == pass_name]


@pytest.fixture(scope="module")
def xeon():
    return {p: build_ops(artifacts(XEON, p), model_layers(p)) for p in ("float32", "float16", "mixed_bfloat16")}


def test_xeon_merges_profiler_times_with_onednn_implementations(xeon):
    for ops in xeon.values():
        assert ops["source"] == "tf_profiler" and ops["sources"] == ["tf_profiler", "onednn_verbose"]
        assert ops["coverage"] >= 0.7


def test_xeon_float16_weight_gradients_run_the_reference_kernel_on_their_own_layer(xeon):
    ops = xeon["float16"]
    for layer in CONV_LAYERS:
        (item,) = _items(ops, layer, "backward_weights")
        assert item["impl"] == "ref:any" and is_reference_impl(item["impl"])
        assert item["dtype"] == "float16"
        assert item["ms_per_step"] > 1000
        assert "Conv2DBackpropFilter" in item["name"]
    # the biggest item of the step is one of them
    assert ops["items"][0]["impl"] == "ref:any"


def test_xeon_float32_and_bfloat16_weight_gradients(xeon):
    for layer in CONV_LAYERS:
        (f32,) = _items(xeon["float32"], layer, "backward_weights")
        assert f32["impl"] and not is_reference_impl(f32["impl"]) and f32["ms_per_step"] < 100
        (bf16,) = _items(xeon["mixed_bfloat16"], layer, "backward_weights")
        assert "amx" in bf16["impl"] and bf16["dtype"] == "bfloat16"


def test_xeon_onednn_alone_still_names_layers_by_shape():
    ops = build_ops({"onednn_lines": artifacts(XEON, "float16")["onednn_lines"]}, model_layers("float16"))
    assert ops["source"] == "onednn_verbose" and "sources" not in ops
    assert ops["window"]["wall_ms"] == 24473.1  # from the end marker
    assert "no timestamps" in ops["coverage_note"] and ops["coverage"] >= 0.7
    for layer in CONV_LAYERS:
        (item,) = _items(ops, layer, "backward_weights")
        assert item["impl"] == "ref:any" and item["ms_per_step"] > 1000
    first = _items(ops, "conv2d", "backward_weights")[0]
    assert first["shape"].startswith("mb32_ic3oc32_ih112oh112") and first["ms_per_step"] == 10698.8


def test_without_xprof_the_ops_say_what_is_lost(monkeypatch):
    monkeypatch.setattr(build, "xprof_available", lambda: False)
    ops = build_ops(artifacts(XEON, "float16"), model_layers("float16"))
    assert ops["source"] == "onednn_verbose" and "xprof not installed" in ops["missing"]


# ---- AMD EPYC, AVX2 only (this project's CI machine): TensorFlow keeps its own kernels on this CPU


@pytest.fixture(scope="module")
def epyc():
    return {p: build_ops(artifacts(EPYC, p), model_layers(p)) for p in ("float32", "float16", "mixed_bfloat16")}


def test_epyc_avx2_each_conv_layer_and_pass_is_timed(epyc):
    for precision, ops in epyc.items():
        assert ops["source"] == "tf_profiler" and ops["coverage"] >= 0.7
        for layer in CONV_LAYERS:
            for pass_name in ("backward_weights", "backward_data" if layer != "conv2d" else "forward"):
                (item,) = [i for i in _items(ops, layer, pass_name) if "Conv" in i["op_type"]]
                assert item["ms_per_step"] > 0
                assert item["dtype"] == {"mixed_bfloat16": "bfloat16"}.get(precision, precision)


def test_epyc_avx2_runs_no_onednn_convolution_and_no_reference_kernel(epyc):
    for ops in epyc.values():
        assert "sources" not in ops  # only gemm_api lines: nothing to give the TensorFlow ops
        assert not any(item["op_type"].startswith("_Mkl") for item in ops["items"])
        assert not any(is_reference_impl(item["impl"]) for item in ops["items"])


# ---- Keras 3 on PyTorch (CPU), TF1 step stats, a public GPU trace


def _recorded(path):
    return json.loads(path.read_text())


@pytest.mark.parametrize("precision", ["float32", "float16"])
def test_torch_profiler_recording(precision):
    data = _recorded(RECORDINGS / "cpu-epyc-torch2.13-keras3" / f"{precision}.torch_events.json")
    ops = build_ops({"window": data["window"], "torch_events": data["torch_events"]}, data["model_layers"])
    assert ops["source"] == "torch_profiler" and ops["coverage"] >= 0.7
    convs = [i for i in ops["items"] if i["layer"] == "conv2d" and i["pass"] == "forward" and i["impl"]]
    assert convs and all(i["dtype"] == precision for i in convs)
    backward = {i["layer"] for i in ops["items"] if i["pass"].startswith("backward")}
    assert {"conv2d", "conv2d_1", "dense"} <= backward  # layers reach backward ops through autograd sequence numbers
    impls = {i["impl"] for i in convs}
    if precision == "float32":
        assert impls == {"aten::mkldnn_convolution"}
    else:  # this torch's CPU float16 convolution takes the slow (im2col + GEMM) path
        assert all(is_reference_impl(impl) for impl in impls)


def test_tf1_step_stats_recording():
    data = _recorded(RECORDINGS / "cpu-epyc-tf1-run-metadata" / "float32.step_stats.json")
    ops = build_ops({"window": data["window"], "tf1_step_stats": data["tf1_step_stats"]}, data["model_layers"])
    assert ops["source"] == "tf1_run_metadata" and ops["coverage"] > 0.5
    (filter_grad,) = [i for i in _items(ops, "conv2d_1", "backward_weights") if i["op_type"] == "Conv2DBackpropFilter"]
    assert filter_grad["dtype"] == "float32" and filter_grad["ms_per_step"] > 0
    assert {i["pass"] for i in ops["items"]} >= {"forward", "backward_data", "backward_weights", "optimizer"}
    assert any(i["layer"] == "dense" and i["pass"] == "backward_weights" for i in ops["items"])


def test_public_gpu_trace_lists_kernels_with_tensor_core_verdicts():
    ops = build_ops({"xplane_path": str(PUBLIC / "gpu-volta-tf2.xplane.pb")}, [])
    kernels = {i["impl"]: i["tensor_cores"] for i in ops["items"] if i.get("op_type") == "kernel"}
    assert kernels["volta_scudnn_128x64_relu_interior_nn_v1"] is False
    assert kernels["volta_sgemm_64x64_nn"] is False
    assert any(v is None for v in kernels.values())  # names the table does not know stay unknown
    assert "window's wall time is unknown" in ops["coverage_note"] and ops["coverage"] is None


def test_nothing_usable_gives_none():
    assert build_ops({}, []) is None
    assert build_ops({"onednn_lines": ["Epoch 1/1"]}, []) is None


def test_torch_ops_get_onednn_kernel_names_from_the_same_window():
    """Recorded by fp16doctor on an AVX2 EPYC (README beside it): the torch profiler's ops stay the ops
    (its coverage), and oneDNN's lines of the same window name the convolutions' kernels."""
    folder = RECORDINGS / "cpu-epyc-avx2-torch2.13-seed"
    data = json.loads(gzip.decompress((folder / "float32.torch_events.json.gz").read_bytes()))
    lines = (folder / "float32.onednn_verbose.log").read_text().splitlines()
    ops = build_ops({"window": data["window"], "torch_events": data["torch_events"], "onednn_lines": lines},
                    data["model_layers"])
    assert ops["source"] == "torch_profiler" and ops["sources"] == ["torch_profiler", "onednn_verbose"]
    assert ops["coverage"] >= 0.7
    assert not any(i["op_type"] == "convolution" for i in ops["items"])  # oneDNN's own records are not listed twice
    convs = [i for i in ops["items"] if i["layer"] in ("conv2d", "conv2d_1", "conv2d_2", "conv2d_3")
             and "conv" in i["name"] and i["ms_per_step"] > 1.0]
    assert convs and all(i["impl"] and ":avx2" in i["impl"] for i in convs), convs
    forward = [i for i in convs if i["pass"] == "forward"]
    assert forward and all(i["impl"].startswith("brg_conv_fwd") for i in forward)
    assert not any(is_reference_impl(i["impl"]) for i in ops["items"])


# ---- Keras 3 on JAX (CPU): HLO ops named by the programs' own metadata

JAX = RECORDINGS / "cpu-epyc-avx2-jax0.10-seed"


def _jax_ops(tmp_path, precision):
    run = json.loads((JAX / "runs.json").read_text())[precision]
    trace = tmp_path / f"{precision}.xplane.pb"
    trace.write_bytes(gzip.decompress((JAX / f"{precision}.xplane.pb.gz").read_bytes()))
    return build_ops({"window": run["window"], "xplane_path": str(trace), "xplane_framework": "jax"},
                     run["model_layers"])


@pytest.mark.parametrize("precision", ["float32", "float16"])
def test_jax_cpu_trace_gives_hlo_ops_with_layers_and_passes(tmp_path, precision):
    """Recorded by fp16doctor on an AVX2 EPYC (README beside it): xprof lists no framework ops for JAX on
    the CPU; the trace's HLO ops, named by the HloProto in its metadata plane, cover the window."""
    ops = _jax_ops(tmp_path, precision)
    assert ops["source"] == "jax_profiler" and ops["coverage"] >= 0.7
    convs = [i for i in ops["items"] if i["name"].endswith("/conv_general_dilated")]
    layers = {"conv2d", "conv2d_1", "conv2d_2", "conv2d_3"}
    for layer in layers:
        passes = {i["pass"] for i in convs if i["layer"] == layer}
        # The first conv needs no gradient for its input: no backward_data there.
        assert passes >= {"forward"} and (precision == "float16" or passes >= ({"backward_weights"} | (
            {"backward_data"} if layer != "conv2d" else set())))
    assert all(i["impl"] for i in convs) and any(i["dtype"] == precision for i in ops["items"])
    assert any(i["pass"] == "optimizer" for i in ops["items"])
    assert any(i["layer"] == "dense" for i in ops["items"])
    # XLA's own ops (no framework op) share one name: their numbers mean nothing across programs.
    unnamed = [i for i in ops["items"] if i["layer"] is None and i["impl"].startswith("wrapped_iota")]
    assert unnamed and {i["name"] for i in unnamed} == {build.UNNAMED_XLA_OPS}


def test_xla_pass_rules():
    from fp16doctor.attribution.xla_hlo import jax_pass, jax_scope

    conv = {"name": "conv2d_1", "kernel": [3, 3], "in_channels": 32, "out_channels": 64}
    assert jax_scope("jit(train_step)/transpose(jvp(conv2d_1))/conv_general_dilated") == [
        "train_step", "conv2d_1", "conv_general_dilated"]
    assert jax_pass("jit(train_step)/jvp(conv2d_1)/conv_general_dilated", [8, 28, 42, 64], conv) == "forward"
    grad = "jit(train_step)/transpose(jvp(conv2d_1))/conv_general_dilated"
    assert jax_pass(grad, [64, 3, 3, 32], conv) == "backward_weights"  # the kernel's dims, any order
    assert jax_pass(grad, [8, 56, 84, 32], conv) == "backward_data"
    assert jax_pass("jit(train_step)/transpose(jvp(conv2d_1))/reduce_sum", [64], conv) == "backward_weights"
    assert jax_pass("jit(train_step)/rm_sprop/sub", [3, 3, 32, 64], conv) == "optimizer"
    assert jax_pass("jit(train_step)/jvp(conv2d_1)/convert_element_type", [8], conv) == "cast"
    assert jax_pass("", [64, 14], None, "transpose_copy_fusion.3") == "layout"
    assert jax_pass("", [64, 14], None, "wrapped_iota.2") == "other"


def test_hlo_events_take_nested_ops_out_of_their_parents_self_time():
    from fp16doctor.attribution.xla_hlo import hlo_events

    def event(op, ts, dur, tid=1):
        return {"ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": tid, "name": op,
                "args": {"hlo_module": "jit_step", "hlo_op": op}}

    trace = {"traceEvents": [event("while.1", 0, 100), event("fusion.2", 10, 30), event("fusion.3", 50, 20),
                             event("fusion.2", 0, 40, tid=2), {"ph": "X", "ts": 0, "dur": 5, "name": "python"}]}
    found = hlo_events(trace)
    assert found[("jit_step", "while.1")]["self_us"] == 50.0
    assert found[("jit_step", "fusion.2")]["self_us"] == 70.0
    assert found[("jit_step", "fusion.2")]["intervals"] == [(10.0, 40.0), (0.0, 40.0)]
    assert len(found) == 3


def test_xla_float16_convolutions_rewritten_to_float32_keep_their_layer_by_shape(tmp_path):
    """XLA's CPU backend computes float16 convolutions in float32; the new instructions carry no op name.
    Their layer and pass come from their shapes: the recorded float16 step's weight gradients land on the
    conv whose kernel they match."""
    ops = _jax_ops(tmp_path, "float16")
    by_shape = [i for i in ops["items"] if i["name"].endswith("layer from its shape)")]
    weights = {i["layer"] for i in by_shape if i["pass"] == "backward_weights"}
    assert weights >= {"conv2d", "conv2d_1", "conv2d_2", "conv2d_3"}
    assert all(i["dtype"] == "float32" for i in by_shape)  # computed in float32, as XLA rewrote them


def test_a_jax_float16_weight_gradient_pairs_with_its_float32_one(tmp_path):
    """float16's rewritten convolution (no op name, layer by shape) and float32's named one are the same
    kind of op on the same layer and pass, so the analysis compares them, not each with nothing."""
    from fp16doctor.analysis.context import OpItem

    keys = {}
    for precision in ("float32", "float16"):
        ops = _jax_ops(tmp_path, precision)
        keys[precision] = {OpItem(layer=i["layer"], pass_=i["pass"], name=i["name"], impl=i["impl"],
                                  dtype=i["dtype"], tensor_cores=i["tensor_cores"], ms_per_step=i["ms_per_step"],
                                  calls_per_step=i["calls_per_step"], op_type=i.get("op_type")).key
                           for i in ops["items"] if i["layer"] == "conv2d_1" and i["pass"] == "backward_weights"
                           and i["ms_per_step"] > 10}
    assert keys["float16"] == keys["float32"] == {("conv2d_1", "backward_weights", "conv")}


# ---- TensorFlow with Keras' image generator (tf.data from_generator)

GENERATOR = RECORDINGS / "cpu-epyc-avx2-tf2.21-generator"


def _generator_ops(tmp_path, precision):
    run = json.loads((GENERATOR / "runs.json").read_text())[precision]
    trace = tmp_path / f"{precision}.xplane.pb"
    trace.write_bytes(gzip.decompress((GENERATOR / f"{precision}.xplane.pb.gz").read_bytes()))
    return build_ops({"window": run["window"], "xplane_path": str(trace)}, run["model_layers"])


@pytest.mark.parametrize("precision", ["float32", "float16"])
def test_the_generators_python_is_input_time_counted_once(tmp_path, precision):
    """Recorded by fp16doctor (README beside it): the generator's Python runs in a PyFunc op that the trace also
    times inside its dataset op. It is the input pipeline's, not forward compute, and listed once."""
    ops = _generator_ops(tmp_path, precision)
    assert ops["source"] == "tf_profiler" and ops["coverage"] >= 0.7
    assert not [i for i in ops["items"] if i["op_type"] in build.PY_FUNCTION_TYPES]
    (generator,) = [i for i in ops["items"] if i["name"].endswith("::Generator")]
    assert generator["pass"] == "input" and generator["includes"] == ["PyFunc"]
    assert generator["ms_per_step"] > 0
    assert not [i for i in ops["items"] if i["layer"] is None and i["pass"] == "forward" and i["ms_per_step"] > 1]
    # Every op of the tf.function's body is named under StatefulPartitionedCall/: the scopes under it decide.
    for item in ops["items"]:
        scopes = item["name"].split("/")
        if "gradient_tape" in scopes:
            assert item["pass"] not in ("forward", "optimizer"), item
        if "rm_sprop" in scopes:
            assert item["pass"] == "optimizer", item
    assert {"backward_weights", "backward_data", "optimizer", "forward", "input"} <= {i["pass"] for i in ops["items"]}


@pytest.mark.parametrize(("name", "op_type", "expected"), [
    ("StatefulPartitionedCall/gradient_tape/sequential_1/dense_1/MatMul/MatMul_1", "MatMul", "backward_weights"),
    ("StatefulPartitionedCall/gradient_tape/sequential_1/dense_1/MatMul/MatMul", "MatMul", "backward_data"),
    ("StatefulPartitionedCall/rm_sprop/Square_6", "Square", "optimizer"),
    ("PartitionedCall/StatefulPartitionedCall_1/loss_scale_optimizer/AssignVariableOp", "AssignVariableOp",
     "optimizer"),
    ("StatefulPartitionedCall/sequential_1/conv2d_1/convolution", "Conv2D", "forward"),
    ("gradient_tape/sequential/conv2d/Conv2DBackpropFilter", "Conv2DBackpropFilter", "backward_weights"),
    ("training/RMSprop/gradients/conv2d_1/Conv2D_grad/Conv2DBackpropInput", "Conv2DBackpropInput", "backward_data"),
])
def test_tensorflow_passes_read_the_scopes_under_the_function_call(name, op_type, expected):
    from fp16doctor.attribution.passes import tf_pass

    assert tf_pass(name, op_type) == expected


def test_a_python_op_with_no_dataset_op_to_hold_it_stays_listed_as_input():
    records = [build.OpRecord("PyFunc", "forward", 40.0, 2, op_type="PyFunc", intervals=[(0.0, 20.0)]),
               build.OpRecord("Iterator::Root", "input", 0.5, 2, op_type="Dataset"),
               build.OpRecord("model/lambda/PyFunc", "forward", 5.0, 2, layer="lambda", op_type="PyFunc")]
    kept = build.fold_python_input(records)
    assert [(r.name, r.pass_) for r in kept] == [("PyFunc", "input"), ("Iterator::Root", "input"),
                                                 ("model/lambda/PyFunc", "forward")]


def test_a_window_cut_inside_its_step_lists_the_running_primitive_in_flight():
    """The real cut window (recordings/cpu-epyc-avx2-tf2.21-cut-in-step): no trace (TensorFlow writes it only when
    the profiler stops), so oneDNN's lines are the source, and the convolution still running at the cut is an op,
    marked in_flight, its time bounded by the cut; the coverage note says so."""
    cut = RECORDINGS / "cpu-epyc-avx2-tf2.21-cut-in-step"
    result = json.loads((cut / "float32.result.json").read_text())
    lines = (cut / "float32.bound_step.onednn_verbose.log").read_text().splitlines()
    ops = build_ops({"window": result["window"], "onednn_lines": lines}, result["model_layers"])
    assert ops is not None and ops["source"] == "onednn_verbose"
    running = [item for item in ops["items"] if item.get("in_flight")]
    assert [(i["layer"], i["pass"], i["impl"]) for i in running] == [("conv2d_1", "forward", "brg_conv_fwd:avx2")]
    assert 0 < running[0]["ms_per_step"] < result["window"]["wall_ms"]
    assert "in_flight" in ops["coverage_note"]
    # The same lines in a window that was not cut: creation lines name nothing, as before.
    window = {k: v for k, v in result["window"].items() if k not in ("cut_in_step", "cut_at_ms")}
    plain = build_ops({"window": window, "onednn_lines": lines}, result["model_layers"])
    assert plain is not None and not any(item.get("in_flight") for item in plain["items"])
