"""torch.profiler events (the list fp16doctor/workload/profile_export.py writes; format in its docstring)
-> op records. On a GPU run an op's time is its kernels' device time, else its own CPU time; a kernel or copy is
counted once, in the row of the op that launched it (device_time.py), and the input rows hold the host's time."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from fp16doctor.attribution.device_time import HOST_TIME, claimed_kernels, is_bookkeeping, is_device_event
from fp16doctor.attribution.passes import kernel_pass, torch_pass
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
    claimed = claimed_kernels(events) if on_device else set()
    layer_names = {str(layer.get("name")) for layer in model_layers}
    grouped: dict[tuple[Any, ...], OpRecord] = {}
    kernels_of: dict[tuple[Any, ...], dict[str, float]] = {}
    spans_by_thread: dict[Any, list[tuple[float, float, tuple[Any, ...]]]] = {}
    for event in events:
        if not isinstance(event, Mapping) or "name" not in event:
            continue
        name = str(event["name"])
        if is_bookkeeping(name):
            continue
        device_event = on_device and is_device_event(event, claimed)
        if device_event and name in claimed:
            continue  # its time is in the row of the op that launched it
        kernels = [k for k in event.get("kernels") or [] if isinstance(k, Mapping)]
        pass_name = torch_pass(name, bool(event.get("backward")))
        # The host's rows (the DataLoader's span that builds a batch) keep the host's time on a GPU too.
        host_row = on_device and not device_event and pass_name == "input"
        own_ms = (float(event.get("self_device_us") or 0.0) if on_device and not host_row
                  else float(event.get("self_cpu_us") or 0.0)) / 1000.0
        if device_event:
            pass_name = kernel_pass(name) or "other"
            own_ms = own_ms or max(float(event.get("end_us") or 0.0) - float(event.get("start_us") or 0.0), 0.0) / 1000
        if kernels:
            dominant = str(max(kernels, key=lambda k: k.get("device_us") or 0)["name"])
            pass_name = kernel_pass(dominant) or pass_name
        layer = event.get("layer")
        layer = str(layer) if layer is not None and (not layer_names or str(layer) in layer_names) else None
        dtype = _dtype(event.get("dtypes") or [])
        key = (name, layer, pass_name, dtype)
        record = grouped.get(key)
        if record is None:
            record = grouped[key] = OpRecord(name=name, pass_=pass_name, total_ms=0.0, calls=0, layer=layer,
                                             dtype=dtype, op_type=name,
                                             impl=name if _IMPLEMENTATION_OP.match(name) else None)
            if host_row:
                record.extra["time"] = HOST_TIME
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
