"""The causal accounting and the verdicts: which cause explains how much of each 16-bit run's difference."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document
from fp16doctor.analysis.causes import HARDWARE_CAUSES
from fp16doctor.analysis.experiments import plan, plan_experiments
from fp16doctor.analysis.registry import REGISTRY, SPEED_CAUSES
from fp16doctor.results import LOW_COVERAGE

DATA = Path(__file__).resolve().parents[2] / "data"
XEON_FLAGS = ["avx2", "f16c", "avx512f", "avx512_fp16", "avx512_bf16", "amx_bf16", "amx_int8"]
EPYC_AVX2_FLAGS = ["avx2", "f16c", "fma"]


def mentions_ms(line: str, ms: float) -> bool:
    """Whether a sentence quotes this duration, in whatever unit the formatter chose."""
    for number, unit in re.findall(r"(\d[\d,]*(?:\.\d+)?)\s*(ms|s)\b", line):
        value = float(number.replace(",", "")) * (1000.0 if unit == "s" else 1.0)
        if abs(value - ms) <= 0.01 * ms:
            return True
    return False


def op(layer: str, pass_: str, ms: float, impl: str | None, dtype: str | None,
       name: str = "Conv2DBackpropFilter") -> dict[str, Any]:
    return {"name": f"{layer}/{name}", "layer": layer, "pass": pass_, "dtype": dtype, "impl": impl,
            "tensor_cores": None, "ms_per_step": ms, "calls_per_step": 1, "op_type": name}


def run(precision: str, ms: float, device: str = "cpu", **extra: Any) -> dict[str, Any]:
    r: dict[str, Any] = {"stack": "host", "precision": precision, "variant": "original", "device": device,
                         "status": "ok", "software": {"tensorflow": "2.21.0", "keras": "3.15.1",
                                                      "keras_backend": "tensorflow"},
                         "step_time_ms": {"median": ms, "p10": ms * 0.97, "p90": ms * 1.03, "n": 5}}
    r.update(extra)
    return r


def doc(*runs: dict[str, Any], flags: list[str] | None = None, gpus: list[dict[str, Any]] | None = None,
        **top: Any) -> dict[str, Any]:
    return {"schema_version": 1, "host": {"cpu": {"model": "test CPU", "flags": flags or XEON_FLAGS},
                                          "gpus": gpus or []}, "runs": list(runs), **top}


def xeon_like() -> dict[str, Any]:
    """The shape of what the Xeon recordings show: float16 conv weight gradients on oneDNN's reference kernel."""
    fp32_ops = [op("conv2d", "backward_weights", 6.0, "brg_conv_bwd_w:avx10_1_512", "float32"),
                op("conv2d", "forward", 5.0, "brg_conv_fwd:avx10_1_512", "float32", "Conv2D"),
                op("conv2d_1", "backward_weights", 4.0, "brg_conv_bwd_w:avx10_1_512", "float32")]
    fp16_ops = [op("conv2d", "backward_weights", 13200.0, "ref:any", "float16"),
                op("conv2d", "forward", 25.0, "brg_conv_fwd:avx10_1_512", "float16", "Conv2D"),
                op("conv2d_1", "backward_weights", 7400.0, "ref:any", "float16"),
                op("conv2d_1", "layout", 300.0, "jit:uni", "float16", "reorder")]
    return doc(run("float32", 126.0, ops={"source": "onednn_verbose", "coverage": 0.9, "items": fp32_ops}),
               run("float16", 24500.0, bound=True, stop_reason="slow_step_bound",
                   step_time_ms={"median": 24500.0, "p10": 24500.0, "p90": 24500.0, "n": 1},
                   loss={"first": 0.69, "last": 0.69, "nan_or_inf": False},
                   ops={"source": "onednn_verbose", "coverage": 0.92, "items": fp16_ops}))


def test_measured_reference_kernel_is_the_cause_and_explains_most_of_the_time() -> None:
    diagnosis = diagnose_document(xeon_like())
    (verdict,) = diagnosis.to_dict()["verdicts"]
    assert verdict["cause"] == "slow_fp16_kernels" and verdict["basis"] == "measured_ops"
    assert verdict["explained_share"] >= 0.5 and verdict["bound"] is True
    assert verdict["headline"].startswith("float16 is >= ")
    slow = next(f for f in diagnosis.to_dict()["findings"] if f["id"] == "slow_fp16_kernels")
    assert "conv2d" in slow["title"] and "ref:any" in slow["title"]
    assert any("ref:any" in line and mentions_ms(line, 13200.0) for line in slow["evidence"])
    assert slow["precision"] == "float16" and slow["machine"] == "host" and slow["explains_ms"] > 10000


def test_explained_never_exceeds_the_difference_and_advice_is_never_a_cause() -> None:
    docs = [xeon_like(), *(json.loads(p.read_text()) for p in sorted((DATA / "cases").glob("*.json")))]
    for d in docs:
        diagnosis = diagnose_document(d)
        for verdict in diagnosis.to_dict()["verdicts"]:
            assert 0.0 <= verdict["explained_share"] <= 1.0
            assert verdict["cause"] is None or verdict["cause"] in SPEED_CAUSES
            total = sum(c["explains_ms"] for c in verdict["causes"])
            assert total <= abs(verdict["difference_ms"]) + 1e-6
        for finding in diagnosis.to_dict()["findings"]:
            if not REGISTRY[finding["id"]].causes_speed:
                assert finding.get("explains_ms") is None


def test_seed_example_names_host_float16_batches_a_likely_cause_never_a_charged_one() -> None:
    # No input time and no ops were measured: the table's 170 vs 26 ms per 128 images (another machine) is
    # evidence for a likely cause, labelled; no verdict cause carries explains_ms from it.
    d = json.loads((DATA / "examples" / "seed-titanv-tf1.7.json").read_text())
    diagnosis = diagnose_document(d)
    (verdict,) = diagnosis.to_dict()["verdicts"]
    assert verdict["cause"] is None and verdict["causes"] == [] and verdict["explained_share"] == 0.0
    assert verdict["likely_cause"]["id"] == "host_fp16_emulation" and verdict["likely_cause"]["basis"] == "estimate"
    assert "probably because host-side preprocessing runs in float16" in verdict["headline"]
    host = next(f for f in diagnosis.to_dict()["findings"] if f["id"] == "host_fp16_emulation")
    assert host["explains_ms"] is None


