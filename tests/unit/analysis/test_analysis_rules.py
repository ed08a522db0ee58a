"""Each rule with the numbers that trigger it and the numbers that must not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fp16doctor.analysis import analyse
from fp16doctor.knowledge.frameworks import HOST_FP16_BATCH_ESTIMATE

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"

TITAN_V = {"index": 0, "name": "NVIDIA TITAN V", "compute_capability": "7.0"}
V100 = {"index": 0, "name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0"}
GTX1080 = {"index": 0, "name": "GeForce GTX 1080", "compute_capability": "6.1"}
GTX1660TI = {"index": 0, "name": "GeForce GTX 1660 Ti", "compute_capability": "7.5"}
P100 = {"index": 0, "name": "Tesla P100-PCIE-16GB", "compute_capability": "6.0"}
K80 = {"index": 0, "name": "Tesla K80", "compute_capability": "3.7"}
RTX2080TI = {"index": 0, "name": "GeForce RTX 2080 Ti", "compute_capability": "7.5"}
RTX3090 = {"index": 0, "name": "NVIDIA GeForce RTX 3090", "compute_capability": "8.6"}
A100 = {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}
H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}

KERAS215 = {"python": "3.5", "tensorflow": "1.7.0", "keras": "2.1.5", "keras_backend": "tensorflow",
            "keras_api": "keras2", "cuda": "9.0", "cudnn": "7.0"}
TF216 = {"python": "3.11", "tensorflow": "2.16.1", "keras": "3.3.3", "keras_backend": "tensorflow",
         "cuda": "12.3", "cudnn": "8.9"}
TF_KERAS_210 = {"tensorflow": "2.10.0", "keras_api": "tf_keras", "cuda": "11.2", "cudnn": "8.1"}
SEED = {"name": "seed_cnn", "image_height": 224, "image_width": 336, "channels": 3, "batch_size": 128}
EPYC_FLAGS = ["fma", "avx", "f16c", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512_bf16"]


def run(precision: str, ms: float, device: str = "gpu:0", software: dict[str, Any] | None = None,
        **extra: Any) -> dict[str, Any]:
    r: dict[str, Any] = {"stack": extra.pop("stack", "s"), "precision": precision,
                         "variant": extra.pop("variant", "original"), "device": device, "status": "ok",
                         "software": software if software is not None else {}, "step_time_ms": {"median": ms}}
    r.update(extra)
    return r


def doc(*runs: dict[str, Any], gpu: dict[str, Any] | None = None, cpu: dict[str, Any] | None = None,
        os: str | None = None) -> dict[str, Any]:
    host: dict[str, Any] = {"gpus": [gpu] if gpu else []}
    if cpu is not None:
        host["cpu"] = cpu
    if os:
        host["os"] = os
    return {"schema_version": 1, "host": host, "runs": list(runs)}


def ids(d: dict[str, Any]) -> set[str]:
    return {f["id"] for f in analyse(d)}


def finding(d: dict[str, Any], fid: str) -> dict[str, Any]:
    return next(f for f in analyse(d) if f["id"] == fid)


# --- fp16_faster ---


def test_fp16_faster_reports_the_measured_ratio() -> None:
    f = finding(doc(run("float32", 100), run("mixed_float16", 60), gpu=V100), "fp16_faster")
    assert "1.67x" in f["title"] and f["speedup"] == 1.667 and f["severity"] == "info"
    assert any("mixed_float16 step 60 ms vs float32 100 ms" in e for e in f["evidence"])


def test_fp16_faster_not_claimed_within_noise() -> None:
    assert "fp16_faster" not in ids(doc(run("float32", 100), run("mixed_float16", 97), gpu=V100))
    spread = {"median": 100, "p10": 80, "p90": 120}
    wide = doc(run("float32", 100, step_time_ms=spread), run("mixed_float16", 88, step_time_ms={"median": 88}),
               gpu=V100)
    assert "fp16_faster" not in ids(wide)


# --- no_fast_fp16_hardware ---


def test_pascal_consumer_runs_fp16_at_one_64th() -> None:
    f = finding(doc(run("float32", 100), run("float16", 300), gpu=GTX1080), "no_fast_fp16_hardware")
    assert f["severity"] == "critical"
    assert any("1/64" in e and "0.14 vs 8.87 TFLOPS" in e for e in f["evidence"])
    assert "no_tensor_cores" not in ids(doc(run("float32", 100), run("float16", 300), gpu=GTX1080))


def test_kepler_has_no_native_fp16() -> None:
    f = finding(doc(run("float32", 211), run("mixed_float16", 220), gpu=K80), "no_fast_fp16_hardware")
    assert any("no native fp16 arithmetic" in e for e in f["evidence"])


def test_cpu_without_avx512_fp16() -> None:
    d = doc(run("float32", 92, device="cpu"), run("float16", 880, device="cpu"),
            cpu={"model": "AMD EPYC", "cores": 2, "flags": EPYC_FLAGS})
    f = finding(d, "no_fast_fp16_hardware")
    assert f["confidence"] >= 0.9 and any("avx512_bf16" in line for line in f["evidence"])
    assert "mixed_bfloat16" in f["recommendation"]
    assert any("880 ms vs float32 92 ms" in e for e in f["evidence"])


def test_cpu_with_avx512_fp16_is_not_blamed() -> None:
    d = doc(run("float32", 92, device="cpu"), run("float16", 100, device="cpu"),
            cpu={"model": "Xeon", "flags": [*EPYC_FLAGS, "avx512_fp16"]})
    assert "no_fast_fp16_hardware" not in ids(d)


def test_cpu_without_flags_is_named_with_lower_confidence() -> None:
    d = doc(run("float32", 92, device="cpu"), run("float16", 880, device="cpu"))
    assert finding(d, "no_fast_fp16_hardware")["confidence"] < 0.7


def test_volta_and_gtx16_have_fast_fp16() -> None:
    for gpu in (TITAN_V, GTX1660TI, RTX3090):
        assert "no_fast_fp16_hardware" not in ids(doc(run("float32", 100), run("float16", 150), gpu=gpu))


# --- no_tensor_cores ---


def test_gtx_1660_ti_has_fast_fp16_but_no_tensor_cores() -> None:
    f = finding(doc(run("float32", 400), run("float16", 2000), gpu=GTX1660TI), "no_tensor_cores")
    assert any("only warns below compute capability 7.0" in e for e in f["evidence"])
    assert any("10.9 TFLOPS vs fp32 5.44" in e for e in f["evidence"])


def test_p100_has_no_tensor_cores() -> None:
    assert "no_tensor_cores" in ids(doc(run("float32", 100), run("mixed_float16", 90), gpu=P100))


def test_turing_rtx_has_tensor_cores() -> None:
    assert "no_tensor_cores" not in ids(doc(run("float32", 100), run("mixed_float16", 150), gpu=RTX2080TI))


# --- tensor_cores_not_eligible ---


def test_seed_first_convolution_with_three_channels() -> None:
    d = doc(run("float32", 500, software=KERAS215, workload=SEED), run("float16", 800, software=KERAS215,
                                                                      workload=SEED), gpu=TITAN_V)
    f = finding(d, "tensor_cores_not_eligible")
    assert f["severity"] == "warning"
    assert any("Conv2D 3->32" in e and "cuDNN 7.0 needs multiples of 8" in e for e in f["evidence"])
    # Padded channels were not measured: the command that measures them, no code before it is measured.
    assert "--variant channels_padded` measures it" in f["recommendation"] and "tf.pad" not in f["recommendation"]


def test_channels_in_multiples_of_8_are_eligible() -> None:
    model = {"layers": [{"type": "Conv2D", "in_channels": 32, "out_channels": 64, "kernel": [3, 3],
                         "output_shape": [56, 56, 64]}]}
    d = doc(run("float32", 50, model=model), run("mixed_float16", 40, model=model), gpu=V100)
    assert "tensor_cores_not_eligible" not in ids(d)


def test_no_eligibility_finding_without_tensor_cores() -> None:
    d = doc(run("float32", 500, workload=SEED), run("float16", 800, workload=SEED), gpu=GTX1080)
    assert "tensor_cores_not_eligible" not in ids(d)


def test_small_ineligible_share_on_new_cudnn_is_info() -> None:
    model = {"layers": [
        {"type": "Conv2D", "in_channels": 3, "out_channels": 8, "kernel": [3, 3], "output_shape": [8, 8, 8]},
        {"type": "Conv2D", "in_channels": 64, "out_channels": 64, "kernel": [3, 3], "output_shape": [64, 64, 64]},
    ]}
    d = doc(run("float32", 50, software=TF216, model=model), run("mixed_float16", 40, software=TF216, model=model),
            gpu=V100)
    assert finding(d, "tensor_cores_not_eligible")["severity"] == "info"


# --- input_pipeline_bound ---


def test_input_dominates_the_step() -> None:
    d = doc(run("float32", 500, input_time_ms={"median": 300}), run("float16", 520, input_time_ms={"median": 310}),
            gpu=V100)
    f = finding(d, "input_pipeline_bound")
    assert any("300 ms to produce a batch, 60% of the 500 ms step" in e for e in f["evidence"])


def test_small_input_share_is_not_a_bottleneck() -> None:
    d = doc(run("float32", 500, input_time_ms={"median": 100}), run("float16", 520, input_time_ms={"median": 100}),
            gpu=V100)
    assert "input_pipeline_bound" not in ids(d)


def test_synthetic_input_comparison() -> None:
    d = doc(run("float32", 500), run("float32", 200, variant="synthetic_input"), gpu=V100)
    f = finding(d, "input_pipeline_bound")
    assert any("500 ms per step reading images vs 200 ms with synthetic" in e for e in f["evidence"])


def test_keras2_input_advice_uses_fit_generator_workers() -> None:
    d = doc(run("float32", 500, software=KERAS215, input_time_ms={"median": 400}), gpu=V100)
    assert "workers=4, use_multiprocessing=True" in finding(d, "input_pipeline_bound")["recommendation"]


# --- host_fp16_emulation ---


def test_measured_host_fp16_batches() -> None:
    d = doc(run("float32", 503, software=KERAS215, input_time_ms={"median": 26}),
            run("float16", 812, software=KERAS215, input_time_ms={"median": 171}), gpu=TITAN_V)
    f = finding(d, "host_fp16_emulation")
    assert f["confidence"] >= 0.9
    assert any("171 ms per batch building float16 images vs 26 ms in float32" in e for e in f["evidence"])


def test_measured_equal_input_overrides_the_inference() -> None:
    d = doc(run("float32", 500, software=KERAS215, workload=SEED, input_time_ms={"median": 26}),
            run("float16", 800, software=KERAS215, workload=SEED, input_time_ms={"median": 27}), gpu=TITAN_V)
    assert "host_fp16_emulation" not in ids(d)


def test_inferred_for_keras_215_generator() -> None:
    d = doc(run("float32", 500, software=KERAS215, workload=SEED), run("float16", 800, software=KERAS215,
                                                                      workload=SEED), gpu=TITAN_V)
    f = finding(d, "host_fp16_emulation")
    assert 0.5 < f["confidence"] < 0.8
    assert "no dtype argument" in f["recommendation"]


def test_the_reference_host_timing_is_quoted_as_measured_and_a_scaled_one_as_scaled() -> None:
    measured = {**SEED, "image_height": 112, "image_width": 168, "batch_size": 32}  # the measurement's own size
    f = finding(doc(run("float32", 500, software=KERAS215, workload=measured),
                    run("float16", 800, software=KERAS215, workload=measured), gpu=TITAN_V), "host_fp16_emulation")
    line = next(e for e in f["evidence"] if "was measured" in e)
    assert "101.9 ms per batch of 32 images of 112x168 in float16 vs 61.0 ms in float32" in line
    assert "scaled" not in line
    f = finding(doc(run("float32", 500, software=KERAS215, workload=SEED),
                    run("float16", 800, software=KERAS215, workload=SEED), gpu=TITAN_V), "host_fp16_emulation")
    line = next(e for e in f["evidence"] if "was measured" in e)
    assert "101.9 ms per batch of 32 images of 112x168 in float16" in line  # what was measured, as measured
    # 128 images of 224x336 are 16 times the work: 1630 vs 976 ms.
    assert "about 1630 vs 976 ms scaled to this run's batch of 128 at 224x336" in line


def test_the_host_batch_estimate_is_the_tf1_7_twins_own_measurement() -> None:
    """The estimate quoted where nothing was measured is fp16doctor's measurement on the tf1.7-cpu stack: its
    figures, batch and image size are those of the example that recorded it."""
    example = json.loads((EXAMPLES / "cpu-epyc-avx2-three-stacks-quick" / "results.json").read_text())
    runs = {r["precision"]: r for r in example["runs"] if r["variant"] == "original" and r["stack"] == "tf1.7-cpu"}
    est = HOST_FP16_BATCH_ESTIMATE
    assert round(runs["float16"]["input_time_ms"]["median"], 1) == est.float16_ms
    assert round(runs["float32"]["input_time_ms"]["median"], 1) == est.float32_ms
    assert runs["float16"]["batch_dtype"] == "float16" and runs["float32"]["batch_dtype"] == "float32"
    for r in runs.values():
        workload, software = r["workload"], r["software"]
        assert (workload["batch_size"], workload["image_height"], workload["image_width"]) == (
            est.batch_size, est.image_height, est.image_width)
        assert software["keras"] == "2.1.5" and r["stack"] == "tf1.7-cpu"


def test_keras_224_generator_yields_float32() -> None:
    sw = {**KERAS215, "tensorflow": "1.13.1", "keras": "2.2.4", "cuda": "10.0", "cudnn": "7.4.1"}
    d = doc(run("float32", 500, software=sw, workload=SEED), run("float16", 480, software=sw, workload=SEED),
            gpu=TITAN_V)
    assert "host_fp16_emulation" not in ids(d)


def test_cpu_run_needs_measured_input_time() -> None:
    cpu = {"model": "AMD EPYC", "flags": EPYC_FLAGS}
    quiet = doc(run("float32", 92, device="cpu", workload=SEED, software=TF216),
                run("float16", 880, device="cpu", workload=SEED, software=TF216), cpu=cpu)
    assert "host_fp16_emulation" not in ids(quiet)
    measured = doc(run("float32", 92, device="cpu", software=TF216, input_time_ms={"median": 20}),
                   run("float16", 880, device="cpu", software=TF216, input_time_ms={"median": 95}), cpu=cpu)
    assert {"no_fast_fp16_hardware", "host_fp16_emulation"} <= ids(measured)


# --- cast_overhead ---


def test_mixed_slower_than_pure_float16() -> None:
    d = doc(run("float32", 92, device="cpu"), run("float16", 880, device="cpu"),
            run("mixed_float16", 990, device="cpu"))
    f = finding(d, "cast_overhead")
    assert any("cost 110 ms per step" in e for e in f["evidence"])


def test_mixed_close_to_pure_float16_is_no_cast_problem() -> None:
    d = doc(run("float32", 100), run("float16", 80), run("mixed_float16", 84), gpu=V100)
    assert "cast_overhead" not in ids(d)


def test_mixed_slower_than_pure_float16_within_the_measured_spread_is_no_cast_cost() -> None:
    def spread(ms: float, plus_minus: float) -> dict[str, Any]:
        return {"median": ms, "p10": ms * (1 - plus_minus), "p90": ms * (1 + plus_minus), "n": 20}

    noisy = doc(run("float32", 100), run("float16", 80, step_time_ms=spread(80, 0.2)),
                run("mixed_float16", 94, step_time_ms=spread(94, 0.2)), gpu=V100)
    assert "cast_overhead" not in ids(noisy)
    steady = doc(run("float32", 100), run("float16", 80, step_time_ms=spread(80, 0.01)),
                 run("mixed_float16", 94, step_time_ms=spread(94, 0.01)), gpu=V100)
    assert "cast_overhead" in ids(steady)


# --- small_model_overhead ---

MNIST = {"layers": [
    {"type": "Conv2D", "in_channels": 1, "out_channels": 10, "kernel": [5, 5], "output_shape": [24, 24, 10]},
    {"type": "Conv2D", "in_channels": 10, "out_channels": 20, "kernel": [5, 5], "output_shape": [8, 8, 20]},
    {"type": "Dense", "in_channels": 320, "out_channels": 50, "output_shape": [50]},
]}


def test_tiny_model_on_a_big_gpu() -> None:
    wl = {"name": "mnist", "batch_size": 64}
    d = doc(run("float32", 3.3, model=MNIST, workload=wl), run("mixed_float16", 3.7, model=MNIST, workload=wl),
            gpu=TITAN_V)
    f = finding(d, "small_model_overhead")
    assert f["confidence"] >= 0.8 and any("best case is" in e for e in f["evidence"])


def test_tiny_step_without_model_lowers_confidence() -> None:
    f = finding(doc(run("float32", 4), run("mixed_float16", 5), gpu=V100), "small_model_overhead")
    assert f["confidence"] <= 0.6


def test_big_step_is_not_small_model() -> None:
    d = doc(run("float32", 500, workload=SEED), run("float16", 800, workload=SEED), gpu=TITAN_V)
    assert "small_model_overhead" not in ids(d)
    assert "small_model_overhead" not in ids(doc(run("float32", 40), run("mixed_float16", 45), gpu=V100))


# --- old_stack ---


def test_tf17_keras215_cudnn70_is_old() -> None:
    d = doc(run("float32", 500, software=KERAS215, workload=SEED), run("float16", 800, software=KERAS215,
                                                                      workload=SEED), gpu=TITAN_V)
    f = finding(d, "old_stack")
    text = " ".join(f["evidence"])
    assert "TensorFlow 1.7.0 predates 1.14" in text and "cuDNN 7.0" in text and "Keras 2.1.5" in text
    assert "at most" in text and "measured 1.60x slower" in text
    assert "set_global_policy('mixed_float16')" in f["recommendation"]


def test_current_stack_is_not_old() -> None:
    d = doc(run("float32", 100, software=TF216), run("mixed_float16", 60, software=TF216), gpu=V100)
    assert "old_stack" not in ids(d)


def test_upgrade_cannot_help_pascal_consumer() -> None:
    d = doc(run("float32", 100, software=KERAS215), run("float16", 300, software=KERAS215), gpu=GTX1080)
    assert "old_stack" not in ids(d)


def test_old_pytorch_without_amp() -> None:
    sw = {"torch": "1.4.0", "cuda": "10.1"}
    f = finding(doc(run("float32", 100, software=sw), run("mixed_float16", 90, software=sw), gpu=V100), "old_stack")
    assert "torch.cuda.amp" in " ".join(f["evidence"]) and "autocast" in f["recommendation"]


# --- pure_float16_floatx ---


def test_floatx_float16_is_pure_fp16_with_stack_specific_fix() -> None:
    keras2 = finding(doc(run("float32", 500, software=KERAS215), run("float16", 800, software=KERAS215),
                         gpu=TITAN_V), "pure_float16_floatx")
    # Keras 2.1.5 has no mixed precision to measure: untested, without a command, and why.
    assert "1e-07" in keras2["evidence"][0] and "Keras 2.1.5" in keras2["recommendation"]
    assert "has no mixed precision API" in keras2["recommendation"]
    tfk = finding(doc(run("float32", 100, software=TF_KERAS_210), run("float16", 80, software=TF_KERAS_210),
                      gpu=V100), "pure_float16_floatx")
    assert "--precision mixed_float16` measures it" in tfk["recommendation"]
    assert tfk["severity"] == "info"  # fp16 was faster: advice, not the cause of a slowdown
    jax_sw = {"keras": "3.15.0", "keras_backend": "jax", "jax": "0.4.30"}
    k3 = finding(doc(run("float32", 100, software=jax_sw), run("float16", 120, software=jax_sw), gpu=V100),
                 "pure_float16_floatx")
    assert "--precision mixed_float16` measures it" in k3["recommendation"]
    torch_sw = {"torch": "2.3.0"}
    loss = {"first": 2.3, "last": 1.1}
    pt = finding(doc(run("float32", 100, software=torch_sw, loss=loss), run("float16", 120, software=torch_sw,
                                                                            loss=loss), gpu=V100),
                 "pure_float16_floatx")
    assert "model.half()" in pt["evidence"][0] and "--precision mixed_float16` measures it" in pt["recommendation"]


def test_half_precision_inference_outside_keras_is_not_called_pure_fp16_training() -> None:
    torch_sw = {"torch": "2.3.0"}
    d = doc(run("float32", 100, software=torch_sw), run("float16", 120, software=torch_sw), gpu=V100)
    assert "pure_float16_floatx" not in ids(d)


def test_mixed_precision_only_is_not_pure_fp16() -> None:
    assert "pure_float16_floatx" not in ids(doc(run("float32", 100), run("mixed_float16", 60), gpu=V100))


# --- numerics_unstable ---


def test_nan_loss_in_fp16_only() -> None:
    d = doc(run("float32", 100, loss={"first": 0.69, "last": 0.5, "nan_or_inf": False}),
            run("float16", 90, loss={"first": 0.69, "last": None, "nan_or_inf": True}), gpu=V100)
    f = finding(d, "numerics_unstable")
    assert f["severity"] == "critical" and f["rank"] == 1


def test_stalled_fp16_loss_over_equal_steps() -> None:
    falling = [0.69 - 0.015 * i for i in range(20)]  # float32 improves 0.29, 10x its step-to-step change
    flat = [0.69, 0.70] * 10
    d = doc(run("float32", 100, losses=falling, loss={"first": falling[0], "last": falling[-1]}),
            run("float16", 90, losses=flat, loss={"first": flat[0], "last": flat[-1]}), gpu=V100)
    f = finding(d, "numerics_unstable")
    assert f["severity"] == "warning" and f["explains_ms"] is None


def test_a_noisy_16bit_curve_beside_a_slowly_falling_float32_is_not_a_stall() -> None:
    # Measured (quick diagnose, TF 2.21 on a 2-core AMD EPYC): float32 fell steadily, mixed_float16 jumped
    # around a flat line by more than float32 gained; its loss scale never moved. Eight steps show no stall.
    falling = [0.70074, 0.691578, 0.688692, 0.686852, 0.684814, 0.681098, 0.678182, 0.673011]
    noisy = [0.658639, 0.697187, 0.677181, 0.68387, 0.689207, 0.682883, 0.697731, 0.67932]
    d = doc(run("float32", 510, losses=falling, loss={"first": falling[0], "last": falling[-1]}),
            run("mixed_float16", 1045, losses=noisy,
                loss={"first": noisy[0], "last": noisy[-1], "scale_first": 32768.0, "scale_last": 32768.0}),
            gpu=V100)
    assert "numerics_unstable" not in ids(d)


def test_a_quick_runs_few_steps_claim_no_stall_and_leave_the_prescription_alone() -> None:
    """Ten steps of each: float32 fell, mixed_bfloat16 did not. At the quick size that is a noisy start, not a
    stall: the faster configuration stays prescribed instead of flipping to float32 on a rerun's luck."""
    from fp16doctor.analysis import diagnose_document

    falling = [0.69 - 0.03 * i for i in range(10)]
    flat = [0.69, 0.70] * 5
    d = doc(run("float32", 100, losses=falling, loss={"first": falling[0], "last": falling[-1]}),
            run("mixed_bfloat16", 50, losses=flat, loss={"first": flat[0], "last": flat[-1]}))
    assert "numerics_unstable" not in ids(d)
    (prescription,) = diagnose_document(d).to_dict()["prescriptions"]
    assert prescription["recommended"]["precision"] == "mixed_bfloat16"


