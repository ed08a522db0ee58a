"""The host engine's options, declared once (engines/options.py): none yet. `--python` is diagnose's own, since
every engine's host cells run on it (a Slurm job's nodes included)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fp16doctor.engines.options import EngineOptions


@dataclass(frozen=True)
class HostOptions(EngineOptions):
    """This machine's own Python, one child process per run."""

    panel: ClassVar[str] = "What to run"
