"""GPUs other than NVIDIA's as data: AMD (ROCm / MIOpen), Apple silicon (MPS) and Intel (XPU), by family.

A family says what its 16-bit arithmetic is, not how fast one card is: the non-matrix fp16 : fp32 rate from the
vendor's peak figures, whether matrix units (AMD's CDNA "matrix cores" (MFMA), RDNA 3/4 WMMA, Intel XMX) take
fp16 and bf16, and whether the family has bfloat16 arithmetic at all. NVIDIA's GPUs stay in gpus.py (compute
capability decides there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Sources used below (cited per entry by key):
SOURCES = {
    "rocm_specs": "https://rocm.docs.amd.com/en/latest/reference/gpu-arch-specs.html (LLVM target gfx id, "
    "peak FP32 / FP16 / BF16 / matrix TFLOPS per Instinct and Radeon GPU)",
    "rocm_precision": "https://rocm.docs.amd.com/en/latest/reference/precision-support.html (which data types each "
    "architecture's matrix cores / WMMA take: CDNA1+ MFMA fp16 and bf16, RDNA3+ WMMA fp16 and bf16, RDNA2 and "
    "GCN (gfx906) none)",
    "amd_vega": "https://www.amd.com/system/files/documents/vega-instruction-set-architecture.pdf (Vega "
    "'Rapid Packed Math': two fp16 operations per lane per clock)",
    "pytorch_mps": "https://pytorch.org/docs/stable/notes/mps.html and PyTorch's MPS backend "
    "(aten/src/ATen/mps/MPSDevice.mm: bfloat16 tensors need macOS 14); Metal runs half-precision natively",
    "apple_families": "https://developer.apple.com/metal/Metal-Feature-Set-Tables.pdf (Apple GPU families: Apple7 = "
    "M1, Apple8 = M2, Apple9 = M3 and M4, Apple10 = M5); Metal Performance Shaders reports bfloat16 arithmetic per "
    "device (MPSDeviceSupportsBFloat16Arithmetic). Apple's MLX maintainers on an M2 Ultra, macOS 14: float16 runs "
    "natively in Metal, bfloat16 pays a conversion to float32 at each operation (ml-explore/mlx-examples#186)",
    "intel_xmx": "https://www.intel.com/content/www/us/en/products/docs/discrete-gpus/arc/technology/xe-matrix-"
    "extensions.html (Xe-HPG / Xe-HPC / Xe2 XMX engines take fp16 and bf16)",
}


@dataclass(frozen=True)
class GpuFamily:
    name: str
    vendor: str  # "amd" | "apple" | "intel"
    gfx: tuple[str, ...]  # AMD LLVM targets ("gfx1030"), as ROCm names the architecture
    patterns: tuple[str, ...]  # regular expressions matched against the lower-cased reported name
    fp16_ratio: float | None  # non-matrix fp16 : fp32 rate; None: the vendor publishes none
    matrix_fp16: bool  # matrix units take fp16
    matrix_bf16: bool  # matrix units take bf16
    bf16: bool | None  # bfloat16 arithmetic at all (None: depends on the OS, e.g. MPS)
    source: str


GPU_FAMILIES: tuple[GpuFamily, ...] = (
    # AMD Instinct (CDNA): MFMA matrix cores for fp16 and bf16 (rocm_precision); the matrix rate is what 16 bits
    # gain there, so no non-matrix ratio is claimed.
    GpuFamily("AMD CDNA 4 (Instinct MI350)", "amd", ("gfx950",), (r"\bmi3[5-9]\d",), None, True, True, True,
              "rocm_precision"),
    GpuFamily("AMD CDNA 3 (Instinct MI300)", "amd", ("gfx942", "gfx940", "gfx941"), (r"\bmi3[0-2]\d",), None, True,
              True, True, "rocm_precision"),
    GpuFamily("AMD CDNA 2 (Instinct MI200)", "amd", ("gfx90a",), (r"\bmi2[0-9]\d",), None, True, True, True,
              "rocm_precision"),
    GpuFamily("AMD CDNA (Instinct MI100)", "amd", ("gfx908",), (r"\bmi100\b",), None, True, True, True,
              "rocm_precision"),
    # GCN 5 (Vega): packed fp16 at twice fp32, no matrix units, no bf16 arithmetic (amd_vega, rocm_precision).
    GpuFamily("AMD GCN 5.1 (Vega 20: MI50/MI60, Radeon VII)", "amd", ("gfx906",),
              (r"\bmi[56]0\b", r"radeon (pro )?vii", r"vega ?20"), 2.0, False, False, False, "rocm_precision"),
    GpuFamily("AMD GCN 5 (Vega 10: MI25, Vega 56/64)", "amd", ("gfx900",), (r"\bmi25\b", r"vega ?(56|64|10)\b"),
              2.0, False, False, False, "amd_vega"),
    # RDNA: packed fp16 at twice fp32 (rocm_specs); WMMA for fp16 and bf16 from RDNA 3 (rocm_precision).
    GpuFamily("AMD RDNA 4", "amd", ("gfx1200", "gfx1201"), (r"\brx 90[67]0\b", r"\bai pro r9[67]00"), 2.0, True,
              True, True, "rocm_precision"),
    GpuFamily("AMD RDNA 3.5", "amd", ("gfx1150", "gfx1151", "gfx1152"), (r"radeon 8[06]60s", r"radeon 8[89]0m"), 2.0,
              True, True, True, "rocm_precision"),
    GpuFamily("AMD RDNA 3", "amd", ("gfx1100", "gfx1101", "gfx1102"), (r"\brx 7[6-9]00\b", r"\bw7[5-9]00\b",
                                                                       r"navi ?3[123]\b"),
              2.0, True, True, True, "rocm_precision"),
    GpuFamily("AMD RDNA 2", "amd", ("gfx1030", "gfx1031", "gfx1032"), (r"\brx 6[6-9][05]0\b", r"\bw6[68]00\b",
                                                                       r"navi ?2[123]\b"),
              2.0, False, False, False, "rocm_precision"),
    # Apple silicon GPUs (MPS, MLX): native half precision; bfloat16 tensors only from macOS 14 (pytorch_mps). On M1
    # and M2 (Apple7/8) bfloat16 is converted to float32 for each operation (apple_families); later families: not said.
    GpuFamily("Apple M1/M2 GPU (Apple7/8)", "apple", (), (r"\bapple m[12]\b",), None,
              False, False, False, "apple_families"),
    GpuFamily("Apple silicon GPU (MPS)", "apple", (), (r"\bapple m\d",), None, False, False, None, "pytorch_mps"),
    # Intel GPUs with XMX matrix engines (intel_xmx).
    GpuFamily("Intel Data Center GPU Max (Xe-HPC)", "intel", (), (r"data center gpu max", r"\bmax 1[15]\d0\b"),
              None, True, True, True, "intel_xmx"),
    GpuFamily("Intel Arc (Xe-HPG / Xe2)", "intel", (), (r"\barc\b.*\b[ab]\d{3}",), None, True, True, True,
              "intel_xmx"),
)


def match_family(name: str | None, gfx: str | None = None) -> GpuFamily | None:
    """The family of a non-NVIDIA GPU, by its ROCm gfx id where reported, else by its name; None when unknown."""
    if gfx:
        wanted = gfx.strip().lower().split(":", 1)[0]  # "gfx90a:sramecc+:xnack-" -> "gfx90a"
        for family in GPU_FAMILIES:
            if wanted in family.gfx:
                return family
    if not name:
        return None
    text = re.sub(r"\s+", " ", name.lower().replace("_", " ").replace("-", " "))
    for family in GPU_FAMILIES:
        if any(re.search(p, text) for p in family.patterns):
            return family
    return None
