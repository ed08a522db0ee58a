"""The oneDNN-off experiment is planned wherever oneDNN's ops take the 16-bit step's time, not only where reference
kernels were named: a script whose _MklNativeConv2DBackpropFilter held 8 of a 10 s step, with 0.3 ms of reference
kernels beside it, once had it skipped as "its expected effect (0 ms)"."""

from __future__ import annotations

from typing import Any

from fp16doctor.analysis.experiments import plan


def _ops(conv_ms: float, ref_ms: float) -> dict[str, Any]:
    return {"source": "tf_profiler", "coverage": 0.95, "window_kind": "steps", "items": [
        {"name": "conv2d/Conv2DBackpropFilter", "layer": "conv2d", "pass": "backward_weights", "dtype": "float16",
         "impl": "jit:avx2", "ms_per_step": conv_ms, "op_type": "_MklNativeConv2DBackpropFilter"},
        {"name": "dense/MatMul", "layer": "dense", "pass": "forward", "dtype": "float16", "impl": "ref:any",
         "ms_per_step": ref_ms, "op_type": "_MklMatMul"}]}


def _doc(fp16_conv_ms: float) -> dict[str, Any]:
    def run(precision: str, ms: float, ops: dict[str, Any]) -> dict[str, Any]:
        return {"stack": "host", "precision": precision, "variant": "original", "device": "cpu", "status": "ok",
                "software": {"tensorflow": "2.21.0", "keras": "3.15.1", "keras_backend": "tensorflow"},
                "workload": {"name": "script"}, "ops": ops,
                "step_time_ms": {"median": ms, "p10": ms * 0.98, "p90": ms * 1.02, "n": 5}}
    return {"schema_version": 1, "invocation": {"argv": ["fp16doctor", "diagnose", "--quick"], "size": "quick"},
            "host": {"cpu": {"model": "Intel Xeon", "cores": 2, "flags": ["avx2", "avx512f", "avx512_fp16"]},
                     "gpus": []},
            "runs": [run("float32", 1200.0, _ops(800.0, 0.1)), run("float16", 10000.0, _ops(fp16_conv_ms, 0.3))]}


def test_onednn_off_is_planned_where_onednns_ops_hold_the_16_bit_step() -> None:
    planned = {(p["precision"], p["variant"]): p for p in plan(_doc(8000.0))}
    fp16 = planned[("float16", "onednn_off")]
    assert "skip_reason" not in fp16, fp16
    assert fp16["reason"] == "oneDNN's ops (_Mkl*) took 7200 ms more of the float16 step than of float32's"
    assert "skip_reason" not in planned[("float32", "onednn_off")]  # judged end to end, float32 beside it


def test_a_few_reference_kernels_with_no_onednn_time_behind_them_stay_skipped() -> None:
    """The same 0.3 ms of reference kernels, with oneDNN's ops no slower than float32's: not worth a run."""
    planned = {(p["precision"], p["variant"]): p for p in plan(_doc(800.0))}
    item = planned.get(("float16", "onednn_off"))
    assert item is None or "expected effect" in item.get("skip_reason", "")


def test_an_op_that_ran_only_in_16_bits_reads_none_in_float32_never_0_ms() -> None:
    """On the AMX Xeon a layout reorder ran only in float16 (795 ms wall): its evidence line says "none in float32"."""
    import json
    from pathlib import Path

    from fp16doctor.analysis import saved_diagnosis

    doc = Path(__file__).resolve().parents[3] / "docs" / "examples" / "cpu-xeon-amx-quick" / "results.json"
    lines = [e for f in saved_diagnosis(json.loads(doc.read_text())).findings for e in f.evidence]
    assert any("layout ran jit:uni: 795 ms wall (1590 ms own) in float16 vs none in float32" in e for e in lines)
    assert not any(" vs 0 ms in " in e for e in lines)
