"""Where an engine's runs go during a diagnose: each record into results.json as it finishes, the rest to the
display (a rounds process's record goes into the runs it timed instead: diagnose/rounds.py RoundsSink)."""

from __future__ import annotations

from typing import Any

from fp16doctor.engines.spec import RunSpec
from fp16doctor.options import Progress
from fp16doctor.results import ResultsWriter


class DocumentSink:
    """An engine's RunSink for diagnose: records go to results.json at once, the rest to the display."""

    def __init__(self, writer: ResultsWriter, progress: Progress, total: int) -> None:
        self.writer = writer
        self.progress = progress
        self.total = total
        self.started = 0

    def runs(self) -> list[dict[str, Any]]:
        return list(self.writer.doc["runs"])

    def note(self, message: str) -> None:
        self.progress.note(message)

    def start_run(self, spec: RunSpec) -> None:
        self.progress.start_run(spec, self.total, self.started)
        self.started += 1

    def event(self, event: dict[str, Any]) -> None:
        self.progress.event(event)

    def finish_run(self, record: dict[str, Any]) -> None:
        self.writer.add_run(record)
        self.progress.finish_run(record)
