"""The live display of a diagnose: one line per run, its phase and its step time as it goes.

Several runs may be in flight at once (stack runs spread over engines and GPUs): each has its own
live row, found by the "run" key its events carry (the spec's label); calls may come from any thread.
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from fp16doctor.engines.base import RunSpec
from fp16doctor.results import run_key

PHASES = {
    "data": "preparing the image folders",
    "import": "importing the framework",
    "build": "building the model",
    "input_timed": "input pipeline timed",
    "train": "training (warm-up)",
}


@dataclass
class _Row:
    """One run in flight."""

    label: str
    status: str = "starting"
    where: str = ""  # the engine and GPU it runs on, when several could
    steps: list[float] = field(default_factory=list)


class LiveProgress:
    """Implements diagnose's Progress protocol with rich; silent when disabled (e.g. --json to a pipe)."""

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled
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
            self.live = Live(Text(""), console=self.console, refresh_per_second=8, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        # Under the lock: after Ctrl-C, stack-run workers may still be drawing from their threads.
        with self.lock:
            live, self.live = self.live, None
        if live is not None:
            live.__exit__(exc_type, exc, tb)

    def _draw(self) -> None:
        if self.live is not None:
            lines = [Text.assemble(("⏵ ", "cyan"), (row.label, "bold"),
                                   (f"  on {row.where}" if row.where else "", "cyan"), "  ", (row.status, "dim"))
                     for row in self.rows.values()]
            self.live.update(Group(*lines) if lines else Text(""))

    def note(self, message: str) -> None:
        if self.enabled:
            with self.lock:
                self.console.print(Text(message, style="dim"))

    def start_run(self, spec: RunSpec, total: int, index: int) -> None:
        with self.lock:
            self.rows[spec.label] = _Row(f"[{index + 1}/{total}] {spec.label} ({spec.size.name})")
            self.current = spec.label
            self._draw()

    def event(self, event: dict[str, Any]) -> None:
        with self.lock:
            row = self.rows.get(str(event.get("run", self.current)))
            if row is None:
                return
            kind = event.get("event")
            if kind == "phase":
                row.status = PHASES.get(str(event.get("phase")), str(event.get("phase")))
            elif kind == "step":
                ms = float(event.get("ms", 0.0))
                if event.get("phase") == "measure":
                    row.steps.append(ms)
                    row.status = (f"step {len(row.steps)}: {ms:.0f} ms, "
                                  f"median {statistics.median(row.steps):.0f} ms")
                else:
                    row.status = f"warm-up step {int(event.get('index', 0)) + 1}: {ms:.0f} ms"
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
        if status == "ok":
            step = record["step_time_ms"]
            line = Text.assemble(("✓ ", "green"), (label, "bold"),
                                 f"  {step['median']:.1f} ms/step (p10 {step.get('p10', 0):.1f}, "
                                 f"p90 {step.get('p90', 0):.1f}, n={step.get('n')})")
        else:
            mark = ("✗ ", "red") if status == "failed" else ("– ", "yellow")
            line = Text.assemble(mark, (label, "bold"), f"  {status}: {record.get('error', '')}"[:300])
        self.console.print(line)
