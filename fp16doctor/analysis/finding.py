"""A finding as the analysis hands it to every output: frozen, typed where an output reads it, and the same record
results.json keeps.

The rules, the accounting, hold.py and fixes.py draft a finding as a record while the diagnosis is made;
`Finding.of` freezes it (or one a saved document kept, however it was written) into this; `to_dict` writes it back
as it was (`of(f.to_dict()) == f`). The fields below are what the answer, the detail and the renderers read; the
record's other facts (what it recommends and instead of what, the remedy by machine, the rule's own figures) stay in
`record`, read-only, for results.json and `--json`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.record import frozen, text, thawed
from fp16doctor.analysis.values import BASIS_WORDS, as_list, as_number, fmt_ms, named_place, variant_words
from fp16doctor.results import HOST_MACHINE


def is_code_line(line: str) -> bool:
    """A line of a recommendation that is code: indented four spaces or a tab, as in markdown."""
    return line.startswith(("    ", "\t")) and line.strip() != ""


def _older_measured_line(record: Mapping[str, Any]) -> str | None:
    """A speed finding saved before findings kept `measured_line`: its first evidence line after its summary that
    holds a figure, as those releases quoted it; None for a finding that explains no time."""
    if record.get("explains_ms") is None:
        return None
    lines = [str(e) for e in as_list(record.get("evidence"))[1:]]
    return next((e for e in lines if any(ch.isdigit() for ch in e)), None)


@dataclass(frozen=True)
class Finding:
    """One thing the analysis found, ranked: what it is, what it explains, its evidence and what to do."""

    id: str
    title: str
    severity: str  # "critical" | "warning" | "info"
    confidence: float | None
    rank: int | None
    evidence: tuple[str, ...]
    # The evidence line that states what was measured of the share it explains (a speed finding's; None elsewhere)
    measured_line: str | None
    recommendation: str
    explains_ms: float | None  # the time of a 16-bit configuration's difference it accounts for
    basis: str | None  # "measured_ops" | "experiment" | "estimate", or None for evidence that explains no time
    saves_ms: float | None  # what its recommended configuration measured faster
    machine: str | None  # the pair it speaks for, where it is a speed finding
    stack: str | None
    variant: str | None
    precision: str | None
    prescribed: bool  # the prescription's own evidence
    ops: tuple[Mapping[str, Any], ...]  # the measured ops behind it, largest first
    fix: Mapping[str, Any] | None  # the code the analysis chose for its stack (fixes.attach_fixes)
    record: Mapping[str, Any]  # the whole record, as results.json keeps it

    @property
    def remedy_places(self) -> tuple[tuple[str, str, bool], ...]:
        """Each machine and stack its remedy was phrased for (hold.py), and whether it recommends a configuration
        there."""
        remedy = self.record.get("remedy")
        machines = remedy.get("machines") if isinstance(remedy, Mapping) else None
        return tuple((str(m.get("machine")), str(m.get("stack")), m.get("recommends") is not None)
                     for m in as_list(machines) if isinstance(m, Mapping))

    @property
    def fix_code(self) -> str:
        """The code the analysis chose for its stack (fixes.attach_fixes), where its recommendation brings no code
        block of its own (a line indented four spaces or a tab); else ""."""
        code = self.fix.get("code") if self.fix is not None else None
        if not isinstance(code, str) or any(is_code_line(line) for line in self.recommendation.splitlines()):
            return ""
        return code

    @property
    def fix_flavour(self) -> str:
        """The stack its fix code is written for ("Keras 3", "tf.keras 2.x")."""
        return str(self.fix.get("flavour") or "") if self.fix is not None else ""

    def place(self, places: Collection[tuple[str, str]]) -> str:
        """The place its sentences name among a document's `places` (values.named_place); "" for one that speaks
        of no run."""
        return named_place(places, self.machine or HOST_MACHINE, self.stack) if self.stack else ""

    def explains_words(self, place: str = "", basis: bool = False) -> str:
        """What it explains, as every output says it: "explains 362 ms of float16", with its variant ("float16,
        with batches in memory"), its `place` ("on tf1.7-cpu") and, with `basis`, how that was found
        (", measured"); "" where it explains no time."""
        if self.explains_ms is None:
            return ""
        variant = self.variant or "original"
        text = f"explains {fmt_ms(self.explains_ms)} of {self.precision or 'its 16-bit run'}"
        text += "" if variant == "original" else f", {variant_words(variant)}"
        text += f" on {place}" if place else ""
        shown = BASIS_WORDS.get(self.basis or "")
        return text + (f", {shown}" if basis and shown else "")

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Finding:
        rank = as_number(record.get("rank"))
        fix = record.get("fix")
        return cls(
            id=str(record.get("id") or "finding"), title=str(record.get("title") or ""),
            severity=str(record.get("severity") or "info"), confidence=as_number(record.get("confidence")),
            rank=int(rank) if rank is not None and rank == int(rank) else None,
            evidence=tuple(str(e) for e in as_list(record.get("evidence"))),
            measured_line=text(record.get("measured_line")) or _older_measured_line(record),
            recommendation=str(record.get("recommendation") or ""), explains_ms=as_number(record.get("explains_ms")),
            basis=text(record.get("basis")), saves_ms=as_number(record.get("saves_ms")),
            machine=text(record.get("machine")), stack=text(record.get("stack")),
            variant=text(record.get("variant")), precision=text(record.get("precision")),
            prescribed=record.get("prescribed") is True,
            ops=tuple(frozen(o) for o in as_list(record.get("ops")) if isinstance(o, Mapping)),
            fix=frozen(fix) if isinstance(fix, Mapping) else None, record=frozen(dict(record)))

    def to_dict(self) -> dict[str, Any]:
        return dict(thawed(self.record))


__all__ = ["Finding", "is_code_line"]
