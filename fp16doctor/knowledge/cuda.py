"""CUDA toolkits and cuDNN as data: which GPUs a toolkit can target, which driver it needs, and when cuDNN
puts fp16 convolutions on Tensor Cores.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CUDA_RELEASE_NOTES = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"  # driver table 3
NVCC_GPU_TARGETS = "https://docs.nvidia.com/cuda/cuda-compiler-driver-nvcc/index.html#gpu-feature-list"
CUDNN_7_GUIDE = (
    "https://docs.nvidia.com/deeplearning/cudnn/archives/cudnn_7xx/cudnn-developer-guide/index.html"
)
TC_PERF_GUIDE = "https://docs.nvidia.com/deeplearning/performance/dl-performance-convolutional/index.html"


@dataclass(frozen=True)
class CudaToolkit:
    version: str
    min_compute_capability: str  # oldest architecture the toolkit still compiles for
    max_compute_capability: str  # newest architecture it has machine code (SASS) for
    min_linux_driver: str  # toolkit driver version (CUDA 11+: minor-version compatibility lowers it, below)


# Source: CUDA_RELEASE_NOTES ("CUDA Toolkit and Corresponding Driver Versions") for drivers; NVCC_GPU_TARGETS
# and each release's notes for architectures (9.0 added sm_70, 10.0 sm_75, 11.0 sm_80, 11.1 sm_86,
# 11.8 sm_89/sm_90, 12.8 sm_100/sm_120; 9.0 dropped sm_2x, 11.0 dropped sm_30, 12.0 dropped sm_35/37,
# 13.0 dropped sm_5x-sm_72).
CUDA_TOOLKITS: dict[str, CudaToolkit] = {
    t.version: t
    for t in (
        CudaToolkit("7.5", "2.0", "5.3", "352.31"),
        CudaToolkit("8.0", "2.0", "6.2", "375.26"),
        CudaToolkit("9.0", "3.0", "7.0", "384.81"),
        CudaToolkit("9.1", "3.0", "7.2", "390.46"),
        CudaToolkit("9.2", "3.0", "7.2", "396.26"),
        CudaToolkit("10.0", "3.0", "7.5", "410.48"),
        CudaToolkit("10.1", "3.0", "7.5", "418.39"),
        CudaToolkit("10.2", "3.0", "7.5", "440.33"),
        CudaToolkit("11.0", "3.5", "8.0", "450.51.05"),
        CudaToolkit("11.1", "3.5", "8.6", "455.23"),
        CudaToolkit("11.2", "3.5", "8.6", "460.27.03"),
        CudaToolkit("11.3", "3.5", "8.6", "465.19.01"),
        CudaToolkit("11.4", "3.5", "8.7", "470.42.01"),
        CudaToolkit("11.5", "3.5", "8.7", "495.29.05"),
        CudaToolkit("11.6", "3.5", "8.7", "510.39.01"),
        CudaToolkit("11.7", "3.5", "8.7", "515.43.04"),
        CudaToolkit("11.8", "3.5", "9.0", "520.61.05"),
        CudaToolkit("12.0", "5.0", "9.0", "525.60.13"),
        CudaToolkit("12.1", "5.0", "9.0", "530.30.02"),
        CudaToolkit("12.2", "5.0", "9.0", "535.54.03"),
        CudaToolkit("12.3", "5.0", "9.0", "545.23.06"),
        CudaToolkit("12.4", "5.0", "9.0", "550.54.14"),
        CudaToolkit("12.5", "5.0", "9.0", "555.42.02"),
        CudaToolkit("12.6", "5.0", "9.0", "560.28.03"),
        CudaToolkit("12.8", "5.0", "12.0", "570.26"),
        CudaToolkit("12.9", "5.0", "12.1", "575.51.03"),
        CudaToolkit("13.0", "7.5", "12.1", "580.65.06"),
    )
}

# CUDA minor-version compatibility (CUDA_RELEASE_NOTES, table 2): any 11.x runtime runs on >= 450.80.02,
# any 12.x on >= 525.60.13, any 13.x on >= 580 (PTX JIT aside).
MINOR_VERSION_COMPAT_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


@dataclass(frozen=True)
class CudnnTensorCoreRule:
    since: str
    rule: str
    source: str


# cuDNN's fp16 Tensor Core conditions by version (CUDNN_7_GUIDE, "Tensor Core Operations"; TC_PERF_GUIDE).
CUDNN_TENSOR_CORE_RULES: tuple[CudnnTensorCoreRule, ...] = (
    CudnnTensorCoreRule(
        "7.0",
        "Tensor Cores only with CUDNN_TENSOR_OP_MATH, the IMPLICIT_PRECOMP_GEMM forward algorithm, fp16 "
        "data, "
        "and input and output channel counts that are multiples of 8",
        CUDNN_7_GUIDE,
    ),
    CudnnTensorCoreRule(
        "7.2",
        "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION lets fp32 data be converted to fp16 for Tensor Cores",
        CUDNN_7_GUIDE,
    ),
    CudnnTensorCoreRule(
        "7.3",
        "the channel-count constraint is lifted for packed NCHW data (cuDNN pads internally, at a cost)",
        CUDNN_7_GUIDE,
    ),
    CudnnTensorCoreRule("7.6.2", "fp16 3-D convolutions (Conv3D) use Tensor Cores", TC_PERF_GUIDE),
)
CUDNN_AUTO_CONVERSION = "7.2"
CUDNN_RELAXED_CHANNELS = "7.3"
# Tensor Cores are most efficient when channels are multiples of 8 for fp16 (TC_PERF_GUIDE, "Channels In
# And Out"); other counts are padded or fall back to slower kernels.
TENSOR_CORE_CHANNEL_MULTIPLE = 8


# Versions as people write them: "2.21.0", "v1.7", "TensorFlow 2.1", "tf-nightly 2.3", "2.2.0rc4",
# "2.13.0.dev20260512+cu130". A name may come first; the first dotted number is the release; a pre-release marker
# right after it (a, b, rc, alpha, beta, dev) or a nightly name makes it an earlier version than that release
# (PEP 440: https://peps.python.org/pep-0440/#pre-releases). A name and no number ("nightly") is not a version.
_VERSION = re.compile(r"^\s*(?:[a-z][a-z_\- ]*?[\s_\-])?v?(\d+(?:\.\d+)*)(?:[.\-]?(a|b|rc|alpha|beta|dev|pre))?",
                      re.IGNORECASE)


def parse_version(version: str | None) -> tuple[tuple[int, ...], bool] | None:
    """(release numbers, is a pre-release) for a version as written; None when no version can be read."""
    if not version or not isinstance(version, str):
        return None
    m = _VERSION.match(version)
    if not m:
        return None
    pre = m.group(2) is not None or "nightly" in version.lower()
    return tuple(int(p) for p in m.group(1).split(".")), pre


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """ "7.0.5" -> (7, 0, 5); "2.21.0rc1" -> (2, 21, 0); "TensorFlow 2.1" -> (2, 1); None or junk -> None."""
    parsed = parse_version(version)
    return None if parsed is None else parsed[0]


def version_at_least(version: str | None, minimum: str) -> bool | None:
    """Compare dotted versions; None when the version is unknown. A pre-release of the minimum is below it
    ("2.2.0rc4" is not at least "2.2.0")."""
    have, need = parse_version(version), parse_version(minimum)
    if have is None or need is None:
        return None
    width = max(len(have[0]), len(need[0]))
    have_release = have[0] + (0,) * (width - len(have[0]))
    need_release = need[0] + (0,) * (width - len(need[0]))
    if have_release == need_release:
        return not have[1] or need[1]
    return have_release > need_release


def toolkit(version: str | None) -> CudaToolkit | None:
    """The table entry for "9.0", "9.0.176", "11.8" ...; None when unknown."""
    t = version_tuple(version)
    if t is None:
        return None
    key = f"{t[0]}.{t[1] if len(t) > 1 else 0}"
    return CUDA_TOOLKITS.get(key)


def min_driver_for(cuda_version: str | None) -> str | None:
    """The lowest Linux driver that runs this CUDA runtime (minor-version compatibility for 11+)."""
    t = version_tuple(cuda_version)
    if t is None:
        return None
    if t[0] in MINOR_VERSION_COMPAT_DRIVER:
        return MINOR_VERSION_COMPAT_DRIVER[t[0]]
    entry = toolkit(cuda_version)
    return entry.min_linux_driver if entry else None
