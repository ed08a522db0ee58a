"""A GPU step's own time, each kernel and copy counted once (``runs[].device_time``), and the rule that gives a
trace's device activity one row each: a kernel belongs to the op that launched it, a copy is counted once, and the
profiler's own bookkeeping is no op.

Pure: the torch profiler's events (fp16doctor/workload/profile_export.py), a TensorFlow or JAX trace's GPU stream
activity (attribution/xplane.py `device_activity`) or a recorded document's op rows in, figures out. What Holistic
Trace Analysis calls a step's idle time is here the host's: the step's time with no kernel or copy running on the
device, which the host spends building batches, dispatching or waiting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fp16doctor.attribution.passes import kernel_pass
from fp16doctor.attribution.records import union_ms

# CUPTI's own activity-buffer requests: the profiler's overhead, not the program's work (2.5-5.4 ms a step in an
# H200 trace of PyTorch 2.11, where they were listed as ops).
BOOKKEEPING = frozenset({"Activity Buffer Request"})
# A device activity's name in PyTorch's Kineto traces: the copies and memsets CUPTI names itself, C++ kernel
# signatures ("void at::native::...") and the library kernels cuDNN, cuBLAS, CUTLASS and Triton name
# ("sm90_xmma_wgrad_...", "nvjet_...", "triton_poi_fused_...").
_DEVICE_NAME = re.compile(r"^(void |Memcpy |Memset |sm\d+_|cutlass|ampere_|volta_|turing_|hopper_|nvjet|cudnn|"
                          r"cublas|triton_|Kernel\b)")
# "Memcpy HtoD (Pageable -> Device)": direction, then the host memory's kind (CUPTI's names in a torch trace); in a
# TensorFlow or JAX trace's GPU plane, "MemcpyH2D" (the CUPTI collector's GetTraceEventTypeName in XLA's
# backends/profiler/gpu/cupti_tracer.cc: MemcpyH2D, MemcpyD2H, MemcpyD2D, MemcpyP2P, MemcpyOther).
_COPY = re.compile(r"^Memcpy ?(HtoD|DtoH|DtoD|HtoH|PtoP|H2D|D2H|D2D|P2P)\b(.*)$")
COPY_DIRECTIONS = {"HtoD": "h2d", "DtoH": "d2h", "DtoD": "d2d", "PtoP": "d2d", "HtoH": "h2h",
                   "H2D": "h2d", "D2H": "d2h", "D2D": "d2d", "P2P": "d2d"}
COPY_KINDS = ("h2d", "d2h", "d2d")  # what `copies_ms` holds: the copies that keep the device busy
# The kinds a torch event's device_type names a device activity by (torch.autograd.DeviceType's str()).
_DEVICE_TYPES = frozenset({"cuda", "devicetype.cuda", "privateuse1", "devicetype.privateuse1", "xpu", "mtia"})
# A recorded op row whose time is the host's (new traces mark their input rows so); other rows of a GPU trace hold
# device time.
HOST_TIME = "host"


def is_bookkeeping(name: str) -> bool:
    return name in BOOKKEEPING


def copy_direction(name: str) -> str | None:
    """"Memcpy HtoD (Pageable -> Device)" -> "h2d"; None for a kernel."""
    match = _COPY.match(name)
    return COPY_DIRECTIONS.get(match.group(1)) if match else None


def is_pageable(name: str) -> bool:
    """A host-to-device copy from pageable host memory (the driver stages it through a pinned buffer)."""
    return copy_direction(name) == "h2d" and "pageable" in name.lower()


def looks_like_device_activity(name: str) -> bool:
    return bool(_DEVICE_NAME.match(name))


IDLE_KINDS = ("waiting_on_data_ms", "launch_gaps_ms", "other_ms")
# What each idle kind means, in the words a verdict says which dominates with.
IDLE_WORDS = {"waiting_on_data_ms": "waiting on the host's data (its batch, collation, copy)",
              "launch_gaps_ms": "launch and dispatch gaps between kernels", "other_ms": "other idle time"}


@dataclass(frozen=True)
class IdleSplit:
    """The step's device idle time, split as Holistic Trace Analysis splits a stream's idle time (its idle time
    breakdown: the host's wait, the kernels' wait, the rest), per step: waiting on the host's data (idle while a host
    span that builds, collates or copies a batch runs), launch and dispatch gaps (idle between two device
    activities with no such span: the host had not issued the next kernel yet) and the rest (idle before the
    window's first activity and after its last). `method`: "trace_intervals" from timestamps; "document_rows" from
    a recorded document's rows (no timestamps: the host's batch rows are its data wait, and nothing can tell a
    launch gap from the rest, so `launch_gaps_ms` is null there; a document with no host rows leaves
    `waiting_on_data_ms` null too: not measured, never 0)."""

    waiting_on_data_ms: float | None
    launch_gaps_ms: float | None
    other_ms: float
    method: str = "trace_intervals"

    @property
    def total_ms(self) -> float:
        return (self.waiting_on_data_ms or 0.0) + (self.launch_gaps_ms or 0.0) + self.other_ms

    @property
    def dominant(self) -> str | None:
        """The idle kind with the most time; None where launch gaps were not told from the rest (no kind can be
        said to dominate while one of them is unknown)."""
        if self.launch_gaps_ms is None or self.waiting_on_data_ms is None:
            return None
        parts = {"waiting_on_data_ms": self.waiting_on_data_ms, "launch_gaps_ms": self.launch_gaps_ms,
                 "other_ms": self.other_ms}
        return max(parts, key=lambda k: parts[k])

    def to_dict(self) -> dict[str, Any]:
        return {"waiting_on_data_ms": round(self.waiting_on_data_ms, 3) if self.waiting_on_data_ms is not None
                else None,
                "launch_gaps_ms": round(self.launch_gaps_ms, 3) if self.launch_gaps_ms is not None else None,
                "other_ms": round(self.other_ms, 3), "method": self.method}

    @classmethod
    def from_dict(cls, value: Any) -> IdleSplit | None:
        if not isinstance(value, Mapping):
            return None
        data, gaps, other = (_number(value.get(k)) for k in IDLE_KINDS)
        if other is None:
            return None
        return cls(data, gaps, other, str(value.get("method") or "trace_intervals"))


def _merged(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _overlap_ms(span: tuple[float, float], others: Sequence[tuple[float, float]]) -> float:
    return sum(max(0.0, min(span[1], hi) - max(span[0], lo)) for lo, hi in others)


def idle_split(device_spans: Sequence[tuple[float, float]], data_spans: Sequence[tuple[float, float]],
               window: tuple[float, float], steps: int) -> IdleSplit:
    """From timestamps (ms, one clock): the window's idle time, each instant once, per step."""
    busy = _merged((max(lo, window[0]), min(hi, window[1])) for lo, hi in device_spans
                   if hi > window[0] and lo < window[1])
    data = _merged(data_spans)
    edges = [(window[0], busy[0][0]), (busy[-1][1], window[1])] if busy else [window]
    between = [(a[1], b[0]) for a, b in zip(busy, busy[1:], strict=False)]
    waiting = sum(_overlap_ms(gap, data) for gap in [*edges, *between])
    gaps = sum(gap[1] - gap[0] - _overlap_ms(gap, data) for gap in between)
    other = sum(max(gap[1] - gap[0], 0.0) - _overlap_ms(gap, data) for gap in edges)
    steps = max(int(steps), 1)
    return IdleSplit(waiting / steps, gaps / steps, max(other, 0.0) / steps)


