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


# ---------------------------------------------------------------- variants that combine changes

from model import check_batches, variant_changes  # noqa: E402
from protocol import compose_variant, variant_base, variant_clash, variant_parts  # noqa: E402


@pytest.mark.parametrize(("variant", "parts", "base"), [
    ("original", (), "original"),
    ("xla", ("xla",), "original"),
    ("synthetic_input+xla", ("synthetic_input", "xla"), "synthetic_input"),
    ("xla+synthetic_input", ("synthetic_input", "xla"), "synthetic_input"),  # VARIANTS' order, whatever was typed
    ("channels_padded+synthetic_input+xla", ("synthetic_input", "channels_padded", "xla"),
     "synthetic_input+channels_padded"),
])
def test_a_combined_variant_is_compared_with_the_one_that_lacks_its_last_change(variant, parts, base) -> None:
    assert variant_parts(variant) == parts
    assert variant_base(variant) == base
    assert compose_variant(parts) == compose_variant(tuple(reversed(parts)))
    assert variant_clash(variant) is None


@pytest.mark.parametrize(("variant", "clash"), [
    ("synthetic_input+float32_batches", "synthetic_input and float32_batches both change the batches"),
    ("xla+xla", "names xla twice"),
    ("original+synthetic_input", "original is the workload as written"),
    ("tf32_off+onednn_off", "tf32_off applies on a GPU only and onednn_off on a CPU only"),
    ("synthetic_input+nhwc", "unknown variant 'nhwc'"),
])
def test_a_combination_that_makes_no_configuration_is_named(variant: str, clash: str) -> None:
    said = variant_clash(variant)
    assert said is not None and clash in said and "\n" not in said


def test_a_combined_variant_applies_and_records_every_change(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(__version__="2.21.0"))
    applied = frameworks.apply_variant(_Api(), "synthetic_input+xla", "cpu", {})
    assert applied == {"batches_in_memory": True, "jit_compile": True}
    assert variant_changes("synthetic_input+xla") == (None, {"jit_compile": True})
    assert variant_changes("synthetic_input+channels_padded+xla") == (None, {"pad_to": 8, "jit_compile": True})
    with pytest.raises(frameworks.Skip, match="compiles its training step already"):
        frameworks.apply_variant(_Backend("jax"), "synthetic_input+xla", "cpu", {})


def test_a_combined_variant_sets_each_changes_environment(monkeypatch) -> None:
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")  # restored as it was after the test
    env = frameworks.set_variant_environment("synthetic_input+onednn_off", "tensorflow")
    assert env == VARIANT_ENV["onednn_off"]
    check_batches("synthetic_input+xla", "float16")  # no float32 batches asked for: nothing to check
    with pytest.raises(frameworks.Skip, match="float32_batches"):
        check_batches("channels_padded+float32_batches", "float16")


def test_the_workload_takes_a_combined_variant_and_refuses_a_clash(capsys) -> None:
    import run_workload

    assert run_workload.parse_args(["--precision", "float32", "--variant", "synthetic_input+xla"]).variant \
        == "synthetic_input+xla"
    with pytest.raises(SystemExit):
        run_workload.parse_args(["--precision", "float32", "--variant", "synthetic_input+float32_batches"])
    assert "both change the batches" in capsys.readouterr().err
