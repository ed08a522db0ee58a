"""CPU probe: recorded /proc/cpuinfo texts in, the flags and native-precision verdicts a user reads out."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from fp16doctor.analysis import analyse
from fp16doctor.probe.cpu import cgroup_cpu_limit, parse_cpuinfo, probe_cpu

DATA = Path(__file__).parent / "data"


def parse(name: str, machine: str) -> dict:
    return parse_cpuinfo((DATA / name).read_text(), machine)


def test_amd_epyc_has_bf16_but_no_native_fp16() -> None:
    cpu = parse("cpuinfo_amd_epyc_avx512bf16.txt", "x86_64")
    assert cpu["model"] == "AMD EPYC"
    assert cpu["vendor"] == "AuthenticAMD"
    assert (cpu["cores"], cpu["physical_cores"]) == (2, 2)
    assert cpu["flags"] == ["sse4_2", "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16"]
    assert cpu["fp16_native"] is False
    assert cpu["bf16_native"] is True
    assert "F16C only converts" in cpu["note"]
    # Only low-precision flags are reported, not the whole flags line.
    assert "sse2" not in cpu["flags"] and "avx512_fp16" not in cpu["flags"]


def test_sapphire_rapids_has_native_fp16_through_avx512_fp16() -> None:
    cpu = parse("cpuinfo_intel_sapphire_rapids.txt", "x86_64")
    assert cpu["model"] == "Intel(R) Xeon(R) Platinum 8480+"
    assert (cpu["cores"], cpu["physical_cores"]) == (4, 2)
    assert {"avx512_fp16", "amx_bf16", "amx_int8", "avx512_bf16", "f16c"} <= set(cpu["flags"])
    assert "amx_fp16" not in cpu["flags"]  # AMX-FP16 arrived with Granite Rapids
    assert cpu["fp16_native"] is True and cpu["bf16_native"] is True
    assert cpu["note"].startswith("AVX512_FP16: float16 arithmetic runs natively")


def test_granite_rapids_reports_amx_fp16() -> None:
    cpu = parse("cpuinfo_intel_granite_rapids.txt", "x86_64")
    assert "amx_fp16" in cpu["flags"]
    assert cpu["fp16_native"] is True
    assert "AMX_FP16" in cpu["note"]


@pytest.mark.parametrize(
    ("name", "model", "fp16", "bf16", "flags"),
    [
        ("cpuinfo_arm_neoverse_n1.txt", "Neoverse-N1", True, False, {"fphp", "asimdhp", "asimddp"}),
        ("cpuinfo_arm_neoverse_v1.txt", "Neoverse-V1", True, True, {"fphp", "bf16", "sve", "i8mm"}),
        ("cpuinfo_arm_cortex_a57.txt", "Cortex-A57", False, False, {"asimd"}),
    ],
)
def test_arm64_fp16_from_features(name: str, model: str, fp16: bool, bf16: bool, flags: set[str]) -> None:
    cpu = parse(name, "aarch64")
    assert cpu["model"] == model
    assert cpu["vendor"] == "ARM"
    assert cpu["arch"] == "arm"
    assert flags <= set(cpu["flags"])
    assert cpu["fp16_native"] is fp16
    assert cpu["bf16_native"] is bf16
    assert cpu["note"].startswith("Armv8.2 FP16" if fp16 else "no FEAT_FP16")


def test_arch_is_guessed_from_flags_when_machine_unknown() -> None:
    assert parse("cpuinfo_arm_neoverse_n1.txt", "")["fp16_native"] is True
    assert parse("cpuinfo_amd_epyc_avx512bf16.txt", "")["arch"] == "x86"


@pytest.mark.parametrize("text", ["", "garbage without colons\n\n", "flags : \n", ":::\nprocessor:\n"])
def test_unreadable_cpuinfo_never_crashes(text: str) -> None:
    cpu = parse_cpuinfo(text, "x86_64")
    assert cpu["flags"] == []
    assert cpu["fp16_native"] is False


def test_missing_cpuinfo_falls_back_to_platform(tmp_path: Path) -> None:
    cpu = probe_cpu(str(tmp_path / "no-such-cpuinfo"))
    assert cpu["cores"] and cpu["cores"] >= 1
    assert cpu["source"] in ("platform", "sysctl")
    assert isinstance(cpu["fp16_native"], bool)


@pytest.mark.parametrize(
    ("files", "limit"),
    [
        ({"cpu.max": "150000 100000\n"}, 1.5),  # cgroup v2, docker --cpus 1.5
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2.0),  # cgroup v1
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
)
def test_container_cpu_quota(tmp_path: Path, files: dict[str, str], limit: float | None) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_cpu_limit(str(tmp_path)) == limit


def test_flags_that_cannot_be_read_are_unknown_not_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No /proc/cpuinfo and no sysctl (e.g. Windows): the analysis must not claim the CPU lacks AVX512-FP16.
    monkeypatch.setattr(platform, "system", lambda: "Windows")
    cpu = probe_cpu(str(tmp_path / "no-such-cpuinfo"))
    assert cpu["flags"] is None
    runs = [{"stack": "host", "precision": p, "device": "cpu", "status": "ok", "step_time_ms": {"median": ms}}
            for p, ms in (("float32", 100.0), ("float16", 300.0))]
    found = analyse({"schema_version": 1, "host": {"gpus": [], "cpu": cpu}, "runs": runs})
    hardware = next(f for f in found if f["id"] == "no_fast_fp16_hardware")
    assert "CPU flags not reported" in hardware["evidence"][0]
    assert hardware["confidence"] <= 0.6
