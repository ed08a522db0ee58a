"""Documents with two or three step times and a device name: the verdict names a likely cause (never charged as
time), bfloat16 has findings of its own, hardware other than NVIDIA's is judged by its own tables, an overhead rule
checks that the run it blames moved, and inference gets no training advice."""

from __future__ import annotations

from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document
from fp16doctor.knowledge.cpu import AMX_MIN_LINUX, linux_kernel, match_cpu
from fp16doctor.knowledge.cuda import version_at_least, version_tuple
from fp16doctor.knowledge.gpu_families import GPU_FAMILIES, SOURCES, match_family


def _doc(host: dict[str, Any], *steps: tuple[str, float], device: str = "cpu", software: dict[str, Any] | None = None,
         mode: str | None = None, stack: str = "user") -> dict[str, Any]:
    runs = []
    for precision, ms in steps:
        run: dict[str, Any] = {"stack": stack, "precision": precision, "device": device, "status": "ok",
                               "software": dict(software or {}), "step_time_ms": {"median": ms}}
        if mode:
            run["workload"] = {"mode": mode}
        runs.append(run)
    return {"schema_version": 1, "host": {"gpus": [], **host}, "runs": runs}


def _verdict(diagnosis: Any, precision: str) -> dict[str, Any]:
    return next(v for v in diagnosis.to_dict()["verdicts"] if v["precision"] == precision)


def _ids(diagnosis: Any) -> set[str]:
    return {f["id"] for f in diagnosis.to_dict()["findings"]}


# ---------------------------------------------------------------------------------------- likely_cause

def test_a_cpu_without_fp16_names_its_likely_cause_and_charges_no_time() -> None:
    doc = _doc({"cpu": {"model": "Some x86", "flags": ["avx2", "f16c"]}}, ("float32", 100.0), ("float16", 900.0))
    diagnosis = diagnose_document(doc)
    verdict = _verdict(diagnosis, "float16")
    assert verdict["cause"] is None and verdict["causes"] == []
    assert verdict["likely_cause"]["id"] == "no_fast_fp16_hardware"
    assert verdict["likely_cause"]["basis"] == "device_fact"
    assert "avx512_fp16" in verdict["likely_cause"]["why"]
    assert "probably because this device computes fp16 no faster than fp32" in verdict["headline"]
    assert "not measured: fp16doctor diagnose on that machine measures it" in verdict["headline"]
    hardware = next(f for f in diagnosis.to_dict()["findings"] if f["id"] == "no_fast_fp16_hardware")
    assert hardware["explains_ms"] is None  # a device fact is never charged as time


def test_measured_ops_that_explain_the_difference_leave_no_likely_cause() -> None:
    doc = _doc({"cpu": {"model": "Some x86", "flags": ["avx2"]}}, ("float32", 100.0), ("float16", 900.0))
    for run, ms in zip(doc["runs"], (90.0, 880.0), strict=True):
        dtype = run["precision"]
        impl = "ref:any" if dtype == "float16" else "brg:avx2"
        run["ops"] = {"source": "onednn_verbose", "coverage": 0.95, "window": {"kind": "after_timing"},
                      "items": [{"name": "conv", "layer": "conv2d", "pass": "forward", "dtype": dtype, "impl": impl,
                                 "ms_per_step": ms, "op_type": "Conv2D"}]}
    verdict = _verdict(diagnose_document(doc), "float16")
    assert verdict["cause"] == "slow_fp16_kernels" and verdict["basis"] == "measured_ops"
    assert verdict["likely_cause"] is None and "probably" not in verdict["headline"]


