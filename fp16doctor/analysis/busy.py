"""Whether the machine was busy while the rounds measured: what else used its CPU (`timing_rounds[].contention`,
read inside the rounds process: workload/contention.py; else the host's `machine_load`, probe/load.py), as a
number, a classification, then a sentence. A busy machine is said in the answer's first lines, and a comparison it
left unsettled is never the prescription (prescribe.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.values import as_int, as_list, as_mapping, as_number

# Other processes using at least this share of the whole CPU (every core) while the rounds measured make the
# machine busy: a quarter of a 4-core machine is one core's worth taken from the measurement; on a 2-core machine
# a busy loop holding one core reads 45-50 %.
BUSY_OTHERS_PCT = 25.0
# A virtual machine's hypervisor taking this share of the CPU (steal time) makes it busy too.
BUSY_STEAL_PCT = 10.0


@dataclass(frozen=True)
class Contention:
    """What else used the CPU while one rounds process measured."""

    others_pct: float | None  # share of the whole CPU that other processes used
    steal_pct: float | None = None  # the hypervisor's share (a virtual machine's steal time)
    cores: int | None = None
    load: float | None = None  # the 1-minute load average at the end
    # "contention": read inside the rounds process over its rounds; "machine_load": the host's busiest other
    # processes before and after (a lower bound: only the busiest are named)
    source: str = "contention"

    @property
    def busy(self) -> bool:
        return (self.others_pct or 0.0) >= BUSY_OTHERS_PCT or (self.steal_pct or 0.0) >= BUSY_STEAL_PCT

    @property
    def figure(self) -> float:
        """The share of the CPU the measurement did not have: others' and the hypervisor's."""
        return (self.others_pct or 0.0) + (self.steal_pct or 0.0)

    def words(self) -> str:
        """'other processes used 48 % of the CPU' (and the hypervisor's share, where it counts)."""
        parts = []
        if self.others_pct is not None:
            least = "at least " if self.source == "machine_load" else ""
            parts.append(f"other processes used {least}{self.others_pct:.0f} % of the CPU")
        if (self.steal_pct or 0.0) >= 1.0:
            parts.append(f"the hypervisor took {self.steal_pct:.0f} % (steal time)")
        return " and ".join(parts) or "the machine was busy"

    def document_words(self) -> str:
        """What a comparison of several documents says of one measured on a busy machine."""
        return f"measured on a busy machine: {self.words()} while its rounds ran"

    def to_dict(self) -> dict[str, Any]:
        return {"others_cpu_pct": self.others_pct, "steal_pct": self.steal_pct, "cores": self.cores,
                "busy": self.busy, "source": self.source}


def contention_of(entry: Mapping[str, Any]) -> Contention | None:
    """One `timing_rounds[]` entry's contention: its own record, else what its `machine_load` names (the busiest
    other processes' share of a core each, over the cores); None where neither says."""
    recorded = as_mapping(entry.get("contention"))
    others = as_number(recorded.get("others_cpu_pct"))
    steal = as_number(recorded.get("steal_pct"))
    if others is not None or steal is not None:
        loads = [as_number(v) for v in as_list(recorded.get("load_1min"))]
        return Contention(others, steal, as_int(recorded.get("cores")), loads[-1] if loads else None)
    load = as_mapping(entry.get("machine_load"))
    cores = as_int(load.get("cores"))
    named = [as_number(as_mapping(p).get("cpu_pct")) for p in as_list(load.get("busiest_others"))]
    if not cores or not named:
        return None
    return Contention(round(sum(v or 0.0 for v in named) / cores, 1), None, cores,
                      as_number(as_mapping(load.get("after")).get("load_1min")), source="machine_load")


def busiest(doc: Mapping[str, Any]) -> Contention | None:
    """The document's busiest rounds process's contention, where one was busy (compare, report of several)."""
    found = [c for c in (contention_of(as_mapping(e)) for e in as_list(doc.get("timing_rounds"))) if c and c.busy]
    return max(found, key=lambda c: c.figure) if found else None