def test_first_and_last_loss_alone_are_noise_not_instability() -> None:
    # Five noisy numbers of a quick run: no claim without the per-step curve.
    d = doc(run("float32", 100, loss={"first": 0.69, "last": 0.40}),
            run("float16", 90, loss={"first": 0.69, "last": 0.69}), gpu=V100)
    assert "numerics_unstable" not in ids(d)


def test_collapsing_loss_scale_is_unstable() -> None:
    d = doc(run("float32", 100), run("mixed_float16", 90, loss={"scale_first": 32768.0, "scale_last": 0.5}),
            gpu=V100)
    assert finding(d, "numerics_unstable")["severity"] == "critical"


def test_both_improving_is_stable() -> None:
    d = doc(run("float32", 100, loss={"first": 0.69, "last": 0.40}),
            run("float16", 90, loss={"first": 0.69, "last": 0.42}), gpu=V100)
    assert "numerics_unstable" not in ids(d)


# --- measurement_warmup ---


def test_first_step_much_slower() -> None:
    d = doc(run("float32", 512, first_step_ms=4200, workload=SEED), gpu=TITAN_V)
    f = finding(d, "measurement_warmup")
    assert any("first step 4200 ms vs 512 ms steady" in e and "4 steps per epoch" in e for e in f["evidence"])


