"""build_ops: raw profile artifacts of one run -> its ``runs[].ops`` object (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fp16doctor.attribution import device_time, onednn, tf1_step_stats, torch_events
from fp16doctor.attribution.layers import OnednnLayerMatcher, ScopeResolver
from fp16doctor.attribution.passes import tf_pass
from fp16doctor.attribution.records import OpRecord, overlap_wall_ms, union_ms
from fp16doctor.attribution.xla_hlo import jax_pass, jax_scope, match_by_shape
from fp16doctor.attribution.xplane import XPROF_MISSING, XplaneData, read_xplane, xprof_available
from fp16doctor.knowledge.kernels import tensor_core_use
from fp16doctor.results import LOW_COVERAGE

# Below this share of the window's wall time the listed ops leave too much unexplained to rank causes on.

# oneDNN primitive kinds that can implement a TensorFlow op type (matched on the op type's words).
_TF_TYPE_TO_PRIMITIVES = (
    ("Conv", ("convolution", "deconvolution")),
    ("Pool", ("pooling",)),
    ("MatMul", ("inner_product", "matmul", "gemm_api")),
    ("Relu", ("eltwise",)),
    ("Elu", ("eltwise",)),
    ("Tanh", ("eltwise",)),
    ("Sigmoid", ("eltwise",)),
    ("BatchNorm", ("batch_normalization",)),
    ("Softmax", ("softmax",)),
)
# aten op names (lower case) -> the oneDNN primitives that run them on the CPU (PyTorch's mkldnn ops).
_TORCH_TYPE_TO_PRIMITIVES = (
    ("conv", ("convolution", "deconvolution")),
    ("pool", ("pooling",)),
    ("linear", ("inner_product", "matmul", "gemm_api")),
    ("addmm", ("inner_product", "matmul", "gemm_api")),
    ("matmul", ("matmul", "gemm_api")),
    ("aten::mm", ("matmul", "gemm_api")),
    ("relu", ("eltwise",)),
    ("threshold", ("eltwise",)),
    ("sigmoid", ("eltwise",)),
    ("tanh", ("eltwise",)),
    ("batch_norm", ("batch_normalization",)),
    ("softmax", ("softmax",)),
)


def _layer_dtypes(model_layers: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return {str(layer["name"]): str(layer["compute_dtype"]) for layer in model_layers
            if layer.get("name") and layer.get("compute_dtype")}


# ---------------------------------------------------------------- oneDNN


def _onednn_records(execs: list[onednn.OnednnExec], model_layers: Sequence[Mapping[str, Any]]) -> list[OpRecord]:
    matcher = OnednnLayerMatcher(model_layers)
    grouped: dict[tuple[Any, ...], OpRecord] = {}
    for record in execs:
        layer, pass_name = matcher.match(record)
        pass_name = pass_name or "other"
        running = record.operation == "in_flight"
        key = (record.primitive, record.impl, pass_name, record.desc, layer, record.src_dtype, running)
        op = grouped.get(key)
        if op is None:
            op = grouped[key] = OpRecord(
                name=f"{record.primitive}:{pass_name}:{record.desc}",
                pass_=pass_name,
                total_ms=0.0,
                calls=0,
                layer=layer,
                dtype=record.src_dtype,
                impl=record.impl or None,
                op_type=record.primitive,
                shape=record.desc,
            )
            if running:
                # Still running when the step was cut: its time is the most it can have run before the cut.
                op.extra["in_flight"] = True
        op.total_ms += record.ms
        op.calls += 1
        if record.start_ms is not None:
            op.intervals.append((record.start_ms, record.start_ms + record.ms))
    return list(grouped.values())


# ---------------------------------------------------------------- TensorFlow profiler


def _xplane_records(data: XplaneData, model_layers: Sequence[Mapping[str, Any]]) -> list[OpRecord]:
    device_names = {op.name for op in data.ops if op.on_device}
    kernels_by_op: dict[str, list[Any]] = {}
    for kernel in data.kernels:
        kernels_by_op.setdefault(kernel.op_name, []).append(kernel)
    resolver = ScopeResolver(model_layers, [op.name for op in data.ops] + list(kernels_by_op))
    hlo_resolver = ScopeResolver(model_layers, ["/".join(jax_scope(op.name)) for op in data.ops if op.hlo_op])
    layers_by_name = {str(entry.get("name")): entry for entry in model_layers}
    records = []
    for op in data.ops:
        if op.name in device_names and not op.on_device:
            continue  # the host side of a GPU op is its launch; the device row carries its time
        if op.hlo_op is not None:
            records.append(_hlo_record(op, hlo_resolver, model_layers, layers_by_name))
            continue
        record = OpRecord(
            name=op.name,
            pass_=tf_pass(op.name, op.op_type),
            total_ms=op.self_us / 1000.0,
            calls=op.occurrences,
            layer=resolver.layer_of(op.name, op.op_type),
            op_type=op.op_type,
            intervals=[(lo / 1000.0, hi / 1000.0) for lo, hi in op.intervals],
        )
        kernels = sorted(kernels_by_op.get(op.name, []), key=lambda k: -k.total_us)
        if kernels:
            record.impl = kernels[0].name
            record.tensor_cores = _kernel_tc(kernels[0])
            if len(kernels) > 1:
                record.extra["kernels"] = [k.name for k in kernels[:5]]
        records.append(record)
    if not device_names:
        # Kernels that name no op (older traces): list them on their own, by kernel name.
        for kernel in kernels_by_op.get("", []):
            records.append(OpRecord(
                name=kernel.name, pass_="other", total_ms=kernel.total_us / 1000.0, calls=kernel.occurrences,
                impl=kernel.name, tensor_cores=_kernel_tc(kernel), op_type="kernel"))
    return records


# TensorFlow ops that run Python: tf.data's from_generator body and numpy_function / py_function.
PY_FUNCTION_TYPES = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
# A dataset op whose self time is at least this share of a Python op's time can hold it.
_HOLDS = 0.95


def fold_python_input(records: list[OpRecord]) -> list[OpRecord]:
    """A Python op outside any layer is the input pipeline's (tf.data runs from_generator's generator and
    numpy_function in one; the model's own would carry its layer's scope). The trace also times the dataset op
    that called it, whose self time includes the Python op's (TF 2.21, a Keras 3 generator: Generator 249.6 ms,
    PyFunc 248.5 ms), so it is folded into the tightest such dataset op, its intervals kept for coverage (dataset
    events carry none), instead of counting the same time twice and, worse, as forward compute."""
    datasets = [r for r in records if r.op_type == "Dataset"]
    kept = []
    for record in records:
        if record.op_type not in PY_FUNCTION_TYPES or record.layer is not None:
            kept.append(record)
            continue
        record.pass_ = "input"
        holders = [d for d in datasets if d.total_ms >= _HOLDS * record.total_ms]
        if not holders:
            kept.append(record)
            continue
        holder = min(holders, key=lambda d: d.total_ms)
        holder.intervals.extend(record.intervals)
        inner = holder.extra.setdefault("includes", [])
        if isinstance(inner, list) and record.name not in inner:
            inner.append(record.name)
    return kept


UNNAMED_XLA_OPS = "XLA's own ops (no framework op)"


def _hlo_record(op: Any, resolver: ScopeResolver, model_layers: Sequence[Mapping[str, Any]],
                layers_by_name: Mapping[str, Mapping[str, Any]]) -> OpRecord:
    """One HLO op of an XLA program on the CPU (attribution/xla_hlo.py): its layer from its framework op
    name, or, when XLA's rewrites left none, from its shape."""
    named = op.name != op.hlo_op
    layer = resolver.layer_of("/".join(jax_scope(op.name))) if named else None
    pass_ = jax_pass(op.name if named else "", op.dims, layers_by_name.get(layer or ""), op.hlo_op)
    name, op_type = op.name, op.op_type
    if not named and (match := match_by_shape(op.inner_opcode or "", op.dims, model_layers)) is not None:
        layer, pass_ = match
        name = f"{op.hlo_op} ({op.inner_opcode}, layer from its shape)"
        op_type = op.inner_opcode  # the kind of op, as the named ones of another run say it (convolution)
    elif not named:
        # XLA's numbering of its own ops (wrapped_iota.3) differs from one program to the next: one name
        # for all of them, so two runs compare their total, not unrelated ops that share a number.
        name = UNNAMED_XLA_OPS
    return OpRecord(name=name, pass_=pass_, total_ms=op.self_us / 1000.0, calls=op.occurrences, layer=layer,
                    dtype=op.dtype, impl=op.hlo_op, op_type=op_type, shape="x".join(str(d) for d in op.dims) or None,
                    intervals=[(lo / 1000.0, hi / 1000.0) for lo, hi in op.intervals])


