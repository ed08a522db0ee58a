"""An experiment's one change, applied where the framework can take it and skipped, with the reason, where there is
nothing to change."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

WORKLOAD_DIR = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"
sys.path.insert(0, str(WORKLOAD_DIR))  # the workload's modules import each other from beside themselves
import frameworks  # noqa: E402
from protocol import VARIANT_ENV  # noqa: E402


class _Api:
    backend_name = "tensorflow"
    version = "2.x"


@pytest.mark.parametrize("version", ["1.7.0", "1.13.1", "2.4.4"])
def test_onednn_off_is_skipped_where_tensorflow_reads_no_onednn_switch(monkeypatch, version: str) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(__version__=version))
    with pytest.raises(frameworks.Skip, match=f"TensorFlow {version} reads no TF_ENABLE_ONEDNN_OPTS"):
        frameworks.apply_variant(_Api(), "onednn_off", "cpu", dict(VARIANT_ENV["onednn_off"]))


@pytest.mark.parametrize("version", ["2.5.0", "2.10.1", "2.21.0"])
def test_onednn_off_applies_from_tensorflow_2_5(monkeypatch, version: str) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(__version__=version))
    applied = frameworks.apply_variant(_Api(), "onednn_off", "cpu", dict(VARIANT_ENV["onednn_off"]))
    assert applied == {"env TF_ENABLE_ONEDNN_OPTS": "0"}