def test_modest_first_step_is_fine() -> None:
    assert "measurement_warmup" not in ids(doc(run("float32", 500, first_step_ms=600), gpu=TITAN_V))


# --- tf32_baseline ---


def test_tf32_on_ampere_with_tf_2x() -> None:
    sw = {"tensorflow": "2.8.0", "keras_api": "tf_keras"}
    f = finding(doc(run("float32", 100, software=sw), run("mixed_float16", 80, software=sw), gpu=A100),
                "tf32_baseline")
    assert "enable_tensor_float_32_execution(False)" in f["recommendation"]
    assert any("156 TFLOPS vs 19.5" in e for e in f["evidence"])


def test_no_tf32_baseline_where_tf32_is_no_faster_than_fp32() -> None:
    sw = {"tensorflow": "2.8.0", "keras_api": "tf_keras"}
    assert "tf32_baseline" not in ids(doc(run("float32", 100, software=sw), gpu=RTX3090))


def test_no_tf32_before_tf_24_or_before_ampere() -> None:
    old = {"tensorflow": "2.3.0"}
    assert "tf32_baseline" not in ids(doc(run("float32", 100, software=old), gpu=A100))
    assert "tf32_baseline" not in ids(doc(run("float32", 100, software=TF216), gpu=V100))


def test_pytorch_112_matmul_only_has_no_tf32_but_convs_do() -> None:
    sw = {"torch": "2.1.0"}
    dense = {"layers": [{"type": "Linear", "in_channels": 4096, "out_channels": 4096, "output_shape": [4096]}]}
    conv = {"layers": [{"type": "Conv2D", "in_channels": 64, "out_channels": 64, "kernel": [3, 3],
                        "output_shape": [56, 56, 64]}]}
    assert "tf32_baseline" not in ids(doc(run("float32", 100, software=sw, model=dense), gpu=H100))
    assert "tf32_baseline" in ids(doc(run("float32", 100, software=sw, model=conv), gpu=H100))


