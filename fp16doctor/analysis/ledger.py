"""A ledger per timed configuration: its step, split into parts that add up to it (TensorBoard Profiler's step-time
breakdown is the model: every other figure on the page is a part of something the reader can see).

On a GPU the parts are the device's kernels and copies (its profiled window, per step), the host building the next
batch (the trace's wait on the host's data where timestamps split the idle time, else the timed input pipeline), the
launch and dispatch gaps where the trace tells them; on a CPU the ops of the profiled window by what they do (input,
compute, casts and layout, the rest), each its overlap-true wall share where the profiler had intervals (ops that ran
at once on several cores share their wall time; `ran_at_once_ms` keeps the op time beyond it). Time two parts claim
is given to one, by PRIORITY: a part takes at most what the step has left after the parts before it (`clipped_ms`
says what it measured beyond that), and what no part places is `unplaced_ms`. So parts + unplaced = step, each
non-negative, whatever the window's own step was.

A run cut by the slow-step bound has a bound for its step, not a step: its ledger says so (`cut`), with the bound's
rule, and marks the ops still running at the cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fp16doctor.analysis.context import Context, OpItem, RunView
from fp16doctor.analysis.values import fmt_signed_ms, listed_words

# The parts, in the order they are given time (a part takes what the step has left after those before it).
KERNELS, COPIES, HOST_BATCH, LAUNCH_GAPS = "kernels", "copies", "host_batch", "launch_gaps"
INPUT, COMPUTE, CASTS_LAYOUT, OTHER_OPS = "input", "compute", "casts_layout", "other_ops"
PRIORITY = (KERNELS, COPIES, HOST_BATCH, LAUNCH_GAPS, INPUT, COMPUTE, CASTS_LAYOUT, OTHER_OPS)
# What each part is, as every output names it.
PART_WORDS = {
    KERNELS: "kernels", COPIES: "copies", HOST_BATCH: "host batch", LAUNCH_GAPS: "launch gaps",
    INPUT: "input", COMPUTE: "compute", CASTS_LAYOUT: "casts and layout", OTHER_OPS: "other ops",
}
UNPLACED_WORDS = "unplaced"
UNPLACED = "unplaced"  # what no part places, as a change's name beside the parts' (part_change)
OTHER_PARTS = "the other parts"  # the smaller changes of a parts line, in one figure
TOP_PARTS = 3  # the parts whose change a configuration's line names; the rest in one figure
SHOWN_PART_MS = 0.05  # a ledger's part (or a part's change) shown in words from this size; the data keeps every one
# An op's pass -> the CPU part it belongs to.
_CPU_PART = {"input": INPUT, "forward": COMPUTE, "backward_data": COMPUTE, "backward_weights": COMPUTE,
             "optimizer": COMPUTE, "cast": CASTS_LAYOUT, "layout": CASTS_LAYOUT}
TOP_OPS = 3  # the ops a part names
ADDS_UP = 0.01  # parts + unplaced within 1 % of the step (rounding only)


@dataclass(frozen=True)
class LedgerOp:
    """One op inside a part: its own time per step, and its wall share where the profiler had intervals."""

    name: str
    layer: str | None
    pass_: str
    ms: float  # its own time per step (on several cores at once, more than the wall time it held)
    wall_ms: float | None
    impl: str | None
    in_flight: bool  # still running when its step was cut: its time is the most it ran

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "layer": self.layer, "pass": self.pass_, "ms": round(self.ms, 3),
                "wall_ms": round(self.wall_ms, 3) if self.wall_ms is not None else None, "impl": self.impl,
                **({"in_flight": True} if self.in_flight else {})}


@dataclass(frozen=True)
class LedgerPart:
    """One part of a step: its time in the ledger, where it was measured, and what it measured beyond its share."""

    name: str  # one of PRIORITY
    ms: float  # its share of the step (after the parts before it)
    source: str  # "device_time" | "input_time" | "ops"
    clipped_ms: float = 0.0  # what it measured beyond what the step had left for it
    ran_at_once_ms: float = 0.0  # its ops' own time beyond the wall time they held (ops on several cores)
    ops: tuple[LedgerOp, ...] = ()  # its largest ops
    detail: tuple[tuple[str, float], ...] = ()  # its own split ("h2d", 15.3): a copy's kinds

    @property
    def words(self) -> str:
        return PART_WORDS.get(self.name, self.name.replace("_", " "))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ms": round(self.ms, 3), "source": self.source,
                **({"clipped_ms": round(self.clipped_ms, 3)} if round(self.clipped_ms, 3) else {}),
                **({"ran_at_once_ms": round(self.ran_at_once_ms, 3)} if round(self.ran_at_once_ms, 3) else {}),
                **({"ops": [o.to_dict() for o in self.ops]} if self.ops else {}),
                **({"detail": {k: round(v, 3) for k, v in self.detail}} if self.detail else {})}


@dataclass(frozen=True)
class Ledger:
    """One timed configuration's step, split into parts that add up to it."""

    machine: str
    stack: str
    precision: str
    variant: str
    step_ms: float  # the step every output quotes for it (its rounds' geometric mean, or its median; a cut run's bound)
    parts: tuple[LedgerPart, ...]
    unplaced_ms: float  # what no part places: framework dispatch, waits, what the profiler did not list
    window_ms: float | None = None  # the profiled window's step the parts were measured in
    cut: bool = False  # cut by the slow-step bound: `step_ms` is how long it ran at least
    bound_rule: str | None = None  # the bound's rule, where the run records it
    in_flight: tuple[str, ...] = field(default=())  # the ops still running at the cut
    compiled: bool = False  # the step ran as one compiled cluster (jit_compile): its ops are not the profiler's to list

    def part(self, name: str) -> LedgerPart | None:
        return next((p for p in self.parts if p.name == name), None)

    @property
    def placed_ms(self) -> float:
        return sum(p.ms for p in self.parts)

    def to_dict(self) -> dict[str, Any]:
        return {"machine": self.machine, "stack": self.stack, "precision": self.precision, "variant": self.variant,
                "step_ms": round(self.step_ms, 3), "parts": [p.to_dict() for p in self.parts],
                "unplaced_ms": round(self.unplaced_ms, 3),
                "window_ms": round(self.window_ms, 3) if self.window_ms is not None else None,
                "cut": self.cut, **({"bound_rule": self.bound_rule} if self.bound_rule else {}),
                **({"in_flight": list(self.in_flight)} if self.in_flight else {}),
                **({"compiled": True} if self.compiled else {})}

    @classmethod
    def of(cls, value: Mapping[str, Any]) -> Ledger:
        """A ledger as `to_dict` wrote it (a saved document's `ledgers`)."""
        parts = tuple(LedgerPart(str(p["name"]), float(p["ms"]), str(p.get("source") or ""),
                                 float(p.get("clipped_ms") or 0.0), float(p.get("ran_at_once_ms") or 0.0),
                                 tuple(LedgerOp(str(o["name"]), o.get("layer"), str(o.get("pass") or "other"),
                                                float(o["ms"]), o.get("wall_ms"), o.get("impl"),
                                                o.get("in_flight") is True) for o in p.get("ops") or []),
                                 tuple((str(k), float(v)) for k, v in (p.get("detail") or {}).items()))
                      for p in value.get("parts") or [])
        window = value.get("window_ms")
        return cls(str(value["machine"]), str(value["stack"]), str(value["precision"]), str(value["variant"]),
                   float(value["step_ms"]), parts, float(value["unplaced_ms"]),
                   float(window) if window is not None else None, value.get("cut") is True,
                   value.get("bound_rule"), tuple(value.get("in_flight") or ()), value.get("compiled") is True)


