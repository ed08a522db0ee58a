"""Every engine diagnose can run cells on, and the one place a cell's engine is chosen.

Adding an engine is one module implementing engines/base.Engine (with a `from_setup` that makes it for one
diagnose), its options (engines/options.py), and its row here and in engines/option_table.ENGINE_OPTIONS. The
first engine, in ENGINES' order, that this invocation selects (its options' selector, where it has one) and
that takes a cell runs it (submitit's `AutoExecutor` over one executor list): --slurm selects Slurm for
every cell; otherwise the host's cells go to this machine's Python and the pinned stacks' to Docker.
"""

from __future__ import annotations

from collections.abc import Iterable

from fp16doctor.engines.base import Engine, EngineSetup
from fp16doctor.engines.docker.fleet import DockerEngine
from fp16doctor.engines.host import HostEngine
from fp16doctor.engines.slurm.engine import SlurmEngine
from fp16doctor.engines.spec import RunSpec

ENGINES: tuple[type[Engine], ...] = (
    SlurmEngine,  # a Slurm cluster: one job per comparison group, the nodes' Python or the stack's container
    HostEngine,  # this machine's own Python, one child process per run
    DockerEngine,  # Docker engines, local or remote: the pinned stacks' images, one container per run
)


def engine_class(spec: RunSpec, setup: EngineSetup,
                 engines: tuple[type[Engine], ...] | None = None) -> type[Engine]:
    """The engine that runs a cell in this invocation: the first in `engines` (ENGINES) it selects that takes it."""
    for cls in ENGINES if engines is None else engines:
        if setup.options(cls.options_class).selected and cls.takes(spec):
            return cls
    raise LookupError(f"no engine takes {spec.label}")


class Router:
    """The engines of one diagnose, each made once (its connections, images and verdicts kept between the
    matrix, the rounds and the experiments), and which of them runs which cell."""

    def __init__(self, setup: EngineSetup, engines: tuple[type[Engine], ...] | None = None) -> None:
        self.setup = setup
        self.classes = tuple(c for c in (ENGINES if engines is None else engines)
                             if setup.options(c.options_class).selected)
        self.made: dict[type[Engine], Engine] = {}

    def engine_class(self, spec: RunSpec) -> type[Engine]:
        return engine_class(spec, self.setup, self.classes)

    def engine(self, cls: type[Engine]) -> Engine:
        if cls not in self.made:
            self.made[cls] = cls.from_setup(self.setup)
        return self.made[cls]

    def route(self, specs: Iterable[RunSpec]) -> list[tuple[Engine, list[RunSpec]]]:
        """The cells by engine, in ENGINES' order (the host's runs before the containers'), each in plan order."""
        by_class: dict[type[Engine], list[RunSpec]] = {}
        for spec in specs:
            by_class.setdefault(self.engine_class(spec), []).append(spec)
        return [(self.engine(cls), by_class[cls]) for cls in self.classes if cls in by_class]

    def check(self, specs: Iterable[RunSpec]) -> None:
        """Each engine these cells need says what would fail every run there, before anything runs."""
        for engine, _ in self.route(specs):
            engine.check()

    def engines(self) -> list[Engine]:
        return list(self.made.values())
