"""CPU instruction-set flags that decide how a CPU handles float16 and bfloat16: one table for the
probe (which flags to report), the analysis (is fp16 native?) and the report (which flags to show); and what a
CPU model name implies where a document reports no flags, with the OS floor AMX needs."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The flags that matter for float16 / bfloat16, in the order they are reported. Names as Linux prints them
# (arch/x86/include/asm/cpufeatures.h; Documentation/arch/arm64/elf_hwcaps.rst).
X86_LOW_PRECISION_FLAGS = (
    "sse4_2",
    "avx2",
    "fma",
    "f16c",  # float16 <-> float32 conversion only (VCVTPH2PS / VCVTPS2PH), no float16 arithmetic
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",  # bfloat16 dot products accumulating in float32 (Cooper Lake, Zen 4)
    "avx512_fp16",  # float16 arithmetic on 512-bit vectors (Sapphire Rapids)
    "avx_vnni",
    "amx_bf16",  # bfloat16 tile matrix multiply (Sapphire Rapids)
    "amx_int8",
    "amx_fp16",  # float16 tile matrix multiply (Granite Rapids)
)
ARM_LOW_PRECISION_FLAGS = (
    "asimd",
    "fphp",  # FEAT_FP16 scalar half-precision arithmetic (Armv8.2-A)
    "asimdhp",  # FEAT_FP16 Advanced SIMD half-precision arithmetic
    "asimdfhm",  # FEAT_FHM float16 multiply-accumulate into float32
    "asimddp",
    "bf16",  # FEAT_BF16 bfloat16 instructions
    "i8mm",
    "sve",
    "sve2",
    "svebf16",
    "sme",
)

# Native fp16 arithmetic on CPUs: x86 AVX512-FP16 (Sapphire Rapids+) and AMX-FP16; Arm FP16 (fphp/asimdhp).
# Without them, frameworks convert fp16 to fp32 for each op (F16C) and back.
CPU_FP16_FLAGS = ("avx512_fp16", "amx_fp16", "asimdhp", "fphp")
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
# What the report's environment section lists: the native sets plus the conversion and vector units.
CPU_FP16_REPORT_FLAGS = frozenset(("f16c", "avx2", "avx512f") + CPU_FP16_FLAGS + CPU_BF16_FLAGS)


# ---------------------------------------------------------------------------------------- CPU models
# A results file written by hand often names the CPU and lists no flags. What a model name implies, for the 16-bit
# types: the first entry whose pattern matches the lower-cased model name wins (specific generations first).
# Sources, cited per entry by key:
CPU_SOURCES = {
    "intel_bf16": "https://www.intel.com/content/www/us/en/developer/articles/technical/"
    "intel-deep-learning-boost-new-instruction-bfloat16.html (AVX512-BF16 arrives with 3rd Gen Xeon Scalable "
    "'Cooper Lake', the H/HL parts)",
    "intel_amx": "https://www.intel.com/content/www/us/en/products/docs/accelerator-engines/"
    "advanced-matrix-extensions/overview.html (AMX-BF16 from 4th Gen Xeon Scalable 'Sapphire Rapids'; 5th Gen "
    "'Emerald Rapids' keeps it; Xeon 6 P-cores 'Granite Rapids' add AMX-FP16)",
    "intel_isa": "https://www.intel.com/content/www/us/en/developer/articles/technical/"
    "intel-sdm.html (Intel 64 and IA-32 SDM / ISA extensions reference: AVX512-FP16 with Sapphire Rapids; "
    "Skylake-SP, Cascade Lake and Ice Lake-SP have AVX-512 without BF16 or FP16 arithmetic)",
    "amd_zen4": "https://www.amd.com/en/products/processors/server/epyc/4th-generation-9004-and-8004-series.html "
    "(Zen 4 adds AVX-512 with BF16 and VNNI; Zen 5 keeps them; earlier Zen cores have no AVX-512)",
    "aws_graviton": "https://github.com/aws/aws-graviton-getting-started (Graviton2: Neoverse N1, fp16 "
    "arithmetic, no bf16; Graviton3: Neoverse V1 with BF16, SVE and I8MM; Graviton4: Neoverse V2 with SVE2 and "
    "BF16)",
    "arm_neoverse": "https://developer.arm.com/Processors/Neoverse%20V1 (Armv8.4 + BF16/I8MM/SVE); "
    "https://developer.arm.com/Processors/Neoverse%20N1 (Armv8.2 with FP16, no BF16); NVIDIA Grace and "
    "Graviton4 are Neoverse V2 (Armv9.0 with BF16)",
    "arm_a53": "https://developer.arm.com/Processors/Cortex-A53 (Armv8.0-A: no half-precision arithmetic, "
    "no BF16)",
}


@dataclass(frozen=True)
class CpuModel:
    """What a CPU generation computes natively in 16 bits (None: not said)."""

    name: str
    patterns: tuple[str, ...]
    native_fp16: bool  # fp16 arithmetic (AVX512-FP16 / AMX-FP16 on x86, FEAT_FP16 on Arm)
    native_bf16: bool  # bf16 arithmetic (AVX512-BF16 / AMX-BF16 on x86, FEAT_BF16 on Arm)
    amx: bool  # AMX tiles, which the OS kernel must enable (AMX_MIN_LINUX)
    source: str

    @property
    def implied_flags(self) -> tuple[str, ...]:
        """The /proc/cpuinfo flags this generation reports on a kernel that knows them."""
        arm = self.source in ("aws_graviton", "arm_neoverse", "arm_a53")
        flags: list[str] = []
        if self.native_fp16:
            flags += ["asimdhp"] if arm else ["avx512_fp16"]
        if self.native_bf16:
            flags += ["bf16"] if arm else ["avx512_bf16"]
        if self.amx:
            flags += ["amx_bf16"]
        return tuple(flags)


_TIER = r"(platinum|gold|silver|bronze)"
CPU_MODELS: tuple[CpuModel, ...] = (
    # Intel Xeon Scalable, by the tier and the second digit of the four-digit model number (1: Skylake-SP,
    # 2: Cascade Lake, 3: Cooper Lake (H/HL) or Ice Lake-SP, 4: Sapphire Rapids, 5: Emerald Rapids).
    CpuModel("Intel Xeon 6 (Granite Rapids)", (r"xeon.*\b6\d{3}p\b",), True, True, True, "intel_amx"),
    CpuModel("Intel Xeon Sapphire/Emerald Rapids", (rf"xeon.*{_TIER}\s*\d[45]\d\d", r"xeon.*\bmax\s*94\d\d",
                                                    r"xeon.*\bw[579]-[23]4\d\d"), True, True, True, "intel_amx"),
    CpuModel("Intel Xeon Cooper Lake", (r"xeon.*(platinum|gold)\s*[5-8]3\d\dhl?\b",), False, True, False,
             "intel_bf16"),
    CpuModel("Intel Xeon Ice Lake-SP / Cascade Lake / Skylake-SP", (rf"xeon.*{_TIER}\s*\d[123]\d\d",),
             False, False, False, "intel_isa"),
    # AMD: EPYC 9xx4/8xx4 and 9xx5 (Zen 4/5), Ryzen 7000/9000 desktop and Threadripper 7000 (Zen 4/5); the laptop
    # parts whose model number's last digit says Zen 4 (AMD's 2023 mobile naming: 7x40 Phoenix, 7x45 Dragon Range,
    # 8x40 Hawk Point) and the desktop 8000G APUs (Phoenix).
    CpuModel("AMD Zen 4/5", (r"epyc\s*(9\d\d[45]|8\d\d4)", r"ryzen\s*\d+\s*(pro\s*)?[79]\d[05]0(x3d|x|f)?\b",
                             r"ryzen\s*\d+\s*(pro\s*)?[78]\d4[05]\s*(hs|hx|h|u)\b",
                             r"ryzen\s*\d+\s*(pro\s*)?8\d00gt?\b",
                             r"threadripper\s*(pro\s*)?[79]9\d\d"), False, True, False, "amd_zen4"),
    CpuModel("AMD Zen 1-3", (r"epyc\s*7\d\d[123]", r"ryzen\s*\d+\s*(pro\s*)?[1-5]\d{3}"), False, False, False,
             "amd_zen4"),
    # Arm servers.
    CpuModel("AWS Graviton3", (r"graviton\s*3", r"neoverse[- ]v1\b"), True, True, False, "aws_graviton"),
    CpuModel("AWS Graviton4 / NVIDIA Grace", (r"graviton\s*4", r"\bgrace\b", r"neoverse[- ]v2\b"), True, True, False,
             "arm_neoverse"),
    CpuModel("AWS Graviton2 / Ampere Altra", (r"graviton\s*2", r"\baltra\b", r"neoverse[- ]n1\b"), True, False,
             False, "aws_graviton"),
    CpuModel("Arm Cortex-A53", (r"cortex[- ]a53",), False, False, False, "arm_a53"),
)


# Matrix units per 16-bit type: AMX tiles take bfloat16 from Sapphire Rapids and float16 only from Granite Rapids
# (intel_amx), so on a CPU with AMX-BF16 and no AMX-FP16 float16 runs on the AVX-512 vector units at a fraction of the
# tiles' rate (oneDNN dispatches f16 matmul to brg_matmul:avx10_1_512, bf16 to brg_matmul:avx10_1_512_amx on a Xeon
# 8592+, uxlfoundation/oneDNN#3868). The flag that gives each type the matrix units.
CPU_MATRIX_FLAGS = {"float16": "amx_fp16", "bfloat16": "amx_bf16"}


def cpu_matrix_16bit(flags: frozenset[str] | None, table: CpuModel | None) -> dict[str, bool | None]:
    """Whether this CPU's matrix units (AMX) take each 16-bit type, by its flags where reported, else by its generation
    (AMX-FP16 only with AMX-BF16 and native fp16 on the Granite Rapids entry); None where neither says."""
    if flags is not None:
        return {family: flag in flags for family, flag in CPU_MATRIX_FLAGS.items()}
    if table is None:
        return {family: None for family in CPU_MATRIX_FLAGS}
    return {"bfloat16": table.amx, "float16": table.amx and table.name.startswith("Intel Xeon 6")}


def match_cpu(model: str | None) -> CpuModel | None:
    """The table entry for a reported CPU model name, or None."""
    if not model:
        return None
    text = re.sub(r"\s+", " ", model.lower().replace("(r)", "").replace("(tm)", ""))
    for entry in CPU_MODELS:
        if any(re.search(p, text) for p in entry.patterns):
            return entry
    return None


# AMX needs the OS: a process must ask the kernel for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM), which
# Linux supports from 5.16 (https://docs.kernel.org/arch/x86/xstate.rst; merged for 5.16:
# https://www.phoronix.com/news/Intel-AMX-Lands-In-Linux). On older kernels oneDNN falls back to AVX-512 and
# bfloat16 can be slower than float32 (intel/intel-extension-for-pytorch#637: Xeon 8481C on Linux 5.10).
AMX_MIN_LINUX = "5.16"


def linux_kernel(os_text: str | None) -> str | None:
    """ "Linux-5.10.0-29-cloud-amd64-x86_64-with-glibc2.31" / "Linux 6.1.0" -> "5.10.0" / "6.1.0"; None where the
    text names no Linux kernel version (a distribution's own number, "Ubuntu 22.04", is not one)."""
    if not os_text:
        return None
    found = re.search(r"linux[- ]?(\d+\.\d+(?:\.\d+)?)", os_text.lower())
    return found.group(1) if found else None
