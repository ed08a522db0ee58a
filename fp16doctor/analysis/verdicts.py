"""Verdicts: one per machine, stack, variant and 16-bit precision, computed from the accounting. The report and
the terminal render these; they never choose a cause themselves."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fp16doctor.analysis.causes import HALF, Accounting, Share
from fp16doctor.analysis.context import BF16, REDUCED, SIXTEEN_BIT, Context
from fp16doctor.analysis.device import Accounted, DeviceSplit, EstimatedBound, accounting, device_split, estimated_bound
from fp16doctor.analysis.ledger import part_in_step
from fp16doctor.analysis.registry import REGISTRY, SPEED_CAUSES
from fp16doctor.analysis.roofline import RooflineEstimate
from fp16doctor.analysis.values import (
    BASIS_WORDS,
    ShownRatio,
    as_list,
    as_number,
    as_positive,
    as_str,
    figure,
    fmt_ms,
    on,
    round_ratio,
    saved_outcome,
    saved_ratio,
    saved_speedup,
)
from fp16doctor.analysis.verdict import Verdict

Record = dict[str, Any]  # a verdict as results.json keeps it, before it is frozen


def shown_ratio(acc: Accounting) -> ShownRatio:
    """The pair's ratio as every output shows it (Pair.shown), "same speed" where the accounting finds no
    significant difference."""
    shown = acc.pair.shown
    return shown if acc.significant else replace(shown, outcome="no_significant_difference")


def _ratio_phrase(acc: Accounting) -> tuple[str, str]:
    """("166x slower", "slower"), with the digits the interval supports (ShownRatio); a run cut short by the
    slow-step bound gives only a one-sided bound, ">= 19x slower"."""
    if not acc.significant:
        return "no faster or slower (the difference is inside the runs' spread)", "no_significant_difference"
    shown = shown_ratio(acc)
    return shown.figure(), "slower" if shown.slower else "faster"


def _context(acc: Accounting) -> str:
    """' (551 ms vs 96 ms per step; 95% interval 5.56-5.97x, 6 paired rounds)': the two steps the ratio comes
    from, and the interval in the headline's own direction where rounds support one; a cut-short run's bound
    says which steps it compared."""
    interval = acc.pair.interval
    parts = [f"{fmt_ms(interval.other_ms)} vs {fmt_ms(interval.fp32_ms)} per step"]
    spread = shown_ratio(acc).interval_text()
    if interval.is_bound:
        parts[0] = f"cut short by the slow-step bound, {interval.compared}: {fmt_ms(interval.other_ms)} vs " \
                   f"{fmt_ms(interval.fp32_ms)}; a one-sided bound, no interval from one step"
    elif interval.is_rounds and spread:
        parts.append(f"{interval.confidence_level:.0%} interval {spread}, {interval.rounds_words()}")
    elif interval.widened_by:
        parts.append(f"two processes{interval.widened_words()}")
    return f" ({'; '.join(parts)})"


def _inside(acc: Accounting) -> str:
    interval = acc.pair.interval
    spread = shown_ratio(acc).interval_text()
    if interval.is_rounds and spread:
        return (f"the {interval.confidence_level:.0%} interval {spread} of {interval.repeats} rounds"
                f"{interval.widened_words()}")
    return "the runs' spread" + interval.widened_words()


def _cause_phrase(share: Share, precision: str) -> str:
    spec = REGISTRY.get(share.cause)
    title = share.title(precision) or (spec.title if spec else share.cause)
    return title[0].lower() + title[1:]


# A fifth of the difference that no cause explains is said in the headline, so "mostly because" never reads as all.
UNEXPLAINED_SAID = 0.2
# Of the unexplained part, at least this share missing from the profiled windows is worth saying.
WINDOW_MISS_SHARE = 0.5


def _window_difference(acc: Accounting) -> float | None:
    """The 16-bit window's step less float32's (measured ops can account for no more than this, in the timed
    difference's direction). None unless both runs have a window after their timing."""
    fp32, reduced = acc.pair.fp32.ops, acc.pair.reduced.ops
    if fp32 is None or reduced is None or fp32.window_ms is None or reduced.window_ms is None:
        return None
    if fp32.window_kind != "after_timing" or reduced.window_kind != "after_timing":
        return None
    return reduced.window_ms - fp32.window_ms


def share_of_difference(acc: Accounting, share: Share, between: str = "") -> str:
    """What a cause explains of its pair's difference, in the words a reader can check: its ledger part's change
    beside the step's and what moved against it, as the parts line says them (ledger.part_in_step: "host batch
    +477 ms of the +362 ms step; unplaced −100 ms ... against it"), where the figure is a part's; else "362 ms of the
    362 ms difference". `between` names the two configurations after the step or the difference."""
    if share.part is not None and acc.ledgers is not None:
        base, mine = acc.ledgers
        return part_in_step(share.part, mine, base, between)
    return f"{fmt_ms(share.ms)} of the {fmt_ms(acc.magnitude_ms)} difference{between}"


@dataclass(frozen=True)
class _Decided:
    """What a verdict decided of its accounting, before anything is said: the ratio's words and outcome, the speed
    causes and the one that explains the most, the share they explain, the windows' difference, the device split and
    its accounting, or the roofline's bound where no trace measured the device."""

    acc: Accounting
    phrase: str
    outcome: str
    causes: tuple[Share, ...]
    share: float
    unexplained: float
    window_delta: float | None
    split: DeviceSplit | None
    accounted: Accounted | None
    guessed: EstimatedBound | None

    @property
    def top(self) -> Share | None:
        return self.causes[0] if self.causes else None

    @classmethod
    def of(cls, acc: Accounting, estimate: RooflineEstimate | None) -> _Decided:
        pair = acc.pair
        phrase, outcome = _ratio_phrase(acc)
        causes = tuple(s for s in acc.shares if s.cause in SPEED_CAUSES)
        explained = sum(s.ms for s in causes)
        share = min(1.0, explained / acc.magnitude_ms) if acc.significant and acc.magnitude_ms else 0.0
        split = device_split(pair)
        # The timed difference over the step's parts, one accounting for the sentence and the record: the ledgers'
        # where the pair has them (the figures its parts line and cause lines quote), else the device split's.
        accounted = accounting(split, acc.difference_ms, acc.ledgers) if split is not None else None
        unexplained = max(0.0, acc.magnitude_ms - explained) if acc.significant else 0.0
        # No trace measured the device: the roofline's best case stands in, labelled an estimate.
        guessed = estimated_bound(pair, estimate.fp32_ms, estimate.fp16_ms) if (
            split is None and estimate is not None) else None
        return cls(acc, phrase, outcome, causes, share, unexplained, _window_difference(acc), split, accounted,
                   guessed)


def verdict_for(acc: Accounting, estimate: RooflineEstimate | None = None,
                findings: Sequence[Mapping[str, Any]] = (), unlisted: str | None = None) -> Verdict:
    """The verdict of one accounting: its record as results.json keeps it, with its likely cause where nothing
    measured explains most of it (likely_cause), and its headline composed once from what it decided."""
    decided = _Decided.of(acc, estimate)
    record = _record(decided)
    found, why = likely_cause(record, acc, findings, unlisted)
    unparsed = sorted(set(acc.pair.reduced.software.unparsed() + acc.pair.fp32.software.unparsed()))
    likely: dict[str, Any] = {"likely_cause": found, **({"unparsed_versions": unparsed} if unparsed else {})}
    if why is not None:
        likely["no_likely_cause"] = why + (f"; versions not understood: {', '.join(unparsed)}" if unparsed else "")
    top = decided.top
    # Where the headline does not name it already, with its estimate: the likely cause, and how to measure it.
    probably = _probably(found, acc) if found is not None and (top is None or top.cause != found["id"]) else None
    # A device the tables lack, with nothing to name: the headline says the runs are all that speaks for it.
    runs_only = (f"the device tables do not list {unlisted}, so only these runs speak for it ({not_measured(acc)})"
                 if found is None and why is not None and unlisted is not None and acc.difference_ms > 0 else None)
    return Verdict.of({**record, "headline": _headline(decided, probably, runs_only), **likely})


def _probably(found: Mapping[str, Any], acc: Accounting) -> str:
    """"probably because <the likely cause's title> (not measured: <how to measure it>)"."""
    how = f"not measured: {found['confirm']}" if found.get("confirm") else not_measured(acc)
    return f"probably because {_title_phrase(str(found['title']))} ({how})"


def _headline(decided: _Decided, probably: str | None, runs_only: str | None) -> str:
    """The verdict's one sentence, clause by clause, from what was decided: the ratio and the two steps, the cause
    that explains the most (or that none does, with what probably does right after it), what moved against it, what
    is unexplained, what the profiled windows missed, the device's split or the roofline's bound, then what only the
    runs say, or what probably causes it where the measured cause that leads is another one."""
    acc, top, share, unexplained = decided.acc, decided.top, decided.share, decided.unexplained
    split, guessed, window_delta = decided.split, decided.guessed, decided.window_delta
    pair = acc.pair
    reduced, fp32 = pair.reduced, pair.fp32
    where = on(reduced.place)
    variant = "" if reduced.variant == "original" else f", {reduced.variant}"
    base = fp32.precision  # float32; another 16-bit type where the document has no float32 run (Context.peer_pairs)
    interval = pair.interval
    headline = f"{reduced.precision} is {decided.phrase} than {base}{where}{variant}{_context(acc)}"
    if interval.aa is not None and not interval.aa.passed:
        headline = (f"{reduced.precision} against {base}{where}{variant} is not measurable {interval.aa.scope} "
                    f"({fmt_ms(interval.other_ms)} vs {fmt_ms(interval.fp32_ms)} per step): {interval.aa.reason}")
        if split is not None and split.step_ms:
            # What the profile measured the precision change on the device, where the timed steps cannot say.
            headline += f"; the profile measured what it changed on the device: {split.change_words()}"
    elif interval.refused:
        headline = (f"{reduced.precision} against {base}{where}{variant} is not compared: "
                    f"{interval.refused}")
    elif decided.outcome == "no_significant_difference":
        headline = f"{reduced.precision} is no faster or slower than {base}{where}{variant} " \
                   f"(the difference is inside {_inside(acc)})"
    elif top is not None:
        basis = BASIS_WORDS[top.basis]
        how = "mostly" if top.ms >= HALF * acc.magnitude_ms else "partly"
        headline += (f": {how} because {_cause_phrase(top, reduced.precision)} "
                     f"({basis}: {share_of_difference(acc, top)})")
    else:
        headline += f"; no measured cause explains the {fmt_ms(acc.magnitude_ms)} difference"
        if probably is not None:
            headline += f", {probably}"
            probably = None
    if acc.significant and acc.against:
        moved = "added" if acc.difference_ms < 0 else "saved"
        headline += "; against it, " + ", ".join(
            f"{_cause_phrase(s, reduced.precision)} ({moved} {fmt_ms(s.ms)})" for s in acc.against)
    # On a GPU trace what no cause explains is sized by the step's parts (`accounted`: the ledgers' unplaced time, or
    # the host time the trace cannot place), never a cause; elsewhere the headline says how much is unexplained.
    if acc.significant and top is not None and 1 - share >= UNEXPLAINED_SAID and split is None:
        headline += f"; {fmt_ms(unexplained)} ({1 - share:.0%}) of it is unexplained"
    # The windows' difference in the direction of the timed one: what the ops there can account for at most.
    shown = max(window_delta if acc.difference_ms > 0 else -window_delta, 0.0) if window_delta is not None else 0.0
    missed = acc.magnitude_ms - shown if window_delta is not None else 0.0
    if acc.significant and share < HALF and missed >= WINDOW_MISS_SHARE * unexplained and missed > 0:
        # The ops were measured in the windows: what the windows did not show, no op can account for.
        assert reduced.ops is not None and fp32.ops is not None
        headline += (f"; the profiled steps were {fmt_ms(shown)} apart ({reduced.precision} "
                     f"{fmt_ms(reduced.ops.window_ms)}, {base} {fmt_ms(fp32.ops.window_ms)} per step), so "
                     f"{fmt_ms(missed)} of the timed difference did not recur there (the steps changed speed "
                     "between the timing and the window)")
    if split is not None and not interval.refused and (interval.aa is None or interval.aa.passed):
        headline += f"; {split.words(decided.accounted if acc.significant else None, pair.step_ms)}"
    if guessed is not None and guessed.bound_elsewhere and acc.significant and not interval.refused:
        headline += f"; {guessed.words(reduced.precision)}"
    return "".join([headline, *(f"; {c}" for c in (runs_only, probably) if c)])


def _record(decided: _Decided) -> Record:
    """The verdict's record as results.json keeps it, but for its likely cause and its headline."""
    acc, top, causes, share, unexplained = decided.acc, decided.top, decided.causes, decided.share, decided.unexplained
    split, accounted, guessed, window_delta = decided.split, decided.accounted, decided.guessed, decided.window_delta
    outcome = decided.outcome
    pair = acc.pair
    reduced, fp32 = pair.reduced, pair.fp32
    base = fp32.precision
    interval = pair.interval
    return {
        "machine": reduced.machine,
        "stack": reduced.stack,
        "variant": reduced.variant,
        "precision": reduced.precision,
        "baseline": base,  # what the ratio is against
        "ratio": round_ratio(pair.speedup),
        "ratio_interval": [round_ratio(interval.low), round_ratio(interval.high)],
        "confidence_level": interval.confidence_level,
        "repeats": interval.repeats,
        "interval_method": interval.method,
        **({"interval_widened_by": round(interval.widened_by, 4)} if interval.widened_by else {}),
        # What the interval covers: the variation between processes it measured, or only that inside one.
        **({"interval_scope": interval.scope} if interval.scope else {}),
        **({"interval_processes": interval.processes,
            "interval_between_processes_sd": round(math.sqrt(interval.between_variance), 4)}
           if interval.processes > 1 else {}),
        **({"compared": interval.compared} if interval.compared else {}),
        **({"comparison_refused": interval.refused} if interval.refused else {}),
        **({"aa_check": interval.aa.to_dict()} if interval.aa is not None else {}),
        # The steps the ratio and the difference come from: the rounds' geometric means, each run's own-process
        # median, or a cut run's first step and float32's.
        "step_ms": pair.step_ms,
        "fp32_step_ms": pair.fp32_step_ms,
        "difference_ms": round(acc.difference_ms, 3),
        "difference_interval_ms": [round(interval.difference_low_ms, 3),
                                   None if interval.difference_high_ms is None
                                   else round(interval.difference_high_ms, 3)],
        "outcome": outcome,
        "bound": interval.is_bound,  # the ratio is only a one-sided bound (cut short by the slow-step bound)
        "cut_short": reduced.bound,  # one step measured: the run met the slow-step bound
        # That step was ended inside at the bound: its time is censored, the ratio can only be a bound.
        **({"cut_in_step": True} if reduced.censored else {}),
        **({"numerics": "not judged: the run was cut short after its first steps"} if reduced.bound else {}),
        "cause": top.cause if top else None,
        "basis": top.basis if top else None,
        "explained_share": round(share, 3),
        "unexplained_ms": round(unexplained, 3),
        **({"window_difference_ms": round(window_delta, 3)} if window_delta is not None else {}),
        **({"noise_floor_interval": [round(pair.noise_floor.low, 4), round(pair.noise_floor.high, 4)]}
           if pair.noise_floor is not None else {}),
        "against": [{"id": s.cause, "ms": round(s.ms, 3), "basis": s.basis, **({"part": s.part} if s.part else {}),
                     "ops": [{"name": o.get("name"), "layer": o.get("layer"), "pass": o.get("pass"),
                              "dtype": o.get("dtype"), "ms": o.get("ms")} for o in s.ops]} for s in acc.against],
        "causes": [{"id": s.cause, "explains_ms": round(s.ms, 3), "basis": s.basis,
                    **({"part": s.part} if s.part else {}),
                    **({"confirmed_by": s.confirmed_by} if s.confirmed_by else {}),
                    "ops": [{"name": o.get("name"), "layer": o.get("layer"), "pass": o.get("pass"),
                             "dtype": o.get("dtype"), "ms": o.get("ms")} for o in s.ops]} for s in causes],
        # Host or device (analysis/device.py): each run's device time, where the runs carry it, and the Amdahl bound.
        **(split.verdict_fields() | {"host_difference_ms": round(acc.difference_ms - split.device_difference_ms, 3),
                                     "accounted": accounted.to_dict()}
           if split is not None and accounted is not None else guessed.verdict_fields() if guessed is not None else {}),
        # ShownRatio's words for no difference: "same speed" inside the equivalence band, "not resolved" past it, or
        # "not measurable" for an interval off 1.
        "figure": decided.phrase if outcome != "no_significant_difference" else shown_ratio(acc).figure(),
    }


def verdicts(accountings: list[Accounting], findings: Sequence[Mapping[str, Any]] = (),
             estimates: Sequence[RooflineEstimate] = (),
             unlisted: Mapping[tuple[str, str], str] | None = None) -> tuple[Verdict, ...]:
    """One verdict per accounting; `unlisted` names the devices the tables do not list, by (machine, device)."""
    best: dict[tuple[str, str, str, str], RooflineEstimate] = {}
    for e in estimates:  # the model's best case on its device, whatever the variant timed
        best.setdefault((e.machine, e.stack, e.device, e.precision), e)
    return tuple(verdict_for(acc, best.get((acc.pair.reduced.machine, acc.pair.reduced.stack,
                                            acc.pair.reduced.device, acc.pair.reduced.precision)),
                             findings, (unlisted or {}).get((acc.pair.reduced.machine, acc.pair.reduced.device)))
                 for acc in accountings)


def unlisted_devices(ctx: Context) -> dict[tuple[str, str], str]:
    """The GPUs of a document's 16-bit runs that no table lists, by (machine, device): their reported names."""
    found = {}
    for run in ctx.runs:
        gpu = ctx.gpu_for(run)
        if run.on_gpu and (gpu is None or not gpu.known):
            found[(run.machine, run.device)] = (gpu.reported_name if gpu is not None else None) or "this GPU"
    return found


# ---------------------------------------------------------------------------------------- likely cause
# When nothing measured (ops, an experiment) accounts for most of a verdict's difference, the finding whose device
# facts or tables best explain it is named as `likely_cause`, never charged as time. In order of preference: facts
# that say the device cannot do better first, then estimates from the step times; each speaks for the 16-bit
# precisions listed and for a slower verdict only (a gain needs no fault to explain it).
LIKELY_CAUSES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("stack_incompatible_gpu", "device_fact", SIXTEEN_BIT),
    ("kernel_too_old", "device_fact", BF16),
    ("bf16_unsupported", "device_fact", BF16),
    ("no_fast_fp16_hardware", "device_fact", REDUCED),
    # Casts are part of a framework's 16-bit path, named where the document points at them (mixed against pure
    # float16, casts it states, mixed precision on a tiny training step): before the path in general.
    ("cast_overhead", "estimate", SIXTEEN_BIT),
    ("framework_16bit_path", "estimate", SIXTEEN_BIT),
    ("host_fp16_emulation", "estimate", ("float16",)),
    ("old_stack", "estimate", SIXTEEN_BIT),
    ("tensor_cores_not_eligible", "estimate", REDUCED),
    ("no_tensor_cores", "device_fact", REDUCED),
    # What the document states the host does every step (a copy between host and device).
    ("input_pipeline_bound", "estimate", SIXTEEN_BIT),
    ("small_model_overhead", "estimate", SIXTEEN_BIT),
)
MEASURED_BASES = ("measured_ops", "experiment")
NOT_MEASURED = "not measured: fp16doctor diagnose on that machine measures it"
# Where the pair's runs were profiled, a diagnose did measure that machine: what it lacks is an op that accounts for it.
NOT_IN_THE_OPS = "not measured: the profiled ops of these runs account for none of it"


