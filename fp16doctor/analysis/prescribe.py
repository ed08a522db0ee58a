"""The prescription, per machine and stack: the configuration to use and its measured worth, in one headline that
leads with a larger change to the user's code where one was measured, and says where a busy machine left the answer
unsettled. What was measured and which is fastest and safe is configs.py's; what nobody measured, with its command,
untested.py's; changes beyond a precision, user_changes.py's. hold.py then holds every finding's advice to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fp16doctor.analysis.advice import how_to_use
from fp16doctor.analysis.busy import Contention
from fp16doctor.analysis.configs import Finding, Measured, baselines, best_config, measured_configs, run_setting
from fp16doctor.analysis.context import Context, RunView
from fp16doctor.analysis.untested import diagnose_command, untested_changes, untested_ideas
from fp16doctor.analysis.user_changes import user_changes
from fp16doctor.analysis.values import (
    EQUIVALENCE_BAND,
    as_list,
    as_mapping,
    as_positive,
    as_str,
    fmt_interval,
    fmt_ms,
    fmt_times,
    on,
    round_ratio,
)
from fp16doctor.analysis.words import change_worth
from fp16doctor.engines.spec import WORKLOAD_SIZES, on_gpu
from fp16doctor.results import SIZE_CAVEATS
from fp16doctor.workload.protocol import FP16, is_pure

Prescription = dict[str, Any]


def _change_headline(change: Mapping[str, Any], on: str, best: Measured) -> str:
    """Two short sentences: the change measured largest, then the precision; intervals live in the table. `on`:
    " on STACK" where the document has more than one machine or stack to tell apart, else ""."""
    then = (f"use {best.label}, {best.shown.figure('than float32')} as written" if not best.baseline
            else "keep float32: as written, no configuration measured significantly faster")
    faster = [m for m in change.get("in_memory") or [] if m.get("outcome") == "faster"]
    top = min(faster, key=lambda m: float(m["step_ms"] or 0.0)) if faster else None
    if change.get("kind") == "backend":
        memory = " with batches in memory" if change.get("variant") == "synthetic_input" else ""
        again = f", and {top['precision']} {top['figure']} again" if top else ""
        return (f"Switch Keras to the {change['backend']} backend{on} first: float32{memory} took "
                f"{fmt_ms(change['changed_step_ms'])} a step there, not {fmt_ms(change['step_ms'])} "
                f"({change['figure']}){again}. On {change.get('from_backend')}, {then}.")
    text = (f"Fix the input pipeline first{on}: with batches in memory float32 took "
            f"{fmt_ms(change['changed_step_ms'])} a step, not {fmt_ms(change['step_ms'])} "
            f"({change_worth(change, detail=False)}). "
            f"Then {then}")
    if top is not None:
        # Why the in-memory gain is not the prescription: it is measured where the pipeline is fixed, not as written.
        risk = " (pure float16: watch its loss)" if is_pure(str(top["precision"]), FP16) else ""
        text += f"; in memory {top['precision']} was {top['figure']}, to measure again after the fix{risk}"
    return text + "."


def _headline(fp32: RunView, best: Measured, configs: Sequence[Measured], on: str) -> str:
    """One sentence: the configuration to use here and its measured worth (`on` as in _change_headline)."""
    others = [m for m in configs if not m.baseline]
    if fp32.precision != "float32":
        # No float32 run: the 16-bit types against the fastest of them (Context.peer_pairs).
        if best.run is fp32:
            return (f"Use {best.label}{on}: the fastest of the 16-bit types measured here (no float32 run to "
                    "compare with)")
        return f"Use {best.label}{on}: {best.speed_phrase()} (no float32 run to compare with)"
    if best.run is fp32:
        if not others:
            return f"Use float32{on}: no 16-bit configuration was measured here"
        fastest = others[0]
        if fastest.interval.outcome == "faster":
            return (f"Use float32{on}: the one faster configuration, {fastest.label}, "
                    f"is not safe here ({fastest.unsafe})")
        return (f"Use float32{on}: no measured configuration is significantly faster; the fastest other, "
                f"{fastest.label}, is {fastest.speed_phrase()}")
    caveat = f"; {best.caveat}" if best.caveat else ""
    return f"Use {best.label}{on}: {best.speed_phrase()}{caveat}"


def _unsettled(configs: Sequence[Measured], best: Measured, fp32: RunView) -> Measured | None:
    """The configuration a busy machine left unsettled where its comparison would change the prescription: as
    written, safe and not cut short, its point estimate beyond the equivalence band faster than what is prescribed,
    and not significantly faster (its interval reaches 1, or the A/A control could not tell it from noise), while
    other processes held the CPU as its rounds measured (busy.py); the largest such speed-up, else None."""
    floor = (1.0 if best.baseline else best.interval.speedup) * (1 + EQUIVALENCE_BAND)
    unsure = [m for m in configs if not m.baseline and m is not best and m.run.variant == "original"
             and m.unsafe is None and not m.run.bound and not m.interval.is_bound and m.interval.outcome != "faster"
             and m.interval.speedup >= floor and _busy(m, fp32) is not None]
    return max(unsure, key=lambda m: m.interval.speedup) if unsure else None


def _busy(m: Measured, fp32: RunView) -> Contention | None:
    """What else held the CPU while a configuration's comparison was timed, where that made the machine busy."""
    contention = m.run.contention or fp32.contention
    return contention if contention is not None and contention.busy else None


