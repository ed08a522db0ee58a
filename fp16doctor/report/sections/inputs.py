"""What a section builds from: one document with the diagnosis the analysis made of it, its machines named as the
report names them, and (for the sections at the top of the page) every document's pieces."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fp16doctor.analysis import Diagnosis, RunRow
from fp16doctor.analysis.runs import rows_on


@dataclass(frozen=True)
class MachineInput:
    key: str  # results.machine_id: "host" or a remote engine's machine
    name: str  # as the report shows it, unique in the report
    anchor: str
    rows: list[RunRow]  # the analysis' rows of the runs on it
    facts: str = ""  # its facts in one line, as the analysis said them (MachineFacts.facts_text)


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


def document_input(index: int, doc: Mapping[str, Any], diagnosis: Diagnosis, used_names: dict[str, int],
                   predicted: Mapping[tuple[str, str], float], known_stacks: set[str] | None) -> DocumentInput:
    """One document's input; `used_names` counts machine names across the report, so each stays unique."""
    machines = []
    for m_index, facts in enumerate(diagnosis.machines):
        name = facts.name
        used_names[name] = used_names.get(name, 0) + 1
        if used_names[name] > 1:
            name = f"{name} (#{used_names[name]})"
        machines.append(MachineInput(facts.key, name, f"machine-{index + 1}-{m_index + 1}",
                                     rows_on(diagnosis.runs, facts.key), facts.facts_text))
    return DocumentInput(index, doc, diagnosis, machines, predicted, known_stacks)
