"""The words of a prescription's entries, written once: a measured configuration against float32 and its notes, a
change to the user's code with its worth, each precision with batches in memory. The analysis and every output say
them with these functions; an output imports them from here, never from the deciders."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from fp16doctor.analysis.intervals import FIRST_STEP
from fp16doctor.analysis.ledger import (
    OTHER_PARTS,
    SHOWN_PART_MS,
    UNPLACED,
    UNPLACED_WORDS,
    Ledger,
    LedgerOp,
    moved_words,
    shown_changes,
)
from fp16doctor.analysis.next_bound import idle_words
from fp16doctor.analysis.runs import RunRow
from fp16doctor.analysis.values import (
    CANNOT_MEASURE,
    EQUIVALENCE_BAND,
    ShownRatio,
    as_mapping,
    as_str,
    fmt_ms,
    fmt_signed_ms,
    fmt_times,
    pass_words,
    variant_words,
)
from fp16doctor.analysis.verdict import Verdict
from fp16doctor.knowledge.kernels import kernel_short_name


def config_notes(unsafe: Any, caveat: Any, bound: bool, compared: str | None = None) -> list[str]:
    notes = [str(n) for n in (unsafe, caveat) if n]
    if bound:
        notes.append(f"cut short by the slow-step bound: its ratio is a one-sided bound ({compared or FIRST_STEP}) "
                     "and its numerics are not judged")
    return notes


def _next_bound_words(change: Mapping[str, Any]) -> str:
    """A change after the input pipeline as every output says it: compiled execution, measured or with its command;
    uint8 batches from pinned memory, an estimate."""
    if change.get("kind") == "batch_bytes":
        return (f"uint8 batches from pinned memory: the copy {fmt_ms(change.get('copy_ms'))} -> about "
                f"{fmt_ms(change.get('estimated_copy_ms'))} a step at {change.get('rate_basis')}, so "
                f"{fmt_ms(change.get('step_ms'))} -> about {fmt_ms(change.get('changed_step_ms'))} in memory "
                "(an estimate)")
    what = f"compiled execution ({change.get('setting')} on {change.get('backend')})"
    idle = as_mapping(change.get("device_idle"))
    why = f"; {idle_words(idle)}" if idle else ""
    if change.get("basis") == "measured":
        return (f"{what}: {fmt_ms(change.get('step_ms'))} -> {fmt_ms(change.get('changed_step_ms'))} a step "
                f"({change.get('figure')}), float32{_as_measured(change)}, measured by the "
                f"{change.get('measured_by')} variant{why}")
    measure = ("its command below" if change.get("command")
               else f"{CANNOT_MEASURE} here ({change.get('no_command')})")
    return f"{what}: untested, {measure}{why}"


def _as_measured(change: Mapping[str, Any]) -> str:
    """" with batches in memory" or " as written": the configuration a change was measured against."""
    words = variant_words(as_str(change.get("variant")) or "original")
    return f" with {words}" if words else " as written"


def change_words(change: Mapping[str, Any]) -> str:
    """"input pipeline: 303 ms -> 82 ms a step (3.7x faster), measured with batches in memory", "backend jax:
    83 ms -> 37 ms a step (2.2x faster), float32 with batches in memory": a user change as every output says it."""
    kind = str(change.get("kind", "")).replace("_", " ")
    if change.get("kind") in ("compiled", "batch_bytes"):
        return _next_bound_words(change)
    if change.get("kind") == "backend":
        what = f"backend {change.get('backend')}"
        measured = ("float32 with batches in memory" if change.get("variant") == "synthetic_input"
                    else "float32 as written") + ", each backend in processes of its own"
    else:
        what, measured = kind, "measured with batches in memory"
    return (f"{what}: {fmt_ms(change.get('step_ms'))} -> {fmt_ms(change.get('changed_step_ms'))} a step "
            f"({change_worth(change)}), {measured}")

def change_worth(change: Mapping[str, Any], detail: bool = True) -> str:
    """"3.7x faster", or where each configuration's own process measured less: "2.8-3.7x faster" and (`detail`) ":
    3.7x in the interleaved rounds, 2.8x in processes of their own, 305 ms -> 109 ms"."""
    own, rounds = change.get("own_process_speedup"), change.get("speedup")
    if not isinstance(own, (int, float)) or not isinstance(rounds, (int, float)) or \
            fmt_times(own, 1.0) == fmt_times(rounds, 1.0) or own <= 1 or rounds <= 1:
        return str(change["figure"])
    low, high = sorted((own, rounds))
    said = f"{fmt_times(low, 1.0).removesuffix('x')}-{fmt_times(high, 1.0)} faster"
    if not detail:
        return said
    before, after = change.get("own_process_ms") or [None, None]
    return (f"{said}: {fmt_times(rounds, 1.0)} in the interleaved rounds, {fmt_times(own, 1.0)} in processes of "
            f"their own, {fmt_ms(before)} -> {fmt_ms(after)}")