def _busy_machine(configs: Sequence[Measured], fp32: RunView) -> Contention | None:
    """The busiest contention its configurations were timed under, where one was busy."""
    found = [c for c in (_busy(m, fp32) for m in configs) if c is not None]
    return max(found, key=lambda c: c.figure) if found else None


def _not_settled(ctx: Context, fp32: RunView, m: Measured) -> dict[str, Any]:
    """`unsettled`: the decision that the prescription is not settled, in data (the headline says it)."""
    iv = m.interval
    contention = _busy(m, fp32)
    assert contention is not None  # _unsettled keeps only those
    return {"precision": m.run.precision, "variant": m.run.variant, "speedup": round_ratio(iv.speedup),
            "speedup_interval": [round_ratio(iv.low), round_ratio(iv.high)], "contention": contention.to_dict(),
            "busy_words": contention.words(),
            "command": diagnose_command(ctx, fp32, m.run.precision, extra=_more_budget(ctx))}


def _more_budget(ctx: Context) -> list[str]:
    """`--budget` at twice the wall budget the document was measured in (the user's, else its size's): rounds that
    go on where a comparison was not settled; none for a size without a budget."""
    invocation = as_mapping(ctx.doc.get("invocation"))
    size = WORKLOAD_SIZES.get(as_str(invocation.get("size")) or "")
    if size is not None and as_list(as_mapping(ctx.doc.get("host")).get("gpus")):
        size = on_gpu(size)
    used = as_positive(invocation.get("budget_s")) or (size.budget_s if size is not None else None)
    return ["--budget", f"{2 * used:.0f}"] if used else []


def _not_settled_headline(unsettled: Mapping[str, Any], on: str) -> str:
    """"Not settled: mixed_bfloat16 measured 1.73x (0.85-3.53x) while other processes used 48 % of the CPU; rerun on
    a quiet machine: <command>"."""
    low, high = unsettled["speedup_interval"]
    speedup = float(unsettled["speedup"])
    command = unsettled.get("command")
    rerun = f": {command}" if command else ""
    return (f"Not settled{on}: {unsettled['precision']} measured {fmt_times(speedup, (high - low) / speedup)} "
            f"({fmt_interval(low, high)}) while {unsettled['busy_words']}; rerun on a quiet machine, with more time "
            f"for its rounds{rerun}")


def _busy_caveat(contention: Contention | None) -> str:
    """After a headline the machine did not unsettle: that it was busy, with its figure; empty where it was not."""
    return f" (measured while {contention.words()})" if contention is not None else ""


def _size_caveat(ctx: Context) -> str:
    """What the invocation's size says of its timings (SIZE_CAVEATS), after the headline; empty for a real size."""
    caveat = SIZE_CAVEATS.get(as_str(as_mapping(ctx.doc.get("invocation")).get("size")) or "")
    return f" ({caveat})" if caveat else ""


def prescribe(ctx: Context, found: Mapping[str, Finding]) -> list[Prescription]:
    """One prescription per machine and stack with a float32 run of the original workload (or, with none, its
    fastest 16-bit type as written)."""
    result = []
    fp32s = baselines(ctx)
    for fp32 in fp32s:
        configs = measured_configs(ctx, fp32, found)
        best = best_config(configs, fp32)
        changes = user_changes(ctx, fp32)
        # The headline leads with the largest change a control measured (the pipeline, a backend).
        lead = next((c for c in changes if c["kind"] in ("input_pipeline", "backend")), None)
        on_place = on(fp32.place)
        unsettled = _unsettled(configs, best, fp32)
        settled_not = _not_settled(ctx, fp32, unsettled) if unsettled is not None else None
        busy = _busy_machine(configs, fp32)
        iv = best.interval
        low, high = (1.0, 1.0) if best.baseline else (iv.low, iv.high)
        result.append({
            "machine": fp32.machine,
            "stack": fp32.stack,
            "device": fp32.device,
            "baseline": fp32.precision,
            "recommended": {
                "precision": best.run.precision, "variant": best.run.variant, "setting": run_setting(best.run),
                "step_ms": best.step_ms, "speedup": 1.0 if best.baseline else round_ratio(iv.speedup),
                "speedup_interval": [round_ratio(low), round_ratio(high)],
                "how": how_to_use(best.run.precision, best.run.software, best.run.variant, best.run.on_gpu,
                                  run_setting(best.run), training=best.run.advice_applies("loss_scaling")),
                "caveat": best.caveat,
            },
            "measured": [m.to_dict() for m in configs],
            "untested": untested_ideas(ctx, fp32, configs, best, found) + untested_changes(changes),
            "user_changes": changes,
            "headline": (_not_settled_headline(settled_not, on_place) if settled_not is not None
                         else (_change_headline(lead, on_place, best) if lead is not None
                               else _headline(fp32, best, configs, on_place)) + _busy_caveat(busy))
            + _size_caveat(ctx),
            **({"unsettled": settled_not} if settled_not is not None else {}),
            **({"contention": busy.to_dict()} if busy is not None else {}),
        })
    return result
