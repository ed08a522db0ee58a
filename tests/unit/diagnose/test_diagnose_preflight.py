"""diagnose keeps what only its pre-flight knows as data in results.json, so `explain` and `report` say it again."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document, saved_diagnosis
from fp16doctor.diagnose import DiagnoseOptions, run_diagnose
from fp16doctor.engines.host import HostEngine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_diagnose_gpu import Recorder, gpu_host  # noqa: E402, F401  (the fixture, by name)

REFUSED = {"id": "stack_incompatible_gpu", "title": "The tf1.7-cuda9.0 stack cannot run on this GPU or driver",
           "severity": "warning", "confidence": 0.9, "stack": "tf1.7-cuda9.0", "alternatives": ["tf2.16-cuda12"],
           "evidence": ["CUDA 9.0 has machine code up to compute capability 7.0; the NVIDIA H200 is 9.0"],
           "recommendation": "Run the tf2.16-cuda12 stack on this host; --force tries anyway."}


def test_a_preflight_refusal_is_stored_as_data_and_found_again_by_explain(
        tmp_path: Path, gpu_host: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    # What the Docker engine's pre-flight finds of a stack, handed on as any engine's findings are.
    monkeypatch.setattr(HostEngine, "findings", lambda self: [dict(REFUSED)])
    run_diagnose(DiagnoseOptions(out_dir=tmp_path, argv=["fp16doctor", "diagnose"], experiments=False),
                 Recorder())
    saved = json.loads((tmp_path / "results.json").read_text())
    (check,) = saved["preflight"]
    assert check["stack"] == "tf1.7-cuda9.0" and check["ok"] is False and check["reasons"] == REFUSED["evidence"]
    for diagnosis in (diagnose_document(saved), saved_diagnosis(saved)):
        finding = next(f for f in diagnosis.to_dict()["findings"] if f["id"] == "stack_incompatible_gpu")
        assert any("CUDA 9.0 has machine code" in line for line in finding["evidence"])
        assert "tf2.16-cuda12" in finding["recommendation"]
