"""The profiled window on the engine side: oneDNN lines kept per window, artifacts handed to the
attribution, raw files removed (or kept), and a profile that cannot be read never failing the run."""

from __future__ import annotations

import io
import json
import sys
import tarfile
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.engines.artifacts import WindowCapture, attach_ops
from fp16doctor.engines.host import HostEngine
from fp16doctor.engines.spec import QUICK, RunSpec

# Two lines as oneDNN v3.7 prints them (the seed model's first conv, float16 weight gradient, on a
# Sapphire Rapids Xeon), and one gemm_api line of the kind an AVX2 CPU prints thousands of per step.
REF_CONV = ("onednn_verbose,v1,primitive,exec,cpu,convolution,ref:any,backward_weights,src:f16::blocked:acdb::f0 "
            "wei:f16:a:blocked:Acdb32a::f0 bia:f16::blocked:a::f0 dst:f16::blocked:acdb::f0,,alg:convolution_direct,"
            "mb32_ic3oc32_ih112oh112kh3sh1dh0ph1_iw168ow168kw3sw1dw0pw1,12527.1")
POOL = ("onednn_verbose,v1,primitive,exec,cpu,pooling,jit:avx512_core,forward_training,src:f32::blocked:acdb::f0 "
        "dst:f32::blocked:acdb::f0 ws:u8::blocked:acdb::f0,,alg:pooling_max,"
        "mb32ic32_ih112oh56kh2sh2dh0ph0_iw168ow84kw2sw2dw0pw0,8.58618")
GEMM = ("onednn_verbose,v1,primitive,exec,cpu,gemm_api,,undef,src_f32::blocked:ab:f0 wei_f32::blocked:ab:f0 "
        "dst_f32::blocked:ab:f0,attr-post-ops:sum:1 ,,3x320:320x32,0.000976562")


def test_only_the_lines_between_a_windows_markers_are_kept() -> None:
    capture = WindowCapture()
    lines = [POOL, "=== fp16doctor-window-start 1764.0 kind first_step", REF_CONV,
             "=== fp16doctor-window-end 1765.0 ms_per_step 12600.0 steps 1 kind first_step", GEMM,
             "Epoch 1/3", "=== fp16doctor-window-start 1766.0 kind after_timing", POOL, POOL,
             "=== fp16doctor-window-end 1767.0 ms_per_step 130.0 steps 2 kind after_timing", POOL]
    consumed = [capture.feed(line + "\n") for line in lines]
    assert capture.windows == {"first_step": [REF_CONV], "after_timing": [POOL, POOL]}
    assert capture.outside == 3  # printed while the timed steps ran: counted, not kept
    assert consumed[5] is False  # ordinary output is left to the log
    assert all(consumed[i] for i in (0, 1, 2, 3, 4))


def test_a_window_flooded_with_lines_is_cut_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    capture = WindowCapture(max_lines=3)
    capture.feed("=== fp16doctor-window-start 1.0 kind after_timing")
    for _ in range(10_000):
        capture.feed(GEMM)
    assert len(capture.windows["after_timing"]) == 3 and capture.truncated == {"after_timing"}
    record = _record({"window": {"kind": "after_timing", "steps": 2, "wall_ms": 260.0}, "onednn": True})
    _install_attribution(monkeypatch, lambda artifacts, layers: {"source": "onednn_verbose", "items": []})
    attach_ops(record, capture, tmp_path)
    assert "cut at 3 lines" in record["ops_error"] and record["ops"]["source"] == "onednn_verbose"


def _record(profile: dict[str, Any]) -> dict[str, Any]:
    return {"stack": "host", "precision": "float16", "variant": "original", "status": "ok", "device": "cpu",
            "step_time_ms": {"median": 22000.0, "n": 1}, "profile": profile,
            "model": {"layers": [{"type": "Conv2D", "name": "conv2d"}]}}


def _install_attribution(monkeypatch: pytest.MonkeyPatch, build_ops: Any) -> None:
    module = types.ModuleType("fp16doctor.attribution")
    module.build_ops = build_ops  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fp16doctor.attribution", module)


def test_without_the_attribution_the_run_stands_and_says_why_there_are_no_ops(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "fp16doctor.attribution", None)  # as if not installed
    capture = WindowCapture()
    for line in ("=== fp16doctor-window-start 1.0 kind first_step", REF_CONV, "=== fp16doctor-window-end 2.0"):
        capture.feed(line)
    record = _record({"window": {"kind": "first_step", "steps": 1, "wall_ms": 22000.0}, "onednn": True})
    attach_ops(record, capture, tmp_path)
    assert record["status"] == "ok" and "ops" not in record
    assert "attribution" in record["ops_error"]
    # What reading the window took here is kept: the budget prices the windows still to come with it.
    attribution_s = record["profile"].pop("attribution_s")
    assert isinstance(attribution_s, float) and 0.0 <= attribution_s < 30.0
    assert record["profile"] == {"window": {"kind": "first_step", "steps": 1, "wall_ms": 22000.0},
                                 "artifacts": ["onednn_lines"]}


