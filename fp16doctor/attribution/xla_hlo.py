"""XLA programs on the CPU (JAX's): the HLO ops a trace timed, named after the framework ops they came from.

On a GPU, xprof's ``framework_op_stats`` lists JAX's ops with their names. On the CPU it lists nothing:
the trace has one event per executed HLO op (``args.hlo_module`` / ``args.hlo_op``, e.g. ``ynn_fusion.12``)
on XLA's threads, and the trace's ``/host:metadata`` plane carries each compiled program as an ``HloProto``
(stat "Hlo Proto") whose instructions keep the op they came from in ``metadata.op_name``
(``jit(train_step)/transpose(jvp(conv2d_3))/conv_general_dilated``). This module reads both:

- ``hlo_events(trace)``: per (module, HLO op), the events' self intervals (a nested HLO op's time is its own);
- ``hlo_instructions(data, modules)``: per module, per entry instruction: ``op_name`` (from the fused
  computation's instructions when the fusion itself has none), ``opcode``, ``dims`` and ``dtype``;
- ``jax_scope(op_name)`` / ``jax_pass(...)``: the name scope without JAX's transformations, and the pass.

The protobuf messages are declared here with the few fields read, numbered as in XLA's
``xla/service/hlo.proto``, ``xla/xla_data.proto`` and TSL's ``tsl/profiler/protobuf/xplane.proto``;
google.protobuf skips every other field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fp16doctor.attribution.passes import OPTIMIZER_SCOPE
from fp16doctor.attribution.records import self_segments

HLO_PROTO_STAT = "Hlo Proto"
METADATA_PLANE = "/host:metadata"

# xla_data.proto PrimitiveType -> the results' dtype names.
XLA_DTYPES = {10: "float16", 11: "float32", 12: "float64", 16: "bfloat16"}

# (message, [(field, number, type, repeated, message type)]); types: "int64", "uint64", "int32", "string",
# "bytes", or a message name.
_SCHEMA: tuple[tuple[str, tuple[tuple[str, int, str, bool], ...]], ...] = (
    ("XStat", (("metadata_id", 1, "int64", False), ("uint64_value", 3, "uint64", False),
               ("bytes_value", 6, "bytes", False))),
    ("XStatMetadata", (("id", 1, "int64", False), ("name", 2, "string", False))),
    ("XEventMetadata", (("id", 1, "int64", False), ("name", 2, "string", False), ("stats", 5, "XStat", True))),
    ("EventMetadataEntry", (("key", 1, "int64", False), ("value", 2, "XEventMetadata", False))),
    ("StatMetadataEntry", (("key", 1, "int64", False), ("value", 2, "XStatMetadata", False))),
    ("XPlane", (("name", 2, "string", False), ("event_metadata", 4, "EventMetadataEntry", True),
                ("stat_metadata", 5, "StatMetadataEntry", True))),
    ("XSpace", (("planes", 1, "XPlane", True),)),
    ("OpMetadata", (("op_type", 1, "string", False), ("op_name", 2, "string", False))),
    ("ShapeProto", (("element_type", 2, "int32", False), ("dimensions", 3, "int64", True))),
    ("HloInstructionProto", (("name", 1, "string", False), ("opcode", 2, "string", False),
                             ("shape", 3, "ShapeProto", False), ("metadata", 7, "OpMetadata", False),
                             ("called_computation_ids", 38, "int64", True))),
    ("HloComputationProto", (("name", 1, "string", False), ("instructions", 2, "HloInstructionProto", True),
                             ("id", 5, "int64", False))),
    ("HloModuleProto", (("name", 1, "string", False), ("entry_computation_name", 2, "string", False),
                        ("computations", 3, "HloComputationProto", True))),
    ("HloProto", (("hlo_module", 1, "HloModuleProto", False),)),
)
_PACKAGE = "fp16doctor_xla_subset"
_classes: dict[str, Any] = {}


def _messages() -> dict[str, Any]:
    """The message classes, built once from _SCHEMA (the map fields as their repeated entry messages,
    which is how protobuf encodes a map on the wire)."""
    if _classes:
        return _classes
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    scalar = descriptor_pb2.FieldDescriptorProto
    types = {"int64": scalar.TYPE_INT64, "uint64": scalar.TYPE_UINT64, "int32": scalar.TYPE_INT32,
             "string": scalar.TYPE_STRING, "bytes": scalar.TYPE_BYTES}
    file = descriptor_pb2.FileDescriptorProto(name=f"{_PACKAGE}.proto", package=_PACKAGE, syntax="proto3")
    for name, fields in _SCHEMA:
        message = file.message_type.add(name=name)
        for field_name, number, kind, repeated in fields:
            field = message.field.add(name=field_name, number=number,
                                      label=scalar.LABEL_REPEATED if repeated else scalar.LABEL_OPTIONAL)
            if kind in types:
                field.type = types[kind]
            else:
                field.type = scalar.TYPE_MESSAGE
                field.type_name = f".{_PACKAGE}.{kind}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    for name, _ in _SCHEMA:
        _classes[name] = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
    return _classes


def hlo_instructions(data: bytes, modules: Iterable[str] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """module name -> entry instruction name -> {op_name, opcode, dims, dtype}, from an xplane's bytes.
    Only the modules named (all when None). Raises ValueError (google.protobuf's DecodeError) on a broken
    file; a trace without programs gives {}."""
    classes = _messages()
    space = classes["XSpace"]()
    space.ParseFromString(data)
    wanted = set(modules) if modules is not None else None
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for plane in space.planes:
        if plane.name != METADATA_PLANE:
            continue
        hlo_stat = {entry.key for entry in plane.stat_metadata if entry.value.name == HLO_PROTO_STAT}
        for entry in plane.event_metadata:
            for stat in entry.value.stats:
                if stat.metadata_id not in hlo_stat or not stat.bytes_value:
                    continue
                proto = classes["HloProto"]()
                proto.ParseFromString(stat.bytes_value)
                module = proto.hlo_module
                if wanted is not None and module.name not in wanted:
                    continue
                found[module.name] = _entry_instructions(module)
    return found


def _entry_instructions(module: Any) -> dict[str, dict[str, Any]]:
    by_id = {c.id: c for c in module.computations}
    entry = next((c for c in module.computations if c.name == module.entry_computation_name), None)
    if entry is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for ins in entry.instructions:
        op_name = ins.metadata.op_name
        inner = ins.opcode
        # A fusion: its fused instructions (called computations, to any depth) say what it does and,
        # when the fusion has no metadata of its own, what it came from (the root, last, wins).
        seen: set[int] = set()
        pending = list(ins.called_computation_ids)
        while pending:
            cid = pending.pop(0)
            if cid in seen or cid not in by_id:
                continue
            seen.add(cid)
            for fused in by_id[cid].instructions:
                if fused.opcode in _WORK_OPCODES:
                    inner = fused.opcode
                if not ins.metadata.op_name and fused.metadata.op_name:
                    op_name = fused.metadata.op_name
                pending += list(fused.called_computation_ids)
        out[ins.name] = {"op_name": op_name or None, "opcode": ins.opcode, "inner_opcode": inner,
                         "dims": list(ins.shape.dimensions), "dtype": XLA_DTYPES.get(ins.shape.element_type)}
    return out


# The HLO opcodes that do a layer's arithmetic (a fusion is named after them when it holds one).
_WORK_OPCODES = ("convolution", "dot")


def match_by_shape(
    opcode: str, dims: Sequence[int], model_layers: Sequence[Mapping[str, Any]],
) -> tuple[str, str] | None:
    """(layer, pass) of a convolution or dot that lost its framework op name in XLA's rewrites (XLA's CPU
    backend computes float16 convolutions in float32 and its new instructions carry no metadata): a
    gradient with a weight's shape is that layer's backward_weights, one with a layer's input shape (the
    layer before it's output, batch first) its backward_data. None when no layer, or more than one, fits."""
    if opcode not in _WORK_OPCODES or not dims:
        return None
    wanted = sorted(int(d) for d in dims)
    weights = [str(layer["name"]) for layer in model_layers if wanted in _variable_shapes(layer)[:1]]
    if len(weights) == 1:
        return weights[0], "backward_weights"
    inputs = []
    for before, layer in zip(model_layers, model_layers[1:], strict=False):
        kind = str(layer.get("type", ""))
        if ("Conv" in kind or "Dense" in kind) and list(before.get("output_shape") or []) == [int(d) for d in dims[1:]]:
            inputs.append(str(layer["name"]))
    if len(inputs) == 1:
        return inputs[0], "backward_data"
    return None


