"""The live display of a diagnose: one line per run, its phase and its step time as it goes."""

from __future__ import annotations

import statistics
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from fp16doctor.engines.base import RunSpec

PHASES = {
    "data": "preparing the image folders",
    "import": "importing the framework",
    "build": "building the model",
    "input_timed": "input pipeline timed",
    "train": "training (warm-up)",
}


class LiveProgress:
    """Implements diagnose's Progress protocol with rich; silent when disabled (e.g. --json to a pipe)."""

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled
        self.live: Live | None = None
        self.label = ""
        self.status = ""
        self.steps: list[float] = []

    def __enter__(self) -> LiveProgress:
        if self.enabled:
            self.live = Live(Text(""), console=self.console, refresh_per_second=8, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.live is not None:
            self.live.__exit__(exc_type, exc, tb)
            self.live = None

    def _draw(self) -> None:
        if self.live is not None:
            self.live.update(Text.assemble(("⏵ ", "cyan"), (self.label, "bold"), "  ", (self.status, "dim")))

    def note(self, message: str) -> None:
        if self.enabled:
            self.console.print(Text(message, style="dim"))

    def start_run(self, spec: RunSpec, total: int, index: int) -> None:
        self.label = f"[{index + 1}/{total}] {spec.label} ({spec.size.name})"
        self.status = "starting"
        self.steps = []
        self._draw()

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "phase":
            self.status = PHASES.get(str(event.get("phase")), str(event.get("phase")))
        elif kind == "step":
            ms = float(event.get("ms", 0.0))
            if event.get("phase") == "measure":
                self.steps.append(ms)
                self.status = (f"step {len(self.steps)}: {ms:.0f} ms, "
                               f"median {statistics.median(self.steps):.0f} ms")
            else:
                self.status = f"warm-up step {int(event.get('index', 0)) + 1}: {ms:.0f} ms"
        elif kind == "log":
            self.status = str(event.get("message", ""))[:100]
        self._draw()

    def finish_run(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        status = record.get("status")
        if status == "ok":
            step = record["step_time_ms"]
            line = Text.assemble(("✓ ", "green"), (self.label, "bold"),
                                 f"  {step['median']:.1f} ms/step (p10 {step.get('p10', 0):.1f}, "
                                 f"p90 {step.get('p90', 0):.1f}, n={step.get('n')})")
        else:
            mark = ("✗ ", "red") if status == "failed" else ("– ", "yellow")
            line = Text.assemble(mark, (self.label, "bold"), f"  {status}: {record.get('error', '')}"[:300])
        self.console.print(line)