@dataclass(frozen=True)
class _Measured:
    """A part as measured, before the step gives it its share."""

    name: str
    ms: float
    source: str
    ran_at_once_ms: float = 0.0
    ops: tuple[LedgerOp, ...] = ()
    detail: tuple[tuple[str, float], ...] = ()


def allocate(step_ms: float, measured: Iterable[_Measured]) -> tuple[tuple[LedgerPart, ...], float]:
    """Each measured part, in PRIORITY order, takes at most what the step has left; the rest is unplaced."""
    left = step_ms
    parts = []
    for m in sorted(measured, key=lambda m: PRIORITY.index(m.name)):
        if m.ms <= 0:
            continue
        share = min(m.ms, max(left, 0.0))
        left -= share
        parts.append(LedgerPart(m.name, share, m.source, m.ms - share, m.ran_at_once_ms, m.ops, m.detail))
    return tuple(parts), max(left, 0.0)


def _ledger_op(item: OpItem) -> LedgerOp:
    return LedgerOp(item.name, item.layer, item.pass_, item.ms_per_step, item.wall_ms_per_step, item.impl,
                    item.in_flight)


def _gpu_parts(run: RunView) -> list[_Measured]:
    device = run.device_time
    assert device is not None
    copies = {k: v for k, v in device.copies_ms.items() if v > 0}
    kernels = [i for i in (run.ops.items if run.ops is not None else ()) if not i.host_time
               and i.pass_ not in ("input",)]
    parts = [_Measured(KERNELS, device.compute_ms, "device_time",
                       ops=tuple(_ledger_op(i) for i in sorted(kernels, key=lambda i: -i.ms_per_step)[:TOP_OPS])),
             _Measured(COPIES, sum(copies.values()), "device_time", detail=tuple(sorted(copies.items())))]
    idle = device.idle
    if idle is not None and idle.waiting_on_data_ms is not None:
        parts.append(_Measured(HOST_BATCH, idle.waiting_on_data_ms, "device_time"))
    elif run.input_ms is not None:
        parts.append(_Measured(HOST_BATCH, run.input_ms, "input_time"))
    if idle is not None and idle.launch_gaps_ms is not None:
        parts.append(_Measured(LAUNCH_GAPS, idle.launch_gaps_ms, "device_time"))
    return parts