def not_measured(acc: Accounting) -> str:
    """How the verdict says its likely cause was not measured: a document without profiles needs a diagnose on that
    machine; one with them has it, and its ops named no cause."""
    profiled = acc.pair.reduced.ops is not None and acc.pair.fp32.ops is not None
    return NOT_IN_THE_OPS if profiled else NOT_MEASURED


def _speaks_for(finding: Mapping[str, Any], verdict: Mapping[str, Any]) -> bool:
    """A finding speaks for a verdict's run where the machine, stack and precision it names (if any) are the
    verdict's: speed findings name their pair, document rules the stacks (and precisions) they judged."""
    for key in ("machine", "stack", "precision"):
        value = finding.get(key)
        if value is not None and value != verdict.get(key):
            return False
    for key, value in (("stacks", verdict.get("stack")), ("precisions", verdict.get("precision"))):
        listed = finding.get(key)
        if isinstance(listed, list) and listed and value not in listed:
            return False
    return True


def _why(evidence: Sequence[str], verdict: Mapping[str, Any]) -> str | None:
    """The finding's line that speaks of the verdict's stack (evidence lines start with where they ran), else its
    first."""
    stack = str(verdict.get("stack"))
    return next((e for e in evidence if e.startswith(f"{stack}:") or e.startswith(f"{stack} on ")),
                evidence[0] if evidence else None)


