"""Engines that cannot be reached or die mid-run, Ctrl-C, and --resume completing what is missing."""

from __future__ import annotations

import _thread
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from fleet_fakes import Fleet, RecordingProgress, options, plan, run_stack_specs, writer

from fp16doctor import probe
from fp16doctor.diagnose import DiagnoseOptions, run_diagnose
from fp16doctor.engines.docker import sdk
from fp16doctor.engines.docker.options import DockerOptions
from fp16doctor.errors import EXIT_OK, EXIT_PARTIAL, DoctorError

A, B = "tcp://node-a:2376", "tcp://node-b:2376"


def _runs(tmp_path: Path) -> list[dict[str, Any]]:
    return list(json.loads((tmp_path / "results.json").read_text())["runs"])


def test_an_engine_unreachable_at_start_leaves_every_run_to_the_other(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A)
    fleet.add(B, reachable=False)
    run_stack_specs(plan("cpu"), {"gpus": []}, options(tmp_path, A, B), writer(tmp_path), progress, 0, 4)

    runs = _runs(tmp_path)
    assert [r["status"] for r in runs] == ["ok"] * 4
    assert {r["engine"]["docker_host"] for r in runs} == {A}
    assert f"engine {B} unreachable: connection refused" in progress.notes
    engines = {e["docker_host"]: e for e in json.loads((tmp_path / "results.json").read_text())["engines"]}
    assert engines[B]["status"] == "failed" and engines[A]["status"] == "ok"