def _cpu_parts(run: RunView) -> list[_Measured]:
    by_part: dict[str, list[OpItem]] = {}
    for item in run.ops.items if run.ops is not None else ():
        by_part.setdefault(_CPU_PART.get(item.pass_, OTHER_OPS), []).append(item)
    parts = []
    for name, items in by_part.items():
        # Each op's wall share where the profiler had its intervals, else its own time (which may overlap others':
        # the step's share then says how much of it the step could hold).
        held = sum(i.wall_ms_per_step if i.wall_ms_per_step is not None else i.ms_per_step for i in items)
        at_once = sum(max(i.ms_per_step - i.wall_ms_per_step, 0.0) for i in items if i.wall_ms_per_step is not None)
        top = tuple(_ledger_op(i) for i in sorted(items, key=lambda i: -i.ms_per_step)[:TOP_OPS])
        parts.append(_Measured(name, held, "ops", at_once, top))
    if INPUT not in by_part and run.input_ms is not None:
        parts.append(_Measured(INPUT, run.input_ms, "input_time"))
    return parts


def _bound_rule(raw: Mapping[str, Any]) -> str | None:
    """"float32's first step 864 ms + 5000 ms" or "50x float32's step 128 ms": the slow-step bound's rule."""
    bound = raw.get("slow_step_bound")
    if not isinstance(bound, Mapping):
        return None
    on_first = raw.get("bound_on") == "first_step"
    first, limit = bound.get("float32_first_step_ms"), bound.get("limit_ms")
    step, multiple = bound.get("float32_step_ms"), bound.get("multiple")
    if on_first and isinstance(first, (int, float)) and isinstance(limit, (int, float)):
        return f"float32's first step {first:.0f} ms + {limit:.0f} ms"
    if isinstance(step, (int, float)) and isinstance(multiple, (int, float)):
        return f"{multiple:g}x float32's step {step:.0f} ms"
    return None


def ledger_of(run: RunView, raw: Mapping[str, Any]) -> Ledger | None:
    """The ledger of one timed run (None for a run without a step)."""
    if not run.ok or run.step_ms is None:
        return None
    step = run.step_ms
    if run.device_time is not None:
        measured, window = _gpu_parts(run), run.device_time.step_ms
    else:
        measured, window = _cpu_parts(run), run.ops.window_ms if run.ops is not None else None
    parts, unplaced = allocate(step, measured)
    in_flight = tuple(dict.fromkeys(o.name for p in parts for o in p.ops if o.in_flight))
    return Ledger(run.machine, run.stack, run.precision, run.variant, step, parts, unplaced, window,
                  cut=run.bound, bound_rule=_bound_rule(raw) if run.bound else None, in_flight=in_flight,
                  compiled=run.compiled)


