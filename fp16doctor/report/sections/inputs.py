"""What a section builds from: one document with the diagnosis the analysis made of it, its machines named as the
report names them, and (for the sections at the top of the page) every document's pieces."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fp16doctor.analysis import Diagnosis, RunRow
from fp16doctor.analysis.runs import machines_of, rows_on
from fp16doctor.report.sections.common import dict_of, gpu_summary, host_gpus, list_of, text
from fp16doctor.results import HOST_MACHINE


@dataclass(frozen=True)
class MachineInput:
    key: str  # results.machine_id: "host" or a remote engine's machine
    name: str  # as the report shows it, unique in the report
    details: list[str]
    anchor: str
    rows: list[RunRow]  # the analysis' rows of the runs on it


@dataclass(frozen=True)
class DocumentInput:
    index: int
    doc: Mapping[str, Any]  # for what describes the measurement (host, invocation, note), never to judge it
    diagnosis: Diagnosis
    machines: list[MachineInput]
    predicted: Mapping[tuple[str, str], float] = field(default_factory=dict)  # roofline best case per cell
    known_stacks: set[str] | None = None

    @property
    def anchor(self) -> str:
        return f"results-{self.index + 1}"

    @property
    def names(self) -> dict[str, str]:
        """Machine id -> the name the report gives it."""
        return {m.key: m.name for m in self.machines}


@dataclass(frozen=True)
class ReportInput:
    documents: list[DocumentInput]
    pieces: Sequence[Mapping[str, Any]]  # each document's sections, by name, as built


def machine_name(doc: Mapping[str, Any], key: str, rows: Sequence[RunRow]) -> tuple[str, list[str]]:
    """A machine's name and details (its GPUs, CPU and OS): the results' own host from its probe, a remote engine's
    machine from its record in `machines` (each run's own hardware), else from what its runs name."""
    details: list[str] = []
    if key != HOST_MACHINE:
        record = dict_of(dict_of(doc.get("machines")).get(key))
        # Where its runs ran, as their engines named it ("docker tcp://gpu-box:2376 gpu 1", "slurm node-3").
        where = [e for e in dict.fromkeys(r.engine for r in rows) if e]
        details.append(", ".join(where) if where else f"machine {text(key)}")
        if not record:
            gpu_names = [g for g in dict.fromkeys(text(r.gpu_name) for r in rows) if g]
            return (gpu_summary(gpu_names) if gpu_names else f"machine {text(key)}"), details
    else:
        record = dict_of(doc.get("host"))
    gpus = [g for g in list_of(record.get("gpus")) if isinstance(g, dict)] if key != HOST_MACHINE else host_gpus(doc)
    cpu = dict_of(record.get("cpu"))
    cpu_model = text(cpu.get("model"))
    if gpus:
        name = gpu_summary([text(g.get("name")) or "?" for g in gpus])
        for g in gpus:
            cc = text(g.get("compute_capability"))
            bits = [f"compute capability {cc}" if cc else ""]
            if g.get("driver_version"):
                bits.append(f"driver {text(g['driver_version'])}")
            if g.get("cuda_driver_version"):
                bits.append(f"CUDA {text(g['cuda_driver_version'])}")
            detail = ", ".join(b for b in bits if b)
            if detail:
                details.append(f"{text(g.get('name'))}: {detail}" if len(gpus) > 1 else detail)
        if cpu_model:
            details.append(cpu_model)
    else:
        name = f"{cpu_model} (CPU only)" if cpu_model else "CPU only (no GPU)"
    if record.get("os"):
        details.append(text(record["os"]))
    return name, details


def document_input(index: int, doc: Mapping[str, Any], diagnosis: Diagnosis, used_names: dict[str, int],
                   predicted: Mapping[tuple[str, str], float], known_stacks: set[str] | None) -> DocumentInput:
    """One document's input; `used_names` counts machine names across the report, so each stays unique."""
    machines = []
    for m_index, key in enumerate(machines_of(diagnosis.runs) or [HOST_MACHINE]):
        rows = rows_on(diagnosis.runs, key)
        name, details = machine_name(doc, key, rows)
        used_names[name] = used_names.get(name, 0) + 1
        if used_names[name] > 1:
            name = f"{name} (#{used_names[name]})"
        machines.append(MachineInput(key, name, details, f"machine-{index + 1}-{m_index + 1}", rows))
    return DocumentInput(index, doc, diagnosis, machines, predicted, known_stacks)