def test_a_best_case_beyond_the_measured_saving_is_not_trimmed_to_fill_it() -> None:
    # The roofline saves 82 ms of a 500 ms float32 step on a Titan V; fp16 measured only 50 ms faster. Trimmed to
    # the 50 ms, it would explain 100 % by construction: it is no share at all.
    volta = [{"index": 0, "name": "NVIDIA TITAN V", "compute_capability": "7.0"}]
    layers = [{"type": "Conv2D", "in_channels": 32, "out_channels": 32, "kernel": [3, 3],
               "output_shape": [224, 336, 32], "flops_per_example": 4.0e9}]
    model = {"layers": layers, "flops_per_example": 4.0e9}
    workload = {"name": "seed_cnn", "batch_size": 128, "image_height": 224, "image_width": 336}
    d = doc(run("float32", 500.0, device="gpu:0", model=model, workload=workload),
            run("mixed_float16", 450.0, device="gpu:0", model=model, workload=workload), gpus=volta)
    diagnosis = diagnose_document(d)
    (verdict,) = diagnosis.to_dict()["verdicts"]
    assert verdict["outcome"] == "faster"
    assert verdict["causes"] == [] and verdict["explained_share"] == 0.0


def test_difference_inside_the_spread_has_no_cause() -> None:
    d = doc(run("float32", 100.0, step_time_ms={"median": 100.0, "p10": 90.0, "p90": 110.0}),
            run("float16", 103.0, step_time_ms={"median": 103.0, "p10": 93.0, "p90": 113.0}),
            flags=EPYC_AVX2_FLAGS)
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    assert verdict["outcome"] == "no_significant_difference" and verdict["cause"] is None


def test_remote_engine_runs_are_judged_against_their_own_gpu() -> None:
    h200 = {"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0"}
    engine = {"kind": "docker", "docker_host": "ssh://lab", "name": "lab", "gpu_name": "NVIDIA GeForce GTX 1080",
              "gpu_compute_capability": "6.1", "gpu_driver_version": "535.54"}
    d = doc(run("float32", 100.0, device="gpu:0", stack="tf2.15-keras2", engine=engine),
            run("float16", 180.0, device="gpu:0", stack="tf2.15-keras2", engine=engine), gpus=[h200])
    diagnosis = diagnose_document(d)
    ids = {f["id"] for f in diagnosis.to_dict()["findings"]}
    assert "tf32_baseline" not in ids  # the local H200 is not where these runs ran
    hardware = next(f for f in diagnosis.to_dict()["findings"] if f["id"] == "no_fast_fp16_hardware")
    assert any("GTX 1080" in line for line in hardware["evidence"])
    assert not any("H200" in line for line in hardware["evidence"])
    # No ops were measured: the device's fact is reported, never stretched over the difference as its cause.
    assert hardware["explains_ms"] is None
    (verdict,) = diagnosis.to_dict()["verdicts"]
    assert verdict["machine"] == "lab" and verdict["cause"] is None
    assert "no measured cause explains" in verdict["headline"]


def test_runs_pair_within_a_machine_only() -> None:
    remote = {"kind": "docker", "docker_host": "tcp://other:2375", "name": "other"}
    d = doc(run("float32", 100.0), run("float16", 300.0, engine=remote), flags=EPYC_AVX2_FLAGS)
    assert diagnose_document(d).to_dict()["verdicts"] == []


def test_oneDNN_off_experiment_confirms_and_quotes_both_times() -> None:
    d = xeon_like()
    d["runs"].append(run("float16", 823.0, variant="onednn_off",
                         experiment={"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}},
                                     "tests": "slow_fp16_kernels"}))
    diagnosis = diagnose_document(d)
    slow = next(f for f in diagnosis.to_dict()["findings"] if f["id"] == "slow_fp16_kernels")
    assert slow["confirmed_by"] == "onednn_off"
    assert any("TF_ENABLE_ONEDNN_OPTS=0" in line and mentions_ms(line, 24500.0) and mentions_ms(line, 823.0)
               for line in slow["evidence"])
    # What to do first (the prescription, pointed at), then what the experiment measured.
    assert diagnosis.to_dict()["prescriptions"][0]["headline"].startswith("Use float32:")
    assert slow["recommendation"].startswith("See the prescription.")
    assert "Measured on this machine" in slow["recommendation"]
    assert len(diagnosis.to_dict()["verdicts"]) == 1  # the experiment is evidence, not a verdict of its own


def test_planner_starts_oneDNN_off_from_measured_reference_kernels() -> None:
    planned = plan_experiments(xeon_like())
    # float32 gets the same switch, so the switch is judged end to end against every configuration.
    assert [(p["variant"], p["precision"], p["experiment"]["tests"]) for p in planned] == \
        [("onednn_off", "float16", "slow_fp16_kernels"), ("onednn_off", "float32", "slow_fp16_kernels")]
    assert planned[0]["experiment"]["changes"] == {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}
    assert "end to end" in planned[1]["reason"]


def test_planner_does_not_repeat_an_experiment_already_run() -> None:
    d = xeon_like()
    d["runs"].append(run("float16", 823.0, variant="onednn_off",
                         experiment={"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}},
                                     "tests": "slow_fp16_kernels"}))
    assert plan_experiments(d) == []


