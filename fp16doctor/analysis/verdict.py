"""A verdict as the analysis hands it to every output: frozen, typed where an output reads it, and the same record
results.json keeps.

verdicts.py decides (one per 16-bit configuration against float32, its record and its headline composed once) and
hands this over frozen, which the stack comparisons and the fixes then read; `Verdict.of` freezes a record, or one a
saved document kept, into this; `to_dict` writes it back as it was (`of(v.to_dict()) == v`). The fields below are
what the answer, the detail and the renderers read; the record's other facts (the interval's scope and processes,
the device split's figures, the likely cause) stay in `record`, read-only, for results.json and `--json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.intervals import AACheck
from fp16doctor.analysis.record import frozen, text, thawed
from fp16doctor.analysis.values import ShownRatio, as_list, as_mapping, as_number, figure, saved_ratio, saved_speedup


@dataclass(frozen=True)
class CauseShare:
    """A cause the accounting charged with part of the difference (`causes[]`), or one that moved against it
    (`against[]`)."""

    id: str
    ms: float | None  # `explains_ms` of a cause, `ms` of one against
    basis: str | None  # "measured_ops" | "experiment" | "estimate"
    part: str | None = None  # the ledger part its figure is, where it has one (ledger.py)
    confirmed_by: str | None = None

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> CauseShare:
        ms = entry.get("explains_ms") if "explains_ms" in entry else entry.get("ms")
        return cls(str(entry.get("id") or ""), as_number(ms), text(entry.get("basis")), text(entry.get("part")),
                   text(entry.get("confirmed_by")))


@dataclass(frozen=True)
class Verdict:
    """One 16-bit configuration against float32 (or the baseline it was measured against) on one machine and stack."""

    machine: str
    stack: str
    variant: str
    precision: str
    baseline: str
    ratio: float | None  # the baseline's step over this one's (below 1: slower)
    ratio_interval: tuple[float, float] | None
    interval_method: str | None
    outcome: str | None  # "slower" | "faster" | "no_significant_difference"; None where a saved file gives none
    bound: bool  # the ratio is a one-sided bound (a run cut short by the slow-step bound)
    step_ms: float | None
    fp32_step_ms: float | None
    difference_ms: float | None
    cause: str | None  # the speed cause that explains the most
    basis: str | None
    causes: tuple[CauseShare, ...]
    against: tuple[CauseShare, ...]
    aa_check: AACheck | None
    comparison_refused: str | None
    bound_by: str | None  # "host" or "device" where a device split says what sets the pace
    # Of the difference, what no part places (`accounted`): the ledgers' unplaced change where the pair has ledgers,
    # else the host time no op in the trace places.
    unplaced_host_ms: float | None
    figure: str  # its ratio as every output shows it (values.figure), whatever a saved file phrased
    headline: str
    record: Mapping[str, Any]  # the whole record, as results.json keeps it

    @property
    def shown(self) -> ShownRatio | None:
        """Its ratio as every output shows it, with its interval and its digits."""
        return saved_ratio(self.record)

    @property
    def speedup(self) -> float | None:
        """The baseline's step over this one's, from the two steps where it gives them (its `ratio` is rounded)."""
        return saved_speedup(self.record)

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Verdict:
        low, high = ([*(as_number(v) for v in as_list(record.get("ratio_interval"))), None, None])[:2]
        accounted = as_mapping(record.get("accounted"))
        return cls(
            machine=str(record.get("machine") or "host"), stack=str(record.get("stack") or "host"),
            variant=str(record.get("variant") or "original"), precision=str(record.get("precision") or "16-bit"),
            baseline=str(record.get("baseline") or "float32"), ratio=as_number(record.get("ratio")),
            ratio_interval=(low, high) if low is not None and high is not None else None,
            interval_method=text(record.get("interval_method")), outcome=text(record.get("outcome")),
            bound=record.get("bound") is True or record.get("interval_method") == "lower_bound",
            step_ms=as_number(record.get("step_ms")), fp32_step_ms=as_number(record.get("fp32_step_ms")),
            difference_ms=as_number(record.get("difference_ms")), cause=text(record.get("cause")),
            basis=text(record.get("basis")),
            causes=tuple(CauseShare.of(c) for c in as_list(record.get("causes")) if isinstance(c, Mapping)),
            against=tuple(CauseShare.of(c) for c in as_list(record.get("against")) if isinstance(c, Mapping)),
            aa_check=AACheck.of(record.get("aa_check")),
            comparison_refused=text(record.get("comparison_refused")), bound_by=text(record.get("bound_by")),
            unplaced_host_ms=as_number(accounted.get("unplaced_host_ms")),
            figure=figure(record), headline=str(record.get("headline") or ""),
            record=frozen(dict(record)))

    def to_dict(self) -> dict[str, Any]:
        return dict(thawed(self.record))


__all__ = ["CauseShare", "Verdict"]