# --- stack_incompatible_gpu ---


def test_cuda_10_cannot_target_ampere() -> None:
    sw = {"tensorflow": "1.15.0", "cuda": "10.0", "cudnn": "7.6"}
    f = finding(doc(run("float32", 100, software=sw), gpu=RTX3090), "stack_incompatible_gpu")
    assert f["severity"] == "critical" and "TensorFlow 2.4 or later" in f["recommendation"]


def test_cuda_12_dropped_kepler() -> None:
    sw = {"torch": "2.3.0", "cuda": "12.1"}
    f = finding(doc(run("float32", 100, software=sw), gpu=K80), "stack_incompatible_gpu")
    assert any("no longer supports compute capability 3.7" in e for e in f["evidence"])


def test_driver_too_old_for_the_runtime_on_linux_only() -> None:
    sw = {"tensorflow": "2.10.0", "cuda": "11.2", "cudnn": "8.1"}
    gpu = {**V100, "driver_version": "418.87"}
    f = finding(doc(run("float32", 100, software=sw), gpu=gpu, os="Ubuntu 18.04"), "stack_incompatible_gpu")
    assert any("needs Linux driver >= 450.80.02; this host has 418.87" in e for e in f["evidence"])
    assert "stack_incompatible_gpu" not in ids(doc(run("float32", 100, software=sw), gpu=gpu, os="Windows 10"))