def in_memory_words(entry: Mapping[str, Any]) -> str:
    """"float16: 1.8x faster (45 ms vs 82 ms; the device's work −14 ms)"."""
    device = entry.get("device_difference_ms")
    part = f"; the device's work {fmt_signed_ms(device)}" if isinstance(device, (int, float)) else ""
    return (f"{entry.get('precision')}: {entry.get('figure')} ({fmt_ms(entry.get('step_ms'))} vs "
            f"{fmt_ms(entry.get('fp32_step_ms'))}{part})")


# A ledger in words: a step and the parts that add up to it, and a configuration's parts against float32's.
TOP_OPS = 3  # the ops a CPU's bound names per run


def _step_words(ledger: Ledger) -> str:
    """"665 ms a step", or a cut run's bound: "cut at fp16doctor's bound after 5865 ms (float32's first step 864 ms +
    5000 ms)": a bound is never said as a step."""
    if not ledger.cut:
        return f"{fmt_ms(ledger.step_ms)} a step"
    rule = f" ({ledger.bound_rule})" if ledger.bound_rule else ""
    return f"cut at fp16doctor's bound after {fmt_ms(ledger.step_ms)}{rule}"

def ledger_words(ledger: Ledger) -> str:
    """"665 ms a step = host batch 638 ms + kernels 15 ms + copies 6.8 ms + unplaced 5.4 ms": a step and the parts
    that add up to it, in the ledger's order (its priority), the time no part places last."""
    words = [f"{p.words} {fmt_ms(p.ms)}" for p in ledger.parts if p.ms >= SHOWN_PART_MS]
    if ledger.unplaced_ms >= SHOWN_PART_MS:
        words.append(f"{UNPLACED_WORDS} {fmt_ms(ledger.unplaced_ms)}")
    return _step_words(ledger) + (f" = {' + '.join(words)}" if words else ": no part measured")

def _op_words(op: LedgerOp) -> str:
    said = [kernel_short_name(op.impl)] if op.impl and op.impl.strip() else []
    if op.in_flight:
        said.append("running at the cut")
    return f"{op.layer or op.name} {pass_words(op.pass_)} {fmt_ms(op.ms)}" + (f" ({', '.join(said)})"
                                                                                      if said else "")

# A step compiled as one cluster, as the profiler sees it (XLA on TensorFlow runs it as one op it does not open).
COMPILED_CLUSTER = "the step ran compiled (jit_compile=True), one cluster the profiler does not see into"


def cpu_ledger_line(ledger: Ledger) -> str:
    """A CPU run's step, its parts, and its largest ops; ops that shared their time (several cores, or waiting on
    each other) are said to have run at once, so their times are not read as adding up to the step."""
    ops = sorted((o for p in ledger.parts if p.name != "input" for o in p.ops), key=lambda o: -o.ms)[:TOP_OPS]
    at_once = sum(p.ran_at_once_ms for p in ledger.parts) >= SHOWN_PART_MS
    line = f"{ledger.precision} ({ledger_words(ledger)})"
    if ledger.compiled and ledger.unplaced_ms >= ledger.placed_ms:
        line += (f"; {COMPILED_CLUSTER}: the ops it lists place {fmt_ms(ledger.placed_ms)} of the "
                 f"{fmt_ms(ledger.step_ms)} step (to see its ops, diagnose a copy of the script compiled with "
                 "jit_compile=False: another program, timed on its own)")
    elif ops:
        line += f"; largest ops{', which ran at once' if at_once else ''}: " + ", ".join(_op_words(o) for o in ops)
    return line

def two_timings(verdict: Verdict, rows: Sequence[RunRow]) -> str:
    """Where a configuration's ratio in its own process (a fit() as the user runs it) and in the interleaved rounds
    (each step beside float32's) disagree by more than the A/A control's spread (or EQUIVALENCE_BAND without one): both
    figures, and which one the user's own fit() sees; "" where they agree or one is missing."""
    mine, base = pair_rows(verdict, rows)
    if mine is None or base is None or not (mine.own_process_ms and base.own_process_ms):
        return ""
    rounds = verdict.ratio
    if rounds is None or rounds <= 0:
        return ""
    own = base.own_process_ms / mine.own_process_ms
    control = verdict.aa_check is not None
    noise = verdict.aa_check.noise if verdict.aa_check is not None else EQUIVALENCE_BAND
    if abs(math.log(own / rounds)) <= math.log1p(noise):
        return ""
    shown = ShownRatio.of(own)
    assert shown is not None
    spread = f"the A/A control's {noise:.0%}" if control else f"the {noise:.0%} equivalence band"
    return (f"Timed two ways, apart by more than {spread}: {fmt_ms(mine.own_process_ms)} against float32's "
            f"{fmt_ms(base.own_process_ms)} ({shown.figure()}) in its own process, as a user's fit() runs it; "
            f"{fmt_ms(mine.step_ms)} against {fmt_ms(base.step_ms)} in the interleaved rounds, which the comparison "
            "weighs")

# Before a custom loop's figures, where no step was timed, and why (workload/script_runner.py).
WHOLE_SCRIPT = "the whole script"
WHOLE_RUN_WHY = "a custom training loop, no fit(), fit_generator or train_on_batch call to time step by step"


