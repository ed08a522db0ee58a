"""torch.profiler events (the list fp16doctor/workload/profile_export.py writes; format in its docstring)
-> op records. On a GPU run an op's time is its kernels' device time, else its own CPU time."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from fp16doctor.attribution.passes import onednn_torch_pass, torch_pass
from fp16doctor.attribution.records import OpRecord, self_segments
from fp16doctor.errors import DoctorError
from fp16doctor.knowledge.kernels import tensor_core_use

# torch's dtype names as the profiler prints them (c10 ScalarType names) -> the results' names.
TORCH_DTYPES = {
    "float": "float32",
    "c10::Half": "float16",
    "c10::BFloat16": "bfloat16",
    "double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
}


# aten ops that name the backend implementation they are (aten/src/ATen/native/native_functions.yaml).
_IMPLEMENTATION_OP = re.compile(r"^aten::(mkldnn_|_mkldnn|_slow_conv|slow_conv|thnn_|_nnpack_spatial|cudnn_|miopen_)")


def _dtype(dtypes: Sequence[Any]) -> str | None:
    for name in dtypes:
        if name in TORCH_DTYPES:
            return TORCH_DTYPES[name]
    return None


def _tensor_cores(kernel_names: Sequence[str]) -> bool | None:
    verdicts = [tensor_core_use(name) for name in kernel_names]
    if any(v is True for v in verdicts):
        return True
    if verdicts and all(v is False for v in verdicts):
        return False
    return None


def records(events: Sequence[Mapping[str, Any]], model_layers: Sequence[Mapping[str, Any]]) -> list[OpRecord]:
    if not isinstance(events, list | tuple):
        raise DoctorError("torch_events is not a list", "produce it with workload.profile_export.export_torch_events")
    on_device = any(event.get("kernels") for event in events if isinstance(event, Mapping))
    layer_names = {str(layer.get("name")) for layer in model_layers}
    grouped: dict[tuple[Any, ...], OpRecord] = {}
    kernels_of: dict[tuple[Any, ...], dict[str, float]] = {}
    spans_by_thread: dict[Any, list[tuple[float, float, tuple[Any, ...]]]] = {}
    for event in events:
        if not isinstance(event, Mapping) or "name" not in event:
            continue
        name = str(event["name"])
        kernels = [k for k in event.get("kernels") or [] if isinstance(k, Mapping)]
        own_ms = (float(event.get("self_device_us") or 0.0) if on_device else float(event.get("self_cpu_us") or 0.0))
        own_ms /= 1000.0
        pass_name = torch_pass(name, bool(event.get("backward")))
        if kernels:
            pass_name = onednn_torch_pass(max(kernels, key=lambda k: k.get("device_us") or 0)["name"], pass_name)
        layer = event.get("layer")
        layer = str(layer) if layer is not None and (not layer_names or str(layer) in layer_names) else None
        dtype = _dtype(event.get("dtypes") or [])
        key = (name, layer, pass_name, dtype)
        record = grouped.get(key)
        if record is None:
            record = grouped[key] = OpRecord(name=name, pass_=pass_name, total_ms=0.0, calls=0, layer=layer,
                                             dtype=dtype, op_type=name,
                                             impl=name if _IMPLEMENTATION_OP.match(name) else None)
            shapes = event.get("shapes")
            if shapes:
                record.shape = "x".join(str(d) for d in shapes[0]) if shapes[0] else None
        record.total_ms += own_ms
        record.calls += 1
        if not on_device and event.get("end_us") is not None:
            spans_by_thread.setdefault(event.get("thread"), []).append(
                (float(event.get("start_us") or 0.0) / 1000.0, float(event["end_us"]) / 1000.0, key))
        for kernel in kernels:
            times = kernels_of.setdefault(key, {})
            kernel_name = str(kernel.get("name"))
            times[kernel_name] = times.get(kernel_name, 0.0) + float(kernel.get("device_us") or 0)
    # An aten op's span holds the ops it calls (aten::conv2d holds aten::convolution ...): each op keeps the
    # instants it ran itself, as its self time counts them.
    for spans in spans_by_thread.values():
        for lo, hi, key in self_segments(spans):
            grouped[key].intervals.append((lo, hi))
    for key, times in kernels_of.items():
        record = grouped[key]
        ordered = sorted(times, key=lambda k: -times[k])
        record.impl = ordered[0]
        record.tensor_cores = _tensor_cores(ordered)
        if len(ordered) > 1:
            record.extra["kernels"] = ordered[:5]
    return [record for record in grouped.values() if record.total_ms > 0]
