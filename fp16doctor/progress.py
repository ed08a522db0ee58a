"""The live display of a diagnose: one line per run, its phase and its step time as it goes.

Several runs may be in flight at once (stack runs spread over engines and GPUs): each has its own
live row, found by the "run" key its events carry (the spec's label); calls may come from any thread.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from fp16doctor.analysis.values import as_positive, fmt_ms
from fp16doctor.analysis.words import WHOLE_RUN_WHY, WHOLE_SCRIPT
from fp16doctor.engines.failures import MAX_REASON, one_line
from fp16doctor.engines.spec import RunSpec
from fp16doctor.results import Run, run_key

PHASES = {
    "data": "preparing the image folders",
    "import": "importing the framework",
    "build": "building the model",
    "input_timed": "input pipeline timed",
    "train": "training (warm-up)",
    "window": "profiling a few steps",
    "attribution": "reading the profile",
    "warmup": "warming every model up",
    "measure": "timing the rounds",
}
# A step running longer than this gets a line saying what the run is waiting for.
SLOW_NOTICE_S = 5.0


def _size_text(spec: RunSpec) -> str:
    """The built-in workload's size, or, for a user's script (whose model and batch are its own), its steps."""
    if spec.script is None:
        return spec.size.name
    return f"script, {spec.script.steps} steps" if spec.script.steps else "script"


@dataclass
class _Row:
    """One run in flight."""

    label: str
    status: str = "starting"
    where: str = ""  # the engine and GPU it runs on, when several could
    steps: list[float] = field(default_factory=list)
    precision: str = ""
    reference_ms: float | None = None  # float32's median step, where it ran first
    step_index: int = 0  # the step now running (1-based); 0 when not training
    step_started: float | None = None  # monotonic time the running step began


def waiting_text(row: _Row, now: float) -> str | None:
    """"float16: step 1 running for 12 s (float32 took 130 ms/step)" once a step has run long."""
    if row.step_started is None or not row.step_index:
        return None
    waited = now - row.step_started
    if waited < SLOW_NOTICE_S:
        return None
    text = f"{row.precision}: step {row.step_index} running for {waited:.0f} s"
    if row.reference_ms:
        text += f" (float32 took {row.reference_ms:.0f} ms/step)"
    return text


class _Rows:
    """The live rows, rendered afresh at every refresh, so a waiting time counts up by itself."""

    def __init__(self, progress: LiveProgress) -> None:
        self.progress = progress

    def __rich__(self) -> RenderableType:
        return self.progress.render()


class LiveProgress:
    """Implements diagnose's Progress protocol with rich; silent when disabled (e.g. --json to a pipe)."""

    def __init__(self, console: Console, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.enabled = enabled
        self.clock = clock
        self.live: Live | None = None
        self.rows: dict[str, _Row] = {}  # in-flight runs by spec label, in start order
        self.current = ""  # the row events without a "run" key belong to
        self.lock = threading.RLock()

    # The single-run view, as before several runs could be in flight.
    @property
    def label(self) -> str:
        row = self.rows.get(self.current)
        return row.label if row else ""

    @property
    def status(self) -> str:
        row = self.rows.get(self.current)
        return row.status if row else ""

    @property
    def steps(self) -> list[float]:
        row = self.rows.get(self.current)
        return row.steps if row else []

    def __enter__(self) -> LiveProgress:
        if self.enabled:
            self.live = Live(_Rows(self), console=self.console, refresh_per_second=4, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        # Under the lock: after Ctrl-C, stack-run workers may still be drawing from their threads.
        with self.lock:
            live, self.live = self.live, None
        if live is not None:
            live.__exit__(exc_type, exc, tb)

    def status_of(self, row: _Row) -> str:
        return waiting_text(row, self.clock()) or row.status

    def render(self) -> RenderableType:
        # Called by rich's refresh thread under its own lock: taking ours here could deadlock against a
        # worker that holds ours and waits for rich's. A snapshot of the rows is enough to draw.
        rows = list(self.rows.values())
        lines = [Text.assemble(("⏵ ", "cyan"), (row.label, "bold"),
                               (f"  on {row.where}" if row.where else "", "cyan"), "  ",
                               (self.status_of(row), "dim"))
                 for row in rows]
        return Group(*lines) if lines else Text("")

    def _draw(self) -> None:
        if self.live is not None:
            self.live.refresh()

    def note(self, message: str) -> None:
        if self.enabled:
            with self.lock:
                self.console.print(Text(message, style="dim"))

    def start_run(self, spec: RunSpec, total: int, index: int) -> None:
        with self.lock:
            self.rows[spec.label] = _Row(f"[{index + 1}/{total}] {spec.label} ({_size_text(spec)})",
                                         precision=spec.precision, reference_ms=spec.reference_ms)
            self.current = spec.label
            self._draw()

    def event(self, event: dict[str, Any]) -> None:
        with self.lock:
            row = self.rows.get(str(event.get("run", self.current)))
            if row is None:
                return
            kind = event.get("event")
            if kind == "ended":  # a row that prints no line of its own (interleaved rounds): its runs print theirs
                self.rows.pop(str(event.get("run")), None)
                self.current = next(reversed(self.rows), "") if self.rows else ""
                self._draw()
                return
            if kind == "step" and event.get("config"):  # interleaved rounds: a configuration's warm-up or block
                where = (f"round {int(event.get('index', 0)) + 1}" if event.get("phase") == "round"
                         else "warm-up")
                row.status = f"{where}: {event.get('config')} {float(event.get('ms', 0.0)):.0f} ms"
                row.step_index, row.step_started = 0, None
                self._draw()
                return
            if kind == "phase":
                phase = str(event.get("phase"))
                row.status = PHASES.get(phase, phase)
                if phase == "train":
                    row.step_index, row.step_started = 1, self.clock()
                elif phase not in ("window",):
                    row.step_index, row.step_started = 0, None
            elif kind == "step":
                ms = float(event.get("ms", 0.0))
                if event.get("bound"):
                    which = "first-step" if event.get("bound_on") == "first_step" else "slow-step"
                    row.status = (f"step {int(event.get('index', 0)) + 1}: {ms:.0f} ms, beyond the {which} "
                                  f"bound of {float(event.get('limit_ms', 0.0)):.0f} ms: stopping here")
                elif event.get("phase") == "measure":
                    row.steps.append(ms)
                    row.status = (f"step {len(row.steps)}: {ms:.0f} ms, "
                                  f"median {statistics.median(row.steps):.0f} ms")
                elif event.get("phase") == "before_window":
                    row.status = f"{ms:.0f} ms, not profiled: the window starts clear of an epoch's first step"
                elif event.get("phase") == "window":
                    row.status = f"profiling: step {int(event.get('index', 0)) + 1}: {ms:.0f} ms"
                else:
                    row.status = f"warm-up step {int(event.get('index', 0)) + 1}: {ms:.0f} ms"
                row.step_index, row.step_started = row.step_index + 1, self.clock()
            elif kind == "log":
                row.status = str(event.get("message", ""))[:100]
            elif kind == "placed":
                row.where = str(event.get("where", ""))
            self._draw()

    def finish_run(self, record: dict[str, Any]) -> None:
        key = " / ".join(run_key(record))  # the spec's label, as start_run filed the row
        with self.lock:
            row = self.rows.pop(key, None)
            if self.current == key:
                self.current = next(reversed(self.rows), "") if self.rows else ""
            self._draw()
            if self.enabled:
                self._print_finished(record, row.label if row else key, row.where if row else "")

    def _print_finished(self, record: dict[str, Any], label: str, where: str) -> None:
        if where:
            label += f" on {where}"
        status = record.get("status")
        if Run.of(record).cut:
            step = record["step_time_ms"]
            bound = record.get("slow_step_bound") or {}
            # The bound it met, and what that is against float32's step (the multiple is only the bound's cap);
            # the first-step bound against float32's first step (one-time work in both).
            if record.get("bound_on") == "first_step":
                limit = as_positive(bound.get("first_step_limit_ms")) or as_positive(record.get("bound_limit_ms"))
                fp32 = as_positive(bound.get("float32_first_step_ms"))
                why = (f"its first step over its bound of {fmt_ms(limit)}, {_multiple(limit / fp32)} float32's "
                       f"first step of {fmt_ms(fp32)}" if limit and fp32 else "its first step over its bound")
                what = ("at least, cut inside its first step, one-time work included" if record.get("cut_in_step")
                        else "for its one step, the first, one-time work included")
            else:
                limit, fp32 = as_positive(bound.get("limit_ms")), as_positive(bound.get("float32_step_ms"))
                why = (f"over its bound of {fmt_ms(limit)}, {_multiple(limit / fp32)} float32's {fmt_ms(fp32)}"
                       if limit and fp32 else "over the slow-step bound")
                what = "at least, cut inside it" if record.get("cut_in_step") else "for its one step"
            line = Text.assemble(("✓ ", "yellow"), (label, "bold"),
                                 f"  {fmt_ms(step['median'])} {what} (stopped there: {why})")
        elif status == "ok" and (record.get("workload") or {}).get("timing") == "whole_run":
            whole = (record.get("workload") or {}).get("whole_run_ms") or record["step_time_ms"]["median"]
            line = Text.assemble(("✓ ", "green"), (label, "bold"),
                                 f"  {WHOLE_SCRIPT} {fmt_ms(whole)}, timed once ({WHOLE_RUN_WHY})")
        elif status == "ok":
            step = record["step_time_ms"]
            line = Text.assemble(("✓ ", "green"), (label, "bold"),
                                 f"  {step['median']:.1f} ms/step (p10 {step.get('p10', 0):.1f}, "
                                 f"p90 {step.get('p90', 0):.1f}, n={step.get('n')}"
                                 f"{' interleaved rounds' if record.get('timed_by') == 'interleaved_rounds' else ''})")
        else:
            mark = ("✗ ", "red") if status == "failed" else ("– ", "yellow")
            located = record.get("error_location")
            at = (f" at {located.get('file')}:{located.get('line')}" if isinstance(located, dict)
                  and located.get("file") else "")
            # One line of at most MAX_REASON characters, cut at a word (the answer says it whole).
            said = one_line(f"{status}{at}: {record.get('error', '')}", MAX_REASON - len(label) - 4)
            line = Text.assemble(mark, (label, "bold"), f"  {said}")
        self.console.print(line)


def _multiple(value: float) -> str:
    """A bound's size against float32's step, a setting rather than a measured ratio: '38x', '5x', '7.7x'."""
    return f"{value:.0f}x" if value >= 10 else f"{value:.2g}x"