def test_a_faster_verdict_says_why_no_likely_cause_fits() -> None:
    doc = _doc({"gpus": [{"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}]},
               ("float32", 100.0), ("mixed_float16", 40.0), device="gpu:0")
    verdict = _verdict(diagnose_document(doc), "mixed_float16")
    assert verdict["outcome"] == "faster" and verdict["likely_cause"] is None
    assert "needs no fault" in verdict["no_likely_cause"]


def test_unreadable_versions_are_said() -> None:
    doc = _doc({"cpu": {}}, ("float32", 100.0), ("float16", 300.0), software={"torch": "nightly"})
    verdict = _verdict(diagnose_document(doc), "float16")
    assert verdict["unparsed_versions"] == ["PyTorch 'nightly'"]


# ---------------------------------------------------------------------------------------- bfloat16 families

def test_pure_bfloat16_faster_is_bf16_faster_not_fp16_faster() -> None:
    doc = _doc({"cpu": {"model": "AMD EPYC 9654", "flags": ["avx512f", "avx512_bf16"]}},
               ("float32", 200.0), ("bfloat16", 80.0))
    ids = _ids(diagnose_document(doc))
    assert "bf16_faster" in ids and "fp16_faster" not in ids


def test_a_cpu_named_without_flags_is_judged_by_its_generation() -> None:
    doc = _doc({"cpu": {"model": "Intel(R) Xeon(R) Silver 4114 CPU @ 2.20GHz"}},
               ("float32", 558.0), ("mixed_bfloat16", 924.0), mode="inference")
    diagnosis = diagnose_document(doc)
    assert "bf16_unsupported" in _ids(diagnosis)
    assert _verdict(diagnosis, "mixed_bfloat16")["likely_cause"]["id"] == "bf16_unsupported"


def test_bf16_without_units_but_faster_is_no_warning_to_use_float32() -> None:
    doc = _doc({"cpu": {"model": "Raspberry Pi (Cortex-A53)"}}, ("float32", 88.0), ("bfloat16", 68.0))
    finding = next(f for f in diagnose_document(doc).to_dict()["findings"] if f["id"] == "bf16_unsupported")
    assert finding["severity"] == "info" and "measured faster" in finding["recommendation"]


def test_an_amx_cpu_on_an_old_kernel_blames_the_kernel() -> None:
    host = {"cpu": {"model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"},
            "os": "Linux-5.10.0-29-cloud-amd64-x86_64-with-glibc2.31"}
    old = diagnose_document(_doc(host, ("float32", 270.0), ("mixed_bfloat16", 400.0)))
    assert "kernel_too_old" in _ids(old) and "bf16_unsupported" not in _ids(old)
    assert _verdict(old, "mixed_bfloat16")["likely_cause"]["id"] == "kernel_too_old"
    new = diagnose_document(_doc({**host, "os": "Linux 6.1.0"}, ("float32", 270.0), ("mixed_bfloat16", 113.0)))
    assert "kernel_too_old" not in _ids(new)


def test_one_16bit_type_slow_while_the_other_is_fast_points_at_the_framework() -> None:
    doc = _doc({"gpus": [{"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}]},
               ("float32", 103.0), ("mixed_float16", 79.0), ("mixed_bfloat16", 415.0), device="gpu:0")
    diagnosis = diagnose_document(doc)
    assert "framework_16bit_path" in _ids(diagnosis) and "bf16_unsupported" not in _ids(diagnosis)
    likely = _verdict(diagnosis, "mixed_bfloat16")["likely_cause"]
    assert likely["id"] == "framework_16bit_path" and likely["basis"] == "estimate"
    assert "mixed_float16 is faster" in likely["why"]


def test_both_16bit_types_slow_on_a_cpu_without_either_is_the_hardware() -> None:
    doc = _doc({"cpu": {"model": "x86", "flags": ["avx2"]}}, ("float32", 27.2), ("bfloat16", 1205.3),
               ("float16", 1753.9))
    diagnosis = diagnose_document(doc)
    assert "framework_16bit_path" not in _ids(diagnosis)
    assert _verdict(diagnosis, "bfloat16")["likely_cause"]["id"] == "bf16_unsupported"
    assert _verdict(diagnosis, "float16")["likely_cause"]["id"] == "no_fast_fp16_hardware"


def test_a_16bit_run_whose_gpu_utilisation_collapses_points_at_the_framework() -> None:
    host = {"gpus": [{"name": "NVIDIA GeForce GTX 1080", "compute_capability": "6.1"}]}
    doc = _doc(host, ("float32", 100.0), ("bfloat16", 400.0), device="gpu:0")
    assert "framework_16bit_path" not in _ids(diagnose_document(doc))  # 6.1 has no bfloat16: the hardware
    host = {"gpus": [{"name": "Some GPU"}]}
    doc = _doc(host, ("float32", 100.0), ("float16", 400.0), device="gpu:0")
    doc["runs"][0]["gpu_utilization_pct"] = {"median": 90.0}
    doc["runs"][1]["gpu_utilization_pct"] = {"median": 12.0}
    finding = next(f for f in diagnose_document(doc).to_dict()["findings"] if f["id"] == "framework_16bit_path")
    assert any("busy 12% of the float16 steps against 90%" in line for line in finding["evidence"])


# ---------------------------------------------------------------------------------------- other vendors

def test_an_amd_gpu_is_judged_by_its_family() -> None:
    host = {"gpus": [{"name": "AMD Radeon RX 6800", "gfx_arch": "gfx1030"}]}
    diagnosis = diagnose_document(_doc(host, ("float32", 121.0), ("mixed_float16", 300.0), ("mixed_bfloat16", 400.0),
                                       device="gpu:0"))
    ids = _ids(diagnosis)
    assert "no_tensor_cores" not in ids and "no_fast_fp16_hardware" not in ids  # NVIDIA's words, not RDNA 2's
    assert "bf16_unsupported" in ids  # RDNA 2 has no bfloat16 arithmetic
    assert "framework_16bit_path" in ids  # packed fp16 at twice fp32, yet 2.5x slower


def test_an_apple_gpu_is_not_said_to_lack_fp16() -> None:
    doc = _doc({"gpus": [{"name": "Apple M1 Pro"}]}, ("float32", 92000.0), ("float16", 200.0), device="gpu:0",
               mode="inference")
    ids = _ids(diagnose_document(doc))
    assert "fp16_faster" in ids and "no_fast_fp16_hardware" not in ids and "small_model_overhead" not in ids


# ---------------------------------------------------------------------------------------- overhead and mode

def test_small_model_overhead_needs_the_16bit_run_not_to_have_moved_far() -> None:
    host = {"gpus": [{"name": "GeForce RTX 2070", "compute_capability": "7.5"}]}
    near = diagnose_document(_doc(host, ("float32", 5.56), ("float16", 6.54), device="gpu:0"))
    assert "small_model_overhead" in _ids(near)
    far = diagnose_document(_doc(host, ("float32", 9.0), ("float16", 15.0), device="gpu:0", mode="inference"))
    assert "small_model_overhead" not in _ids(far)  # launch overhead cannot make 16 bits 1.67x slower


def test_pure_float16_inference_is_not_called_pure_fp16_training() -> None:
    host = {"gpus": [{"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}]}
    keras = {"tensorflow": "2.15.0", "keras": "2.15.0"}
    trained = _doc(host, ("float32", 100.0), ("float16", 60.0), device="gpu:0", software=keras)
    served = _doc(host, ("float32", 100.0), ("float16", 60.0), device="gpu:0", software=keras, mode="inference")
    assert "pure_float16_floatx" in _ids(diagnose_document(trained))
    assert "pure_float16_floatx" not in _ids(diagnose_document(served))


def test_inference_gets_no_training_numerics_advice() -> None:
    host = {"gpus": [{"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}]}
    trained = diagnose_document(_doc(host, ("float32", 100.0), ("float16", 40.0), device="gpu:0"))
    served = diagnose_document(_doc(host, ("float32", 100.0), ("float16", 40.0), device="gpu:0", mode="inference"))
    advice = {d: next(f for f in x.to_dict()["findings"] if f["id"] == "fp16_faster")["recommendation"]
              for d, x in (("train", trained), ("infer", served))}
    assert "numerics of training" in advice["train"] and "numerics of training" not in advice["infer"]


# ---------------------------------------------------------------------------------------- knowledge

@pytest.mark.parametrize(("written", "minimum", "expected"), [
    ("2.2.0rc4", "2.2.0", False), ("2.2.0", "2.2.0", True), ("TensorFlow 2.1", "2.1", True),
    ("tf-nightly 2.3", "2.3", False), ("tf-nightly 2.3", "2.2", True), ("nightly", "1.0", None),
    ("2.13.0.dev20260512+cu130", "2.13", False), ("v1.7", "1.7", True),
])
def test_versions_as_people_write_them(written: str, minimum: str, expected: bool | None) -> None:
    assert version_at_least(written, minimum) is expected


def test_version_names_and_years_are_not_numbers() -> None:
    assert version_tuple("ROCm wheel (2026)") is None and version_tuple("TensorFlow 2.1") == (2, 1)


@pytest.mark.parametrize(("model", "bf16", "amx"), [
    ("Intel(R) Xeon(R) Silver 4114 CPU @ 2.20GHz", False, False),
    ("Intel(R) Xeon(R) Gold 6242 CPU @ 2.80GHz", False, False),
    ("Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz", True, False),
    ("Intel(R) Xeon(R) Platinum 8358 CPU @ 2.60GHz", False, False),
    ("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", True, True),
    ("Intel(R) Xeon(R) Platinum 8592+", True, True),
    ("AMD Ryzen 9 7950X3D 16-Core Processor", True, False),
    ("AMD Ryzen 9 7845HX with Radeon Graphics", True, False),  # Zen 4 laptop parts (Dragon Range, Phoenix)
    ("AMD Ryzen 7 7840HS w/ Radeon 780M Graphics", True, False),
    ("AMD Ryzen 5 8600G w/ Radeon 760M Graphics", True, False),
    ("AMD EPYC 9654 96-Core Processor", True, False),
    ("AMD EPYC 7763 64-Core Processor", False, False),
    ("AWS Graviton3", True, False),
    ("Neoverse-N1", False, False),
])
def test_cpu_models_imply_their_16bit_units(model: str, bf16: bool, amx: bool) -> None:
    entry = match_cpu(model)
    assert entry is not None and entry.native_bf16 is bf16 and entry.amx is amx


def test_an_old_xeon_model_number_is_not_a_new_generation() -> None:
    assert match_cpu("Intel(R) Xeon(R) CPU E5-2450 0 @ 2.10GHz") is None
    assert match_cpu("AMD Ryzen 7 7735HS with Radeon Graphics") is None  # Zen 3+ under the 7000 name


def test_linux_kernel_versions_and_the_amx_floor() -> None:
    assert linux_kernel("Linux-5.10.0-29-cloud-amd64-x86_64-with-glibc2.31") == "5.10.0"
    assert linux_kernel("Ubuntu 22.04.4 LTS") is None  # a distribution's number is no kernel version
    assert version_at_least("5.15.0", AMX_MIN_LINUX) is False and version_at_least("6.1", AMX_MIN_LINUX) is True


@pytest.mark.parametrize(("name", "gfx", "family"), [
    ("AMD Radeon RX 6800", None, "AMD RDNA 2"),
    ("AMD Radeon RX 7900 XTX", None, "AMD RDNA 3"),
    ("AMD Radeon RX 9070 XT", None, "AMD RDNA 4"),
    ("AMD Instinct MI300X", None, "AMD CDNA 3 (Instinct MI300)"),
    ("AMD Instinct MI250X", None, "AMD CDNA 2 (Instinct MI200)"),
    ("Radeon VII", None, "AMD GCN 5.1 (Vega 20: MI50/MI60, Radeon VII)"),
    ("gpu 0", "gfx90a:sramecc+:xnack-", "AMD CDNA 2 (Instinct MI200)"),
    ("Apple M2 Max", None, "Apple M1/M2 GPU (Apple7/8)"),
    ("Apple M4 Max", None, "Apple silicon GPU (MPS)"),
    ("Intel(R) Arc(TM) A770 Graphics", None, "Intel Arc (Xe-HPG / Xe2)"),
])
def test_gpu_families_by_name_or_gfx_id(name: str, gfx: str | None, family: str) -> None:
    found = match_family(name, gfx)
    assert found is not None and found.name == family


def test_every_gpu_family_cites_a_source() -> None:
    assert all(f.source in SOURCES for f in GPU_FAMILIES)


# ---------------------------------------------------------------------------------------- thresholds

def _literals_in_comparisons(source: str) -> list[str]:
    """Numbers other than 0 and 1 inside a comparison (an index such as key[2] is no threshold)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        indices = {id(n) for sub in ast.walk(node) if isinstance(sub, ast.Subscript) for n in ast.walk(sub.slice)}
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Constant) and isinstance(sub.value, (int, float))
                    and not isinstance(sub.value, bool) and sub.value not in (0, 1) and id(sub) not in indices):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_every_rule_threshold_is_a_named_constant() -> None:
    from pathlib import Path

    rules = Path(__file__).resolve().parents[3] / "fp16doctor" / "analysis" / "rules"
    literals = {p.name: _literals_in_comparisons(p.read_text(encoding="utf-8")) for p in sorted(rules.glob("*.py"))}
    assert {name: found for name, found in literals.items() if found} == {}


def test_the_threshold_scan_sees_a_literal() -> None:
    assert _literals_in_comparisons("x = a < 0.5 * b") == ["line 1: a < 0.5 * b"]
    assert _literals_in_comparisons("x = key[2] in KINDS and a > 0 and b >= 1") == []