def test_planner_asks_for_the_input_control_only_where_it_could_show_an_input_cost() -> None:
    """The in-memory control counts only where reading images makes the step 1.3x its own (host_input.py): a run
    whose batch took under 1 - 1/1.3 of its step gets none; one above it does, and float32 with no batch time
    measured does too; a script's runs and a run already controlled do not."""
    seed = {"name": "seed_cnn", "batch_size": 32, "image_height": 112, "image_width": 168}
    controls = lambda d: sorted((p["precision"], p.get("control")) for p in plan(d)  # noqa: E731
                                if p["variant"] == "synthetic_input")
    assert controls(doc(run("float32", 140.0, workload=seed, input_time_ms={"median": 19.0}),
                        run("float16", 790.0, workload=seed, input_time_ms={"median": 25.0}),
                        flags=EPYC_AVX2_FLAGS)) == []
    assert controls(doc(run("float32", 40.0, workload=seed, input_time_ms={"median": 19.0}),
                        run("float16", 790.0, workload=seed, input_time_ms={"median": 25.0}),
                        flags=EPYC_AVX2_FLAGS)) == [("float32", True)]
    assert controls(doc(run("float32", 40.0, workload=seed), run("float16", 790.0, workload=seed),
                        flags=EPYC_AVX2_FLAGS)) == [("float32", True)]
    script = {"name": "script", "script_sha256": "ab"}
    assert controls(doc(run("float32", 40.0, workload=script), run("float16", 790.0, workload=script),
                        flags=EPYC_AVX2_FLAGS)) == []
    done = doc(run("float32", 40.0, workload=seed), run("float32", 35.0, workload=seed, variant="synthetic_input"),
               run("float16", 790.0, workload=seed), flags=EPYC_AVX2_FLAGS)
    assert controls(done) == []


def test_planner_float32_batches_from_host_float16_work_and_skips_tiny_effects() -> None:
    seed = {"name": "seed_cnn", "batch_size": 32, "image_height": 112, "image_width": 168}
    sw = {"tensorflow": "2.15.0", "keras": "2.15.0", "keras_backend": "tensorflow", "keras_api": "keras2"}
    big = doc(run("float32", 140.0, workload=seed, software=sw, input_time_ms={"median": 19.0}),
              run("float16", 790.0, workload=seed, software=sw, input_time_ms={"median": 80.0}),
              flags=EPYC_AVX2_FLAGS)
    variants = {p["variant"]: p for p in plan(big)}
    assert "float32_batches" in variants and "skip_reason" not in variants["float32_batches"]
    small = doc(run("float32", 140.0, workload=seed, software=sw, input_time_ms={"median": 19.0}),
                run("float16", 790.0, workload=seed, software=sw, input_time_ms={"median": 25.0}),
                flags=EPYC_AVX2_FLAGS)
    skipped = {p["variant"]: p for p in plan(small)}["float32_batches"]
    assert "under 5%" in skipped["skip_reason"]


def test_bf16_unsupported_on_a_cpu_without_bf16_and_on_volta() -> None:
    cpu = doc(run("float32", 100.0), run("mixed_bfloat16", 400.0), flags=EPYC_AVX2_FLAGS)
    assert "bf16_unsupported" in {f["id"] for f in diagnose_document(cpu).to_dict()["findings"]}
    v100 = {"index": 0, "name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0"}
    gpu = doc(run("float32", 100.0, device="gpu:0"), run("mixed_bfloat16", 160.0, device="gpu:0"), gpus=[v100])
    finding = next(f for f in diagnose_document(gpu).to_dict()["findings"] if f["id"] == "bf16_unsupported")
    assert any("7.0" in line for line in finding["evidence"])


def test_bf16_preferred_with_the_measured_ratio() -> None:
    d = doc(run("float32", 116.0), run("float16", 900.0), run("mixed_bfloat16", 59.0))
    finding = next(f for f in diagnose_document(d).to_dict()["findings"] if f["id"] == "bf16_preferred")
    assert "1.97x" in finding["title"] and finding["recommends"]["precision"] == "mixed_bfloat16"


def test_faster_16_bit_run_names_what_saved_time_never_the_outcome() -> None:
    """Without ops, the saving is estimated from the GPU's peak rates where the roofline knows the model; the
    estimate is its own number, not what is left of the difference."""
    a100 = {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}
    seed = {"name": "seed_cnn", "image_height": 224, "image_width": 336, "channels": 3, "batch_size": 128}
    d = doc(run("float32", 200.0, device="gpu:0", workload=seed),
            run("mixed_float16", 110.0, device="gpu:0", workload=seed), gpus=[a100])
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    assert verdict["outcome"] == "faster" and verdict["cause"] != "fp16_faster"
    assert verdict["cause"] == "fast_16bit_kernels" and verdict["basis"] == "estimate"
    assert 0 < verdict["causes"][0]["explains_ms"] < 90.0  # the roofline's best-case saving, not the 90 ms
    assert "estimated" in verdict["headline"]
    # With nothing to estimate from, the saving stays unexplained.
    d = doc(run("float32", 200.0, device="gpu:0"), run("mixed_float16", 110.0, device="gpu:0"), gpus=[a100])
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    assert verdict["outcome"] == "faster" and verdict["cause"] is None and verdict["explained_share"] == 0.0


# ---- what a review of the accounting found, kept as tests


