"""What `fp16doctor diagnose` writes, through the real entry point with the engine faked (no framework runs):
results.json and the report's embedded copy pass docs/results.schema.json, --out may come from FP16DOCTOR_OUT,
and OUT/diagnose.log keeps the runs (a failed one with its output's tail), redacted as results.json is."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest
from cli_helpers import ROOT, run_cli

import fp16doctor.probe as probe
from fp16doctor.engines import host as host_engine
from fp16doctor.engines.spec import RunSpec
from fp16doctor.errors import EXIT_PARTIAL
from fp16doctor.results import load_all

HOME = os.path.expanduser("~")
CPU_HOST = {
    # A CPU with float16 arithmetic: every precision runs in a process of its own (none is profiled in the rounds).
    "cpu": {"model": "Intel(R) Xeon(R)", "cores": 2, "flags": ["avx2", "f16c", "avx512bw", "avx512_fp16"]}, "gpus": [],
    "nvml": {"error": "no driver"},
    "os": "Linux", "python": {"version": "3.11.7", "executable": "python3"},
    "frameworks": {"keras": {"version": "3.15.1", "backend": "tensorflow"}, "tensorflow": {"version": "2.21.0"}},
}
STEP_MS = {"float32": 95.0, "float16": 550.0, "mixed_float16": 552.0}


@pytest.fixture
def cpu_host(monkeypatch: pytest.MonkeyPatch) -> list[RunSpec]:
    ran: list[RunSpec] = []
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(CPU_HOST)))
    for name in [n for n in os.environ if n.startswith("FP16DOCTOR_")]:
        monkeypatch.delenv(name)

    def fake_run(self, spec: RunSpec, on_event, gpu_index=None):  # type: ignore[no-untyped-def]
        ran.append(spec)
        if spec.rounds_of:
            rounds = {p: [STEP_MS[p] * f for f in (1.0, 1.01, 0.99)] for p in spec.rounds_of}
            rounds["float32_aa"] = [STEP_MS["float32"] * f for f in (1.005, 0.995, 1.0)]
            return {"stack": spec.stack, "precision": "float32", "variant": "original", "device": "cpu",
                    "status": "ok", "rounds": rounds, "order": [list(spec.rounds_of)] * 3}
        if spec.precision == "mixed_float16":
            return {"stack": spec.stack, "precision": spec.precision, "variant": spec.variant, "device": "cpu",
                    "status": "failed", "error": f"MemoryError in {HOME}/project/train.py",
                    "log_tail": f"Traceback (most recent call last):\n  File \"{HOME}/project/train.py\"\nMemoryError"}
        ms = STEP_MS[spec.precision]
        return {"stack": spec.stack, "precision": spec.precision, "variant": spec.variant, "device": "cpu",
                "status": "ok", "engine": {"kind": "host"},
                "step_time_ms": {"median": ms, "p10": ms * 0.98, "p90": ms * 1.03, "n": 5},
                "workload": {"name": "seed_cnn", "image_height": spec.size.image_height,
                             "image_width": spec.size.image_width, "channels": 3, "batch_size": spec.size.batch_size},
                "software": {"keras": "3.15.1", "keras_backend": "tensorflow", "tensorflow": "2.21.0"}}

    monkeypatch.setattr(host_engine.HostEngine, "run", fake_run)
    return ran


def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((ROOT / "docs" / "results.schema.json").read_text()))


def test_what_diagnose_writes_passes_the_schema_and_its_log_keeps_the_runs(
        tmp_path: Path, cpu_host: list[RunSpec], monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "from-env"
    monkeypatch.setenv("FP16DOCTOR_OUT", str(out))
    monkeypatch.setenv("FP16DOCTOR_PARTITION", "gpu")  # a cluster's setting: no error on a run without --slurm
    done = run_cli("diagnose", "-q", "-p", "float32", "-p", "float16", "-p", "mixed_float16", "--no-experiments")
    assert done.code == EXIT_PARTIAL, done.stderr  # mixed_float16 failed; the others are kept
    assert cpu_host and {s.precision for s in cpu_host} == set(STEP_MS)
    validator = _validator()
    document = json.loads((out / "results.json").read_text())
    assert [e.message for e in validator.iter_errors(document)] == []
    embedded = load_all(out / "report.html")
    assert len(embedded) == 1 and [e.message for e in validator.iter_errors(embedded[0])] == []

    log = (out / "diagnose.log").read_text(encoding="utf-8")
    assert "run finished: host / float16 / original on host: ok, 550.0 ms/step" in log
    assert "run finished: host / mixed_float16 / original" in log and "MemoryError" in log
    assert "its output ended with:" in log and '~/project/train.py' in log
    assert HOME not in log  # redacted as results.json is
    assert "-p float32" in log.splitlines()[0]  # the command line it ran, first


def test_verbose_shows_the_log_on_stderr(tmp_path: Path, cpu_host: list[RunSpec]) -> None:
    quiet = run_cli("diagnose", "-q", "-p", "float32", "--no-experiments", "-o", str(tmp_path / "a"))
    loud = run_cli("diagnose", "-q", "-p", "float32", "--no-experiments", "-o", str(tmp_path / "b"), "-v")
    assert quiet.code == loud.code == 0, loud.stderr
    assert "run finished: host / float32" not in quiet.stderr
    assert "run finished: host / float32 / original on host: ok" in loud.stderr
    assert "run finished: host / float32" in (tmp_path / "a" / "diagnose.log").read_text()


def test_a_usage_error_leaves_no_log(tmp_path: Path, cpu_host: list[RunSpec]) -> None:
    done = run_cli("diagnose", "--no-host", "-o", str(tmp_path))
    assert done.code == 2 and not (tmp_path / "diagnose.log").exists() and cpu_host == []
