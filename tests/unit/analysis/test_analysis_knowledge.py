"""The knowledge tables: GPU names as drivers report them, CUDA limits, framework features by version."""

from __future__ import annotations

import pytest

from fp16doctor.knowledge.cuda import min_driver_for, toolkit, version_at_least
from fp16doctor.knowledge.frameworks import has_feature, tf_build
from fp16doctor.knowledge.gpus import GPU_MODELS, SOURCES, architecture_for, gpu_facts, match_gpu


@pytest.mark.parametrize(
    ("reported", "model", "cc", "tensor_cores"),
    [
        ("NVIDIA TITAN V", "TITAN V", "7.0", True),
        ("Tesla V100-SXM2-16GB", "Tesla V100 SXM2", "7.0", True),
        ("Tesla V100-PCIE-32GB", "Tesla V100 PCIe", "7.0", True),
        ("NVIDIA H200", "H200", "9.0", True),
        ("NVIDIA H100 80GB HBM3", "H100 SXM5", "9.0", True),
        ("NVIDIA H100 PCIe", "H100 PCIe", "9.0", True),
        ("GeForce GTX 1660 Ti", "GeForce GTX 1660 Ti", "7.5", False),
        ("NVIDIA GeForce GTX 1650", "GeForce GTX 1650", "7.5", False),
        ("Tesla K80", "Tesla K80", "3.7", False),
        ("Tesla P100-PCIE-16GB", "Tesla P100 PCIe", "6.0", False),
        ("Tesla P40", "Tesla P40", "6.1", False),
        ("GeForce GTX 1080 Ti", "GeForce GTX 1080 Ti", "6.1", False),
        ("GeForce GTX 1080", "GeForce GTX 1080", "6.1", False),
        ("Tesla T4", "Tesla T4", "7.5", True),
        ("NVIDIA A100-SXM4-40GB", "A100", "8.0", True),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB", "8.0", True),
        ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090", "8.6", True),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", "8.9", True),
        ("NVIDIA GeForce RTX 5090", "GeForce RTX 5090", "12.0", True),
        ("GeForce RTX 2080 Ti", "GeForce RTX 2080 Ti", "7.5", True),
    ],
)
def test_reported_names_match_their_table_entry(reported: str, model: str, cc: str, tensor_cores: bool) -> None:
    m = match_gpu(reported)
    assert m is not None and m.name == model
    assert m.compute_capability == cc and m.tensor_cores is tensor_cores


def test_variants_without_their_own_entry_do_not_borrow_a_siblings_figures() -> None:
    assert match_gpu("NVIDIA GeForce RTX 3060 Ti") is None
    assert match_gpu("NVIDIA GeForce RTX 4070 SUPER") is None
    assert match_gpu("Quadro P5000") is None


def test_every_entry_cites_a_source_and_has_consistent_figures() -> None:
    for m in GPU_MODELS:
        assert m.source in SOURCES
        assert m.fp32_tflops > 0 and m.memory_bandwidth_gbs > 0
        assert (m.tensor_tflops is not None) == m.tensor_cores
        assert architecture_for(m.compute_capability) is not None


def test_fp16_ratios_by_architecture() -> None:
    assert gpu_facts("GeForce GTX 1070", None).fp16_ratio == pytest.approx(1 / 64)
    assert gpu_facts("Tesla K80", None).fp16_ratio is None
    assert gpu_facts("Tesla P100-PCIE-16GB", None).fp16_ratio == 2.0
    assert gpu_facts(None, "7.5").tensor_cores is True  # a 7.5 part with no name: assume Tensor Cores
    assert gpu_facts("GeForce GTX 1660 SUPER", "7.5").tensor_cores is False


def test_reported_capability_wins_over_a_mismatched_name() -> None:
    facts = gpu_facts("Tesla K80", "7.0")
    assert facts.model is None and facts.compute_capability == "7.0" and facts.tensor_cores is True


def test_h200_has_more_bandwidth_than_h100() -> None:
    h200, h100 = match_gpu("NVIDIA H200"), match_gpu("NVIDIA H100 80GB HBM3")
    assert h200 and h100 and h200.memory_bandwidth_gbs > h100.memory_bandwidth_gbs
    assert h200.tensor_tflops == h100.tensor_tflops


def test_cuda_toolkits() -> None:
    assert toolkit("9.0.176") is not None and toolkit("9.0.176").max_compute_capability == "7.0"  # type: ignore[union-attr]
    assert toolkit("11.1").max_compute_capability == "8.6"  # type: ignore[union-attr]
    assert toolkit("12.8").max_compute_capability == "12.0"  # type: ignore[union-attr]
    assert toolkit("12.2").min_compute_capability == "5.0"  # type: ignore[union-attr]
    assert min_driver_for("10.0") == "410.48"
    assert min_driver_for("11.8") == "450.80.02"  # minor-version compatibility
    assert min_driver_for("12.4") == "525.60.13"
    assert toolkit("banana") is None and min_driver_for(None) is None


def test_versions_compare_numerically() -> None:
    assert version_at_least("1.13.1", "1.14") is False
    assert version_at_least("1.14.0", "1.14") is True
    assert version_at_least("2.21.0rc1", "2.4") is True
    assert version_at_least("7.0.5", "7.2") is False
    assert version_at_least(None, "1.0") is None


def test_framework_features_by_version() -> None:
    assert has_feature("tf_amp_graph_rewrite", "1.7.0") is False
    assert has_feature("tf_amp_graph_rewrite", "1.14.0") is True
    assert has_feature("tf_keras_policy", "2.3.1") is False
    assert has_feature("tf_keras_policy", "2.4.0") is True
    assert has_feature("kp_ignores_dtype", "1.0.5") is True
    assert has_feature("kp_ignores_dtype", "1.1.0") is True
    assert has_feature("kp_ignores_dtype", "1.1.1") is False
    assert has_feature("torch_tf32_matmul_default", "1.11.0") is True
    assert has_feature("torch_tf32_matmul_default", "1.12.0") is False
    assert has_feature("torch_amp", "1.5.1") is False
    assert has_feature("tf_tf32_default", None) is None


def test_tensorflow_builds() -> None:
    build = tf_build("1.7.0")
    assert build is not None and build.cuda == "9" and build.cudnn == "7"
    assert tf_build("2.4.1").cuda == "11.0"  # type: ignore[union-attr]
    assert tf_build("garbage") is None
