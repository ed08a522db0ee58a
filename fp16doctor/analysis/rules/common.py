"""What every rule module shares: the finding constructor and small readers of the context."""

from __future__ import annotations

from typing import Any

from fp16doctor.analysis.context import Context, Pair, RunView, Software
from fp16doctor.analysis.roofline import RooflineEstimate, estimate_context
from fp16doctor.analysis.values import fmt_ms

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
    """Where a run ran, as an evidence line opens with it ("tf-2.15 on node2: "); nothing in a document with one
    machine and stack (RunView.place)."""
    return f"{run.place}: " if run.place else ""


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
    seen = set()
    for e in roofline_estimates(ctx):
        # One line per precision and machine: the best case does not change with the variant or its timing.
        if (e.machine, e.stack) in stacks and e.predicted_speedup is not None and e.key() not in seen:
            seen.add(e.key())
            kernels = e.kernels_words()
            lines.append(f"best case for this model on the {e.gpu_name}: at most "
                         f"{e.predicted_times()} from "
                         f"{e.precision} ({fmt_ms(e.fp32_ms)} -> {fmt_ms(e.fp16_ms)} of kernels per step, "
                         f"{e.bound}-bound)" + (f"; {kernels}" if kernels else
                                                 f"; measured {e.measured_words()}" if e.measured_speedup else ""))
    return lines




# A document's own statement of what cost the time (knowledge/stated.py): a field is a fact, a note's words a weaker
# one; both below anything measured.
STATED_CONFIDENCE = 0.55
NOTED_CONFIDENCE = 0.4
# A note quoted in evidence is cut to this many characters.
NOTE_QUOTE_CHARS = 160


def _stated_words(run: RunView, kind: str) -> str:
    facts = run.stated
    if kind == "casts" and facts.cast_ops:
        return f"{facts.cast_ops} cast ops per step"
    if kind == "cpu_fallback" and facts.cpu_fallback:
        ops = facts.cpu_fallback
        return (f"{ops} ops on the CPU" if isinstance(ops, int)
                else f"{', '.join(ops)} on the CPU")
    if kind == "transfer" and facts.transfers:
        return f"{facts.transfers} copies between host and device per step"
    note = facts.note_for(kind) or ""
    quoted = note if len(note) <= NOTE_QUOTE_CHARS else note[:NOTE_QUOTE_CHARS].rstrip() + "..."
    return f'its notes: "{quoted}"'


def stated_causes(ctx: Context, kind: str) -> list[tuple[Pair, str, float]]:
    """Each 16-bit run no faster than its baseline (float32, or the sibling 16-bit type where the document has no
    float32 run) whose document states a fact of this kind for it and not for the baseline: (the pair, the evidence
    line, the confidence a field or a note gives)."""
    found = []
    for pair in [*ctx.pairs, *ctx.peer_pairs]:
        run, base = pair.reduced, pair.fp32
        if pair.faster or not run.stated.says(kind):
            continue
        if base.stated.says(kind) and not _more(run, base, kind):
            continue  # the baseline states as much: not what the 16-bit type changed
        line = (f"{at(run)}the document states {_stated_words(run, kind)} in {run.precision}"
                + (f" (and {_stated_words(base, kind)} in {base.precision})" if base.stated.says(kind) else "")
                + f"; {pair.describe()} (stated, not measured)")
        found.append((pair, line, STATED_CONFIDENCE if run.stated.structured(kind) else NOTED_CONFIDENCE))
    return found


def _more(run: RunView, base: RunView, kind: str) -> bool:
    """The 16-bit run's stated count above the baseline's (casts, copies): what the precision added."""
    mine, theirs = ((run.stated.cast_ops, base.stated.cast_ops) if kind == "casts"
                    else (run.stated.transfers, base.stated.transfers) if kind == "transfer" else (None, None))
    return mine is not None and (theirs is None or mine > theirs)
