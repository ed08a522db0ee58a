"""--docker-host values with a GPU selection, grouping runs by machine, and the live table of runs."""

from __future__ import annotations

import io
import threading

import pytest
from rich.console import Console

from fp16doctor.engines.docker.daemons import EngineTarget, parse_docker_host, select_gpus
from fp16doctor.engines.spec import QUICK, RunSpec, ScriptSpec
from fp16doctor.errors import DoctorError
from fp16doctor.progress import LiveProgress
from fp16doctor.results import group_runs_by_machine


@pytest.mark.parametrize(("text", "target"), [
    ("tcp://node:2376", EngineTarget("tcp://node:2376")),
    ("tcp://node:2376#gpus=0,2", EngineTarget("tcp://node:2376", ("0", "2"))),
    ("ssh://me@node#gpus=GPU-abc", EngineTarget("ssh://me@node", ("GPU-abc",))),
    ("a100-context#gpus=none", EngineTarget("a100-context", ())),
    ("unix:///var/run/docker.sock#gpus=all", EngineTarget("unix:///var/run/docker.sock")),
])
def test_docker_host_takes_a_gpu_selection(text: str, target: EngineTarget) -> None:
    assert parse_docker_host(text) == target


def test_a_gpu_selection_without_an_engine_is_a_usage_error() -> None:
    with pytest.raises(DoctorError, match="names no engine"):
        parse_docker_host("#gpus=0")


def test_gpu_selection_matches_indices_and_uuids() -> None:
    gpus = [{"index": i, "uuid": f"GPU-{i}"} for i in range(4)]
    assert [g["index"] for g in select_gpus(gpus, ("GPU-3", "1"))] == [1, 3]
    assert select_gpus(gpus, ()) == []
    assert select_gpus(gpus, None) == gpus


def test_runs_group_by_machine_and_local_engines_count_as_this_host() -> None:
    runs = [
        {"stack": "host", "engine": {"kind": "host"}},
        {"stack": "cpu", "engine": {"kind": "docker", "docker_host": "unix:///var/run/docker.sock", "name": "vm"}},
        {"stack": "cpu", "engine": {"kind": "docker", "docker_host": "tcp://10.0.0.5:2376", "name": "a100-node"}},
        {"stack": "cpu", "engine": {"kind": "docker", "docker_host": "tcp://10.0.0.5:2377", "name": "a100-node"}},
        {"stack": "cpu", "engine": {"kind": "docker", "docker_host": "ssh://h200"}},
    ]
    groups = group_runs_by_machine(runs)
    assert list(groups) == ["", "a100-node", "ssh://h200"]
    assert [len(g) for g in groups.values()] == [2, 2, 1]


def test_live_progress_keeps_one_row_per_run_in_flight() -> None:
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, width=200, color_system=None), enabled=True)
    f32 = RunSpec("cpu", "float32", "original", QUICK)
    f16 = RunSpec("cpu", "float16", "original", QUICK)
    progress.start_run(f32, 4, 0)
    progress.event({"event": "placed", "run": f32.label, "where": "tcp://a:2376 (CPU)"})
    progress.start_run(f16, 4, 1)
    progress.event({"event": "step", "phase": "measure", "ms": 120.0, "run": f32.label})
    progress.event({"event": "step", "phase": "measure", "ms": 310.0, "run": f16.label})
    assert [row.steps for row in progress.rows.values()] == [[120.0], [310.0]]

    progress.finish_run({"stack": "cpu", "precision": "float32", "variant": "original", "status": "ok",
                         "step_time_ms": {"median": 120.0, "p10": 118.0, "p90": 125.0, "n": 9}})
    assert "[1/4] cpu / float32 / original (quick) on tcp://a:2376 (CPU)  120.0 ms/step" in out.getvalue()
    assert list(progress.rows) == [f16.label] and progress.label.startswith("[2/4] cpu / float16")
    progress.event({"event": "phase", "phase": "train"})  # no "run" key: the host engine's single run
    assert progress.status == "training (warm-up)"


def test_a_scripts_run_is_labelled_by_its_steps_not_the_built_in_size() -> None:
    """A user's script has its own model and batch: the quick/full size does not describe it."""
    progress = LiveProgress(Console(file=io.StringIO(), width=200, color_system=None), enabled=True)
    progress.start_run(RunSpec("tf2.10-cpu", "float16", "original", QUICK, script=ScriptSpec("/p/train.py", steps=3)),
                       2, 1)
    progress.start_run(RunSpec("host", "float32", "original", QUICK, script=ScriptSpec("/p/train.py")), 2, 0)
    labels = [row.label for row in progress.rows.values()]
    assert labels == ["[2/2] tf2.10-cpu / float16 / original (script, 3 steps)",
                      "[1/2] host / float32 / original (script)"]


def test_closing_the_live_display_waits_for_a_worker_drawing_it() -> None:
    # After Ctrl-C the CLI closes the display while a worker thread may be in the middle of drawing.
    progress = LiveProgress(Console(file=io.StringIO(), width=120, color_system=None), enabled=True)
    progress.__enter__()
    spec = RunSpec("cpu", "float32", "original", QUICK)
    progress.start_run(spec, 1, 0)
    closed = threading.Event()
    with progress.lock:  # a worker is drawing
        closer = threading.Thread(target=lambda: (progress.__exit__(None, None, None), closed.set()))
        closer.start()
        assert not closed.wait(0.3)
        assert progress.live is not None  # still there for the draw in progress
    closer.join(5)
    assert closed.is_set() and progress.live is None
    progress.event({"event": "phase", "phase": "train", "run": spec.label})  # a late event draws nothing
