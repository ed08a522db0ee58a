"""What a kernel's or an implementation's name says about how it computed: Tensor Cores or not (NVIDIA GPU
kernels), reference / generic code or an optimised one (oneDNN implementations on CPUs).

Names are matched, never guessed: a GPU kernel whose name matches no pattern gives None ("not knowable from
the name"), never False.
"""

from __future__ import annotations

import re

# Tensor Core kernels, by name. Sources:
# - cuDNN / cuBLAS kernel names carry the MMA instruction shape: "884" = HMMA.884 (Volta, sm_70), "1688" =
#   HMMA.1688 (Turing sm_75 and Ampere), "16816" = HMMA.16816 (Ampere sm_80+), e.g.
#   volta_h884cudnn_256x64_ldg8_relu_exp_small_nhwc_tn_v1, turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn,
#   ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_32x3_nn (NVIDIA, "Deep Learning Performance
#   Documentation: Tensor Core Requirements"; names as seen in Nsight Systems and torch.profiler output).
# - "hmma" / "imma": the Tensor Core instructions themselves (PTX ISA, "mma" / "wmma"; SASS HMMA, IMMA).
# - "xmma": NVIDIA's Tensor Core kernel library behind cuDNN 8 (sm80_xmma_fprop_implicit_gemm_...,
#   sm86_xmma_dgrad_...; names as listed in TensorFlow profiler kernel_stats on Ampere).
# - "gmma" / "wgmma": Hopper's warpgroup MMA (PTX ISA 8.0 "wgmma.mma_async"); sm90_xmma_* and the
#   CUTLASS 3 kernels cutlass3x_sm90_tensorop_* use it.
# - cuBLASLt's Hopper/Blackwell GEMMs are named nvjet_* (e.g. nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT);
#   they are Tensor Core GEMMs (NVIDIA cuBLAS 12.x release notes: "nvjet" kernels for sm90+).
# - "tensorop" / "s161616" / "wmma": CUTLASS Tensor Core kernel names (cutlass_tensorop_*, wmma_*).
# - "tf32": TF32 Tensor Core math (Ampere+), e.g. ampere_tf32_s1688gemm_tf32_128x128_ldg8_f2f_nn.
TENSOR_CORE_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"(?<![0-9])(884|1688|16816|161616|16832|16x8x16)(?![0-9])", "MMA shape in the name (HMMA.884/1688/16816)"),
    (r"hmma|imma|wmma|[^a-z]mma_|^mma_", "Tensor Core instruction named"),
    (r"xmma", "NVIDIA xmma Tensor Core kernel library"),
    (r"w?gmma", "Hopper warpgroup MMA"),
    (r"^sm9\d_|_sm9\d_|sm90", "sm90 (Hopper) tensor-op kernel"),
    (r"^nvjet_", "cuBLASLt nvjet GEMM (Tensor Cores)"),
    (r"tensorop", "CUTLASS tensor-op kernel"),
    (r"tf32", "TF32 Tensor Core math"),
)

# Known non-Tensor-Core kernels: plain FP32/FP64 SIMT GEMMs and cuDNN's SIMT convolution engines
# (volta_sgemm_64x64_nn, maxwell_scudnn_128x64_relu_interior_nn, implicit_convolve_sgemm,
# cudnn::detail::wgrad_alg0_engine, dgrad_engine; names as listed in TensorFlow profiler kernel_stats,
# where such kernels carry is_kernel_using_tensor_core = false).
NON_TENSOR_CORE_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"(^|_)[sdhc]gemm(_|$)|^(maxwell|pascal|volta|turing|ampere|hopper)_[sdc]gemm", "SIMT GEMM (sgemm/dgemm)"),
    (r"scudnn|dcudnn", "cuDNN SIMT convolution (scudnn)"),
    (r"implicit_convolve_sgemm|explicit_convolve_sgemm", "cuDNN SIMT implicit GEMM convolution"),
    (r"wgrad_alg[0-9]_engine|dgrad_engine|dgrad2d_|wgrad2d_|fft2d_|winograd", "cuDNN SIMT convolution engine"),
    (r"gemv|gemmSN|gemmk1", "GEMV / small-N SIMT GEMM"),
)

_TC = tuple((re.compile(p, re.IGNORECASE), why) for p, why in TENSOR_CORE_PATTERNS)
_NON_TC = tuple((re.compile(p, re.IGNORECASE), why) for p, why in NON_TENSOR_CORE_PATTERNS)


def tensor_core_use(kernel_name: str | None) -> bool | None:
    """True when the name says Tensor Cores, False when it names a known SIMT kernel, None otherwise."""
    if not kernel_name:
        return None
    for pattern, _why in _TC:
        if pattern.search(kernel_name):
            return True
    for pattern, _why in _NON_TC:
        if pattern.search(kernel_name):
            return False
    return None


def tensor_core_reason(kernel_name: str) -> str | None:
    """Which pattern decided tensor_core_use (for evidence lines), or None."""
    for pattern, why in _TC + _NON_TC:
        if pattern.search(kernel_name):
            return why
    return None


