"""What a diagnose was asked to do, and what it tells the user while it works.

Shared by diagnose's modules and the outputs that show its progress (the layers in docs/architecture.md).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fp16doctor.engines.options import EngineOptions, Options, options_of
from fp16doctor.engines.spec import HOST_STACK, RunSpec

__all__ = ["HOST_STACK", "DiagnoseOptions", "Progress"]


class Progress(Protocol):
    """What diagnose tells the user while it works (the CLI draws it; tests record it)."""

    def note(self, message: str) -> None: ...
    def start_run(self, spec: RunSpec, total: int, index: int) -> None: ...
    def event(self, event: dict[str, Any]) -> None: ...
    def finish_run(self, record: dict[str, Any]) -> None: ...


@dataclass
class DiagnoseOptions:
    out_dir: Path
    size: str | None = None  # "quick" | "full"; None: full with a GPU, quick without
    stacks: list[str] = field(default_factory=list)
    precisions: list[str] = field(default_factory=list)
    data_dir: Path | None = None
    include_host: bool = True
    force: bool = False
    resume: bool = False
    python: str | None = None  # the host Python that runs the workload (default: this one)
    ca_bundle: Path | None = None  # for stack builds behind a TLS proxy (default: build.default_ca_bundle())
    wheelhouse: Path | None = None  # stack builds install from these wheels only
    variants: list[str] | None = None  # default: original everywhere + synthetic_input per size
    script: Path | None = None  # the user's own training script, run instead of the seed workload
    script_args: list[str] = field(default_factory=list)
    steps: int | None = None  # --script: exactly this many measured steps (default: the size decides)
    budget_s: float | None = None  # --budget: the wall budget in place of the size's (a size that has one)
    rounds: int | None = None  # --rounds: at least this many interleaved rounds
    experiments: bool = True  # run the experiments the analysis plans after the main matrix
    keep_profiles: bool = False  # keep each run's raw profile under out_dir/profiles
    engines: tuple[EngineOptions, ...] = ()  # each engine's own options (engines/options.py): --slurm, --docker-host
    plan: bool = False  # --plan: every check, then what would run; nothing runs and nothing is created
    argv: list[str] = field(default_factory=lambda: list(sys.argv))
    started: float | None = None  # time.monotonic() when the user's command began: the budget's clock (None: now)

    def engine(self, cls: type[Options]) -> Options:
        """One engine's options as the user set them (their defaults where none was set)."""
        return options_of(self.engines, cls)
