"""TensorFlow 1.x ``RunMetadata.step_stats`` (RunOptions(trace_level=FULL_TRACE)), as
``google.protobuf.json_format.MessageToDict`` gives it, -> op records.

Shape (tensorflow/core/framework/step_stats.proto): devStats[] {device, nodeStats[] {nodeName, allStartMicros,
opStartRelMicros, opEndRelMicros, allEndRelMicros, timelineLabel}}; int64 fields arrive as strings. CPU and
GPU compute devices label a node "name = Type(inputs)"; with CUPTI, GPU ``.../stream:all`` devices list the
kernels, nodeName "op_name:OpType" (or the op name) and timelineLabel the kernel's name. snake_case keys
(``dev_stats`` ...) from ``preserving_proto_field_name=True`` are read too. Checked on TensorFlow 1.7.0's own
traces (the tf1.7-cpu stack: microsecond fields only, no ``*Nanos``) and on tf_keras's compat.v1 ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from fp16doctor.attribution.layers import ScopeResolver
from fp16doctor.attribution.passes import tf_pass
from fp16doctor.attribution.records import OpRecord
from fp16doctor.errors import DoctorError
from fp16doctor.knowledge.kernels import tensor_core_use

_LABEL_TYPE = re.compile(r"=\s*([A-Za-z0-9_]+)\(")
# tensorflow/core/framework/types.proto names -> the results' names.
TF_DTYPES = {"DT_FLOAT": "float32", "DT_HALF": "float16", "DT_BFLOAT16": "bfloat16", "DT_DOUBLE": "float64"}


def _output_dtype(node: Mapping[str, Any]) -> str | None:
    for output in node.get("output") or []:
        description = output.get("tensorDescription", output.get("tensor_description")) or {}
        dtype = TF_DTYPES.get(str(description.get("dtype")))
        if dtype:
            return dtype
    return None


def _get(node: Mapping[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    return node.get(camel, node.get(snake, default))


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def records(step_stats: Mapping[str, Any], model_layers: Sequence[Mapping[str, Any]]) -> list[OpRecord]:
    if not isinstance(step_stats, Mapping):
        raise DoctorError("tf1_step_stats is not a dict", "pass MessageToDict(run_metadata.step_stats)")
    devices = _get(step_stats, "devStats", "dev_stats", []) or []
    kernel_devices = [d for d in devices if str(d.get("device", "")).endswith("stream:all")]
    compute_devices = [d for d in devices if "stream" not in str(d.get("device", ""))
                       and "memcpy" not in str(d.get("device", ""))]
    op_types: dict[str, str] = {}
    for device in compute_devices:
        for node in _get(device, "nodeStats", "node_stats", []) or []:
            match = _LABEL_TYPE.search(str(_get(node, "timelineLabel", "timeline_label", "")))
            if match:
                op_types[str(_get(node, "nodeName", "node_name", ""))] = match.group(1)
    use_kernels = bool(kernel_devices)
    chosen = kernel_devices if use_kernels else compute_devices
    grouped: dict[str, OpRecord] = {}
    kernels_of: dict[str, dict[str, float]] = {}
    names: list[str] = []
    for device in chosen:
        for node in _get(device, "nodeStats", "node_stats", []) or []:
            raw_name = str(_get(node, "nodeName", "node_name", ""))
            if not raw_name or raw_name in ("_SOURCE", "_SINK"):
                continue
            name, _, type_suffix = raw_name.partition(":")
            op_type = op_types.get(name) or type_suffix or None
            start_us = _int(_get(node, "allStartMicros", "all_start_micros"))
            duration_us = _int(_get(node, "allEndRelMicros", "all_end_rel_micros")) or _int(
                _get(node, "opEndRelMicros", "op_end_rel_micros"))
            record = grouped.get(name)
            if record is None:
                record = grouped[name] = OpRecord(name=name, pass_=tf_pass(name, op_type or ""), total_ms=0.0,
                                                  calls=0, op_type=op_type)
                names.append(name)
            record.total_ms += duration_us / 1000.0
            record.calls += 1
            record.dtype = record.dtype or _output_dtype(node)
            if start_us:
                record.intervals.append((start_us / 1000.0, (start_us + duration_us) / 1000.0))
            if use_kernels:
                label = str(_get(node, "timelineLabel", "timeline_label", ""))
                times = kernels_of.setdefault(name, {})
                times[label] = times.get(label, 0.0) + duration_us
    resolver = ScopeResolver(model_layers, names)
    for name, record in grouped.items():
        record.layer = resolver.layer_of(name, record.op_type or "")
        kernel_times = kernels_of.get(name) or {}
        if kernel_times:
            ordered = sorted(kernel_times, key=lambda k: -kernel_times[k])
            record.impl = ordered[0]
            verdicts = [tensor_core_use(k) for k in ordered]
            record.tensor_cores = True if True in verdicts else (False if all(v is False for v in verdicts) else None)
    return list(grouped.values())
