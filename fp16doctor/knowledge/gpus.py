"""NVIDIA GPUs as data: architecture by compute capability, and peak figures by model name.

Peak throughputs are vendor figures at boost clock, dense (no sparsity), in TFLOPS; bandwidth in GB/s.
`tensor_tflops` is FP16 Tensor Core throughput with FP32 accumulate (what mixed precision training uses;
GeForce Turing/Ampere/Ada/Blackwell run FP32 accumulate at half their FP16-accumulate rate).
`fp16_tflops` is non-tensor (CUDA core) FP16 arithmetic; None where the part has no native FP16 math.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fp16doctor.knowledge.gpu_families import GpuFamily, match_family

# Sources used below (cited per entry by key):
SOURCES = {
    "cuda_guide": "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#arithmetic-instructions",
    "kepler": "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-product-literature/"
    "Tesla-K80-BoardSpec-07317-001-v05.pdf",
    "pascal": "https://images.nvidia.com/content/pdf/tesla/whitepaper/pascal-architecture-whitepaper.pdf",
    "p40": "https://images.nvidia.com/content/pdf/tesla/184427-Tesla-P40-Datasheet-NV-Final-Letter-Web.pdf",
    "geforce10": "https://www.nvidia.com/en-us/geforce/10-series/ (specs pages)",
    "volta": "https://images.nvidia.com/content/volta-architecture/pdf/volta-architecture-whitepaper.pdf",
    "titanv": "https://www.nvidia.com/en-us/titan/titan-v/",
    "turing": "https://images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/"
    "turing-architecture/NVIDIA-Turing-Architecture-Whitepaper.pdf",
    "t4": "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf",
    "gtx16": "https://www.nvidia.com/en-us/geforce/graphics-cards/gtx-1660-ti/ (TU116: no Tensor Cores, "
    "dedicated FP16 units)",
    "ga100": "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf",
    "ga102": "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf",
    "ada": "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf",
    "l4": "https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet",
    "hopper": "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper",
    "h200": "https://www.nvidia.com/en-us/data-center/h200/",
    "blackwell_rtx": "https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/"
    "nvidia-rtx-blackwell-gpu-architecture.pdf",
}


@dataclass(frozen=True)
class Architecture:
    """What a compute capability implies, whatever the model."""

    compute_capability: str
    name: str
    fp16_ratio: float | None  # non-tensor fp16 : fp32 throughput; None = no native fp16 arithmetic
    tensor_cores: bool  # the usual part at this capability (GTX 16xx is the exception, see GpuModel)
    tf32: bool  # float32 matmul/conv may run on Tensor Cores as TF32
    source: str


# Ratios from the CUDA C Programming Guide, "Throughput of Native Arithmetic Instructions"
# (16-bit vs 32-bit add/multiply/multiply-add results per clock per SM): 5.3: 256/128, 6.0: 128/64,
# 6.1: 2/128, 6.2: 256/128, 7.x: 128/64, 8.0: 256/64; 3.x and 5.0/5.2: no 16-bit arithmetic (N/A).
# GeForce Ampere/Ada/Blackwell: non-tensor FP16 equals FP32 (ga102, ada, blackwell_rtx whitepapers).
ARCHITECTURES: dict[str, Architecture] = {
    a.compute_capability: a
    for a in (
        Architecture("3.0", "Kepler", None, False, False, "cuda_guide"),
        Architecture("3.2", "Kepler", None, False, False, "cuda_guide"),
        Architecture("3.5", "Kepler", None, False, False, "cuda_guide"),
        Architecture("3.7", "Kepler", None, False, False, "cuda_guide"),
        Architecture("5.0", "Maxwell", None, False, False, "cuda_guide"),
        Architecture("5.2", "Maxwell", None, False, False, "cuda_guide"),
        Architecture("5.3", "Maxwell (Tegra X1)", 2.0, False, False, "cuda_guide"),
        Architecture("6.0", "Pascal (GP100)", 2.0, False, False, "cuda_guide"),
        Architecture("6.1", "Pascal (consumer)", 1 / 64, False, False, "cuda_guide"),
        Architecture("6.2", "Pascal (Tegra)", 2.0, False, False, "cuda_guide"),
        Architecture("7.0", "Volta", 2.0, True, False, "volta"),
        Architecture("7.2", "Volta (Xavier)", 2.0, True, False, "cuda_guide"),
        Architecture("7.5", "Turing", 2.0, True, False, "turing"),
        Architecture("8.0", "Ampere (GA100)", 4.0, True, True, "ga100"),
        Architecture("8.6", "Ampere (GA10x)", 1.0, True, True, "ga102"),
        Architecture("8.7", "Ampere (Orin)", 2.0, True, True, "cuda_guide"),
        Architecture("8.9", "Ada Lovelace", 1.0, True, True, "ada"),
        Architecture("9.0", "Hopper", 2.0, True, True, "hopper"),
        Architecture("10.0", "Blackwell (data centre)", 2.0, True, True, "cuda_guide"),
        Architecture("12.0", "Blackwell (GeForce)", 1.0, True, True, "blackwell_rtx"),
    )
}


@dataclass(frozen=True)
class GpuModel:
    name: str
    compute_capability: str
    tensor_cores: bool
    fp32_tflops: float
    fp16_tflops: float | None  # non-tensor
    tensor_tflops: float | None  # FP16 Tensor Core, FP32 accumulate, dense
    memory_bandwidth_gbs: float
    patterns: tuple[str, ...]  # regular expressions matched against the normalised reported name
    source: str

    @property
    def architecture(self) -> Architecture | None:
        return ARCHITECTURES.get(self.compute_capability)

    @property
    def fp16_ratio(self) -> float | None:
        return None if self.fp16_tflops is None else self.fp16_tflops / self.fp32_tflops


def _m(
    name: str,
    cc: str,
    tc: bool,
    fp32: float,
    fp16: float | None,
    tensor: float | None,
    bw: float,
    patterns: tuple[str, ...],
    source: str,
) -> GpuModel:
    return GpuModel(name, cc, tc, fp32, fp16, tensor, bw, patterns, source)


# Order matters: the first model whose pattern matches wins, so specific names come before general ones.
GPU_MODELS: tuple[GpuModel, ...] = (
    # Kepler: FP16 is storage only (cuda_guide: no 16-bit arithmetic before 5.3). K80 figures per GK210.
    _m("Tesla K80", "3.7", False, 4.37, None, None, 240.0, (r"\bk80\b",), "kepler"),
    _m("Tesla K40", "3.5", False, 5.04, None, None, 288.0, (r"\bk40",), "kepler"),
    # Pascal GP100: 2:1 FP16, no Tensor Cores (pascal whitepaper, table 1).
    _m("Tesla P100 SXM2", "6.0", False, 10.6, 21.2, None, 732.0, (r"p100.*sxm",), "pascal"),
    _m("Tesla P100 PCIe", "6.0", False, 9.3, 18.7, None, 732.0, (r"\bp100\b",), "pascal"),
    # Pascal 6.1: FP16 arithmetic at 1/64 of FP32 (cuda_guide).
    _m("Tesla P40", "6.1", False, 11.76, 0.18, None, 346.0, (r"\bp40\b",), "p40"),
    _m("Tesla P4", "6.1", False, 5.5, 0.09, None, 192.0, (r"\bp4\b",), "p40"),
    _m("TITAN Xp", "6.1", False, 12.15, 0.19, None, 547.7, (r"titan xp\b",), "geforce10"),
    _m("TITAN X (Pascal)", "6.1", False, 10.97, 0.17, None, 480.0, (r"titan x \(?pascal",), "geforce10"),
    _m("GeForce GTX 1080 Ti", "6.1", False, 11.34, 0.18, None, 484.0, (r"1080 ?ti",), "geforce10"),
    _m("GeForce GTX 1080", "6.1", False, 8.87, 0.14, None, 320.0, (r"\b1080\b",), "geforce10"),
    _m("GeForce GTX 1070 Ti", "6.1", False, 8.19, 0.13, None, 256.0, (r"1070 ?ti",), "geforce10"),
    _m("GeForce GTX 1070", "6.1", False, 6.46, 0.10, None, 256.0, (r"\b1070\b",), "geforce10"),
    _m("GeForce GTX 1060", "6.1", False, 4.38, 0.07, None, 192.0, (r"\b1060\b",), "geforce10"),
    _m("GeForce GTX 1050 Ti", "6.1", False, 2.14, 0.03, None, 112.0, (r"1050 ?ti",), "geforce10"),
    _m("GeForce GTX 1050", "6.1", False, 1.86, 0.03, None, 112.0, (r"\b1050\b",), "geforce10"),
    # Volta: 2:1 FP16 and first-generation Tensor Cores (volta whitepaper, table 1; titanv: 110 DL TFLOPS).
    _m("TITAN V", "7.0", True, 14.9, 29.8, 110.0, 652.8, (r"titan v\b",), "titanv"),
    _m("Tesla V100 SXM2", "7.0", True, 15.7, 31.4, 125.0, 900.0, (r"v100.*sxm",), "volta"),
    _m("Tesla V100 PCIe", "7.0", True, 14.0, 28.0, 112.0, 900.0, (r"\bv100\b",), "volta"),
    # Turing GTX 16xx (TU116/TU117): dedicated FP16 units at 2:1, but no Tensor Cores (gtx16).
    _m("GeForce GTX 1660 Ti", "7.5", False, 5.44, 10.9, None, 288.0, (r"1660 ?ti",), "gtx16"),
    _m("GeForce GTX 1660 SUPER", "7.5", False, 5.03, 10.1, None, 336.0, (r"1660 ?super",), "gtx16"),
    _m("GeForce GTX 1660", "7.5", False, 5.03, 10.1, None, 192.0, (r"\b1660\b",), "gtx16"),
    _m("GeForce GTX 1650 SUPER", "7.5", False, 4.42, 8.8, None, 192.0, (r"1650 ?super",), "gtx16"),
    _m("GeForce GTX 1650", "7.5", False, 2.98, 6.0, None, 128.0, (r"\b1650\b",), "gtx16"),
    # Turing with Tensor Cores (turing whitepaper, appendix tables; t4 datasheet).
    _m("Tesla T4", "7.5", True, 8.1, 16.2, 65.0, 320.0, (r"\bt4\b",), "t4"),
    _m("TITAN RTX", "7.5", True, 16.3, 32.6, 130.5, 672.0, (r"titan rtx",), "turing"),
    _m("Quadro RTX 8000", "7.5", True, 16.3, 32.6, 130.5, 672.0, (r"rtx 8000",), "turing"),
    _m("GeForce RTX 2080 Ti", "7.5", True, 13.4, 26.9, 53.8, 616.0, (r"2080 ?ti",), "turing"),
    _m("GeForce RTX 2080", "7.5", True, 10.1, 20.1, 40.3, 448.0, (r"\b2080\b(?! ?(ti|super))",), "turing"),
    _m("GeForce RTX 2070", "7.5", True, 7.5, 14.9, 29.9, 448.0, (r"\b2070\b(?! ?(ti|super))",), "turing"),
    _m("GeForce RTX 2060", "7.5", True, 6.45, 12.9, 25.8, 336.0, (r"\b2060\b(?! ?(ti|super))",), "turing"),
    # Ampere GA100: FP16 non-tensor 4:1, TF32 and FP16 Tensor Cores (ga100 whitepaper, table 1).
    _m("A100 SXM4 80GB", "8.0", True, 19.5, 78.0, 312.0, 2039.0, (r"a100.*80 ?gb",), "ga100"),
    _m("A100", "8.0", True, 19.5, 78.0, 312.0, 1555.0, (r"\ba100\b",), "ga100"),
    # Ampere GA10x (ga102 whitepaper, appendix: FP16 Tensor TFLOPS with FP32 accumulate, dense).
    _m("NVIDIA A10", "8.6", True, 31.2, 31.2, 125.0, 600.0, (r"\ba10\b",), "ga102"),
    _m("GeForce RTX 3090", "8.6", True, 35.6, 35.6, 71.0, 936.0, (r"\b3090\b(?! ?(ti|super))",), "ga102"),
    _m("GeForce RTX 3080 Ti", "8.6", True, 34.1, 34.1, 68.2, 912.0, (r"3080 ?ti",), "ga102"),
    _m("GeForce RTX 3080", "8.6", True, 29.8, 29.8, 59.5, 760.0, (r"\b3080\b(?! ?(ti|super))",), "ga102"),
    _m("GeForce RTX 3070", "8.6", True, 20.3, 20.3, 40.6, 448.0, (r"\b3070\b(?! ?(ti|super))",), "ga102"),
    _m("GeForce RTX 3060", "8.6", True, 12.7, 12.7, 25.4, 360.0, (r"\b3060\b(?! ?(ti|super))",), "ga102"),
    # Ada (ada whitepaper, appendix; l4 datasheet).
    _m("NVIDIA L4", "8.9", True, 30.3, 30.3, 121.0, 300.0, (r"\bl4\b",), "l4"),
    _m("GeForce RTX 4090", "8.9", True, 82.6, 82.6, 165.2, 1008.0, (r"\b4090\b(?! ?(ti|super))",), "ada"),
    _m("GeForce RTX 4080", "8.9", True, 48.7, 48.7, 97.5, 716.8, (r"\b4080\b(?! ?(ti|super))",), "ada"),
    _m("GeForce RTX 4070", "8.9", True, 29.1, 29.1, 58.3, 504.0, (r"\b4070\b(?! ?(ti|super))",), "ada"),
    _m("GeForce RTX 4060", "8.9", True, 15.1, 15.1, 30.2, 272.0, (r"\b4060\b(?! ?(ti|super))",), "ada"),
    # Hopper (hopper whitepaper, table 2, SXM5 / PCIe; h200 product page: same compute, 4.8 TB/s).
    _m("H200", "9.0", True, 67.0, 133.8, 989.4, 4800.0, (r"\bh200\b",), "h200"),
    _m("H100 PCIe", "9.0", True, 51.0, 102.4, 756.0, 2000.0, (r"h100.*pcie",), "hopper"),
    _m("H100 SXM5", "9.0", True, 67.0, 133.8, 989.4, 3350.0, (r"\bh100\b",), "hopper"),
    # Blackwell GeForce (blackwell_rtx whitepaper, appendix: FP32-accumulate tensor rate, dense).
    _m("GeForce RTX 5090", "12.0", True, 104.8, 104.8, 209.5, 1792.0, (r"\b5090\b",), "blackwell_rtx"),
    _m("GeForce RTX 5080", "12.0", True, 56.3, 56.3, 112.6, 960.0, (r"\b5080\b(?! ?(ti|super))",), "blackwell_rtx"),
    _m("GeForce RTX 5070", "12.0", True, 30.9, 30.9, 61.7, 672.0, (r"\b5070\b(?! ?(ti|super))",), "blackwell_rtx"),
)


# What an NVIDIA name alone implies where no model matches and no compute capability is reported: the RTX brand
# (GeForce RTX, Quadro RTX, RTX A-series and RTX Ada) began with Turing (turing whitepaper) and every RTX part has
# Tensor Cores and fp16 at least at the fp32 rate (1x on GeForce Ampere, Ada and Blackwell: ga102, ada,
# blackwell_rtx; 2x on Turing). The lowest of each, as a floor: no peak, no compute capability, no TF32 claimed.
NAME_FLOORS: tuple[tuple[str, Architecture], ...] = (
    (r"\brtx\b", Architecture("7.5", "an RTX part (Turing or later)", 1.0, True, False, "turing")),
)


def name_floor(name: str | None) -> Architecture | None:
    """The architecture floor an unmatched NVIDIA name implies (NAME_FLOORS), else None."""
    text = _normalise(name or "")
    return next((arch for pattern, arch in NAME_FLOORS if re.search(pattern, text)), None)


def _normalise(name: str) -> str:
    text = name.lower().replace("_", " ").replace("-", " ")
    return re.sub(r"\s+", " ", text).strip()


def match_gpu(name: str | None) -> GpuModel | None:
    """The table entry for a reported GPU name ("NVIDIA TITAN V", "Tesla V100-SXM2-16GB", ...), or None."""
    if not name:
        return None
    text = _normalise(name)
    for model in GPU_MODELS:
        if any(re.search(p, text) for p in model.patterns):
            return model
    return None


def architecture_for(compute_capability: str | None) -> Architecture | None:
    """Architecture for "7.0"-style strings; an unknown minor version falls back to the major's first
    entry."""
    if not compute_capability:
        return None
    cc = compute_capability.strip()
    if cc in ARCHITECTURES:
        return ARCHITECTURES[cc]
    major = cc.split(".")[0]
    for key, arch in ARCHITECTURES.items():
        if key.split(".")[0] == major:
            return arch
    return None


# fp16 at twice the fp32 rate or more (CUDA C Programming Guide, arithmetic instructions: 6.0 and 7.x 128 vs 64
# results per clock per SM): a device where 16-bit arithmetic itself can win.
FAST_FP16_RATIO = 2.0

# bfloat16 arithmetic on NVIDIA GPUs starts with Ampere (compute capability 8.0; CUDA C Programming
# Guide, "Arithmetic Instructions": __nv_bfloat16 arithmetic needs sm_80).
BF16_MIN_COMPUTE_CAPABILITY = (8, 0)


def gpu_has_bfloat16(compute_capability: str | None) -> bool:
    return (cc_tuple(compute_capability) or (0, 0)) >= BF16_MIN_COMPUTE_CAPABILITY


def cc_tuple(compute_capability: str | None) -> tuple[int, int] | None:
    if not compute_capability:
        return None
    m = re.match(r"^\s*(\d+)(?:\.(\d+))?", compute_capability)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or 0)


@dataclass(frozen=True)
class GpuFacts:
    """What is known about one GPU of a results file: the table's model and architecture, merged; for AMD, Apple
    and Intel GPUs, their family (gpu_families.py)."""

    reported_name: str | None
    model: GpuModel | None
    compute_capability: str | None
    architecture: Architecture | None
    family: GpuFamily | None = None

    @property
    def nvidia(self) -> bool:
        return self.family is None

    @property
    def tensor_cores(self) -> bool | None:
        """NVIDIA Tensor Cores, or another vendor's matrix units for fp16 (MFMA, WMMA, XMX)."""
        if self.family is not None:
            return self.family.matrix_fp16
        if self.model is not None:
            return self.model.tensor_cores
        return None if self.architecture is None else self.architecture.tensor_cores

    @property
    def fp16_ratio(self) -> float | None:
        if self.family is not None:
            return self.family.fp16_ratio
        # The architecture's exact ratio (1/64 on 6.1) beats one computed from rounded peak figures.
        if self.architecture is not None:
            return self.architecture.fp16_ratio
        return None if self.model is None else self.model.fp16_ratio

    @property
    def fp16_slow(self) -> bool | None:
        """fp16 arithmetic slower than fp32 (or absent: NVIDIA below 5.3); None when the tables cannot say."""
        ratio = self.fp16_ratio
        if ratio is not None:
            return ratio < 1
        if self.family is not None:
            return None if self.family.fp16_ratio is None and not self.family.matrix_fp16 else False
        return True if self.architecture is not None or self.model is not None else None

    @property
    def bfloat16(self) -> bool | None:
        """bfloat16 arithmetic on this GPU: NVIDIA from compute capability 8.0; another vendor's by family."""
        if self.family is not None:
            return self.family.bf16
        cc = cc_tuple(self.compute_capability)
        return None if cc is None else cc >= BF16_MIN_COMPUTE_CAPABILITY

    @property
    def native_16bit(self) -> dict[str, bool | None]:
        """Whether the tables say this GPU computes each 16-bit family natively, at least at float32's rate:
        {"float16": ..., "bfloat16": ...}; None where they cannot say."""
        if self.family is not None:
            ratio = self.family.fp16_ratio
            fp16 = True if self.family.matrix_fp16 or (ratio is not None and ratio >= 1) else None
            return {"float16": fp16, "bfloat16": self.family.bf16}
        slow = self.fp16_slow
        return {"float16": None if slow is None else not slow, "bfloat16": self.bfloat16}

    @property
    def known(self) -> bool:
        return self.model is not None or self.architecture is not None or self.family is not None

    @property
    def tf32(self) -> bool:
        return bool(self.architecture and self.architecture.tf32)

    @property
    def label(self) -> str:
        name = self.reported_name or (self.model.name if self.model else "GPU")
        if self.family is not None:
            return f"{name} ({self.family.name})"
        return f"{name} (compute capability {self.compute_capability})" if self.compute_capability else name


def gpu_facts(name: str | None, compute_capability: str | None, gfx: str | None = None) -> GpuFacts:
    """Merge a reported name and compute capability with the tables; the reported capability wins. A GPU with a
    ROCm gfx id or the name of an AMD, Apple or Intel family and no compute capability is judged by its family."""
    family = None if compute_capability else match_family(name, gfx)
    if family is not None:
        return GpuFacts(name, None, None, None, family)
    model = match_gpu(name)
    cc = compute_capability or (model.compute_capability if model else None)
    if (
        model is not None
        and compute_capability
        and cc_tuple(compute_capability) != cc_tuple(model.compute_capability)
    ):
        model = None  # the name matched a different part than the one that reported itself
    if model is None and cc is None:
        return GpuFacts(name, None, None, name_floor(name))  # a floor from the name alone, where it implies one
    return GpuFacts(name, model, cc, architecture_for(cc))