def test_an_attribution_that_fails_is_recorded_not_raised(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(artifacts: dict[str, Any], layers: list[Any]) -> dict[str, Any]:
        raise ValueError("unexpected xplane version")

    _install_attribution(monkeypatch, broken)
    xplane = tmp_path / "after_timing" / "plugins" / "profile" / "1" / "vm.xplane.pb"
    xplane.parent.mkdir(parents=True)
    xplane.write_bytes(b"\x00")
    record = _record({"window": {"kind": "after_timing"}, "onednn": False, "dir": "/inside/the/container",
                      "xplane": "/inside/the/container/after_timing/plugins/profile/1/vm.xplane.pb"})
    attach_ops(record, WindowCapture(), tmp_path)
    assert record["ops_error"] == "attribution failed: ValueError: unexpected xplane version"
    assert record["profile"]["artifacts"] == ["xplane"]  # found where the copy out of the container put it


FAKE_WORKLOAD = """
    import json, os, sys
    argv = sys.argv[1:]
    root = argv[argv.index("--profile-dir") + 1]
    window = os.path.join(root, "after_timing")
    os.makedirs(window)
    with open(os.path.join(window, "torch_events.json"), "w") as fh:
        json.dump([{"name": "aten::convolution", "ts_us": 0.0, "dur_us": 120.0}], fh)
    out = sys.stdout
    for _ in range(3):
        out.write(POOL + "\\n")  # a timed step: not part of the window
    out.write("=== fp16doctor-window-start 1.0 kind after_timing\\n")
    out.write(REF_CONV + "\\n")
    out.write("=== fp16doctor-window-end 2.0 ms_per_step 130.0 steps 2 kind after_timing\\n")
    out.write("@@fp16doctor " + json.dumps({"event": "result", "run": {
        "status": "ok", "device": "cpu", "step_time_ms": {"median": 130.0, "n": 5},
        "model": {"layers": [{"type": "Conv2D", "name": "conv2d"}]},
        "profile": {"window": {"kind": "after_timing", "steps": 2, "wall_ms": 260.0}, "onednn": True,
                    "backend": "torch", "dir": root,
                    "torch_events_path": os.path.join(window, "torch_events.json")}}}) + "\\n")
"""


def _fake_workload(tmp_path: Path) -> Path:
    script = tmp_path / "fake_workload.py"
    script.write_text(f"POOL = {POOL!r}\nREF_CONV = {REF_CONV!r}\n" + textwrap.dedent(FAKE_WORKLOAD))
    return script


def test_the_host_engine_hands_the_window_to_the_attribution_and_removes_the_raw_files(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[tuple[dict[str, Any], list[Any]]] = []

    def build_ops(artifacts: dict[str, Any], layers: list[Any]) -> dict[str, Any]:
        seen.append((artifacts, layers))
        assert Path(artifacts["onednn_log"]).read_text().splitlines() == [REF_CONV]
        return {"source": "torch_profiler", "coverage": 0.9, "items": []}

    _install_attribution(monkeypatch, build_ops)
    events: list[dict[str, Any]] = []
    spec = RunSpec("host", "float16", "original", QUICK)
    record = HostEngine(script=_fake_workload(tmp_path), cache_dir=tmp_path).run(spec, events.append)
    assert record["status"] == "ok" and record["ops"]["source"] == "torch_profiler"
    ((artifacts, layers),) = seen
    assert artifacts["onednn_lines"] == [REF_CONV]  # the window's line only, not the timed steps'
    assert artifacts["torch_events"] == [{"name": "aten::convolution", "ts_us": 0.0, "dur_us": 120.0}]
    assert artifacts["window"] == {"kind": "after_timing", "steps": 2, "wall_ms": 260.0}
    assert layers == [{"type": "Conv2D", "name": "conv2d"}]
    # The raw files lived in the run's temporary folder, which is gone.
    assert not Path(artifacts["torch_events_path"]).exists()
    assert "kept" not in record["profile"] and "ops_error" not in record
    assert record["profile"]["onednn_lines_outside_window"] == 3
    assert {"event": "phase", "phase": "attribution"} in events


def test_keep_profiles_keeps_the_raw_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _install_attribution(monkeypatch, lambda artifacts, layers: None)
    keep = tmp_path / "out" / "profiles"
    spec = RunSpec("host", "float16", "original", QUICK)
    record = HostEngine(script=_fake_workload(tmp_path), cache_dir=tmp_path, keep_profiles=keep).run(
        spec, lambda e: None)
    kept = Path(record["profile"]["kept"])
    assert kept == keep / "host-float16-original"
    assert json.loads((kept / "after_timing" / "torch_events.json").read_text())[0]["name"] == "aten::convolution"
    assert (kept / "after_timing" / "onednn_verbose.log").read_text().strip() == REF_CONV
    assert record["ops_error"] == "the attribution found no ops in this profile"


def _tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class _StoppedContainer:
    """What docker's get_archive gives for the profile folder of a finished container."""

    def __init__(self, archive: bytes) -> None:
        self.archive = archive
        self.asked: list[str] = []

    def get_archive(self, path: str) -> tuple[list[bytes], dict[str, Any]]:
        self.asked.append(path)
        return [self.archive[:100], self.archive[100:]], {"name": Path(path).name}


def test_a_container_runs_profile_is_copied_out_and_read_like_a_host_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from fp16doctor.engines.docker import sdk

    seen: list[dict[str, Any]] = []
    _install_attribution(monkeypatch, lambda artifacts, layers: seen.append(artifacts) or {"items": []})
    inside = sdk.CONTAINER_PROFILE_DIR
    events = [{"name": "aten::convolution", "ts_us": 1.0, "dur_us": 2.0}]
    container = _StoppedContainer(_tar({"fp16doctor-profile/after_timing/torch_events.json":
                                        json.dumps(events).encode()}))
    archive, error = sdk._copy_profile_out(container)
    assert container.asked == [inside] and error is None
    record = _record({"window": {"kind": "after_timing", "steps": 2, "wall_ms": 300.0}, "onednn": False,
                      "dir": inside, "torch_events_path": f"{inside}/after_timing/torch_events.json"})
    sdk.attach_container_ops(record, WindowCapture(), archive, error, None)
    assert seen[0]["torch_events"] == events and record["ops"] == {"items": []}
    assert "ops_error" not in record


def test_a_profile_that_cannot_be_copied_out_leaves_the_run_as_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    from fp16doctor.engines.docker import sdk

    _install_attribution(monkeypatch, lambda artifacts, layers: {"items": []})
    archive, error = sdk._copy_profile_out(object())  # an engine API without get_archive
    record = _record({"window": {"kind": "after_timing"}, "onednn": False, "dir": "/tmp/fp16doctor-profile",
                      "xplane": "/tmp/fp16doctor-profile/after_timing/plugins/profile/1/vm.xplane.pb"})
    sdk.attach_container_ops(record, WindowCapture(), archive, error, None)
    assert record["status"] == "ok" and "ops" not in record
    assert record["ops_error"].startswith("could not copy the profile out of the container")


def test_a_script_log_gives_its_window_lines_to_the_capture_and_keeps_the_scripts_output(tmp_path: Path) -> None:
    from fp16doctor.engines.artifacts import split_script_log

    log = tmp_path / "host-float32.log"
    log.write_text("\n".join(["Epoch 1/4", POOL, "=== fp16doctor-window-start 1766.0 kind after_timing", REF_CONV,
                              "=== fp16doctor-window-end 1767.0 ms_per_step 130.0 steps 1 kind after_timing",
                              "14/14 - 1s - loss: 0.69", ""]))
    capture = WindowCapture()
    split_script_log(log, capture)
    assert log.read_text() == "Epoch 1/4\n14/14 - 1s - loss: 0.69\n"
    assert capture.windows == {"after_timing": [REF_CONV]}
    assert capture.outside == 1
    split_script_log(tmp_path / "missing.log", capture)  # no log: nothing to do, no error


def test_each_configuration_a_rounds_process_profiled_gets_its_own_windows_ops(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A rounds process profiles the precisions with no run of their own, each its own window (kind rounds_<label>):
    each gets the oneDNN lines of its window and its own model's layers, in its own entry."""
    seen: dict[str, tuple[list[str], list[Any]]] = {}

    def build_ops(artifacts: dict[str, Any], layers: list[Any]) -> dict[str, Any]:
        kind = artifacts["window"]["kind"]
        seen[kind] = (artifacts.get("onednn_lines", []), layers)
        return {"source": "onednn_verbose", "items": [kind]}

    _install_attribution(monkeypatch, build_ops)
    capture = WindowCapture()
    for line in ("=== fp16doctor-window-start 1.0 kind rounds_mixed_bfloat16", POOL,
                 "=== fp16doctor-window-end 2.0 ms_per_step 100.0 steps 2 kind rounds_mixed_bfloat16", REF_CONV):
        capture.feed(line)
    layers = [{"type": "Conv2D", "name": "conv2d"}]
    record = {"status": "ok", "device": "cpu", "rounds": {},
              "own_run": {"mixed_bfloat16": {"model": {"layers": layers}, "profile": {
                  "window": {"kind": "rounds_mixed_bfloat16", "steps": 2, "wall_ms": 100.0}, "onednn": True}}}}
    attach_ops(record, capture, tmp_path)
    own = record["own_run"]["mixed_bfloat16"]
    assert own["ops"] == {"source": "onednn_verbose", "items": ["rounds_mixed_bfloat16"]}
    assert seen == {"rounds_mixed_bfloat16": ([POOL], layers)}  # the line after its window is not its
    assert "ops" not in record  # the rounds process itself has no window of its own
