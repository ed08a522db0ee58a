"""The environment: the host as probed, its GPUs, each stack's software as its runs reported it, and the
workload measured."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from fp16doctor.analysis import RunRow
from fp16doctor.knowledge.cpu import CPU_FP16_REPORT_FLAGS
from fp16doctor.report.sections.common import dict_of as _dict
from fp16doctor.report.sections.common import host_gpus as _gpus
from fp16doctor.report.sections.common import list_of as _list
from fp16doctor.report.sections.common import positive as _positive
from fp16doctor.report.sections.common import text as _text
from fp16doctor.report.sections.inputs import DocumentInput


@dataclass(frozen=True)
class GpuView:
    index: str
    name: str
    compute_capability: str
    memory: str
    driver: str
    cuda_driver: str


@dataclass(frozen=True)
class SoftwareRow:
    stack: str
    engine: str
    values: dict[str, str]
    description: str = ""  # the catalogue's words for a stack run in Docker (engine.stack_description)


SOFTWARE_KEYS = ("python", "tensorflow", "keras", "keras_backend", "cuda", "cudnn")


@dataclass(frozen=True)
class EnvironmentView:
    host: list[tuple[str, str]]
    gpus: list[GpuView]
    software: list[SoftwareRow]


def _environment(doc: Mapping[str, Any], rows_of_runs: Sequence[RunRow]) -> EnvironmentView:
    host = _dict(doc.get("host"))
    cpu = _dict(host.get("cpu"))
    rows: list[tuple[str, str]] = []
    if host.get("os"):
        rows.append(("OS", _text(host["os"])))
    if cpu.get("model"):
        cores = f" ({cpu['cores']} cores)" if isinstance(cpu.get("cores"), int) else ""
        rows.append(("CPU", _text(cpu["model"]) + cores))
    flags = cpu.get("flags")
    if isinstance(flags, list):
        # Only the flags that decide how a CPU handles float16 (F16C converts, AVX512-FP16/AMX compute).
        relevant = [f for f in flags if isinstance(f, str) and f.lower() in CPU_FP16_REPORT_FLAGS]
        rows.append(("CPU fp16-related flags", _text(", ".join(relevant)) or "none of f16c, avx512_fp16, amx"))
    gpus = [
        GpuView(
            index=_text(g.get("index")),
            name=_text(g.get("name")) or "?",
            compute_capability=_text(g.get("compute_capability")),
            memory=f"{g['memory_total_mib'] / 1024:.0f} GiB" if _positive(g.get("memory_total_mib")) else "",
            driver=_text(g.get("driver_version")),
            cuda_driver=_text(g.get("cuda_driver_version")),
        )
        for g in _gpus(doc)
    ]
    software: list[SoftwareRow] = []
    seen: set[tuple[str, str, str]] = set()
    described = {_text(r.get("stack")): _text(_dict(r.get("engine")).get("stack_description"))
                 for r in runs_of(doc) if _dict(r.get("engine")).get("stack_description")}
    for row in rows_of_runs:
        sw = asdict(row.software) if row.software is not None else {}
        values = {k: _text(sw.get(k)) for k in SOFTWARE_KEYS}
        values["image"] = _text(row.image)
        values["os"] = _text(sw.get("os"))
        if not any(values.values()):
            continue  # a run that failed before reporting its software
        key = (_text(row.stack), _text(row.engine), json.dumps(values, sort_keys=True))
        if key in seen:
            continue
        seen.add(key)
        software.append(SoftwareRow(stack=key[0], engine=key[1], values=values,
                                    description=described.get(key[0], "")))
    return EnvironmentView(host=rows, gpus=gpus, software=software)



def runs_of(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The records, for what describes the workload measured (never to judge it: that is the analysis')."""
    return [r for r in _list(doc.get("runs")) if isinstance(r, dict)]


def _workload(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    for run in runs_of(doc):
        wl = _dict(run.get("workload"))
        if not wl:
            continue
        out = []
        if wl.get("name"):
            out.append(("workload", _text(wl["name"])))
        if wl.get("script_sha256"):  # the user's own script: named and hashed, its content never stored
            out.append(("script", _text(wl.get("script"))))
            out.append(("script digest", _text(f"sha256:{wl['script_sha256']}")))
        if wl.get("image_height") and wl.get("image_width"):
            channels = f"×{wl['channels']}" if wl.get("channels") else ""
            out.append(("image", _text(f"{wl['image_height']}×{wl['image_width']}{channels}")))
        for key, label in (
            ("batch_size", "batch size"),
            ("steps_measured", "steps measured"),
            ("warmup_steps", "warm-up steps"),
        ):
            if wl.get(key) is not None:
                out.append((label, _text(wl[key])))
        return out
    return []




@dataclass(frozen=True)
class EnvironmentSection:
    """The environment and the workload, shown together in one card."""

    environment: EnvironmentView
    workload: list[tuple[str, str]]


def build(source: DocumentInput) -> EnvironmentSection:
    return EnvironmentSection(_environment(source.doc, source.diagnosis.runs), _workload(source.doc))