def hlo_events(trace: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """(module, HLO op) -> {"intervals": [(start_us, end_us)], "own": [...], "self_us": float}, from
    trace_viewer's events that carry ``args.hlo_op``. An HLO op run inside another on the same thread (a call, a
    while body) is taken out of its parent's self time and own intervals, so no time is counted twice."""
    events = trace.get("traceEvents", []) if isinstance(trace, Mapping) else []
    by_thread: dict[tuple[Any, Any], list[tuple[float, float, tuple[str, str]]]] = {}
    for event in events:
        if not isinstance(event, Mapping) or event.get("ph") != "X" or "dur" not in event:
            continue
        args = event.get("args") or {}
        op = args.get("hlo_op")
        if not op:
            continue
        start = float(event.get("ts", 0.0))
        key = (str(args.get("hlo_module") or ""), str(op))
        by_thread.setdefault((event.get("pid"), event.get("tid")), []).append((start, start + float(event["dur"]), key))
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for spans in by_thread.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_: list[tuple[float, float, tuple[str, str]]] = []
        for start, end, key in spans:
            while open_ and open_[-1][1] <= start:
                open_.pop()
            entry = found.setdefault(key, {"intervals": [], "own": [], "self_us": 0.0})
            entry["intervals"].append((start, end))
            entry["self_us"] += end - start
            if open_:  # nested in the op still open on this thread: not its parent's own time
                found[open_[-1][2]]["self_us"] -= end - start
            open_.append((start, end, key))
        for lo, hi, key in self_segments(spans):
            found[key]["own"].append((lo, hi))
    return found


_TRANSFORM = re.compile(r"^[A-Za-z_]\w*\((.*)\)$")
_LAYOUT_OPS = {"transpose", "rev", "copy", "reshape", "broadcast_in_dim", "squeeze", "expand_dims", "concatenate"}
_CAST_OPS = {"convert_element_type", "reduce_precision"}


def jax_scope(op_name: str) -> list[str]:
    """``jit(train_step)/transpose(jvp(conv2d_3))/conv_general_dilated`` -> [train_step, conv2d_3,
    conv_general_dilated]: each segment without JAX's transformations around it."""
    segments = []
    for segment in op_name.split("/"):
        while (match := _TRANSFORM.match(segment)) is not None:
            segment = match.group(1)
        segments.append(segment)
    return segments


def _variable_shapes(layer: Mapping[str, Any] | None) -> list[list[int]]:
    """The layer's weight and bias shapes, sorted (a gradient's dims in any order match them)."""
    if not layer:
        return []
    kernel = layer.get("kernel")
    cin, cout = layer.get("in_channels"), layer.get("out_channels")
    if isinstance(kernel, Sequence) and cin and cout:
        return [sorted([*map(int, kernel), int(cin), int(cout)]), [int(cout)]]
    fin, fout = layer.get("in_features"), layer.get("out_features")
    if fin and fout:
        return [sorted([int(fin), int(fout)]), [int(fout)]]
    return []


_LAYOUT_HLO = re.compile(r"^(transpose|copy|bitcast|reshape|concatenate|slice)")


def jax_pass(op_name: str, dims: Sequence[int], layer: Mapping[str, Any] | None, hlo_op: str = "") -> str:
    """The pass of one HLO op of a JAX training step, from its op_name and output dims: inside
    ``transpose(...)`` is the backward pass, and a backward op whose output has a weight's or bias's shape
    is that variable's gradient (backward_weights); the optimizer's scope is the update."""
    if not op_name:  # XLA's own copies and layout changes carry no framework op
        return "layout" if _LAYOUT_HLO.match(hlo_op) else "other"
    segments = op_name.split("/")
    primitive = jax_scope(op_name)[-1] if op_name else ""
    if any(OPTIMIZER_SCOPE.match(s) for s in jax_scope(op_name)):
        return "optimizer"
    if primitive in _CAST_OPS:
        return "cast"
    if primitive in _LAYOUT_OPS:
        return "layout"
    if any(s.startswith("transpose(") for s in segments):
        if sorted(int(d) for d in dims) in _variable_shapes(layer):
            return "backward_weights"
        return "backward_data"
    if any(s.startswith("jvp(") for s in segments):
        return "forward"
    return "other"