def test_matching_stack_is_compatible() -> None:
    sw = {"torch": "2.3.0", "cuda": "12.1"}
    gpu = {**H100, "driver_version": "550.54.15"}
    assert "stack_incompatible_gpu" not in ids(doc(run("float32", 100, software=sw), gpu=gpu, os="Ubuntu 22.04"))


def test_failed_run_with_no_kernel_image() -> None:
    failed = {"stack": "tf1", "precision": "float32", "device": "gpu:0", "status": "failed",
              "error": "CUDA error: no kernel image is available for execution on the device"}
    assert "stack_incompatible_gpu" in ids(doc(failed, gpu=H100))


# --- whole analysis ---


def test_hand_written_minimum_still_explains() -> None:
    d = doc(run("float32", 500), run("float16", 800), gpu={"name": "GeForce GTX 1070"})
    found = analyse(d)
    assert [f["id"] for f in found][:1] == ["no_fast_fp16_hardware"]
    assert all(f["rank"] == i for i, f in enumerate(found, start=1))


def test_nothing_to_say_about_no_runs() -> None:
    assert analyse(doc(gpu=V100)) == []


def test_unknown_gpu_name_falls_back_to_compute_capability() -> None:
    d = doc(run("float32", 100), run("float16", 300), gpu={"name": "Some Pascal board", "compute_capability": "6.1"})
    f = finding(d, "no_fast_fp16_hardware")
    assert f["confidence"] < finding(doc(run("float32", 100), run("float16", 300), gpu=GTX1080),
                                     "no_fast_fp16_hardware")["confidence"]


