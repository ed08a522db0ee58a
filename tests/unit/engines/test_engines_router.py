"""Which engine runs which cell: decided in one place (engines/registry.Router), from the engines' own traits."""

from __future__ import annotations

from pathlib import Path

from fp16doctor.engines.base import EngineSetup
from fp16doctor.engines.docker.fleet import DockerEngine
from fp16doctor.engines.host import HostEngine
from fp16doctor.engines.option_table import ENGINE_OPTIONS
from fp16doctor.engines.registry import ENGINES, Router
from fp16doctor.engines.slurm.engine import SlurmEngine
from fp16doctor.engines.slurm.options import SlurmOptions
from fp16doctor.engines.spec import HOST_STACK, QUICK, RunSpec

CELLS = [RunSpec(stack, precision, "original", QUICK) for stack in ("cpu", HOST_STACK, "tf2.10-cpu")
         for precision in ("float32", "float16")]


def _routed(setup: EngineSetup) -> list[tuple[str, list[str]]]:
    return [(engine.kind, [f"{s.stack}/{s.precision}" for s in cells]) for engine, cells in Router(setup).route(CELLS)]


def test_without_slurm_the_hosts_cells_run_here_first_and_the_stacks_in_docker() -> None:
    assert _routed(EngineSetup(out_dir=Path("out"))) == [
        ("host", ["host/float32", "host/float16"]),
        ("docker", ["cpu/float32", "cpu/float16", "tf2.10-cpu/float32", "tf2.10-cpu/float16"]),
    ]


def test_with_slurm_every_cell_goes_to_the_cluster_in_plan_order() -> None:
    [(kind, cells)] = _routed(EngineSetup(out_dir=Path("out"), engines=(SlurmOptions(slurm=True),)))
    assert kind == "slurm" and cells == [f"{s.stack}/{s.precision}" for s in CELLS]


def test_each_engine_is_made_once_per_diagnose() -> None:
    router = Router(EngineSetup(out_dir=Path("out")))
    first = {engine.kind: engine for engine, _ in router.route(CELLS)}
    again = {engine.kind: engine for engine, _ in router.route(CELLS[:2])}
    assert again["docker"] is first["docker"] and len(router.engines()) == 2


def test_what_differs_between_engines_is_their_declared_traits() -> None:
    assert ENGINES == (SlurmEngine, HostEngine, DockerEngine)
    assert [(e.kind, e.runs_here, e.queued) for e in ENGINES] == [
        ("slurm", False, True), ("host", True, False), ("docker", False, False)]


def test_each_engine_names_its_options_and_the_option_table_lists_them_in_the_engines_order() -> None:
    assert tuple(e.options_class for e in ENGINES) == ENGINE_OPTIONS


def test_an_engine_is_chosen_by_its_options_selector() -> None:
    """--slurm's field selects Slurm; a Slurm option given without it selects nothing."""
    assert [kind for kind, _ in _routed(EngineSetup(out_dir=Path("out"), engines=(SlurmOptions(partition="gpu"),)))] \
        == ["host", "docker"]
