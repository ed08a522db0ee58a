"""The first real GPU diagnosis, shared by the tests that re-analyse it: the seed script on an NVIDIA H200, Keras 3 on
PyTorch (docs/examples/gpu-h200-keras-torch-full/results.json, as recorded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.analysis import Diagnosis, diagnose_document

H200 = Path(__file__).resolve().parents[3] / "docs" / "examples" / "gpu-h200-keras-torch-full" / "results.json"


@pytest.fixture(scope="session")
def h200_doc() -> dict[str, Any]:
    return json.loads(H200.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def h200(h200_doc: dict[str, Any]) -> Diagnosis:
    return diagnose_document(h200_doc)