def pair_rows(verdict: Verdict, rows: Sequence[RunRow]) -> tuple[RunRow | None, RunRow | None]:
    """The finished runs a verdict compares: its configuration's and its float32's (None where either is missing)."""
    key = (verdict.machine, verdict.stack, verdict.variant)
    same = [r for r in rows if (r.machine, r.stack, r.variant) == key and r.ok]
    return (next((r for r in same if r.precision == verdict.precision), None),
            next((r for r in same if r.precision == "float32"), None))


def whole_run(verdict: Verdict, rows: Sequence[RunRow]) -> bool:
    """Whether the verdict's configuration or its float32 was timed as the whole script (a custom loop)."""
    return any(r is not None and r.whole_run for r in pair_rows(verdict, rows))


def loop_step_note(verdict: Verdict, rows: Sequence[RunRow]) -> str:
    """Where a configuration or its float32 was a custom loop timed step by step: between which calls, once."""
    names = sorted({r.loop_step for r in pair_rows(verdict, rows) if r is not None and r.loop_step})
    if not names:
        return ""
    return (f"A custom training loop (no fit() call): each step timed end to end between two calls of its step "
            f"function {' and '.join(names)}, the one that updates the weights, as fit()'s steps are; no profiled "
            "window, so no ops, and no interleaved rounds")


def whole_run_note(verdict: Verdict, rows: Sequence[RunRow]) -> str:
    """Where a configuration and float32 were each timed as the whole script (a custom loop): how, once, for the
    verdict's notes; "" elsewhere."""
    if not whole_run(verdict, rows):
        return ""
    return (f"Timed as {WHOLE_SCRIPT}, once each, less the Keras import ({WHOLE_RUN_WHY}): its figure holds the "
            "script's data loading and model building beside its training, and no per-step time, warm-up or loss "
            "was measured; write the loop as model.fit(), or time your train step yourself, for a per-step answer")


def not_in_rounds(verdict: Verdict, rows: Sequence[RunRow]) -> str:
    """Where the interleaved rounds left a configuration out for another reason than the slow-step bound (whose cut
    its line already says): "float16 was not timed in the interleaved rounds: <why>"; "" elsewhere."""
    mine, base = pair_rows(verdict, rows)
    if mine is None or mine.bound or not mine.left_out_of_rounds:
        return ""
    said = f"{mine.precision} was not timed in the interleaved rounds: {mine.left_out_of_rounds}"
    against = verdict.fp32_step_ms
    if base is not None and against is not None and base.step_ms is not None \
            and fmt_ms(against) != fmt_ms(base.step_ms):
        said += (f"; so its line sets it against float32's {fmt_ms(against)} in a process of its own, where the "
                 f"rounds timed float32 at {fmt_ms(base.step_ms)}")
    return said


def pair_ledgers(verdict: Verdict, ledgers: Sequence[Ledger]) -> tuple[Ledger | None, Ledger | None]:
    """The ledgers a verdict compares: its configuration's and its baseline's (None where either is missing)."""
    key = (verdict.machine, verdict.stack, verdict.variant)
    same = [led for led in ledgers if (led.machine, led.stack, led.variant) == key]
    base_name = verdict.baseline
    return (next((led for led in same if led.precision == verdict.precision), None),
            next((led for led in same if led.precision == base_name), None))


def parts_against(verdict: Verdict, ledgers: Sequence[Ledger]) -> str:
    """"against float32's parts: host batch +477 ms (162 -> 638 ms), unplaced −100 ms, ...; the step +362 ms": each
    part of the ledger that moved, largest first, adding up to the step's difference (a cut run has no parts to set
    against: its step is a bound)."""
    mine, base = pair_ledgers(verdict, ledgers)
    if verdict.outcome not in ("faster", "slower") or mine is None or base is None or mine.cut or base.cut \
            or not (mine.parts and base.parts):
        return ""  # a difference the interval does not resolve has no parts to reconcile
    words = []
    for name, change in shown_changes(mine, base):
        before, after = base.part(name), mine.part(name)
        pair = f" ({_ms_pair(before.ms if before else 0.0, after.ms if after else 0.0)})" \
            if name not in (UNPLACED, OTHER_PARTS) else ""
        words.append(moved_words(name, change) + pair)
    if not words:
        return ""
    step = fmt_signed_ms(mine.step_ms - base.step_ms)
    return f"against {verdict.baseline}'s parts: {'; '.join(words)}; the step {step}"

def _ms_pair(before: float, after: float) -> str:
    """"162 -> 638 ms": one unit for both where both are in milliseconds."""
    a, b = fmt_ms(before), fmt_ms(after)
    return f"{a.removesuffix(' ms')} -> {b}" if a.endswith(" ms") and b.endswith(" ms") else f"{a} -> {b}"


__all__ = ["change_words", "change_worth", "config_notes", "cpu_ledger_line", "in_memory_words", "ledger_words",
           "pair_ledgers", "parts_against", "two_timings"]
