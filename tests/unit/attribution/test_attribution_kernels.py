"""The Tensor Core and reference-implementation tables on kernel names seen in real traces
(tests/data/public/kernel_names.tsv names where each was seen)."""

from __future__ import annotations

import pytest
from attribution_data import PUBLIC

from fp16doctor.knowledge.kernels import is_reference_impl, tensor_core_use, uses_amx

_EXPECTED = {"true": True, "false": False, "null": None}


def _rows() -> list[tuple[str, bool | None]]:
    rows = []
    for line in (PUBLIC / "kernel_names.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            name, expected, _source = line.split("\t")
            rows.append((name, _EXPECTED[expected]))
    return rows


@pytest.mark.parametrize(("name", "expected"), _rows())
def test_public_kernel_names(name, expected):
    assert tensor_core_use(name) is expected


@pytest.mark.parametrize("name", ["volta_h884cudnn_256x64_ldg8_relu_exp_small_nhwc_tn_v1",
                                  "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_nhwckrsc_nhwc_tilesize128x128x32",
                                  "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
                                  "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT",
                                  "ampere_tf32_s1688gemm_tf32_128x128_ldg8_f2f_nn"])
def test_tensor_core_families(name):
    assert tensor_core_use(name) is True


def test_unknown_name_is_null_not_false():
    assert tensor_core_use("my_custom_fused_kernel") is None
    assert tensor_core_use("") is None


def test_reference_implementations():
    assert is_reference_impl("ref:any")
    assert is_reference_impl("gemm:ref")
    assert is_reference_impl("aten::_slow_conv2d_backward")
    assert not is_reference_impl("brg_conv_bwd_w:avx10_1_512_amx")
    assert not is_reference_impl("jit:avx2")
    assert not is_reference_impl(None)
    assert uses_amx("brgconv_bwd_w:avx10_1_512_amx") and not uses_amx("jit:avx512_core")
