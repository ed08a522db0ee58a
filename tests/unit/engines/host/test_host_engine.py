"""The host engine against small stand-in workloads: protocol, failures, and what reaches the record."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from fp16doctor.engines.base import parse_protocol_line
from fp16doctor.engines.host import HostEngine
from fp16doctor.engines.spec import QUICK, RunSpec


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "fake_workload.py"
    path.write_text(textwrap.dedent(body))
    return path


SPEC = RunSpec("host", "float16", "original", QUICK)


def test_protocol_lines_are_parsed_and_other_output_ignored() -> None:
    assert parse_protocol_line('@@fp16doctor {"event": "step", "ms": 12.5}\n') == {"event": "step", "ms": 12.5}
    assert parse_protocol_line("Epoch 1/3 - 800ms/step") is None
    assert parse_protocol_line("@@fp16doctor {not json") is None
    assert parse_protocol_line('@@fp16doctor {"no_event": 1}') is None


def test_result_event_becomes_an_ok_record(tmp_path: Path) -> None:
    script = _script(tmp_path, """
        import json, sys
        print("framework noise on stdout")
        print("@@fp16doctor " + json.dumps({"event": "step", "phase": "measure", "ms": 810.0}))
        print("@@fp16doctor " + json.dumps({"event": "result", "run": {
            "status": "ok", "device": "cpu", "step_time_ms": {"median": 812.0, "n": 5},
            "argv": sys.argv[1:]}}))
    """)
    events: list[dict] = []
    record = HostEngine(script=script, cache_dir=tmp_path).run(SPEC, events.append)
    assert record["status"] == "ok"
    assert record["step_time_ms"]["median"] == 812.0
    assert (record["stack"], record["precision"], record["variant"]) == ("host", "float16", "original")
    assert record["engine"]["kind"] == "host" and record["engine"]["python"] == sys.executable
    assert [e["event"] for e in events] == ["step", "result"]
    # The engine passes the run's size and precision on to the workload.
    argv = record["argv"]
    assert argv[argv.index("--precision") + 1] == "float16"
    assert argv[argv.index("--batch-size") + 1] == str(QUICK.batch_size)


def test_workload_error_event_is_a_failed_run_with_its_reason(tmp_path: Path) -> None:
    script = _script(tmp_path, """
        import json, sys
        sys.stderr.write("Traceback ... ResourceExhaustedError: OOM when allocating tensor\\n")
        print("@@fp16doctor " + json.dumps({"event": "error", "status": "failed",
              "error": "ResourceExhaustedError: OOM when allocating tensor"}))
        sys.exit(1)
    """)
    record = HostEngine(script=script, cache_dir=tmp_path).run(SPEC, lambda e: None)
    # One wording on every engine: the classified reason, the workload's own words in the log's tail.
    assert record["status"] == "failed" and record["failure_kind"] == "gpu_oom"
    assert "out of device memory" in record["error"]
    assert any("OOM when allocating" in line for line in record["log_tail"])


def test_skip_event_is_a_skipped_run(tmp_path: Path) -> None:
    script = _script(tmp_path, """
        import json
        print("@@fp16doctor " + json.dumps({"event": "error", "status": "skipped",
              "error": "mixed_float16 needs a Keras dtype policy"}))
    """)
    record = HostEngine(script=script, cache_dir=tmp_path).run(SPEC, lambda e: None)
    assert record["status"] == "skipped"
    assert "dtype policy" in record["error"]


def test_a_crash_without_a_report_keeps_the_exit_status_and_log(tmp_path: Path) -> None:
    script = _script(tmp_path, """
        import sys
        sys.stderr.write("Segmentation fault in libcudnn\\n")
        sys.exit(139)
    """)
    record = HostEngine(script=script, cache_dir=tmp_path).run(SPEC, lambda e: None)
    assert record["status"] == "failed"
    assert "139" in record["error"]
    assert any("libcudnn" in line for line in record["log_tail"])


def test_a_groups_records_name_this_machine_and_how_to_run_there_again(tmp_path: Path) -> None:
    script = _script(tmp_path, """
        import json
        print("@@fp16doctor " + json.dumps({"event": "result", "run": {
            "status": "ok", "device": "cpu", "step_time_ms": {"median": 40.0}}}))
    """)

    class Sink:
        def __init__(self) -> None:
            self.records: list[dict] = []

        def runs(self) -> list[dict]:
            return self.records

        def note(self, message: str) -> None: ...
        def start_run(self, spec: RunSpec) -> None: ...
        def event(self, event: dict) -> None: ...

        def finish_run(self, record: dict) -> None:
            self.records.append(record)

    sink = Sink()
    HostEngine(script=script, cache_dir=tmp_path).run_groups([[RunSpec("host", "float32", "original", QUICK)]], sink)
    [record] = sink.records
    assert record["machine"] == "host" and record["engine"]["label"] == "host" and record["engine"]["rerun"] == []


def test_gpu_runs_carry_the_sampled_utilisation(tmp_path: Path) -> None:
    script = _script(tmp_path, """
        import json
        print("@@fp16doctor " + json.dumps({"event": "result", "run": {
            "status": "ok", "device": "gpu:0", "step_time_ms": {"median": 40.0}}}))
    """)

    class FakeSampler:
        def __init__(self, index: int) -> None:
            self.index = index

        def __enter__(self) -> FakeSampler:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def summary(self) -> dict:
            return {"gpu_utilization_pct": {"median": 37.0, "n": 12}}

    engine = HostEngine(script=script, cache_dir=tmp_path, sampler=FakeSampler)
    record = engine.run(SPEC, lambda e: None, gpu_index=0)
    assert record["gpu_utilization_pct"]["median"] == 37.0
    # No GPU: no sampler is opened and nothing is invented.
    record = engine.run(SPEC, lambda e: None, gpu_index=None)
    assert "gpu_utilization_pct" not in record


def test_interrupt_stops_the_child(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    script = _script(tmp_path, f"""
        import json, os, time
        open({str(marker)!r}, "w").write(str(os.getpid()))
        print("@@fp16doctor " + json.dumps({{"event": "phase", "phase": "train"}}), flush=True)
        time.sleep(60)
    """)

    def interrupt(event: dict) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        HostEngine(script=script, cache_dir=tmp_path).run(SPEC, interrupt)
    pid = int(marker.read_text())
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def test_a_silent_hang_is_stopped_at_the_time_limit(tmp_path: Path) -> None:
    # A workload stuck in a driver call prints nothing; the limit must still end the run.
    script = _script(tmp_path, """
        import json, time
        print("@@fp16doctor " + json.dumps({"event": "phase", "phase": "train"}), flush=True)
        time.sleep(60)
    """)
    started = time.monotonic()
    record = HostEngine(script=script, cache_dir=tmp_path, timeout_s=1.0).run(SPEC, lambda e: None)
    assert time.monotonic() - started < 30
    assert record["status"] == "failed"
    assert record["error"] == "the run exceeded its 1 s limit and was killed" and record["failure_kind"] == "timeout"


def test_a_killed_workload_leaves_no_private_keras_home(tmp_path: Path) -> None:
    """The workload's private keras.json lives in the engine's scratch folder, which the engine removes
    even when it had to kill the workload (no exit handler runs then)."""
    workload_dir = Path(__file__).resolve().parents[4] / "fp16doctor" / "workload"
    script = _script(tmp_path, f"""
        import json, sys, time
        sys.path.insert(0, {str(workload_dir)!r})
        import frameworks
        keras_dir, _ = frameworks.prepare_keras_home("float16", "tensorflow")
        print("@@fp16doctor " + json.dumps({{"event": "phase", "phase": "train", "keras_dir": keras_dir}}), flush=True)
        time.sleep(60)
    """)
    events: list[dict] = []
    record = HostEngine(script=script, cache_dir=tmp_path, timeout_s=2.0).run(SPEC, events.append)
    assert record["status"] == "failed" and record["error"] == "the run exceeded its 2 s limit and was killed"
    keras_dir = next(e["keras_dir"] for e in events if "keras_dir" in e)
    assert "fp16doctor-run-" in keras_dir and not Path(keras_dir).exists()


def test_a_host_stack_of_another_backend_runs_the_workload_on_it(tmp_path: Path) -> None:
    from fp16doctor.engines.spec import host_rerun, host_stack, is_host_stack, stack_backend

    assert host_stack("jax", "torch") == "host-jax" and host_stack("torch", "torch") == "host"
    assert is_host_stack("host-jax") and not is_host_stack("host-keras") and not is_host_stack("cpu")
    assert stack_backend("host-torch") == "torch" and stack_backend("host") is None
    assert host_rerun("host-jax") == ["--backend", "jax"] and host_rerun("host") == []
    engine = HostEngine(backend="torch", cache_dir=tmp_path)
    assert HostEngine.takes(RunSpec("host-jax", "float32", "original", QUICK))
    jax = engine.command(RunSpec("host-jax", "float32", "original", QUICK))
    assert jax[jax.index("--backend") + 1] == "jax"
    configured = engine.command(RunSpec("host", "float32", "original", QUICK))
    assert configured[configured.index("--backend") + 1] == "torch"
