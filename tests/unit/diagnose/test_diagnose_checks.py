"""Before any run, diagnose checks that the target Python imports what the workload needs, and names
the package to install (the probe's answers are faked: no framework needed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import fp16doctor.probe as probe
from fp16doctor import cli
from fp16doctor.diagnose import DiagnoseOptions, check_workload_imports, run_diagnose
from fp16doctor.engines import host as host_engine
from fp16doctor.engines.spec import RunSpec
from fp16doctor.errors import DoctorError

PYTHON = "/opt/venv/bin/python"


def host_with(**frameworks: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"numpy": {"version": "1.26.4"}, "pillow": {"version": "10.4.0"},
                            "scipy": {"version": "1.13.1"}, "keras": {"version": "2.15.0"},
                            "tensorflow": {"version": "2.15.1"}, "tf_keras": None, "jax": None, "torch": None}
    base.update(frameworks)
    return {"cpu": {"model": "x86", "flags": []}, "gpus": [], "nvml": {"available": False, "error": "no driver"},
            "os": "Linux", "python": {"version": "3.11.9", "executable": PYTHON}, "frameworks": base}


def test_a_missing_pillow_stops_diagnose_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(host_with(pillow=None))))
    runs: list[Any] = []
    monkeypatch.setattr(host_engine.HostEngine, "run", lambda self, spec, *a, **k: runs.append(spec))
    monkeypatch.setattr(sys, "argv", ["fp16doctor", "diagnose", "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()  # as the console script runs it
    assert exit_info.value.code != 0 and runs == []
    stderr = capsys.readouterr().err
    lines = [line for line in stderr.splitlines() if line.startswith(("error:", "hint:"))]
    assert lines == [f"error: {PYTHON} cannot import Pillow, which the workload needs",
                     f"hint: {PYTHON} -m pip install pillow"]
    assert "Traceback" not in stderr
    assert not (tmp_path / "results.json").exists()


def test_keras_2_needs_scipy_for_the_scripts_flips() -> None:
    with pytest.raises(DoctorError) as info:
        check_workload_imports(host_with(scipy=None), "tensorflow")
    assert "SciPy" in info.value.message and info.value.hint == f"{PYTHON} -m pip install scipy"


def test_keras_3_runs_without_scipy() -> None:
    check_workload_imports(host_with(scipy=None, keras={"version": "3.15.1", "backend": "jax"},
                                     jax={"version": "0.7.0"}, tensorflow=None), "jax")


def test_a_broken_install_is_named_with_its_error() -> None:
    with pytest.raises(DoctorError) as info:
        check_workload_imports(host_with(numpy={"version": "2.1.0", "error": "ImportError: bad ABI"}), "tensorflow")
    assert "broken NumPy (ImportError: bad ABI)" in info.value.message
    assert info.value.hint == f"{PYTHON} -m pip install numpy"


def test_keras_3_without_its_backend_names_the_backend_to_install() -> None:
    with pytest.raises(DoctorError) as info:
        check_workload_imports(host_with(keras={"version": "3.15.1", "backend": "tensorflow"}, tensorflow=None),
                               "tensorflow")
    assert "no working backend" in info.value.message and "pip install tensorflow-cpu" in str(info.value.hint)


def test_a_probe_that_did_not_ask_is_not_held_against_the_host() -> None:
    host = host_with()
    for key in ("numpy", "pillow", "scipy"):
        del host["frameworks"][key]
    check_workload_imports(host, "tensorflow")


def test_a_script_run_needs_neither_pillow_nor_scipy() -> None:
    # The user's script brings its own imports; only the built-in workload loads images with Pillow.
    check_workload_imports(host_with(pillow=None, scipy=None), "tensorflow", script=True)
    with pytest.raises(DoctorError) as info:
        check_workload_imports(host_with(numpy=None, pillow=None), "tensorflow", script=True)
    assert info.value.message == f"{PYTHON} cannot import NumPy, which fp16doctor's script runner needs"


def test_diagnose_script_runs_on_a_python_without_pillow_or_scipy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe, "probe_host",
                        lambda python=None: json.loads(json.dumps(host_with(pillow=None, scipy=None))))
    ran: list[RunSpec] = []

    def fake_run(self: Any, spec: RunSpec, on_event: Any, gpu_index: int | None = None) -> dict[str, Any]:
        ran.append(spec)
        return {"stack": spec.stack, "precision": spec.precision, "variant": spec.variant, "device": "cpu",
                "status": "skipped", "error": "stopped by the test"}

    monkeypatch.setattr(host_engine.HostEngine, "run", fake_run)
    script = tmp_path / "train.py"
    script.write_text("import keras\n")
    options = DiagnoseOptions(out_dir=tmp_path / "out", script=script, precisions=["float32", "float16"])

    class Quiet:
        def note(self, message: str) -> None: ...
        def start_run(self, spec: RunSpec, total: int, index: int) -> None: ...
        def event(self, event: dict[str, Any]) -> None: ...
        def finish_run(self, record: dict[str, Any]) -> None: ...

    run_diagnose(options, Quiet())
    assert [s.precision for s in ran] == ["float32", "float16"]
    assert all(s.script is not None for s in ran)
