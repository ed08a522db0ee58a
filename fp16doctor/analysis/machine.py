"""Each machine a document's runs ran on, named and described once: its name (its GPUs, else its CPU) and its facts
(where a remote engine ran it, each GPU's compute capability, driver and CUDA, the CPU model beside GPUs, the OS).

The detail says them as its "machine" section (`explain --full`, the markdown); the report's machine cards lay out
the same facts under each machine's name. The results' own host is described from its probe (`host`), a remote
engine's machine from its record in `machines`, else from what its runs name. Pure: a document and its run rows in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.runs import RunRow, machines_of, rows_on
from fp16doctor.analysis.values import as_list, as_mapping
from fp16doctor.redaction import redact_text
from fp16doctor.results import HOST_MACHINE

FACTS_JOIN = "; "  # between a machine's facts, in every output


@dataclass(frozen=True)
class MachineFacts:
    """One machine as every output names and describes it."""

    key: str  # results.machine_id: "host" or a remote engine's machine
    name: str  # "NVIDIA H200", "2× NVIDIA A100", "AMD EPYC 9B14 (CPU only)"
    facts: tuple[str, ...]  # "compute capability 9.0, driver 580.159.04, CUDA 13.0", the CPU model, the OS

    @property
    def facts_text(self) -> str:
        """Its facts in one line, as the report shows them under its name; "" where nothing is known."""
        return FACTS_JOIN.join(self.facts)

    @property
    def line(self) -> str:
        """"NVIDIA H200: compute capability 9.0, driver 580.159.04, CUDA 13.0; Intel(R) Xeon(R); Ubuntu 24.04"."""
        return f"{self.name}: {self.facts_text}" if self.facts else self.name


def _text(value: Any) -> str:
    return "" if value is None else redact_text(str(value))


def gpu_summary(names: Sequence[str]) -> str:
    """"2× NVIDIA A100, NVIDIA H100": each GPU name once, with its count."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n}× {name}" if n > 1 else name for name, n in counts.items())


def _gpu_facts(gpu: Mapping[str, Any], named: bool) -> str:
    cc = _text(gpu.get("compute_capability"))
    bits = [f"compute capability {cc}" if cc else ""]
    if gpu.get("driver_version"):
        bits.append(f"driver {_text(gpu['driver_version'])}")
    if gpu.get("cuda_driver_version"):
        bits.append(f"CUDA {_text(gpu['cuda_driver_version'])}")
    facts = ", ".join(b for b in bits if b)
    return f"{_text(gpu.get('name'))}: {facts}" if facts and named else facts


def machine_facts(doc: Mapping[str, Any], key: str, rows: Sequence[RunRow]) -> MachineFacts:
    """One machine's name and facts: the results' own host from its probe, a remote engine's machine from its record
    in `machines` (each run's own hardware), else from what its runs name."""
    facts: list[str] = []
    if key != HOST_MACHINE:
        record = as_mapping(as_mapping(doc.get("machines")).get(key))
        # Where its runs ran, as their engines named it ("docker tcp://gpu-box:2376 gpu 1", "slurm node-3").
        where = [e for e in dict.fromkeys(r.engine for r in rows) if e]
        facts.append(", ".join(where) if where else f"machine {_text(key)}")
        if not record:
            gpu_names = [g for g in dict.fromkeys(_text(r.gpu_name) for r in rows) if g]
            return MachineFacts(key, gpu_summary(gpu_names) if gpu_names else f"machine {_text(key)}", tuple(facts))
    else:
        record = as_mapping(doc.get("host"))
    gpus = [as_mapping(g) for g in as_list(record.get("gpus")) if isinstance(g, Mapping)]
    cpu_model = _text(as_mapping(record.get("cpu")).get("model"))
    if gpus:
        name = gpu_summary([_text(g.get("name")) or "?" for g in gpus])
        facts += [f for f in (_gpu_facts(g, len(gpus) > 1) for g in gpus) if f]
        if cpu_model:
            facts.append(cpu_model)
    else:
        name = f"{cpu_model} (CPU only)" if cpu_model else "CPU only (no GPU)"
    if record.get("os"):
        facts.append(_text(record["os"]))
    return MachineFacts(key, name, tuple(facts))


def machines(doc: Mapping[str, Any], rows: Sequence[RunRow]) -> tuple[MachineFacts, ...]:
    """Every machine the runs ran on, in first-seen order; the results' own host where there are no runs."""
    return tuple(machine_facts(doc, key, rows_on(rows, key)) for key in machines_of(rows) or [HOST_MACHINE])


__all__ = ["FACTS_JOIN", "MachineFacts", "gpu_summary", "machine_facts", "machines"]