@dataclass(frozen=True)
class DeviceTime:
    """One run's device time per step of its profiled window (``runs[].device_time``)."""

    busy_ms: float  # the union of the device's kernel and copy intervals, each counted once
    step_ms: float | None  # the profiled window's step
    copies_ms: Mapping[str, float] = field(default_factory=dict)  # "h2d" | "d2h" | "d2d" -> ms per step
    h2d_pageable: bool | None = None
    source: str = "torch_profiler"
    # "interval_union": from the device's timestamps; "kernel_sum": from a recorded document's kernel rows, each
    # once (no timestamps: kernels on one stream do not overlap, so the sum is the busy time there, at most over).
    method: str = "interval_union"
    idle: IdleSplit | None = None  # the step's idle time (host_ms), split by what the device waited on

    @property
    def busy_share(self) -> float | None:
        return min(self.busy_ms / self.step_ms, 1.0) if self.step_ms else None

    @property
    def host_ms(self) -> float | None:
        """The step's time with the device idle: the host's input, dispatch and waiting."""
        return max(self.step_ms - self.busy_ms, 0.0) if self.step_ms else None

    @property
    def compute_ms(self) -> float:
        """Busy time that is not a copy (kernels, memsets)."""
        return max(self.busy_ms - sum(self.copies_ms.values()), 0.0)

    def to_dict(self) -> dict[str, Any]:
        share = self.busy_share
        host = self.host_ms
        return {
            "busy_ms": round(self.busy_ms, 3),
            "step_ms": round(self.step_ms, 3) if self.step_ms is not None else None,
            "busy_share": round(share, 4) if share is not None else None,
            "copies_ms": {k: round(v, 3) for k, v in self.copies_ms.items()},
            "h2d_pageable": self.h2d_pageable,
            "host_ms": round(host, 3) if host is not None else None,
            "source": self.source,
            "method": self.method,
            **({"idle": self.idle.to_dict()} if self.idle is not None else {}),
        }

    @classmethod
    def from_dict(cls, value: Any) -> DeviceTime | None:
        """A document's ``device_time`` (None where it is missing or unreadable)."""
        if not isinstance(value, Mapping):
            return None
        busy, step = _number(value.get("busy_ms")), _number(value.get("step_ms"))
        if busy is None or busy < 0:
            return None
        copies = value.get("copies_ms")
        pageable = value.get("h2d_pageable")
        return cls(busy, step if step and step > 0 else None,
                   {str(k): float(v) for k, v in copies.items() if str(k) in COPY_KINDS and _number(v) is not None}
                   if isinstance(copies, Mapping) else {},
                   pageable if isinstance(pageable, bool) else None, str(value.get("source") or "torch_profiler"),
                   str(value.get("method") or "interval_union"), IdleSplit.from_dict(value.get("idle")))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _copies(durations: Iterable[tuple[str, float]]) -> tuple[dict[str, float], bool | None]:
    copies: dict[str, float] = {}
    pageable: bool | None = None
    for name, ms in durations:
        direction = copy_direction(name)
        if direction is None:
            continue
        if direction in COPY_KINDS:
            copies[direction] = copies.get(direction, 0.0) + ms
        if direction == "h2d":
            pageable = bool(pageable) or is_pageable(name)
    return copies, pageable