def likely_cause(verdict: Mapping[str, Any], acc: Accounting, findings: Sequence[Mapping[str, Any]],
                 unlisted: str | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(likely_cause, why none fits) for a verdict: (None, None) where a measured cause accounts for most of the
    difference or there is no difference to explain."""
    if not acc.significant:
        return None, None
    measured = sum(s.ms for s in acc.shares if s.cause in SPEED_CAUSES and s.basis in MEASURED_BASES)
    if acc.magnitude_ms and measured >= HALF * acc.magnitude_ms:
        return None, None
    precision = str(verdict.get("precision"))
    if acc.difference_ms < 0:
        return None, ("a faster 16-bit step needs no fault to explain it: no finding is charged with the gain "
                      f"({not_measured(acc)})")
    # A finding that names how a device fact costs the time (`mechanism_for` this precision: the casts a library or
    # the document says it makes) comes before the fact itself; then the table's order.
    mechanism = [c for c in LIKELY_CAUSES if any(f.get("id") == c[0] and precision in as_list(f.get("mechanism_for"))
                                                 for f in findings)]
    for fid, basis, precisions in [*mechanism, *LIKELY_CAUSES]:
        if precision not in precisions:
            continue
        finding = next((f for f in findings if f.get("id") == fid and _speaks_for(f, verdict)), None)
        if finding is None:
            continue
        evidence = [str(e) for e in as_list(finding.get("evidence"))]
        confirm = as_str(finding.get("confirm"))  # the measurement that would confirm it, where the rule says one
        return {"id": fid, "basis": basis, "title": as_str(finding.get("title")) or REGISTRY[fid].title,
                "why": _why(evidence, verdict) or REGISTRY[fid].title,
                **({"confirm": confirm} if confirm else {})}, None
    if unlisted is not None:
        # A device the tables lack: what the runs themselves say of it, not silence.
        return None, (f"the device tables do not list {unlisted}, so no table says whether it computes "
                      f"{precision.removeprefix('mixed_')} faster than {verdict.get('baseline')}; the runs say its "
                      f"{precision} path is {verdict.get('figure')} here, the same workload on the same device and "
                      f"stack ({not_measured(acc)})")
    return None, (f"no device fact or table accounts for {precision} being {verdict.get('figure')} here "
                  f"({not_measured(acc)})")


# ---------------------------------------------------------------------------------------- saved verdicts
# A results file may carry verdicts of the contract's short shape (ratio, cause, basis; no headline), with no runs
# to remake them from: the analysis phrases them here, once, and every output prints that.

def _title_phrase(title: str) -> str:
    title = title.strip().rstrip(".")
    # "Pure float16 ..." -> "pure float16 ...", but keep acronyms such as "GPU ..." or "TF 1.7 ...".
    if len(title) > 1 and title[0].isupper() and (title[1].islower() or title[1] == " "):
        title = title[0].lower() + title[1:]
    return title


def _matches(finding: Mapping[str, Any], verdict: Mapping[str, Any]) -> int:
    """How closely a finding speaks of a verdict's run (-1: not at all): same id, then machine, stack, precision."""
    if finding.get("id") != verdict.get("cause"):
        return -1
    score = 0
    for key in ("machine", "stack", "precision", "variant"):
        value = finding.get(key)
        if value is None:
            continue
        if value != verdict.get(key, "original" if key == "variant" else None):
            return -1
        score += 1
    return score


def _cause_title(verdict: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> str:
    """The title of the finding the verdict names (the most specific one for its run), else the registry's."""
    cause = str(verdict.get("cause"))
    scored = [(_matches(f, verdict), i) for i, f in enumerate(findings)]
    best = max((s for s in scored if s[0] >= 0), default=None, key=lambda s: (s[0], -s[1]))
    if best is not None:
        title = as_str(findings[best[1]].get("title"))
        if title:
            return title
    spec = REGISTRY.get(cause)
    return spec.title if spec is not None else cause


def complete_saved(verdict: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> Record:
    """A saved verdict with its outcome, figure and headline: its own where it has them, else phrased from what it
    says (its ratio, cause, basis, bound and unexplained share); nothing here chooses a cause."""
    out = dict(verdict)
    speedup = saved_speedup(verdict)
    outcome = saved_outcome(verdict, speedup)
    if outcome is not None:
        out["outcome"] = outcome
    out["figure"] = figure(out)
    if as_str(verdict.get("headline")):
        return out
    precision = as_str(verdict.get("precision")) or "16-bit"
    stack = as_str(verdict.get("stack")) or "host"
    variant = as_str(verdict.get("variant")) or "original"
    if speedup is None or outcome is None:
        out["headline"] = f"{precision} has no ratio to float32"
        return out
    step, fp32 = as_positive(verdict.get("step_ms")), as_positive(verdict.get("fp32_step_ms"))
    context = [f"{fmt_ms(step)} vs {fmt_ms(fp32)} per step"] if (step and fp32) else []
    if stack != "host":
        context.append(f"stack {stack}")
    if variant != "original":
        context.append(variant)
    shown = saved_ratio(verdict)
    if outcome in ("slower", "faster") and shown is not None:
        comparison = shown.figure("than")
    else:
        comparison = "about as fast as"
        context.append("the difference is inside the runs' spread")
    sentence = f"{precision} is {comparison} float32"
    if context:
        sentence += f" ({'; '.join(context)})"
    difference = as_number(verdict.get("difference_ms"))
    cause = as_str(verdict.get("cause"))
    if cause is not None and outcome in ("slower", "faster"):
        shares = [c for c in as_list(verdict.get("causes")) if isinstance(c, Mapping) and c.get("id") == cause]
        cause_ms = as_positive(shares[0].get("explains_ms")) if shares else None
        detail = BASIS_WORDS.get(as_str(verdict.get("basis")) or "", "")
        if cause_ms is not None and difference is not None:
            detail += f"{': ' if detail else ''}{fmt_ms(cause_ms)} of the {fmt_ms(abs(difference))} difference"
        share = as_number(verdict.get("explained_share"))
        # "mostly" only when the cause accounts for at least half of the difference, as the numbers say.
        own = cause_ms / abs(difference) if (cause_ms is not None and difference) else share
        sentence += f", {'partly' if own is not None and own < HALF else 'mostly'} because "
        sentence += _title_phrase(_cause_title(verdict, findings))
        sentence += f" ({detail})" if detail else ""
        unexplained = as_positive(verdict.get("unexplained_ms"))
        if share is not None and share < HALF:
            amount = f"{fmt_ms(unexplained)} ({1 - share:.0%})" if unexplained is not None else f"{1 - share:.0%}"
            sentence += f"; {amount} of it is unexplained"
    elif outcome in ("slower", "faster"):
        amount = f"the {fmt_ms(abs(difference))} difference" if difference is not None else "it"
        sentence += f"; no finding explains {amount}"
    out["headline"] = sentence
    return out