def test_containers_of_a_killed_fp16doctor_are_removed_when_the_engine_is_reached_and_said(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    engine = fleet.add(A, orphans=["fp16doctor-old-cpu-float16-original-abc123"])
    run_stack_specs(plan("cpu"), {"gpus": []}, options(tmp_path, A), writer(tmp_path), progress, 0, 4)

    assert engine.orphans == []
    assert any(f"removed 1 fp16doctor container(s) on {A} whose fp16doctor was killed mid-run: "
               "fp16doctor-old-cpu-float16-original-abc123" in note for note in progress.notes)
    assert [r["status"] for r in _runs(tmp_path)] == ["ok"] * 4


def test_every_engine_unreachable_fails_every_run_with_the_reason(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A, reachable=False)
    run_stack_specs(plan("cpu"), {"gpus": []}, options(tmp_path, A), writer(tmp_path), progress, 0, 4)

    runs = _runs(tmp_path)
    assert len(runs) == 4
    assert all(r["status"] == "failed" and r["error"] == f"engine {A} unreachable: connection refused"
               for r in runs)


def test_an_engine_dying_mid_run_fails_only_its_run_in_flight(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A)
    fleet.add(B, die_on_run=1)
    run_stack_specs(plan("cpu"), {"gpus": []}, options(tmp_path, A, B), writer(tmp_path), progress, 0, 4)

    runs = _runs(tmp_path)
    failed = [r for r in runs if r["status"] == "failed"]
    assert len(failed) == 1 and len(fleet.engines[B].runs) == 1
    assert failed[0]["failure_kind"] == "engine_lost"
    assert failed[0]["error"].startswith(f"engine {B} died during the run (connection refused)")
    assert failed[0]["engine"]["docker_host"] == B
    ok = [r for r in runs if r["status"] == "ok"]
    assert len(ok) == 3 and {r["engine"]["docker_host"] for r in ok} == {A}
    assert any(n.startswith(f"engine {B} died mid-run") for n in progress.notes)


def test_an_engine_that_cannot_build_gets_the_image_from_another(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    fleet.add(A)
    fleet.add(B, build_error="no route to the registry", build_delay_s=0.1)
    run_stack_specs(plan("cpu"), {"gpus": []}, options(tmp_path, A, B), writer(tmp_path), progress, 0, 4)

    assert fleet.copies == [(A, B)]
    assert {r["engine"]["docker_host"] for r in _runs(tmp_path)} == {A, B}
    assert any("copied the image from" in n for n in progress.notes)


def test_ctrl_c_removes_the_containers_in_flight_and_propagates(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress
) -> None:
    """Ctrl-C while a run is known to be in flight (its start is the event, not a timing two runs may or may not
    overlap in): every engine's containers are removed, nothing is written as a result, and no run starts after
    the last clean-up."""
    fleet.add(A)
    fleet.add(B)
    fleet.hold = True  # a run stays in flight until its container is removed (or 10 s)

    interrupted: list[int] = []

    def interrupt_on_the_first_start(f: Fleet) -> None:
        with f.lock:
            first = not interrupted
            interrupted.append(f.in_flight)
        if first:
            _thread.interrupt_main()  # what Ctrl-C does to the main thread

    fleet.on_start = interrupt_on_the_first_start
    # interrupt_main does nothing where SIGINT is ignored (a suite started as a background job inherits that).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_stack_specs(plan("cpu"), {"gpus": []}, options(tmp_path, A, B), writer(tmp_path), progress, 0, 4)
    finally:
        signal.signal(signal.SIGINT, previous)

    assert interrupted and interrupted[0] == 1
    assert {url for url, _ in fleet.cleanups} == {A, B}
    assert {run_id for _, run_id in fleet.cleanups} == {sdk.RUN_ID}
    assert fleet.containers == set()
    assert _runs(tmp_path) == []  # nothing measured is written as if it were a result
    last_cleanup = max(i for i, what in enumerate(fleet.timeline) if what.startswith("cleanup"))
    assert not [what for what in fleet.timeline[last_cleanup:] if what.startswith("start")]  # none left behind
    assert 1 <= len(fleet.engines[A].runs) + len(fleet.engines[B].runs) <= 2  # at most one run per slot


def test_resume_runs_exactly_the_cells_that_failed(
    tmp_path: Path, fleet: Fleet, progress: RecordingProgress, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe, "probe_host", lambda python=None: {"gpus": [], "cpu": {"cores": 2}})
    fleet.add(A, die_on_run=2)
    first = run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="quick", stacks=["cpu"], include_host=False,
                                         engines=(DockerOptions(docker_hosts=(A,)),)), progress)
    assert first.exit_code == EXIT_PARTIAL
    statuses = {(r["precision"], r["variant"]): r["status"] for r in _runs(tmp_path)}
    assert list(statuses.values()).count("ok") == 1 and len(statuses) == 3
    missing = {label for label, status in
               ((f"cpu / {p} / {v}", s) for (p, v), s in statuses.items()) if status != "ok"}

    fleet.engines[A].reachable = True
    fleet.engines[A].die_on_run = None
    fleet.engines[A].runs.clear()
    again = run_diagnose(DiagnoseOptions(out_dir=tmp_path, size="quick", stacks=["cpu"], include_host=False,
                                         engines=(DockerOptions(docker_hosts=(A,)),), resume=True), progress)
    assert again.exit_code == EXIT_OK
    # The cells that failed, then the stack's precisions timed together again (the resumed ones joined them).
    assert {label for label, _ in fleet.engines[A].runs} == missing | {
        "cpu / interleaved rounds of float32, float16, mixed_float16"}
    assert [r["status"] for r in _runs(tmp_path)] == ["ok"] * 3


def test_the_check_before_anything_runs_gives_up_on_an_engine_that_does_not_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from fp16doctor.engines import base
    from fp16doctor.engines.docker import fleet as fleet_module

    answered = threading.Event()

    def hangs(docker_host: str | None) -> object:
        answered.wait(5)  # an ssh engine waiting for a password nobody types
        raise DoctorError("never")

    monkeypatch.setattr(sdk, "engine_facts", hangs)
    monkeypatch.setattr(fleet_module, "CHECK_TIMEOUT_S", 0.3)
    engine = fleet_module.DockerEngine(base.EngineSetup(out_dir=tmp_path, engines=(DockerOptions(docker_hosts=("ssh://gpu-box",)),)))
    with pytest.raises(DoctorError) as raised:
        engine.check()
    answered.set()
    assert raised.value.message == "Docker engine ssh://gpu-box unreachable: no answer within 0 s"
    assert "--docker-host" in (raised.value.hint or "")