def test_one_experiment_credits_one_cause_only() -> None:
    d = doc(run("float32", 100.0), run("float16", 10000.0),
            run("float16", 3000.0, variant="onednn_off",
                experiment={"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}, "tests": "slow_fp16_kernels"}),
            flags=XEON_FLAGS)
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    assert [c["id"] for c in verdict["causes"]] == ["slow_fp16_kernels"]
    assert verdict["causes"][0]["explains_ms"] == 7000.0 and verdict["causes"][0]["basis"] == "experiment"
    setting = next(f for f in diagnose_document(d).to_dict()["findings"] if f["id"] == "framework_setting")
    assert setting["explains_ms"] is None and mentions_ms(setting["evidence"][0], 3000.0)


def test_an_experiment_that_slows_a_faster_run_explains_nothing() -> None:
    a100 = {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}
    d = doc(run("float32", 100.0, device="gpu:0"), run("mixed_float16", 60.0, device="gpu:0"),
            run("mixed_float16", 90.0, device="gpu:0", variant="xla",
                experiment={"changes": {"jit_compile": True}, "tests": "small_model_overhead"}), gpus=[a100])
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    assert verdict["cause"] != "small_model_overhead"
    assert all(c["basis"] != "experiment" for c in verdict["causes"])


def test_measured_ops_leave_the_rest_unexplained_instead_of_a_flag_estimate() -> None:
    ops = {"source": "onednn_verbose", "coverage": 0.9}
    d = doc(run("float32", 100.0, ops={**ops, "items": [op("conv2d", "forward", 50.0, "jit:avx2", "float32")]}),
            run("float16", 1000.0, ops={**ops, "items": [op("conv2d", "forward", 100.0, "jit:avx2", "float16")]}),
            flags=EPYC_AVX2_FLAGS)
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    assert verdict["basis"] == "measured_ops" and verdict["explained_share"] < 0.1
    assert "unexplained" in verdict["headline"]


def test_a_finding_on_one_machine_is_no_estimate_for_another() -> None:
    v100 = {"kind": "docker", "docker_host": "ssh://a", "name": "a", "gpu_name": "Tesla V100-SXM2-16GB",
            "gpu_compute_capability": "7.0"}
    a100 = {"kind": "docker", "docker_host": "ssh://b", "name": "b", "gpu_name": "NVIDIA A100-SXM4-40GB",
            "gpu_compute_capability": "8.0"}
    d = doc(run("float32", 100.0, device="gpu:0", engine=v100),
            run("mixed_bfloat16", 200.0, device="gpu:0", engine=v100),
            run("float32", 100.0, device="gpu:0", engine=a100),
            run("mixed_bfloat16", 150.0, device="gpu:0", engine=a100))
    diagnosis = diagnose_document(d)
    verdicts = {v["machine"]: v for v in diagnosis.to_dict()["verdicts"]}
    assert verdicts["b"]["cause"] != "bf16_unsupported"
    # The fact is machine a's: reported for it alone, and as a fact, not as a share of either difference.
    (finding,) = [f for f in diagnosis.to_dict()["findings"] if f["id"] == "bf16_unsupported"]
    assert any("V100" in line for line in finding["evidence"]) and not any("A100" in line
                                                                          for line in finding["evidence"])
    assert finding["explains_ms"] is None and verdicts["a"]["cause"] is None


def test_bfloat16_on_a_pre_ampere_tensor_core_gpu_is_not_a_slow_kernel() -> None:
    v100 = {"index": 0, "name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0"}
    gpu_op = {"name": "conv", "layer": "conv2d", "pass": "forward", "dtype": "bfloat16", "op_type": "Conv2D",
              "impl": "implicit_convolve_sgemm", "tensor_cores": False, "ms_per_step": 80.0}
    f32_op = {**gpu_op, "dtype": "float32", "ms_per_step": 40.0}
    d = doc(run("float32", 100.0, device="gpu:0", ops={"source": "tf_profiler", "items": [f32_op]}),
            run("mixed_bfloat16", 140.0, device="gpu:0", ops={"source": "tf_profiler", "items": [gpu_op]}),
            gpus=[v100])
    diagnosis = diagnose_document(d)
    (verdict,) = diagnosis.to_dict()["verdicts"]
    # The bfloat16 conv ran a regular kernel and took longer: the framework's bfloat16 path, measured; the
    # missing bfloat16 units stay a fact beside it.
    assert verdict["cause"] == "slow_16bit_compute" and verdict["basis"] == "measured_ops"
    (fact,) = [f for f in diagnosis.to_dict()["findings"] if f["id"] == "bf16_unsupported"]
    assert fact["explains_ms"] is None


def test_tf32_off_is_planned_even_when_16_bits_look_no_better() -> None:
    a100 = {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}
    d = doc(run("float32", 100.0, device="gpu:0"), run("mixed_float16", 98.0, device="gpu:0"), gpus=[a100])
    assert [(p["variant"], p["precision"]) for p in plan_experiments(d)] == [("tf32_off", "float32")]


def test_a_cut_short_base_is_compared_with_the_experiments_first_step() -> None:
    d = xeon_like()
    d["runs"].append(run("float16", 800.0, variant="onednn_off", first_step_ms=2500.0,
                         experiment={"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}},
                                     "tests": "slow_fp16_kernels"}))
    setting = next(f for f in diagnose_document(d).to_dict()["findings"] if f["id"] == "framework_setting")
    assert "first step" in setting["evidence"][0] and mentions_ms(setting["evidence"][0], 2500.0)


def test_a_base_cut_short_by_a_later_warmup_step_is_still_compared_on_first_steps() -> None:
    """Its measured step is its second, still a warm-up step (on a Xeon one cut run's second step was 22 % over
    its first): the like for like is defined once, first step against first step, tracing included on both."""
    d = xeon_like()
    d["runs"][1]["first_step_ms"] = 31000.0  # the first step stayed under its allowance; the second met the bound
    d["runs"].append(run("float16", 800.0, variant="onednn_off", first_step_ms=2500.0,
                         experiment={"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}},
                                     "tests": "slow_fp16_kernels"}))
    setting = next(f for f in diagnose_document(d).to_dict()["findings"] if f["id"] == "framework_setting")
    evidence = setting["evidence"][0]
    assert "first step" in evidence and mentions_ms(evidence, 31000.0) and mentions_ms(evidence, 2500.0)
    assert "one step against one step" in evidence


def test_an_error_that_merely_contains_nan_is_no_instability() -> None:
    d = doc(run("float32", 100.0), {**run("float16", 0.0), "status": "failed", "step_time_ms": None,
                                     "error": "RuntimeError: maintenance window; stack overflow in the loader"})
    assert "numerics_unstable" not in {f["id"] for f in diagnose_document(d).to_dict()["findings"]}


def test_without_implementation_names_a_pathological_slowdown_still_plans_oneDNN_off_and_it_confirms() -> None:
    """TensorFlow's profiler gives op types, not oneDNN's implementation names: the experiment decides."""
    d = xeon_like()
    for r in d["runs"]:
        for item in r["ops"]["items"]:
            item["impl"] = None
    assert [(p["variant"], p["precision"]) for p in plan_experiments(d)] == [("onednn_off", "float16"),
                                                                             ("onednn_off", "float32")]
    d["runs"].append(run("float16", 823.0, variant="onednn_off", first_step_ms=900.0,
                         experiment={"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}},
                                     "tests": "slow_fp16_kernels"}))
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    assert verdict["cause"] == "slow_fp16_kernels" and verdict["basis"] == "experiment"
    assert verdict["explained_share"] >= 0.5


def test_oneDNN_off_is_not_run_where_the_trace_shows_tensorflow_ran_its_own_kernels() -> None:
    """An AVX2 CPU: the profiler's op types are TensorFlow's own (Conv2DBackpropFilter, not _MklNative...),
    so switching oneDNN off could not change the step; the planner says so instead of spending a run."""
    own = [op("conv2d", "backward_weights", 3000.0, None, "float16", "Conv2DBackpropFilter"),
           op("conv2d", "forward", 20.0, None, "float16", "Conv2D")]
    d = doc(run("float32", 100.0, ops={"source": "tf_profiler", "coverage": 0.95,
                                       "items": [op("conv2d", "backward_weights", 60.0, None, "float32",
                                                    "Conv2DBackpropFilter")]}),
            run("float16", 3100.0, ops={"source": "tf_profiler", "coverage": 0.95, "items": own}))
    from fp16doctor.analysis.experiments import plan

    (item,) = [p for p in plan(d) if p["variant"] == "onednn_off"]
    assert "own kernels" in item["skip_reason"]
    assert not [p for p in plan_experiments(d) if p["variant"] == "onednn_off"]
    for item_ in d["runs"][1]["ops"]["items"]:
        item_["op_type"] = "_MklNative" + item_["op_type"]
    assert [p["variant"] for p in plan_experiments(d)] == ["onednn_off", "onednn_off"]


EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


MEASURED_EXAMPLES = ("cpu-epyc-avx2-quick", "cpu-epyc-avx2-quick-torch", "cpu-epyc-avx2-quick-jax",
                     "cpu-epyc-avx2-tf2.10-quick", "cpu-epyc-avx2-tf2.10-seed-script", "cpu-epyc-avx512bf16-quick")


@pytest.mark.parametrize("name", MEASURED_EXAMPLES)
def test_every_ok_run_of_a_measured_example_lists_ops_covering_most_of_its_window(name: str) -> None:
    """The examples a user reads first: each ok run's ops cover at least LOW_COVERAGE of its profiled window,
    a window after the timed steps that holds no epoch's first step (for a precision profiled in the rounds
    alone, after its warm-up there)."""
    d = json.loads((EXAMPLES / name / "results.json").read_text())
    ok = [r for r in d["runs"] if r["status"] == "ok"]
    assert ok
    for run in ok:
        ops = run["ops"]
        assert ops["coverage"] >= LOW_COVERAGE, (run["precision"], run["variant"], ops.get("coverage_note"))
        kind = "rounds_" + run["precision"] if run.get("timed_by") == "interleaved_rounds" else "after_timing"
        assert ops["window"]["kind"] == kind and not ops["window"].get("epoch_start")


def test_the_questions_script_and_the_built_in_workload_get_the_same_verdict_in_a_keras_2_stack() -> None:
    """Recorded on a 2-core AVX2 EPYC in the tf2.10-cpu stack: the question's script, unchanged (Keras 2.10
    takes its RMSprop(lr=..., decay=...)), and the built-in workload, analysed again from their runs."""
    verdicts = {}
    for name in ("cpu-epyc-avx2-tf2.10-seed-script", "cpu-epyc-avx2-tf2.10-quick"):
        d = json.loads((EXAMPLES / name / "results.json").read_text())
        assert {r["software"]["keras"] for r in d["runs"]} == {"2.10.0"}
        (verdict,) = [v for v in diagnose_document(d).to_dict()["verdicts"] if v["precision"] == "float16"]
        assert verdict["outcome"] == "slower" and verdict["basis"] == "measured_ops", name
        assert verdict["explained_share"] >= 0.9, name
        verdicts[d["invocation"]["data"]] = verdict["cause"]
        # The AVX2 EPYC's lack of fp16 instructions is still reported, as a fact that explains no time itself.
        (fact,) = [f for f in diagnose_document(d).to_dict()["findings"] if f["id"] == "no_fast_fp16_hardware"]
        assert fact["explains_ms"] is None, name
    assert set(verdicts) == {"script", "synthetic"}
    assert verdicts["script"] == verdicts["synthetic"] == "slow_16bit_compute"


def test_a_small_input_share_named_by_the_ops_alone_is_information_saying_what_was_measured() -> None:
    """mixed_float16's input op took 1.5 ms longer in a 22 ms difference: the input does not dominate the step
    (its rule does not fire), so the finding says what was measured, as information."""
    fp32_ops = [op("conv2d", "backward_weights", 5.0, "Conv2DBackpropFilter", "float32"),
                op("Iterator::Root", "input", 0.2, "Dataset", "float32", "Dataset")]
    mixed_ops = [op("conv2d", "backward_weights", 25.5, "Conv2DBackpropFilter", "float16"),
                 op("Iterator::Root", "input", 1.7, "Dataset", "float32", "Dataset")]
    d = doc(run("float32", 20.0, ops={"source": "tf_profiler", "coverage": 0.9, "items": fp32_ops}),
            run("mixed_float16", 42.0, ops={"source": "tf_profiler", "coverage": 0.9, "items": mixed_ops}),
            flags=EPYC_AVX2_FLAGS)
    diagnosis = diagnose_document(d)
    (verdict,) = diagnosis.to_dict()["verdicts"]
    assert verdict["cause"] == "slow_16bit_compute"
    (inputs,) = [f for f in diagnosis.to_dict()["findings"] if f["id"] == "input_pipeline_bound"]
    assert inputs["severity"] == "info" and inputs["explains_ms"] < 0.1 * verdict["difference_ms"]
    assert inputs["title"] == "Producing batches on the host took longer in mixed_float16 than in float32"


def _windowed(ms: float, window_ms: float, items: list[dict[str, Any]], precision: str) -> dict[str, Any]:
    return run(precision, ms, ops={"source": "jax_profiler", "coverage": 0.9, "items": items,
                                   "window": {"kind": "after_timing", "steps": 2, "wall_ms": window_ms}})


def test_an_unexplained_difference_the_profiled_windows_did_not_show_is_said_to_be_missing_there() -> None:
    """The shape of a measured JAX run on a 2-core VM: mixed_float16's timed median 436 ms above float32's, its
    profiled steps only 55 ms above. The ops account for what the windows show; the verdict says where the rest
    went instead of leaving it bare."""
    fp32 = [op("conv2d", "backward_weights", 300.0, "ynn_fusion.1", "float32"),
            op("conv2d", "forward", 700.0, "ynn_fusion.2", "float32", "Conv")]
    mixed = [op("conv2d", "backward_weights", 381.0, "ynn_fusion.1", "float16"),
             op("conv2d", "forward", 700.0, "ynn_fusion.2", "float16", "Conv")]
    d = doc(_windowed(990.0, 1069.0, fp32, "float32"), _windowed(1426.0, 1124.0, mixed, "mixed_float16"),
            flags=EPYC_AVX2_FLAGS)
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    assert verdict["outcome"] == "slower" and verdict["explained_share"] < 0.5
    assert verdict["window_difference_ms"] == 55.0
    assert "did not recur there" in verdict["headline"] and mentions_ms(verdict["headline"], 381.0)


def test_windows_that_show_the_whole_difference_add_nothing_to_the_verdict() -> None:
    fp32 = [op("conv2d", "backward_weights", 300.0, "Conv2DBackpropFilter", "float32")]
    f16 = [op("conv2d", "backward_weights", 900.0, "Conv2DBackpropFilter", "float16")]
    d = doc(_windowed(400.0, 410.0, fp32, "float32"), _windowed(1000.0, 1005.0, f16, "float16"),
            flags=EPYC_AVX2_FLAGS)
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    assert verdict["explained_share"] >= 0.9 and verdict["window_difference_ms"] == 595.0
    assert "did not recur" not in verdict["headline"]


# ---- attribution that adds up: each case a document that reproduced a defect of the accounting


def _conv(layer: str, ms: float, impl: str | None, dtype: str, wall: float | None = None) -> dict[str, Any]:
    item = op(layer, "backward_weights", ms, impl, dtype)
    if wall is not None:
        item["wall_ms_per_step"] = wall
    return item


def _ops(*items: dict[str, Any], source: str = "onednn_verbose") -> dict[str, Any]:
    return {"source": source, "coverage": 0.95, "items": list(items)}


def _causes_add_up(verdict: dict[str, Any]) -> None:
    assert sum(c["explains_ms"] for c in verdict["causes"]) <= abs(verdict["difference_ms"]) + 1e-6
    for cause in verdict["causes"]:
        assert abs(sum(o["ms"] for o in cause["ops"]) - cause["explains_ms"]) <= 0.01 or cause["basis"] != \
            "measured_ops"


def test_a_named_cause_claims_only_its_part_when_ops_without_a_cause_grew_too() -> None:
    """Two conv weight gradients each took 600 ms more thread time, one on oneDNN's ref:any, one on a regular
    kernel in float32 (no cause); the step grew by 600 ms. The slow kernel's part is half, not all of it."""
    d = doc(run("float32", 100.0, ops=_ops(_conv("conv2d", 10.0, "brg:avx512", "float32"),
                                           _conv("conv2d_1", 10.0, "brg:avx512", "float32"))),
            run("float16", 700.0, ops=_ops(_conv("conv2d", 610.0, "ref:any", "float16"),
                                           _conv("conv2d_1", 610.0, "brg:avx512", "float32"))))
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    (slow,) = [c for c in verdict["causes"] if c["id"] == "slow_fp16_kernels"]
    assert slow["explains_ms"] == pytest.approx(300.0)
    assert slow["ops"] == [{"name": "conv2d/Conv2DBackpropFilter", "layer": "conv2d", "pass": "backward_weights",
                            "dtype": "float16", "ms": 300.0}]
    assert verdict["explained_share"] == pytest.approx(0.5) and "300 ms of the 600 ms" in verdict["headline"]
    _causes_add_up(verdict)


def test_ops_that_ran_at_once_are_charged_their_wall_share() -> None:
    """The same two convs, recorded with intervals: in float16 they ran side by side, so each added 295 ms to the
    step where its own thread time grew by 600 ms."""
    d = doc(run("float32", 100.0, ops=_ops(_conv("conv2d", 10.0, "brg:avx512", "float32", wall=10.0),
                                           _conv("conv2d_1", 10.0, "brg:avx512", "float16", wall=10.0),
                                           source="tf_profiler")),
            run("float16", 700.0, ops=_ops(_conv("conv2d", 610.0, "ref:any", "float16", wall=305.0),
                                           _conv("conv2d_1", 610.0, "brg:avx512", "float32", wall=305.0),
                                           source="tf_profiler")))
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    (slow,) = [c for c in verdict["causes"] if c["id"] == "slow_fp16_kernels"]
    assert slow["explains_ms"] == pytest.approx(295.0) and slow["ops"][0]["ms"] == pytest.approx(295.0)
    _causes_add_up(verdict)


def test_host_input_time_measured_as_ops_is_not_added_again() -> None:
    """float16 batches built on the host: the input op's time grew by 40 ms in the window and the host's batch time
    by 40 ms. Both measure the same work: 40 ms of the 100 ms difference, not 80."""
    seed = {"name": "seed_cnn", "batch_size": 32, "image_height": 112, "image_width": 168}
    sw = {"tensorflow": "2.15.0", "keras": "2.15.0", "keras_backend": "tensorflow", "keras_api": "keras2"}
    generator = "Iterator::Root::Prefetch::Generator"
    d = doc(run("float32", 100.0, workload=seed, software=sw, input_time_ms={"median": 20.0},
                ops=_ops(op(generator, "input", 10.0, None, None, "Dataset"), source="tf_profiler")),
            run("float16", 200.0, workload=seed, software=sw, input_time_ms={"median": 60.0},
                ops=_ops(op(generator, "input", 50.0, None, None, "Dataset"), source="tf_profiler")),
            flags=EPYC_AVX2_FLAGS)
    diagnosis = diagnose_document(d)
    (verdict,) = diagnosis.to_dict()["verdicts"]
    (host,) = [c for c in verdict["causes"] if c["id"] == "host_fp16_emulation"]
    assert host["explains_ms"] == pytest.approx(40.0) and host["basis"] == "measured_ops"
    assert "40 ms of the 100 ms" in verdict["headline"] and "unexplained" in verdict["headline"]
    _causes_add_up(verdict)


def test_a_device_fact_is_no_measured_cause_and_float32_ops_are_not_16_bit_work() -> None:
    """AVX2 EPYC (no fp16 instructions), mixed_float16: a float16 conv on a regular kernel grew by 200 ms, a
    float32 dense op (mixed precision keeps it in float32) by 100 ms. The conv's time is the framework's 16-bit
    kernel; the dense op ran no 16-bit arithmetic; the missing fp16 instructions are a fact, reported."""
    fp32 = [op("conv2d", "forward", 50.0, "jit:avx2", "float32", "Conv2D"),
            op("dense", "forward", 10.0, "gemm:jit", "float32", "MatMul")]
    mixed = [op("conv2d", "forward", 250.0, "jit:avx2", "float16", "Conv2D"),
             op("dense", "forward", 110.0, "gemm:jit", "float32", "MatMul")]
    d = doc(run("float32", 100.0, ops=_ops(*fp32)), run("mixed_float16", 400.0, ops=_ops(*mixed)),
            flags=EPYC_AVX2_FLAGS)
    diagnosis = diagnose_document(d)
    (verdict,) = diagnosis.to_dict()["verdicts"]
    assert verdict["cause"] == "slow_16bit_compute" and verdict["basis"] == "measured_ops"
    assert verdict["causes"][0]["explains_ms"] == pytest.approx(200.0)
    assert "100 ms" in verdict["headline"] and "unexplained" in verdict["headline"]
    for cause in verdict["causes"]:
        assert cause["id"] not in HARDWARE_CAUSES
        assert all(o["dtype"] in ("float16", "bfloat16") for o in cause["ops"])
    (fact,) = [f for f in diagnosis.to_dict()["findings"] if f["id"] == "no_fast_fp16_hardware"]
    assert fact["explains_ms"] is None and fact["basis"] is None
    _causes_add_up(verdict)


def test_an_estimate_never_fills_what_is_left() -> None:
    """The shape of docs/examples/cpu-epyc-quick (no ops recorded, AVX2 EPYC): the device's missing fp16 is
    reported as a fact; nothing measured or estimated explains the 646 ms, and the verdict says so."""
    d = json.loads((EXAMPLES / "cpu-epyc-quick" / "results.json").read_text())
    diagnosis = diagnose_document(d)
    assert {v["outcome"] for v in diagnosis.to_dict()["verdicts"]} == {"slower"}
    for verdict in diagnosis.to_dict()["verdicts"]:
        assert verdict["explained_share"] < 1.0
        assert all(c["id"] not in HARDWARE_CAUSES for c in verdict["causes"])
        assert "no measured cause explains" in verdict["headline"] or "unexplained" in verdict["headline"]
        _causes_add_up(verdict)
    assert "no_fast_fp16_hardware" in {f["id"] for f in diagnosis.to_dict()["findings"]}


def test_every_example_verdict_adds_up_and_charges_hardware_only_16_bit_ops() -> None:
    for name in (*MEASURED_EXAMPLES, "cpu-epyc-quick"):
        d = json.loads((EXAMPLES / name / "results.json").read_text())
        for verdict in diagnose_document(d).to_dict()["verdicts"]:
            _causes_add_up(verdict)
            for cause in verdict["causes"]:
                if cause["id"] in HARDWARE_CAUSES:
                    assert all(o["dtype"] in ("float16", "bfloat16", "half") for o in cause["ops"]), name


def _switch_doc(fp16_off: float, fp32_off: float) -> dict[str, Any]:
    off = {"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}, "tests": "slow_fp16_kernels"}
    return doc(run("float32", 100.0), run("float16", 300.0),
               run("float32", fp32_off, variant="onednn_off", experiment=off),
               run("float16", fp16_off, variant="onednn_off", experiment=off))


def test_a_switch_that_sped_float32_as_much_confirms_no_16_bit_cause() -> None:
    """oneDNN off took 30 % off float16 and 30 % off float32 alike: float16/float32 is 3.0 in both settings, so
    the switch explains none of float16's difference against float32 (compared inside each setting, the log ratios
    cancel); it was credited with 90 ms of it, "confirmed by an experiment"."""
    (verdict,) = diagnose_document(_switch_doc(210.0, 70.0)).to_dict()["verdicts"]
    assert not any(c["basis"] == "experiment" or c.get("confirmed_by") for c in verdict["causes"])
    (moved,) = diagnose_document(_switch_doc(110.0, 95.0)).to_dict()["verdicts"]  # float16/float32: 3.0 -> 1.16
    assert any(c["id"] == "slow_fp16_kernels" and c.get("confirmed_by") == "onednn_off" for c in moved["causes"])


def test_a_float32_op_on_a_reference_kernel_is_no_16_bit_kernel_cause() -> None:
    # A mixed run's optimizer update stays float32; its ref:any kernel got slower, but no 16-bit kernel ran it.
    fp32_ops = [op("rmsprop", "optimizer", 20.0, "ref:any", "float32", "ResourceApplyRMSProp"),
                op("conv2d", "forward", 50.0, "brg_conv_fwd:avx10_1_512", "float32", "Conv2D")]
    mixed_ops = [op("rmsprop", "optimizer", 400.0, "ref:any", "float32", "ResourceApplyRMSProp"),
                 op("conv2d", "forward", 55.0, "brg_conv_fwd:avx10_1_512", "float16", "Conv2D")]
    diagnosis = diagnose_document(doc(
        run("float32", 100.0, ops={"source": "onednn_verbose", "coverage": 0.9, "items": fp32_ops}),
        run("mixed_float16", 480.0, ops={"source": "onednn_verbose", "coverage": 0.9, "items": mixed_ops})))
    (verdict,) = diagnosis.to_dict()["verdicts"]
    assert verdict["outcome"] == "slower"
    assert all(c["id"] != "slow_fp16_kernels" for c in verdict["causes"]), verdict["causes"]
    assert "slow_fp16_kernels" not in {f["id"] for f in diagnosis.to_dict()["findings"]}


def test_ops_that_moved_against_a_faster_step_are_named_with_their_time() -> None:
    # An A100: the 16-bit conv saved 100 ms, casts added 90 ms; the step is 10 ms faster. The casts are said.
    a100 = [{"index": 0, "name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}]
    fp32_ops = [op("conv2d", "forward", 150.0, "sm80_xmma_fprop_implicit_gemm_tf32", "float32", "Conv2D"),
                op("conv2d", "cast", 10.0, None, "float32", "Cast")]
    mixed_ops = [op("conv2d", "forward", 50.0, "sm80_xmma_fprop_implicit_gemm_f16f16", "float16", "Conv2D"),
                 op("conv2d", "cast", 100.0, None, "float16", "Cast")]
    d = doc(run("float32", 200.0, device="gpu:0", ops={"source": "tf_profiler", "coverage": 0.8, "items": fp32_ops}),
            run("mixed_float16", 190.0, device="gpu:0",
                ops={"source": "tf_profiler", "coverage": 0.8, "items": mixed_ops}), gpus=a100)
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    assert verdict["outcome"] == "faster" and verdict["cause"] == "fast_16bit_kernels"
    assert sum(c["explains_ms"] for c in verdict["causes"]) <= abs(verdict["difference_ms"]) + 0.01
    (against,) = verdict["against"]
    assert against["id"] == "cast_overhead" and against["ms"] == pytest.approx(90.0)
    assert "against it, casts and layout changes" in verdict["headline"] and "added 90 ms" in verdict["headline"]


def test_a_cause_is_charged_on_the_net_change_of_its_ops() -> None:
    # float16's conv forward lost 300 ms on a reference kernel, its backward gained 100 ms back on the same kind of
    # kernel: the cause is charged the net 200 ms, not the 300 ms that moved its way.
    fp32_ops = [op("conv2d", "forward", 50.0, "brg_conv_fwd:avx2", "float32", "Conv2D"),
                op("conv2d", "backward_data", 200.0, "brg_conv_bwd_d:avx2", "float32", "Conv2DBackpropInput")]
    fp16_ops = [op("conv2d", "forward", 350.0, "ref:any", "float16", "Conv2D"),
                op("conv2d", "backward_data", 100.0, "ref:any", "float16", "Conv2DBackpropInput")]
    d = doc(run("float32", 500.0, ops={"source": "onednn_verbose", "coverage": 0.9, "items": fp32_ops}),
            run("float16", 900.0, ops={"source": "onednn_verbose", "coverage": 0.9, "items": fp16_ops}),
            flags=EPYC_AVX2_FLAGS)
    (verdict,) = diagnose_document(d).to_dict()["verdicts"]
    slow = next(c for c in verdict["causes"] if c["id"] == "slow_fp16_kernels")
    assert slow["explains_ms"] == pytest.approx(200.0)


def test_a_step_cut_inside_leads_with_the_reference_kernel_it_was_still_running() -> None:
    """The Xeon's mixed_float16 first step, cut at its bound: the window holds only its later layers' backward pass,
    and the ops in flight at the cut (a reference weight gradient, a JIT data gradient) share the time to the cut.
    By shares the JIT kernel's 16-bit compute can come out ahead; the step was waiting for the reference kernel."""
    fp32_ops = [op("conv2d_2", "backward_weights", 3.0, "brg_conv_bwd_w:avx10_1_512", "float32"),
                op("conv2d_2", "backward_data", 3.0, "brg_conv_bwd_d:avx10_1_512", "float32",
                   "Conv2DBackpropInput")]
    cut_ops = [dict(op("conv2d_2", "backward_weights", 1800.0, "ref:any", "float16"), in_flight=True),
               dict(op("conv2d_2", "backward_data", 1900.0, "brg_conv_bwd:avx10_1_512", "float16",
                       "Conv2DBackpropInput"), in_flight=True)]
    cut = run("mixed_float16", 5800.0, bound=True, stop_reason="slow_step_bound", cut_in_step=True,
              bound_on="first_step", first_step_ms=5800.0,
              step_time_ms={"median": 5800.0, "p10": 5800.0, "p90": 5800.0, "n": 1, "censored": True},
              ops={"source": "onednn_verbose", "coverage": 0.85, "items": cut_ops})
    fp32 = run("float32", 125.0, first_step_ms=815.0,
               ops={"source": "onednn_verbose", "coverage": 0.9, "items": fp32_ops})
    (verdict,) = diagnose_document(doc(fp32, cut)).to_dict()["verdicts"]
    assert verdict["cause"] == "slow_fp16_kernels" and verdict["cut_in_step"] is True
    shares = {c["id"]: c["explains_ms"] for c in verdict["causes"]}
    assert shares["slow_16bit_compute"] > shares["slow_fp16_kernels"]  # the lead is not the larger share
    # A step that ran to its end is judged by its shares alone.
    finished = dict(cut, cut_in_step=None, step_time_ms={"median": 5800.0, "p10": 5800.0, "p90": 5800.0, "n": 1},
                    ops={"source": "onednn_verbose", "coverage": 0.85,
                         "items": [{k: v for k, v in item.items() if k != "in_flight"} for item in cut_ops]})
    (whole,) = diagnose_document(doc(fp32, finished)).to_dict()["verdicts"]
    assert whole["cause"] == "slow_16bit_compute"