def test_small_but_clear_host_fp16_excess_is_reported_as_minor() -> None:
    # Input times as diagnose measured them on the 2-core EPYC: ranges apart, but tiny beside the step.
    d = doc(run("float32", 354, device="cpu", input_time_ms={"median": 22.8, "p10": 19.5, "p90": 24.4}),
            run("float16", 1400, device="cpu", input_time_ms={"median": 28.6, "p10": 26.9, "p90": 34.7}),
            cpu={"model": "AMD EPYC", "flags": EPYC_FLAGS})
    f = finding(d, "host_fp16_emulation")
    assert f["severity"] == "info" and any("0.4% of the 1400 ms step" in e for e in f["evidence"])
    overlapping = doc(run("float32", 354, device="cpu", input_time_ms={"median": 22.8, "p10": 19.5, "p90": 27}),
                      run("float16", 1400, device="cpu", input_time_ms={"median": 25.0, "p10": 21, "p90": 30}))
    assert "host_fp16_emulation" not in ids(overlapping)


def test_warmup_uses_the_workloads_own_epoch_length() -> None:
    wl = {"name": "seed_cnn", "batch_size": 32, "images": 320}
    f = finding(doc(run("float32", 100, first_step_ms=2000, workload=wl), gpu=V100), "measurement_warmup")
    assert any("with 10 steps per epoch" in e for e in f["evidence"])


