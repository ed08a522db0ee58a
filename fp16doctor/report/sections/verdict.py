"""The verdicts at the top of the page (and in each machine's card of a comparison): the analysis' verdict per
16-bit run against float32, in the analysis' own words. Nothing here judges a difference or phrases a verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fp16doctor.analysis.detail import no_verdict_words
from fp16doctor.analysis.verdict import Verdict
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
    sentence: str  # the analysis' own: the verdict's headline (the machine is named beside it)
    figure: str = "no ratio"  # the analysis' "1.60x slower", ">= 166x slower", "1.25x faster", "same speed"


def verdict_view(name: str, verdict: Verdict) -> VerdictView:
    """The analysis' verdict on machine `name` (named beside it): its headline, word for word, and its figure."""
    speedup = verdict.speedup
    tone = OUTCOME_TONE.get(verdict.outcome or "", "unknown") if speedup is not None else "unknown"
    return VerdictView(
        machine=name,
        stack=_text(verdict.stack),
        variant=verdict.variant,
        precision=verdict.precision,
        tone=tone,
        speedup=speedup,
        bound=verdict.bound,
        cause_id=verdict.cause,
        basis=verdict.basis,
        sentence=_text(verdict.headline),
        figure=verdict.figure,  # one rule for every output (ShownRatio), whatever a saved file phrased
    )


def no_verdict(name: str, statuses: Sequence[str]) -> VerdictView:
    """A machine on which the analysis could pair no 16-bit run with a float32 run (its runs' statuses)."""
    return VerdictView(name, "", "original", None, "unknown", None, False, None, None, no_verdict_words(statuses))


def machine_verdicts(name: str, key: str, statuses: Sequence[str], verdicts: Sequence[Verdict]) -> list[VerdictView]:
    """The verdicts on one machine (`key` as results.machine_id gives it; `statuses`: its runs')."""
    mine = [v for v in verdicts if (v.machine or HOST_MACHINE) == key]
    if not mine:
        return [no_verdict(name, statuses)]
    return [verdict_view(name, v) for v in mine]


def build(source: ReportInput) -> list[VerdictView]:
    """Every machine's verdicts, in the order of the documents and their machines."""
    return [v for piece in source.pieces for m in piece.get("machines", []) for v in m.verdicts]
