"""The verdicts at the top of the page (and in each machine's card of a comparison): the analysis' verdict per
16-bit run against float32, in the analysis' own words. Nothing here judges a difference or phrases a verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.values import figure, saved_speedup
from fp16doctor.report.sections.common import text as _text
from fp16doctor.report.sections.inputs import ReportInput
from fp16doctor.results import HOST_MACHINE

OUTCOME_TONE = {"slower": "slower", "faster": "faster", "no_significant_difference": "same"}


@dataclass(frozen=True)
class VerdictView:
    """One verdict of the analysis (a 16-bit run against float32 on one machine), as a reader sees it."""

    machine: str  # the machine's display name
    stack: str
    variant: str
    precision: str | None  # None: no verdict could be made on this machine (sentence says why)
    tone: str  # "slower", "faster", "same" (inside the runs' spread) or "unknown"
    speedup: float | None  # float32 step / this step, the verdict's `ratio` (below 1: slower)
    bound: bool  # the 16-bit run was cut short: it is at least this much slower
    cause_id: str | None
    basis: str | None
    sentence: str
    figure: str = "no ratio"  # the analysis' "1.60x slower", ">= 166x slower", "1.25x faster", "same speed"


def verdict_view(name: str, verdict: Mapping[str, Any]) -> VerdictView:
    """The analysis' verdict on machine `name`: its headline, word for word, and its figure."""
    speedup = saved_speedup(verdict)
    tone = OUTCOME_TONE.get(str(verdict.get("outcome")), "unknown") if speedup is not None else "unknown"
    headline = _text(verdict.get("headline")).rstrip(".")
    return VerdictView(
        machine=name,
        stack=_text(verdict.get("stack")) or "host",
        variant=_text(verdict.get("variant")) or "original",
        precision=_text(verdict.get("precision")) or "16-bit",
        tone=tone,
        speedup=speedup,
        bound=verdict.get("bound") is True or verdict.get("interval_method") == "lower_bound",
        cause_id=_text(verdict.get("cause")) or None,
        basis=_text(verdict.get("basis")) or None,
        sentence=f"On {name}: {headline}.",
        figure=figure(verdict),  # one rule for every output (ShownRatio), whatever a saved file phrased
    )


def no_verdict(name: str, statuses: Sequence[str]) -> VerdictView:
    """A machine on which the analysis could pair no 16-bit run with a float32 run (its runs' statuses)."""
    failed = [s for s in statuses if s != "ok"]
    why = f" ({len(failed)} of {len(statuses)} runs did not complete)" if failed else ""
    return VerdictView(
        name, "", "original", None, "unknown", None, False, None, None,
        f"On {name}, no float32 run and 16-bit run both completed, so there is no ratio to report{why}.",
    )


def machine_verdicts(name: str, key: str, statuses: Sequence[str],
                     verdicts: Sequence[Mapping[str, Any]]) -> list[VerdictView]:
    """The verdicts on one machine (`key` as results.machine_id gives it; `statuses`: its runs')."""
    mine = [v for v in verdicts if (_text(v.get("machine")) or HOST_MACHINE) == key]
    if not mine:
        return [no_verdict(name, statuses)]
    return [verdict_view(name, v) for v in mine]


def build(source: ReportInput) -> list[VerdictView]:
    """Every machine's verdicts, in the order of the documents and their machines."""
    return [v for piece in source.pieces for m in piece.get("machines", []) for v in m.verdicts]