def test_old_stack_is_advice_only_when_fp16_already_wins() -> None:
    sw = {**KERAS215, "tensorflow": "1.13.1", "keras": "2.2.4", "cuda": "10.0", "cudnn": "7.4.1"}
    d = doc(run("float32", 500, software=sw, workload=SEED), run("float16", 450, software=sw, workload=SEED),
            gpu=TITAN_V)
    f = finding(d, "old_stack")
    assert f["severity"] == "info"
    assert not any("after an upgrade to CUDA 10.0" in e for e in f["evidence"])  # that is this stack already
    assert "Expected gain: up to" in f["recommendation"]


def test_input_bound_inferred_for_the_seed_script_when_the_gpu_is_mostly_idle() -> None:
    d = doc(run("float32", 500, software=KERAS215, workload=SEED), run("float16", 800, software=KERAS215,
                                                                      workload=SEED), gpu=TITAN_V)
    f = finding(d, "input_pipeline_bound")
    assert f["confidence"] == 0.5 and "not measured" in f["evidence"][0]
    assert "workers=4, use_multiprocessing=True" in f["recommendation"]
    measured = doc(run("float32", 500, software=KERAS215, workload=SEED, input_time_ms={"median": 40}),
                   run("float16", 800, software=KERAS215, workload=SEED, input_time_ms={"median": 45}), gpu=TITAN_V)
    assert "input_pipeline_bound" not in ids(measured)


