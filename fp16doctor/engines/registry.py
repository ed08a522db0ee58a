"""Every engine diagnose can run cells on, by kind: adding an engine is one module implementing
engines/base.Engine (with a `from_setup` that makes it for one diagnose) plus one line here.

Docker engines are driven by fp16doctor/scheduler.py (slots per GPU over a fleet of engines), which
calls engines/docker_engine.py run by run; they are not listed here yet.
"""

from __future__ import annotations

from collections.abc import Callable

from fp16doctor.engines.base import Engine, EngineSetup
from fp16doctor.engines.host import HostEngine
from fp16doctor.engines.slurm_engine import SlurmEngine

ENGINES: dict[str, Callable[[EngineSetup], Engine]] = {
    HostEngine.kind: HostEngine.from_setup,  # this machine's own Python, one child process per run
    SlurmEngine.kind: SlurmEngine.from_setup,  # a Slurm cluster: one job per comparison group, the nodes' Python
}


def create(kind: str, setup: EngineSetup) -> Engine:
    """The engine of this kind for one diagnose."""
    return ENGINES[kind](setup)
