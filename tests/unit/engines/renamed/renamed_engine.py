"""A test-only engine: the host's cells in a child process under another name, with a stand-in workload that
reports each cell at once. Adding it to a diagnose is this module and its rows in engines/registry.ENGINES and
engines/option_table.ENGINE_OPTIONS; its one option is one field of RenamedOptions."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from fp16doctor.engines.base import EngineSetup
from fp16doctor.engines.host import HostEngine
from fp16doctor.engines.options import EngineOptions, option
from fp16doctor.engines.spec import HOST_STACK, RunSpec

# The stand-in workload: one result per run, the step time by precision (float16 slower), no framework needed.
WORKLOAD = textwrap.dedent("""
    import json, sys
    precision = sys.argv[sys.argv.index("--precision") + 1]
    given = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--float16-ms=")]
    ms = {"float32": 100.0, "float16": float(given[0]) if given else 250.0}.get(precision, 120.0)
    print("@@fp16doctor " + json.dumps({"event": "result", "run": {
        "status": "ok", "device": "cpu", "step_time_ms": {"median": ms, "p10": ms, "p90": ms, "n": 5},
        "first_step_ms": 10 * ms, "workload": {"name": "seed_cnn"}}}))
""")


@dataclass(frozen=True)
class RenamedOptions(EngineOptions):
    panel: ClassVar[str] = "Renamed"

    float16_ms: int | None = option("--renamed-float16-ms", "The stand-in workload's float16 step, in ms.",
                                    env="FP16DOCTOR_RENAMED_FLOAT16_MS", tool="--float16-ms")


class RenamedEngine(HostEngine):
    kind: ClassVar[str] = "renamed"
    options_class: ClassVar[type[EngineOptions]] = RenamedOptions
    runs_here: ClassVar[bool] = True
    queued: ClassVar[bool] = False
    one_run: ClassVar[str] = "its own renamed process"
    workload_dir: ClassVar[Path | None] = None  # where the test put the stand-in workload

    @classmethod
    def from_setup(cls, setup: EngineSetup) -> RenamedEngine:
        assert cls.workload_dir is not None
        script = cls.workload_dir / "stand_in_workload.py"
        script.write_text(WORKLOAD)
        return cls(setup.options(RenamedOptions), python=setup.python, script=script, cache_dir=cls.workload_dir)

    def __init__(self, options: RenamedOptions, **host: Any) -> None:
        super().__init__(**host)
        self.options = options

    def command(self, spec: RunSpec, scratch: Path | None = None, profile_dir: Path | None = None) -> list[str]:
        return [*super().command(spec, scratch, profile_dir), *self.options.tool_args()]

    @classmethod
    def takes(cls, spec: RunSpec) -> bool:
        return spec.stack == HOST_STACK
