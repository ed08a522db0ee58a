"""The host CPU: model, cores and the instruction-set flags that decide low-precision speed.

Linux reads /proc/cpuinfo; macOS asks sysctl; anything else falls back to `platform`. Never raises:
a CPU we cannot read is reported with empty flags and a note saying so.
"""

from __future__ import annotations

import os
import platform
import subprocess
from typing import Any

from fp16doctor.knowledge.cpu import ARM_LOW_PRECISION_FLAGS, X86_LOW_PRECISION_FLAGS

# Arm implementer and part numbers as the Linux kernel names them (arch/arm64/include/asm/cputype.h).
ARM_IMPLEMENTERS = {
    "0x41": "ARM",
    "0x42": "Broadcom",
    "0x48": "HiSilicon",
    "0x4e": "NVIDIA",
    "0x51": "Qualcomm",
    "0x61": "Apple",
    "0xc0": "Ampere",
}
ARM_PARTS = {
    ("0x41", "0xd03"): "Cortex-A53",
    ("0x41", "0xd07"): "Cortex-A57",
    ("0x41", "0xd08"): "Cortex-A72",
    ("0x41", "0xd0b"): "Cortex-A76",
    ("0x41", "0xd0c"): "Neoverse-N1",
    ("0x41", "0xd40"): "Neoverse-V1",
    ("0x41", "0xd49"): "Neoverse-N2",
    ("0x41", "0xd4f"): "Neoverse-V2",
    ("0x48", "0xd01"): "Kunpeng-920",
}

_X86_MACHINES = {"x86_64", "amd64", "i386", "i686", "x86"}
_ARM_MACHINES = {"aarch64", "arm64", "armv8l"}


def _arch_family(machine: str, flags: set[str]) -> str:
    machine = machine.lower()
    if machine in _X86_MACHINES:
        return "x86"
    if machine in _ARM_MACHINES or machine.startswith("arm"):
        return "arm"
    # Unknown machine string (e.g. a recorded text parsed elsewhere): guess from the flags themselves.
    if "asimd" in flags or "fphp" in flags:
        return "arm"
    if "sse2" in flags or "avx" in flags:
        return "x86"
    return "unknown"


def low_precision_summary(flags: set[str], arch: str) -> tuple[list[str] | None, bool, bool, str]:
    """Pick the interesting flags and say whether float16 / bfloat16 arithmetic is native here.

    The flags are None where this platform's flags cannot be read: unknown, not absent, so the analysis
    does not read an empty list as "no avx512_fp16 here"."""
    if arch == "arm":
        wanted = [f for f in ARM_LOW_PRECISION_FLAGS if f in flags]
        fp16 = "fphp" in flags and "asimdhp" in flags
        bf16 = "bf16" in flags or "svebf16" in flags
        if fp16:
            note = "Armv8.2 FP16: float16 arithmetic runs natively (scalar and SIMD)"
        else:
            note = "no FEAT_FP16: float16 arithmetic is converted to float32 or emulated in software"
        if bf16:
            note += "; bfloat16 instructions present (FEAT_BF16)"
        return wanted, fp16, bf16, note
    if arch == "x86":
        wanted = [f for f in X86_LOW_PRECISION_FLAGS if f in flags]
        fp16 = "avx512_fp16" in flags or "amx_fp16" in flags
        bf16 = "avx512_bf16" in flags or "amx_bf16" in flags
        if fp16:
            units = " and ".join(f.upper() for f in ("avx512_fp16", "amx_fp16") if f in flags)
            note = f"{units}: float16 arithmetic runs natively"
        elif "f16c" in flags:
            note = "no native float16 arithmetic (F16C only converts): float16 runs as float32 or emulated"
        else:
            note = "no float16 support at all: float16 is emulated in software"
        if bf16:
            units = " and ".join(f.upper() for f in ("avx512_bf16", "amx_bf16") if f in flags)
            note += f"; bfloat16 in hardware ({units})"
        return wanted, fp16, bf16, note
    return None, False, False, "CPU flags unknown on this platform: native float16 support cannot be told"


def parse_cpuinfo(text: str, machine: str | None = None) -> dict[str, Any]:
    """Turn the text of /proc/cpuinfo (x86 or arm64) into the probe's CPU object."""
    processors: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                processors.append(current)
                current = {}
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key == "processor" and current.get("processor") is not None:
            processors.append(current)
            current = {}
        current[key] = value.strip()
    if current:
        processors.append(current)

    # Some arm64 kernels print one trailing block with machine-wide fields (Hardware, Serial ...).
    cpus = [p for p in processors if "processor" in p] or processors
    first = cpus[0] if cpus else {}
    flags: set[str] = set()
    for proc in cpus:
        flags.update((proc.get("flags") or proc.get("features") or "").split())
    arch = _arch_family(machine or "", flags)

    vendor = first.get("vendor_id")
    model = first.get("model name")
    implementer = first.get("cpu implementer", "").lower()
    if implementer:
        vendor = vendor or ARM_IMPLEMENTERS.get(implementer, f"Arm implementer {implementer}")
        part = first.get("cpu part", "").lower()
        model = model or ARM_PARTS.get((implementer, part)) or f"{vendor} part {part or '?'}"
    if model is None:
        model = next((p["hardware"] for p in processors if "hardware" in p), None)

    cores_by_package: dict[str, int] = {}
    for proc in cpus:
        if "physical id" in proc and "cpu cores" in proc and proc["cpu cores"].isdigit():
            cores_by_package[proc["physical id"]] = int(proc["cpu cores"])
    physical_cores = sum(cores_by_package.values()) or None

    wanted, fp16, bf16, note = low_precision_summary(flags, arch)
    return {
        "model": model,
        "vendor": vendor,
        "arch": arch,
        "cores": len(cpus) or None,
        "physical_cores": physical_cores,
        "flags": wanted,
        "fp16_native": fp16,
        "bf16_native": bf16,
        "note": note,
    }