# oneDNN's reference (naive C++ loops, no vector ISA) and generic implementations. The implementation name in
# ONEDNN_VERBOSE is "<kind>:<isa>"; "ref" kinds are the reference primitives (oneDNN developer guide,
# "Verbose Mode" and src/cpu/ref_*.cpp: ref_convolution_t reports "ref:any"), "gemm:ref" / "ref_int8" the
# reference GEMM, "simple:any" generic reorders/concats without JIT.
REFERENCE_IMPL_PATTERNS: tuple[str, ...] = (
    r"^ref(_[a-z0-9]+)?:",  # ref:any, ref_int8:any, ref_fused:any
    r"^gemm:ref",  # reference GEMM-based convolution
    r"(^|\+)ref:",  # a composite implementation with a reference part
    r"^simple:any$",  # generic reorder / concat / sum
    # PyTorch's "slow" convolution (im2col + GEMM, aten/src/ATen/native/ConvolutionMM2d.cpp), what CPU
    # convolutions fall back to when mkldnn does not take the dtype (float16 on CPUs without native fp16).
    r"^aten::(_?slow_conv|thnn_conv)",  # thnn_conv2d is the dispatcher entry of the same path
)
_REF = tuple(re.compile(p) for p in REFERENCE_IMPL_PATTERNS)


def is_reference_impl(impl: str | None) -> bool:
    """True for a reference / generic oneDNN implementation name (``ref:any``, ``gemm:ref`` ...)."""
    if not impl:
        return False
    return any(p.search(impl.strip().lower()) for p in _REF)


# oneDNN ISA names that mean AMX (tile) or AVX-512 FP16 / BF16 units were used (oneDNN cpu_isa_traits.hpp:
# avx512_core_amx, avx10_1_512_amx, avx512_core_amx_fp16, avx10_1_512_amx_fp16; avx512_core_fp16).
AMX_IMPL_PATTERN = re.compile(r"amx", re.IGNORECASE)


def uses_amx(impl: str | None) -> bool:
    return bool(impl) and bool(AMX_IMPL_PATTERN.search(impl or ""))


# A kernel's name as a line shows it. cuDNN / cuBLAS / CUTLASS kernels are named by their library's kind (the
# pass, the algorithm, the data type, Tensor Cores or not); a demangled C++ kernel by its function without
# template arguments or parameters. The whole name stays in the data (--json, the report's detail).
SHORT_NAME_MAX = 60
_LIBRARIES: tuple[tuple[str, str], ...] = (
    (r"cudnn|xmma_(fprop|dgrad|wgrad)", "cuDNN"),
    (r"^nvjet_", "cuBLASLt"),
    (r"cutlass", "CUTLASS"),
    (r"gemm", "cuBLAS"),
)
_PASSES = {"fprop": "fprop", "dgrad": "dgrad", "wgrad": "wgrad"}
_ALGORITHMS: tuple[tuple[str, str], ...] = (
    (r"implicit_gemm|implicit_convolve", "implicit GEMM"),
    (r"winograd", "Winograd"),
    (r"fft", "FFT"),
    (r"gemv", "GEMV"),
    (r"gemm", "GEMM"),
    (r"conv", "convolution"),
)
_DTYPES: tuple[tuple[str, str], ...] = (
    (r"bf16", "bf16"), (r"tf32", "tf32"), (r"(?<![a-z])h|f16|fp16|half", "f16"), (r"s(gemm|cudnn)|f32", "f32"),
)


def _strip_bracketed(name: str, opening: str, closing: str) -> str:
    """`name` with every balanced `opening`...`closing` group removed (nested ones included)."""
    kept: list[str] = []
    depth = 0
    for char in name:
        if char == opening:
            depth += 1
        elif char == closing and depth:
            depth -= 1
        elif not depth:
            kept.append(char)
    return "".join(kept)


def _library_kind(name: str) -> str | None:
    lowered = name.lower()
    library = next((lib for pattern, lib in _LIBRARIES if re.search(pattern, lowered)), None)
    if library is None or "::" in name or " " in name:
        return None
    words = [library]
    stage = next((word for key, word in _PASSES.items() if key in lowered), None)
    if stage:
        words.append(stage)
    algorithm = next((word for pattern, word in _ALGORITHMS if re.search(pattern, lowered)), None)
    if algorithm:
        words.append(algorithm)
    parts = [" ".join(words)]
    tokens = re.split(r"[_x]", lowered)
    dtype = next((word for pattern, word in _DTYPES if any(re.fullmatch(f"({pattern}).*", t) for t in tokens)),
                 None)
    if dtype:
        parts.append(dtype)
    tensor_cores = tensor_core_use(name)
    if tensor_cores is not None:
        parts.append("Tensor Cores" if tensor_cores else "no Tensor Cores")
    return ", ".join(parts)


def kernel_short_name(name: str | None, limit: int = SHORT_NAME_MAX) -> str:
    """A kernel's or implementation's name short enough for a line: "cuDNN wgrad implicit GEMM, f16, Tensor Cores"
    for sm80_xmma_wgrad_implicit_gemm_..._cudnn, "at::native::elementwise_kernel" for a demangled template, the
    name itself where it is short already (oneDNN's "ref:any"); cut at `limit` characters with an ellipsis."""
    whole = " ".join(str(name or "").split())
    if len(whole) <= limit and "<" not in whole:
        return whole
    kind = _library_kind(whole)
    if kind is not None:
        return kind
    short = whole
    if "(" in short or "<" in short:
        stripped = _strip_bracketed(_strip_bracketed(short, "<", ">"), "(", ")").removeprefix("void ").strip()
        short = stripped or short  # a name that is all brackets keeps them
    return short if len(short) <= limit else short[:limit - 1].rstrip() + "…"