def ledgers(ctx: Context) -> tuple[Ledger, ...]:
    """One ledger per timed configuration of the document, in its runs' order."""
    raw_runs: Sequence[Any] = ctx.doc.get("runs") or []
    found = []
    for run in ctx.runs:
        raw = raw_runs[run.index] if 0 <= run.index < len(raw_runs) and isinstance(raw_runs[run.index], Mapping) \
            else {}
        ledger = ledger_of(run, raw)
        if ledger is not None:
            found.append(ledger)
    return tuple(found)


def part_change(mine: Ledger, base: Ledger, name: str) -> float:
    """One part's change from `base`'s ledger to `mine`'s (a part one ledger lacks counts 0 there); UNPLACED: the
    time no part places."""
    if name == UNPLACED:
        return mine.unplaced_ms - base.unplaced_ms
    before, after = base.part(name), mine.part(name)
    return (after.ms if after else 0.0) - (before.ms if before else 0.0)


def shown_changes(mine: Ledger, base: Ledger) -> list[tuple[str, float]]:
    """The changes a configuration's parts line names, as (name, change): each part that moved (UNPLACED among them),
    as named_changes gives them, adding up to the step's change."""
    names = list(dict.fromkeys([*(p.name for p in base.parts), *(p.name for p in mine.parts), UNPLACED]))
    return named_changes((n, part_change(mine, base, n)) for n in names)


def named_changes(changes: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """The one rule for which part changes a line names, wherever a step's change is split over its parts (a parts
    line, a verdict's accounting): those of SHOWN_PART_MS or more, largest first, the first TOP_PARTS by name and the
    rest in one figure (OTHER_PARTS) where two or more are left (one part is named, never "the other parts")."""
    moved = sorted(((n, d) for n, d in changes if abs(d) >= SHOWN_PART_MS), key=lambda m: -abs(m[1]))
    if len(moved) <= TOP_PARTS + 1:
        return moved
    return [*moved[:TOP_PARTS], (OTHER_PARTS, sum(d for _, d in moved[TOP_PARTS:]))]


def moved_words(name: str, change: float) -> str:
    """"host batch +477 ms", "unplaced −100 ms", "kernels −6.2 ms": a change as a parts line names it (OTHER_PARTS:
    the smaller changes it groups in one figure)."""
    return f"{PART_WORDS.get(name, UNPLACED_WORDS if name == UNPLACED else name)} {fmt_signed_ms(change)}"


def part_of_step(name: str, mine: Ledger, base: Ledger, step: bool = True) -> str:
    """A cause's figure in its ledger part's words, as the parts line beside it says them: "kernels −6.2 ms"; with
    `step`, beside the step's change: "host batch +477 ms of the +362 ms step"."""
    said = moved_words(name, part_change(mine, base, name))
    return f"{said} of the {fmt_signed_ms(mine.step_ms - base.step_ms)} step" if step else said


def _against_part(name: str, mine: Ledger, base: Ledger) -> str:
    """Where a part moved more than the step because other parts moved the other way, those parts as the parts line
    names them: "unplaced −100 ms, copies −8.5 ms and kernels −6.2 ms against it"; else ""."""
    change = part_change(mine, base, name)
    if abs(change) <= abs(mine.step_ms - base.step_ms):
        return ""
    against = [moved_words(n, d) for n, d in shown_changes(mine, base) if n != name and d * change < 0]
    if not against:
        return ""
    return f"{listed_words(against)} against it"


def part_in_step(name: str, mine: Ledger, base: Ledger, between: str = "") -> str:
    """A cause's figure as every output says it, in the parts line's words: its part's change beside the step's, then
    the parts that moved against it where it moved more than the step: "host batch +477 ms of the +362 ms step;
    unplaced −100 ms, copies −8.5 ms and kernels −6.2 ms against it". `between` names the step's two
    configurations after it (" between float16 (665 ms) and float32 (303 ms)")."""
    against = _against_part(name, mine, base)
    return f"{part_of_step(name, mine, base)}{between}" + (f"; {against}" if against else "")


__all__ = ["OTHER_PARTS", "PART_WORDS", "PRIORITY", "SHOWN_PART_MS", "TOP_PARTS", "UNPLACED", "UNPLACED_WORDS",
           "Ledger", "LedgerOp", "LedgerPart", "allocate", "ledger_of", "ledgers", "part_change",
           "moved_words", "named_changes", "part_in_step", "part_of_step", "shown_changes"]