# ------------------------------------------------------------------------------------ torch profiler events


def claimed_kernels(events: Sequence[Mapping[str, Any]]) -> set[str]:
    """The device activities an op launched (its ``kernels``): they belong to that op's row."""
    return {str(k.get("name")) for e in events if isinstance(e, Mapping)
            for k in (e.get("kernels") or []) if isinstance(k, Mapping)}


def is_device_event(event: Mapping[str, Any], claimed: set[str]) -> bool:
    """A kernel, copy or memset on the device, not a host op: the export's device_type where it says, else a name
    an op claims as its kernel or a device activity's name."""
    kind = event.get("device_type")
    if isinstance(kind, str) and kind:
        return kind.lower() in _DEVICE_TYPES
    name = str(event.get("name", ""))
    return name in claimed or looks_like_device_activity(name)


def from_events(events: Sequence[Mapping[str, Any]], steps: int, step_ms: float | None) -> DeviceTime | None:
    """From a torch trace's device events with timestamps; None where it holds no device activity (a CPU run)."""
    claimed = claimed_kernels(events)
    spans: list[tuple[float, float]] = []
    durations: list[tuple[str, float]] = []
    data: list[tuple[float, float]] = []  # the host's batch spans: the DataLoader's, and the host side of a copy in
    everything: list[tuple[float, float]] = []
    for event in events:
        if not isinstance(event, Mapping) or is_bookkeeping(str(event.get("name", ""))):
            continue
        start, end = _number(event.get("start_us")), _number(event.get("end_us"))
        if start is None or end is None or end < start:
            continue
        span = (start / 1000.0, end / 1000.0)
        everything.append(span)
        if not is_device_event(event, claimed):
            if is_host_data(event):
                data.append(span)
            continue
        spans.append(span)
        durations.append((str(event.get("name", "")), (end - start) / 1000.0))
    if not spans:
        return None
    steps = max(int(steps), 1)
    copies, pageable = _copies(durations)
    busy = union_ms(spans)
    # The window: its steps' wall time where the workload timed it, ending at the last activity the trace holds
    # (what the trace holds before its first event is idle time too, the rest's).
    last = max(hi for _, hi in everything)
    window = (last - step_ms * steps, last) if step_ms else (min(lo for lo, _ in everything), last)
    return DeviceTime(busy / steps, step_ms, {k: v / steps for k, v in copies.items()}, pageable,
                      idle=idle_split(spans, data, window, steps))


