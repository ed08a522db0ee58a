"""results.json on disk: written whole, with the usual mode, without touching the process umask."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from fp16doctor.results import ResultsWriter, new_document


def test_results_file_is_written_whole_with_the_umask_mode_and_no_temporary_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_umask = os.umask
    old = real_umask(0o027)
    try:
        # Stack runs write from worker threads while others create files: the umask must never change.
        set_to: list[int] = []
        monkeypatch.setattr(os, "umask", lambda mask: set_to.append(mask) or real_umask(mask))
        path = tmp_path / "out" / "results.json"
        writer = ResultsWriter(path, new_document({"gpus": []}))
        writer.add_run({"stack": "host", "precision": "float32", "device": "cpu", "status": "skipped"})
    finally:
        real_umask(old)
    assert set_to == []
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]
    assert json.loads(path.read_text())["runs"][0]["status"] == "skipped"


def test_a_non_finite_loss_is_written_as_null_not_a_crash(tmp_path: Path) -> None:
    doc = new_document({"gpus": []})
    writer = ResultsWriter(tmp_path / "results.json", doc)
    writer.add_run({"stack": "host", "precision": "float16", "variant": "original", "device": "cpu", "status": "ok",
                    "step_time_ms": {"median": 10.0}, "loss": {"first": 0.7, "last": float("nan"), "nan_or_inf": True}})
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["runs"][0]["loss"] == {"first": 0.7, "last": None, "nan_or_inf": True}


def test_a_machines_cpu_is_taken_from_any_of_its_records(tmp_path: Path) -> None:
    """The first record of a remote machine failed before its engine reported the CPU; the next one has it. The
    machine's facts keep it, so the analysis judges that machine's runs against its own CPU."""
    writer = ResultsWriter(tmp_path / "results.json", new_document({"gpus": []}))
    engine = {"kind": "docker", "docker_host": "ssh://lab", "name": "lab"}
    writer.add_run({"stack": "cpu", "precision": "float32", "variant": "original", "device": "cpu",
                    "status": "failed", "error": "image pull failed", "engine": dict(engine)})
    cpu = {"model": "AMD EPYC 7B13", "cores": 2, "flags": ["avx2", "f16c"]}
    writer.add_run({"stack": "cpu", "precision": "float16", "variant": "original", "device": "cpu", "status": "ok",
                    "step_time_ms": {"median": 10.0}, "engine": {**engine, "cpu": cpu}})
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["machines"]["lab"]["cpu"] == cpu
    assert saved["machines"]["lab"]["engine"]["docker_host"] == "ssh://lab"


def test_a_token_passed_as_a_script_argument_never_reaches_the_results_file(tmp_path: Path) -> None:
    from fp16doctor.results import ResultsWriter, new_document

    doc = new_document({"cpu": {}, "gpus": []})
    doc["invocation"] = {"argv": ["fp16doctor", "diagnose", "--script", "train.py", "--script-arg=--api-key",
                                 "--script-arg", "sk-abcdefghijklmnopqrstuvwxyz123456", "--docker-host",
                                 "tcp://ci:s3cretpassw0rd@gpu-box:2376"],
                         "script": {"path": str(tmp_path / "proj" / "train.py")}}
    writer = ResultsWriter(tmp_path / "out" / "results.json", doc)
    writer.save()
    text = (tmp_path / "out" / "results.json").read_text()
    assert "sk-abcdefghijklmnopqrstuvwxyz123456" not in text and "s3cretpassw0rd" not in text
    assert "[REDACTED]" in text
    assert str(tmp_path / "proj" / "train.py") in text  # a path of this machine outside any home stays whole


def test_names_that_only_look_opaque_stay_as_the_analysis_reads_them(tmp_path: Path) -> None:
    """A oneDNN op type is a long unbroken name with digits: it is data (the accounting pairs ops by it), not a
    secret, so the results file keeps it where the shared report would blank anything that long."""
    doc = new_document({"cpu": {}, "gpus": []})
    doc["runs"] = [{"ops": {"items": [{"name": "conv", "op_type": "_MklNativeConv2DBackpropFilterWithBias"}]}}]
    ResultsWriter(tmp_path / "results.json", doc).save()
    assert "_MklNativeConv2DBackpropFilterWithBias" in (tmp_path / "results.json").read_text()