def test_p100_on_tensorflow_names_the_fp32_compute_default() -> None:
    sw = {"tensorflow": "1.4.0", "cuda": "9.0", "cudnn": "7.0"}
    f = finding(doc(run("float32", 3.3, software=sw), run("float16", 4.0, software=sw), gpu=P100), "no_tensor_cores")
    assert any("TF_FP16_CONV_USE_FP32_COMPUTE=0" in e for e in f["evidence"])
    # No variant sets them: named untested, without a command, with why.
    assert ("fp16doctor cannot measure it (no fp16doctor variant sets these variables): mixed_float16 with "
            "TF_FP16_CONV_USE_FP32_COMPUTE=0 TF_FP16_MATMUL_USE_FP32_COMPUTE=0") in f["recommendation"]
    torch = finding(doc(run("float32", 3.3, software={"torch": "2.1"}), run("float16", 4.0, software={"torch": "2.1"}),
                        gpu=P100), "no_tensor_cores")
    assert not any("TF_FP16" in e for e in torch["evidence"])
    old = finding(doc(run("float32", 3.3, software=sw), run("float16", 4.0, software=sw), gpu=P100), "old_stack")
    assert "NHWC" not in old["evidence"][0]  # no Tensor Cores, so no Tensor Core path to miss


# --- one machine per comparison: a rule pairs runs of one machine only


def _engine(name: str, gpu: dict[str, Any] | None = None) -> dict[str, Any]:
    engine: dict[str, Any] = {"kind": "docker", "docker_host": f"ssh://{name}", "name": name}
    if gpu is not None:
        engine.update(gpu_name=gpu["name"], gpu_compute_capability=gpu["compute_capability"])
    return engine


def test_an_in_memory_control_on_another_machine_is_no_control() -> None:
    """Machine a read images at 500 ms a step; the synthetic-input control ran on machine b at 200 ms. The 300 ms
    between them are two machines, not the input pipeline; on one machine the same numbers are."""
    apart = doc(run("float32", 500, engine=_engine("a", V100)),
                run("float32", 200, variant="synthetic_input", engine=_engine("b", V100)))
    assert "input_pipeline_bound" not in ids(apart)
    together = doc(run("float32", 500, engine=_engine("a", V100)),
                   run("float32", 200, variant="synthetic_input", engine=_engine("a", V100)))
    assert "input_pipeline_bound" in ids(together)


def test_mixed_precision_casts_are_judged_against_pure_float16_of_the_same_machine() -> None:
    """mixed_float16 took 500 ms on machine a, pure float16 200 ms on machine b: no cast cost is measured there."""
    a, b = _engine("a", V100), _engine("b", V100)
    apart = doc(run("float32", 400, engine=a), run("mixed_float16", 500, engine=a),
                run("float32", 400, engine=b), run("float16", 200, engine=b))
    assert "cast_overhead" not in ids(apart)
    together = doc(run("float32", 400, engine=a), run("mixed_float16", 500, engine=a),
                   run("float16", 200, engine=a))
    assert "cast_overhead" in ids(together)


def test_a_small_model_is_judged_by_the_roofline_of_its_own_machines_gpu() -> None:
    """Same stack on two machines: an A100 (in the table of peak rates) whose 40 ms step is mostly overhead, and a
    GPU the table does not know, at 45 ms. Only the A100's step is judged against the A100's best case."""
    seed = {**SEED, "batch_size": 32, "image_height": 112, "image_width": 168}
    a = _engine("a", A100)
    b = _engine("b", {"name": "Example Accelerator 9000", "compute_capability": "8.9"})
    d = doc(run("float32", 40, engine=a, workload=seed, software=TF216),
            run("mixed_float16", 38, engine=a, workload=seed, software=TF216),
            run("float32", 45, engine=b, workload=seed, software=TF216),
            run("mixed_float16", 44, engine=b, workload=seed, software=TF216))
    f = finding(d, "small_model_overhead")
    assert any("float32 step 40 ms" in e for e in f["evidence"])
    assert not any("float32 step 45 ms" in e for e in f["evidence"])