def is_host_data(event: Mapping[str, Any]) -> bool:
    """A host span the step waits on for its data: the DataLoader's batch (its collation inside it), and an op whose
    kernel is a host-to-device copy (the host side of the batch's copy)."""
    name = str(event.get("name", ""))
    if "DataLoader" in name:
        return True
    return any(copy_direction(str(k.get("name", ""))) == "h2d" for k in event.get("kernels") or []
               if isinstance(k, Mapping))


def from_activity(activity: Sequence[tuple[str, float, float]], steps: int, step_ms: float | None,
                  source: str) -> DeviceTime | None:
    """From a TensorFlow or JAX trace's GPU stream activity, (name, start_us, end_us) each (xplane.device_activity);
    None where there is none (a CPU run). Whether a host-to-device copy was pageable the trace does not say here."""
    spans = [(start / 1000.0, end / 1000.0) for _, start, end in activity if end >= start]
    if not spans:
        return None
    steps = max(int(steps), 1)
    copies, _ = _copies((name, (end - start) / 1000.0) for name, start, end in activity if end >= start)
    return DeviceTime(union_ms(spans) / steps, step_ms, {k: v / steps for k, v in copies.items()}, None, source)


# ------------------------------------------------------------------------------------ recorded op rows


def _row_name(item: Mapping[str, Any]) -> str:
    return str(item.get("name", ""))


def claimed_by_rows(items: Sequence[Mapping[str, Any]]) -> set[str]:
    """The kernel names op rows list as theirs (``kernels``, else the ``impl`` they name)."""
    names: set[str] = set()
    for item in items:
        kernels = item.get("kernels")
        if isinstance(kernels, list):
            names.update(str(k) for k in kernels)
        impl = item.get("impl")
        if isinstance(impl, str) and impl != _row_name(item):
            names.add(impl)
    return names


def _device_row(item: Mapping[str, Any], claimed: set[str]) -> bool:
    name = _row_name(item)
    return not item.get("kernels") and (name in claimed or looks_like_device_activity(name))


def from_rows(items: Sequence[Mapping[str, Any]], step_ms: float | None) -> DeviceTime | None:
    """A recorded GPU document's device time from its kernel rows, each counted once (no timestamps: their sum)."""
    claimed = claimed_by_rows(items)
    durations = [(_row_name(i), float(i.get("ms_per_step") or 0.0)) for i in items
                 if isinstance(i, Mapping) and not is_bookkeeping(_row_name(i)) and _device_row(i, claimed)]
    if not durations:
        return None
    copies, pageable = _copies(durations)
    busy = sum(ms for _, ms in durations)
    idle = None
    if step_ms:
        # No timestamps: the host's batch rows are what the device waited on for data (at most its idle time); a
        # launch gap cannot be told from the rest.
        idle_ms = max(step_ms - busy, 0.0)
        host = [float(i.get("ms_per_step") or 0.0) for i in items
                if isinstance(i, Mapping) and i.get("time") == HOST_TIME]
        data = min(sum(host), idle_ms) if host else None  # no host rows: the data wait was not measured
        idle = IdleSplit(data, None, idle_ms - (data or 0.0), "document_rows")
    return DeviceTime(busy, step_ms, copies, pageable, method="kernel_sum", idle=idle)


def one_row_each(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A GPU document's op rows with each device activity counted once: profiler bookkeeping dropped, a kernel row
    an op row claims dropped (the op holds its time), an unclaimed kernel's pass read from its name, and an input
    row that holds device time (the DataLoader span repeating its batch copy) dropped unless it holds the host's.
    Rows already so (a new trace's) pass through unchanged."""
    claimed = claimed_by_rows(items)
    rows: list[dict[str, Any]] = []
    for item in items:
        name = _row_name(item)
        if is_bookkeeping(name):
            continue
        row = dict(item)
        if _device_row(item, claimed):
            if name in claimed:
                continue
            row["pass"] = kernel_pass(name) or row.get("pass") or "other"
        elif isinstance(row.get("impl"), str) and copy_direction(str(row["impl"])) == "h2d":
            row["pass"] = "input"  # the op whose longest activity brings the batch to the device
        elif row.get("pass") == "input" and row.get("time") != HOST_TIME and not row.get("impl"):
            continue  # a host span (the DataLoader's) credited with device time its copy already has
        rows.append(row)
    return rows