def _kernel_tc(kernel: Any) -> bool | None:
    by_name = tensor_core_use(kernel.name)
    if by_name is not None:
        return by_name
    return True if kernel.uses_tensor_core else None  # xprof's "false" is not proof: it only knows some names


def _merge_impl(op_records: list[OpRecord], dnn_records: list[OpRecord], torch: bool = False) -> int:
    """Gives each framework op (TensorFlow's, or with `torch` PyTorch's aten ops) the oneDNN implementation
    that ran it (same layer, pass and kind, the one with the most time); returns how many ops got one."""
    merged = 0
    type_map = _TORCH_TYPE_TO_PRIMITIVES if torch else _TF_TYPE_TO_PRIMITIVES
    for record in op_records:
        if record.layer is None or record.op_type is None:
            continue
        op_type = record.op_type.lower() if torch else record.op_type
        kinds: tuple[str, ...] = ()
        for word, primitives in type_map:
            if word in op_type:
                kinds = primitives
                break
        # PyTorch's convolution_backward computes both gradients in one op: any backward pass matches it.
        both_backward = torch and record.pass_.startswith("backward")
        candidates = [
            d for d in dnn_records
            if d.layer == record.layer and d.op_type in kinds and d.impl
            and (d.pass_ == record.pass_ or (both_backward and d.pass_.startswith("backward")))
        ]
        if not candidates:
            continue
        best = max(candidates, key=lambda d: d.total_ms)
        record.impl = best.impl
        record.dtype = best.dtype or record.dtype
        record.extra["onednn_ms"] = round(sum(d.total_ms for d in candidates), 3)
        merged += 1
    return merged


