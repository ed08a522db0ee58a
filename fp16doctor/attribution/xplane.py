"""TensorFlow 2 / JAX profiler traces (``*.xplane.pb``), read with ``xprof`` (the maintained reader behind
TensorBoard's profile plugin; ``pip install fp16doctor[profile]``).

Tools used (xprof.convert.raw_to_tool_data.xspace_to_tool_data):
- ``framework_op_stats``: per op (name, type, occurrences, self time; host and device rows);
- ``trace_viewer``: the op events with start and duration, for coverage (the union of their intervals);
- ``kernel_stats``: GPU kernels with the op that launched them and xprof's own Tensor Core flags.
xprof writes a cache (``ALL_HOSTS.op_stats_v2.pb``) beside the trace and reuses it for any trace in that
folder, so each trace is read from a private temporary copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from fp16doctor.attribution.records import self_segments
from fp16doctor.attribution.xla_hlo import hlo_events, hlo_instructions, jax_scope
from fp16doctor.errors import DoctorError

XPROF_MISSING = "xprof not installed: no TensorFlow profiler times (pip install 'fp16doctor[profile]')"


@dataclass
class XplaneOp:
    name: str
    op_type: str
    on_device: bool
    occurrences: int
    self_us: float
    intervals: list[tuple[float, float]] = field(default_factory=list)  # microseconds
    # An HLO op of an XLA program on the CPU (attribution.xla_hlo): its name is the framework op it came
    # from (op_name), `hlo_op` XLA's own name for it, `dims` and `dtype` its output's.
    hlo_op: str | None = None
    dims: list[int] = field(default_factory=list)
    dtype: str | None = None
    inner_opcode: str | None = None  # the arithmetic inside a fusion (convolution, dot), when there is some


@dataclass
class XplaneKernel:
    name: str
    op_name: str
    occurrences: int
    total_us: float
    tensor_core_eligible: bool | None
    uses_tensor_core: bool | None


@dataclass
class XplaneData:
    ops: list[XplaneOp]
    kernels: list[XplaneKernel]
    has_device: bool
    # (name, start_us, end_us) of each kernel, copy and memset on a GPU's streams (device_activity)
    device_activity: list[tuple[str, float, float]] = field(default_factory=list)


def xprof_available() -> bool:
    try:
        from xprof.convert import raw_to_tool_data  # noqa: F401
    except ImportError:
        return False
    return True


def _tool(path: str, tool: str, params: dict[str, Any]) -> Any:
    from xprof.convert import raw_to_tool_data

    data, _content_type = raw_to_tool_data.xspace_to_tool_data([path], tool, params)
    if data is None:
        return None
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    return json.loads(data)


def _table(data: Any) -> list[dict[str, Any]]:
    """A gviz DataTable (or a list of them) -> rows as {column id: value}."""
    tables = data if isinstance(data, list) else [data]
    rows: list[dict[str, Any]] = []
    for table in tables:
        if not isinstance(table, dict) or "cols" not in table:
            continue
        ids = [col.get("id") for col in table["cols"]]
        for row in table.get("rows", []):
            values = [cell.get("v") if isinstance(cell, dict) else None for cell in row.get("c", [])]
            rows.append(dict(zip(ids, values, strict=False)))
        break  # the first table is the per-op one; later ones repeat it per device kind
    return rows


def _intervals(trace: Any) -> dict[str, list[tuple[float, float]]]:
    """Op name -> [(start_us, end_us)] from trace_viewer's events (``args.long_name`` = "name:type"): the instants
    each op ran itself (an op nested in another on its thread, a function's body in its call, is its own)."""
    by_thread: dict[tuple[Any, Any], list[tuple[float, float, str]]] = {}
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []
    for event in events:
        if event.get("ph") != "X" or "dur" not in event:
            continue
        args = event.get("args") or {}
        long_name = args.get("long_name") or args.get("tf_op")
        if not long_name:
            continue
        name = str(long_name).rsplit(":", 1)[0]
        start = float(event.get("ts", 0.0))
        thread = (event.get("pid"), event.get("tid"))
        by_thread.setdefault(thread, []).append((start, start + float(event["dur"]), name))
    found: dict[str, list[tuple[float, float]]] = {}
    for spans in by_thread.values():
        for lo, hi, name in self_segments(spans):
            found.setdefault(name, []).append((lo, hi))
    return found


# The lines xprof derives on a GPU plane from its streams' events (tsl/profiler/utils/xplane_schema.cc: kStepLineName,
# kTensorFlowNameScopeLineName, kTensorFlowOpLineName, kXlaModuleLineName, kXlaOpLineName, kXlaAsyncOpLineName,
# kKernelLaunchLineName, kSourceLineName): the same time again, by step, op or module, never device activity of its
# own. A GPU plane is named "/device:GPU:<ordinal>" (kGpuPlanePrefix).
DERIVED_LINES = frozenset({"Steps", "TensorFlow Name Scope", "TensorFlow Ops", "XLA Modules", "XLA Ops",
                           "Async XLA Ops", "Launch Stats", "Source code"})
GPU_PLANE_PREFIX = "/device:GPU:"


def device_activity(trace: Any) -> list[tuple[str, float, float]]:
    """(name, start_us, end_us) of every event on a GPU plane's stream lines in trace_viewer's events (each process a
    plane, each thread a line, named by "process_name" / "thread_name" metadata): its kernels, copies and memsets,
    the derived lines left out."""
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []
    names: dict[tuple[str, Any, Any], str] = {}
    for event in events:
        if isinstance(event, dict) and event.get("ph") == "M" and event.get("name") in ("process_name", "thread_name"):
            key = ("process", event.get("pid"), None) if event["name"] == "process_name" else (
                "thread", event.get("pid"), event.get("tid"))
            names[key] = str((event.get("args") or {}).get("name") or "")
    found = []
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X" or "dur" not in event:
            continue
        pid, tid = event.get("pid"), event.get("tid")
        if not names.get(("process", pid, None), "").startswith(GPU_PLANE_PREFIX):
            continue
        if names.get(("thread", pid, tid), "") in DERIVED_LINES:
            continue
        start = float(event.get("ts", 0.0))
        found.append((str(event.get("name") or ""), start, start + float(event["dur"])))
    return found


TOOLS = ("framework_op_stats", "trace_viewer", "kernel_stats")
XPROF_TIMEOUT_S = 300.0


def _read_tools_isolated(copy: str, path: str) -> dict[str, Any]:
    """Runs xprof in a child process: its C++ logging writes straight to stderr (and a broken trace can take
    the reader down), neither of which may reach diagnose's own terminal output."""
    try:
        proc = subprocess.run([sys.executable, "-m", "fp16doctor.attribution.xplane", copy], capture_output=True,
                              text=True, timeout=XPROF_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DoctorError(f"cannot read profiler trace {path}: {exc.__class__.__name__}",
                          "re-record the trace") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        detail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
        raise DoctorError(f"cannot read profiler trace {path}: {detail}", "re-record the trace")
    try:
        found = json.loads(lines[-1])
    except json.JSONDecodeError:
        raise DoctorError(f"cannot read profiler trace {path}: unreadable reader output",
                          "re-record the trace") from None
    return found if isinstance(found, dict) else {}


def _main(argv: list[str]) -> int:
    """`python -m fp16doctor.attribution.xplane TRACE`: the three tools' answers as one JSON line on stdout."""
    params = {"use_saved_result": False}
    try:
        found = {tool: _tool(argv[0], tool, params) for tool in TOOLS}
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"{exc.__class__.__name__}: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(found) + "\n")
    return 0


# The last trace read, by path, size and modification time: the ops and the device time read one trace each.
_LAST: dict[tuple[str, int, float], XplaneData] = {}


def read_xplane(path: str) -> XplaneData:
    """Reads one trace (once: the attribution's ops and its device time both ask). Raises DoctorError when xprof is
    missing or the file cannot be read."""
    try:
        stat = os.stat(path)
        key = (os.path.abspath(path), stat.st_size, stat.st_mtime)
    except OSError:
        key = None
    if key is not None and key in _LAST:
        return _LAST[key]
    data = _read_xplane(path)
    if key is not None:
        _LAST.clear()
        _LAST[key] = data
    return data


def _read_xplane(path: str) -> XplaneData:
    if not xprof_available():
        raise DoctorError(XPROF_MISSING, "install the profile extra: pip install 'fp16doctor[profile]'")
    if not os.path.isfile(path):
        raise DoctorError(f"profiler trace not found: {path}", "the workload's profile.xplane path must exist")
    workdir = tempfile.mkdtemp(prefix="fp16doctor-xplane-")
    try:
        copy = os.path.join(workdir, os.path.basename(path))
        shutil.copyfile(path, copy)
        tools = _read_tools_isolated(copy, path)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    op_rows = _table(tools.get("framework_op_stats"))
    kernel_rows = _table(tools.get("kernel_stats"))
    intervals = _intervals(tools.get("trace_viewer"))
    ops = []
    for row in op_rows:
        op_type = str(row.get("type") or "")
        if op_type == "IDLE":
            continue
        name = str(row.get("operation") or "")
        ops.append(
            XplaneOp(
                name=name,
                op_type=op_type,
                on_device=str(row.get("host_or_device", "")).lower() == "device",
                occurrences=int(row.get("occurrences") or 0),
                self_us=float(row.get("total_self_time") or 0.0),
                intervals=intervals.get(name, []),
            )
        )
    if not ops:
        ops = _hlo_ops(path, tools.get("trace_viewer"))
    kernels = [
        XplaneKernel(
            name=str(row.get("kernel_name") or ""),
            op_name=str(row.get("op_name") or ""),
            occurrences=int(row.get("occurrences") or 0),
            total_us=float(row.get("total_duration_us") or 0.0),
            tensor_core_eligible=row.get("is_op_tensor_core_eligible"),
            uses_tensor_core=row.get("is_kernel_using_tensor_core"),
        )
        for row in kernel_rows
    ]
    return XplaneData(ops=ops, kernels=kernels, has_device=any(op.on_device for op in ops) or bool(kernels),
                      device_activity=device_activity(tools.get("trace_viewer")))


def _hlo_ops(path: str, trace: Any) -> list[XplaneOp]:
    """No framework ops in xprof's table (JAX on the CPU): one op per executed HLO op, named by the
    program's own metadata when the trace carries it (attribution/xla_hlo.py)."""
    events = hlo_events(trace)
    if not events:
        return []
    try:
        with open(path, "rb") as fh:
            programs = hlo_instructions(fh.read(), {module for module, _ in events})
    except (OSError, ValueError, ImportError):
        programs = {}  # the ops keep XLA's names, without layers
    ops = []
    for (module, hlo_op), found in events.items():
        meta = programs.get(module, {}).get(hlo_op, {})
        op_name = meta.get("op_name") or ""
        ops.append(XplaneOp(name=op_name or hlo_op, op_type=jax_scope(op_name)[-1] if op_name else
                            str(meta.get("opcode") or hlo_op), on_device=False, occurrences=len(found["intervals"]),
                            self_us=max(float(found["self_us"]), 0.0), intervals=list(found["own"]),
                            hlo_op=hlo_op, dims=list(meta.get("dims") or []), dtype=meta.get("dtype"),
                            inner_opcode=meta.get("inner_opcode")))
    return ops


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
