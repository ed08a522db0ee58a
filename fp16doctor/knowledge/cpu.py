"""CPU instruction-set flags that decide how a CPU handles float16 and bfloat16: one table for the
probe (which flags to report), the analysis (is fp16 native?) and the report (which flags to show)."""

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