# ---------------------------------------------------------------- the entry point


def build_ops(artifacts: Mapping[str, Any], model_layers: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Turns one run's raw profile artifacts into its ``ops`` object; None when nothing usable was given.

    ``artifacts`` (all keys optional): ``window`` {steps, wall_ms (per step), kind}, ``onednn_lines`` (raw
    verbose lines, window markers allowed), ``xplane_path`` (+ ``xplane_framework``: "tensorflow" | "jax"),
    ``torch_events`` (fp16doctor.workload.profile_export's list), ``tf1_step_stats`` (RunMetadata.step_stats
    as a dict). A trace that cannot be read raises DoctorError.
    """
    window = dict(artifacts.get("window") or {})
    steps = max(int(window.get("steps") or 1), 1)
    notes: list[str] = []
    missing: list[str] = []
    sources: list[str] = []
    records: list[OpRecord] = []

    dnn_records: list[OpRecord] = []
    lines = artifacts.get("onednn_lines")
    if lines:
        window_lines, marker_wall_ms = onednn.window_lines(str(line) for line in lines)
        if window.get("wall_ms") is None and marker_wall_ms is not None:
            window["wall_ms"] = marker_wall_ms
        execs = onednn.parse_lines(window_lines)
        cut_at_ms = window.get("cut_at_ms")
        if window.get("cut_in_step") and isinstance(cut_at_ms, (int, float)):
            execs += onednn.in_flight(window_lines, float(cut_at_ms), len(execs))
        dnn_records = _onednn_records(execs, model_layers)

    xplane_path = artifacts.get("xplane_path")
    if xplane_path:
        if xprof_available():
            source = "jax_profiler" if artifacts.get("xplane_framework") == "jax" else "tf_profiler"
            tf_records = fold_python_input(_xplane_records(read_xplane(str(xplane_path)), model_layers))
            if tf_records:
                sources.append(source)
                records = tf_records
                if dnn_records:
                    if _merge_impl(tf_records, dnn_records):
                        sources.append("onednn_verbose")
                    dnn_records = []  # their time is inside the TensorFlow ops; listing both would count it twice
        else:
            missing.append(XPROF_MISSING)

    events = artifacts.get("torch_events")
    if events and not records:
        # PyTorch's profiler sees every op; oneDNN's lines only its primitives: they name the kernels.
        records = torch_events.records(events, model_layers)
        if records:
            sources.append("torch_profiler")
            if dnn_records:
                if _merge_impl(records, dnn_records, torch=True):
                    sources.append("onednn_verbose")
                dnn_records = []  # their time is inside the torch ops

    if not records and dnn_records:
        records = dnn_records
        sources.append("onednn_verbose")

    step_stats = artifacts.get("tf1_step_stats")
    if step_stats and not records:
        records = tf1_step_stats.records(step_stats, model_layers)
        if records:
            sources.append("tf1_run_metadata")

    if not records:
        return None

    layer_dtypes = _layer_dtypes(model_layers)
    for record in records:
        if record.dtype is None and record.layer in layer_dtypes:
            record.dtype = layer_dtypes[record.layer]
    if any(record.intervals for record in records):
        # Self times overlap where ops run at once; each op's wall share is what the analysis compares.
        for record, wall_ms in zip(records, overlap_wall_ms(records), strict=True):
            record.wall_ms = wall_ms

    ops: dict[str, Any] = {"source": sources[0]}
    if len(sources) > 1:
        ops["sources"] = sources
    window.setdefault("steps", steps)
    ops["window"] = window
    wall_ms = window.get("wall_ms")
    coverage = None
    if wall_ms:
        total_wall = float(wall_ms) * steps
        intervals = [span for record in records for span in record.intervals]
        if intervals:
            coverage = min(union_ms(intervals) / total_wall, 1.0)
        else:
            coverage = min(sum(record.total_ms for record in records) / total_wall, 1.0)
            notes.append("no timestamps in this source: coverage is the sum of op times over the window's wall "
                         "time (capped at 1), so overlapping ops can overstate it")
    else:
        notes.append("the window's wall time is unknown: no coverage")
    ops["coverage"] = round(coverage, 4) if coverage is not None else None
    if window.get("cut_in_step"):
        notes.append("the window's step was cut inside, at the slow-step bound: an op marked in_flight was still "
                     "running then, its time the most it can have run before the cut")
    if window.get("epoch_start"):
        notes.append("the window holds an epoch's first step (one epoch is too short to leave it out): the time "
                     "between two epochs, the data iterator torn down and rebuilt, runs in no op")
    if coverage is not None and coverage < LOW_COVERAGE:
        notes.append(f"the listed ops account for only {coverage:.0%} of the window's wall time")
    if notes:
        ops["coverage_note"] = "; ".join(notes)
    if missing:
        ops["missing"] = "; ".join(missing)
    ops["items"] = [record.item(steps) for record in sorted(records, key=lambda r: -r.total_ms)]
    return ops


def build_device_time(artifacts: Mapping[str, Any]) -> dict[str, Any] | None:
    """One GPU run's ``runs[].device_time`` from its trace's device timestamps (docs/results-schema.md); None for a
    CPU run or a trace without device activity."""
    device = str(artifacts.get("device") or "gpu")
    if not device.lower().startswith("gpu"):
        return None
    window = artifacts.get("window") or {}
    wall_ms = window.get("wall_ms") if isinstance(window, Mapping) else None
    step_ms = float(wall_ms) if isinstance(wall_ms, int | float) else None
    steps = int(window.get("steps") or 1) if isinstance(window, Mapping) else 1
    events = artifacts.get("torch_events")
    found = None
    if isinstance(events, list | tuple) and events:
        found = device_time.from_events(events, steps, step_ms)
    elif artifacts.get("xplane_path") and xprof_available():
        source = "jax_profiler" if artifacts.get("xplane_framework") == "jax" else "tf_profiler"
        found = device_time.from_activity(read_xplane(str(artifacts["xplane_path"])).device_activity, steps, step_ms,
                                          source)
    return found.to_dict() if found is not None else None