def _sysctl(name: str) -> str | None:
    try:
        done = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _probe_macos(machine: str) -> dict[str, Any]:
    flags: set[str] = set()
    if machine in _ARM_MACHINES:
        # Apple exposes Arm features as hw.optional.arm.FEAT_* = 1 (sysctl(3), "Determining Instruction Set
        # Characteristics" in Apple's developer documentation).
        if _sysctl("hw.optional.arm.FEAT_FP16") == "1":
            flags.update({"fphp", "asimdhp"})
        if _sysctl("hw.optional.arm.FEAT_BF16") == "1":
            flags.add("bf16")
        if _sysctl("hw.optional.arm.FEAT_FHM") == "1":
            flags.add("asimdfhm")
        flags.add("asimd")
    else:
        for key in ("machdep.cpu.features", "machdep.cpu.leaf7_features"):
            flags.update(f.lower().replace(".", "_") for f in (_sysctl(key) or "").split())
        # Intel Macs spell them F16C, AVX2, AVX512F, SSE4.2, AVX1.0; map to the Linux names used elsewhere.
        renames = {"avx512vnni": "avx512_vnni", "avx1_0": "avx"}
        flags = {renames.get(f, f) for f in flags}
    arch = _arch_family(machine, flags)
    wanted, fp16, bf16, note = low_precision_summary(flags, arch)
    cores = _sysctl("hw.logicalcpu")
    physical = _sysctl("hw.physicalcpu")
    return {
        "model": _sysctl("machdep.cpu.brand_string") or platform.processor() or None,
        "vendor": "Apple" if machine in _ARM_MACHINES else _sysctl("machdep.cpu.vendor"),
        "arch": arch,
        "cores": int(cores) if cores and cores.isdigit() else os.cpu_count(),
        "physical_cores": int(physical) if physical and physical.isdigit() else None,
        "flags": wanted,
        "fp16_native": fp16,
        "bf16_native": bf16,
        "note": note,
    }


def cgroup_cpu_limit(root: str = "/sys/fs/cgroup") -> float | None:
    """CPUs' worth of time a container may use (docker --cpus), or None when unlimited or unknown.

    cgroup v2 writes "quota period" to cpu.max ("max" = no limit); v1 has cpu.cfs_quota_us (-1 = no limit)
    and cpu.cfs_period_us (Linux Documentation/admin-guide/cgroup-v2.rst, scheduler/sched-bwc.rst).
    """

    def read(*parts: str) -> str | None:
        try:
            with open(os.path.join(root, *parts), encoding="ascii") as handle:
                return handle.read().strip()
        except (OSError, UnicodeDecodeError):
            return None

    quota: str | None
    period: str | None
    v2 = read("cpu.max")
    if v2 is not None:
        quota, _, period = v2.partition(" ")
    else:
        quota, period = read("cpu", "cpu.cfs_quota_us"), read("cpu", "cpu.cfs_period_us")
    try:
        quota_us, period_us = int(quota or ""), int(period or "")
    except ValueError:  # "max", missing files
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return round(quota_us / period_us, 2)


CPUINFO = "/proc/cpuinfo"


def probe_cpu(cpuinfo_path: str = CPUINFO) -> dict[str, Any]:
    """Describe this machine's CPU; adds `source` (where the facts came from), `cores_usable` (affinity)
    and `cpu_limit_cores` (a container's CPU quota, None when unlimited)."""
    machine = platform.machine()
    system = platform.system()
    result: dict[str, Any]
    text = ""
    if system == "Linux" or cpuinfo_path != CPUINFO:  # only Linux has /proc; a recorded file reads anywhere
        try:
            with open(cpuinfo_path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            text = ""
    if text.strip():
        result = parse_cpuinfo(text, machine)
        result["source"] = cpuinfo_path
    elif system == "Darwin":
        result = _probe_macos(machine.lower())
        result["source"] = "sysctl"
    else:
        wanted, fp16, bf16, note = low_precision_summary(set(), "unknown")
        result = {
            "model": platform.processor() or None,
            "vendor": None,
            "arch": _arch_family(machine, set()),
            "cores": os.cpu_count(),
            "physical_cores": None,
            "flags": wanted,
            "fp16_native": fp16,
            "bf16_native": bf16,
            "note": note,
            "source": "platform",
        }
    if not result.get("cores"):
        result["cores"] = os.cpu_count()
    # A container or taskset may allow fewer CPUs than the machine has; that is what a run can use.
    sched_getaffinity = getattr(os, "sched_getaffinity", None)
    result["cores_usable"] = len(sched_getaffinity(0)) if sched_getaffinity else result["cores"]
    result["cpu_limit_cores"] = cgroup_cpu_limit() if system == "Linux" else None
    return result
