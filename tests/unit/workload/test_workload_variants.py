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


class _Backend:
    version = "3.15.1"

    def __init__(self, name: str) -> None:
        self.backend_name = name


@pytest.mark.parametrize("version,applies", [("2.0.1", False), ("2.1.0", True), ("2.11.0+cu130", True)])
def test_xla_is_torch_compile_on_keras_torch_backend_from_torch_2_1(monkeypatch, version: str, applies: bool) -> None:
    # Keras 3's torch trainer runs jit_compile=True as torch.compile from torch 2.1 (below it, eagerly with a warning).
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__=version))
    if applies:
        assert frameworks.apply_variant(_Backend("torch"), "xla", "gpu:0", {}) == {"jit_compile": True}
    else:
        with pytest.raises(frameworks.Skip, match="torch.compile from torch 2.1"):
            frameworks.apply_variant(_Backend("torch"), "xla", "gpu:0", {})


def test_xla_is_skipped_on_keras_jax_backend_which_compiles_already() -> None:
    with pytest.raises(frameworks.Skip, match="compiles its training step already"):
        frameworks.apply_variant(_Backend("jax"), "xla", "gpu:0", {})
