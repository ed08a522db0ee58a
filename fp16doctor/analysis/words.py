"""The words of a prescription's entries, written once: a measured configuration against float32 and its notes, a
change to the user's code with its worth, each precision with batches in memory. The analysis and every output say
them with these functions; an output imports them from here, never from the deciders."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fp16doctor.analysis.intervals import FIRST_STEP
from fp16doctor.analysis.next_bound import idle_words
from fp16doctor.analysis.values import (
    NOT_COMPARED,
    ShownRatio,
    as_mapping,
    as_str,
    fmt_ms,
    fmt_signed_ms,
    variant_words,
)


def config_notes(unsafe: Any, caveat: Any, bound: bool, compared: str | None = None) -> list[str]:
    notes = [str(n) for n in (unsafe, caveat) if n]
    if bound:
        notes.append(f"cut short by the slow-step bound: its ratio is a one-sided bound ({compared or FIRST_STEP}) "
                     "and its numerics are not judged")
    return notes


def entry_versus(entry: Mapping[str, Any]) -> str:
    """A measured configuration against float32 as every output says it: "2.19x faster (2.08-2.30x)", "the
    baseline", "not compared"."""
    outcome, speedup, interval = entry.get("outcome"), entry.get("speedup"), entry.get("speedup_interval")
    if outcome == "baseline" or not isinstance(speedup, (int, float)) or speedup <= 0:
        return "the baseline"
    if entry.get("comparison_refused"):
        return NOT_COMPARED
    shown = ShownRatio.of(speedup, interval, outcome, method=entry.get("interval_method"), aa=entry.get("aa_check"))
    return shown.versus() if shown is not None else "the baseline"


def entry_notes(entry: Mapping[str, Any]) -> list[str]:
    """What every output says beside a measured configuration's time: why it may be unsafe, its caveat, a bound
    (its `notes`; a file saved before they were kept gets the same words from the fields)."""
    saved = entry.get("notes")
    if isinstance(saved, list):
        return [str(n) for n in saved]
    return config_notes(entry.get("unsafe"), entry.get("caveat"), entry.get("bound") is True)


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
               else f"fp16doctor cannot measure it here ({change.get('no_command')})")
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
            f"({change.get('figure')}), {measured}")


def in_memory_words(entry: Mapping[str, Any]) -> str:
    """"float16: 1.8x faster (45 ms vs 82 ms; the device's work −14 ms)"."""
    device = entry.get("device_difference_ms")
    part = f"; the device's work {fmt_signed_ms(device)}" if isinstance(device, (int, float)) else ""
    return (f"{entry.get('precision')}: {entry.get('figure')} ({fmt_ms(entry.get('step_ms'))} vs "
            f"{fmt_ms(entry.get('fp32_step_ms'))}{part})")


__all__ = ["change_words", "config_notes", "entry_notes", "entry_versus", "in_memory_words"]
