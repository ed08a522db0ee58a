# -*- coding: utf-8 -*-
"""torch.profiler's events as plain JSON, written inside the workload's process for the engine to read.

Runs in the target Python beside run_workload.py: stdlib only (torch is handed in as the profile).
The workload records, the attribution parses: each event keeps what the attribution needs to name
the op, its Keras layer (the enclosing "keras_layer:<name>" range on the same thread) and its pass.
"""
from __future__ import division, print_function


def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def export_torch_profile(prof):
    """One dict per profiled event: name, start and duration in microseconds, thread, device, shapes."""
    events = []
    for event in prof.events():
        span = getattr(event, "time_range", None)
        start = _number(getattr(span, "start", None))
        end = _number(getattr(span, "end", None))
        device = getattr(event, "device_type", None)
        item = {
            "name": str(getattr(event, "name", "")),
            "ts_us": start,
            "dur_us": (end - start) if start is not None and end is not None else None,
            "thread": getattr(event, "thread", None),
            "device": str(device).split(".")[-1].lower() if device is not None else None,
            "sequence_nr": getattr(event, "sequence_nr", None),
            "fwd_thread": getattr(event, "fwd_thread", None),
            "self_cpu_us": _number(getattr(event, "self_cpu_time_total", None)),
        }
        shapes = getattr(event, "input_shapes", None)
        if shapes:
            item["input_shapes"] = [list(s) if isinstance(s, (list, tuple)) else s for s in shapes]
        events.append(item)
    return events
