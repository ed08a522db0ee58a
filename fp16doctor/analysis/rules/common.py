"""What every rule module shares: the finding constructor and small readers of the context."""

from __future__ import annotations

from typing import Any

from fp16doctor.analysis.context import Context, RunView, Software
from fp16doctor.analysis.roofline import RooflineEstimate, estimate_context
from fp16doctor.analysis.values import fmt_ms
from fp16doctor.results import HOST_MACHINE

Finding = dict[str, Any]
SEED_STEPS_PER_EPOCH = 4  # the script: nb_train_samples 512 / batch_size 128



def make_finding(
    fid: str,
    title: str,
    severity: str,
    confidence: float,
    evidence: list[str],
    recommendation: str,
    **extra: Any,
) -> Finding:
    return {
        "id": fid,
        "title": title,
        "severity": severity,
        "confidence": round(max(0.05, min(confidence, 0.99)), 2),
        "evidence": evidence,
        "recommendation": recommendation,
        **extra,
    }




def stacks_of(runs: list[RunView]) -> list[str]:
    return sorted({r.stack for r in runs})


def at(run: RunView) -> str:
    """Where a run ran, as evidence names it: its stack, and its machine where that is not the host."""
    return run.stack if run.machine == HOST_MACHINE else f"{run.stack} on {run.machine}"


def where_of(runs: list[RunView]) -> list[dict[str, str]]:
    """The machines and stacks a finding speaks of: its advice is phrased for each from that machine's own table
    (two machines with one stack name never share advice)."""
    return [{"machine": m, "stack": s} for m, s in sorted({(r.machine, r.stack) for r in runs})]


def first_software(runs: list[RunView]) -> Software:
    for run in runs:
        if run.software.known:
            return run.software
    return runs[0].software if runs else Software.from_run({})


def roofline_estimates(ctx: Context) -> list[RooflineEstimate]:
    return estimate_context(ctx)


def roofline_lines(ctx: Context, runs: list[RunView]) -> list[str]:
    """'at most 2.6x from fp16 here; measured 0.62x' for the runs' stacks, where the GPU is in the table."""
    stacks = {(r.machine, r.stack) for r in runs}
    lines = []
    for e in roofline_estimates(ctx):
        if (e.machine, e.stack) in stacks and e.predicted_speedup is not None:
            measured = f"; measured {e.measured_words()}" if e.measured_speedup else ""
            lines.append(f"best case for this model on the {e.gpu_name}: at most "
                         f"{e.predicted_times()} from "
                         f"{e.precision} ({fmt_ms(e.fp32_ms)} -> {fmt_ms(e.fp16_ms)} per step, {e.bound}-bound)"
                         f"{measured}")
    return lines


