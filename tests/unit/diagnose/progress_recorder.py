"""A Progress (fp16doctor.options) for the diagnose tests: it keeps the notes diagnose prints, and nothing else."""

from __future__ import annotations

from typing import Any

from fp16doctor.engines.spec import RunSpec


class Recorder:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, message: str) -> None:
        self.notes.append(message)

    def start_run(self, spec: RunSpec, total: int, index: int) -> None:
        pass

    def event(self, event: dict[str, Any]) -> None:
        pass

    def finish_run(self, record: dict[str, Any]) -> None:
        pass
