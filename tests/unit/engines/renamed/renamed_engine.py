"""A test-only engine: the host's cells in a child process under another name, with a stand-in workload that
reports each cell at once. Adding it to a diagnose is this module and one row in engines/registry.ENGINES."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import ClassVar

from fp16doctor.engines.base import EngineSetup
from fp16doctor.engines.host import HostEngine
from fp16doctor.engines.spec import HOST_STACK, RunSpec

# The stand-in workload: one result per run, the step time by precision (float16 slower), no framework needed.
WORKLOAD = textwrap.dedent("""
    import json, sys
    precision = sys.argv[sys.argv.index("--precision") + 1]
    ms = {"float32": 100.0, "float16": 250.0}.get(precision, 120.0)
    print("@@fp16doctor " + json.dumps({"event": "result", "run": {
        "status": "ok", "device": "cpu", "step_time_ms": {"median": ms, "p10": ms, "p90": ms, "n": 5},
        "first_step_ms": 10 * ms, "workload": {"name": "seed_cnn"}}}))
""")


class RenamedEngine(HostEngine):
    kind: ClassVar[str] = "renamed"
    runs_here: ClassVar[bool] = True
    queued: ClassVar[bool] = False
    one_run: ClassVar[str] = "its own renamed process"
    workload_dir: ClassVar[Path | None] = None  # where the test put the stand-in workload

    @classmethod
    def from_setup(cls, setup: EngineSetup) -> RenamedEngine:
        assert cls.workload_dir is not None
        script = cls.workload_dir / "stand_in_workload.py"
        script.write_text(WORKLOAD)
        return cls(python=setup.python, script=script, cache_dir=cls.workload_dir)

    @classmethod
    def selected(cls, setup: EngineSetup) -> bool:
        return setup.slurm is None

    @classmethod
    def takes(cls, spec: RunSpec) -> bool:
        return spec.stack == HOST_STACK
