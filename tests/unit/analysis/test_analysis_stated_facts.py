"""A likely cause from what a document holds, where nothing was measured: its batch against the device's size, the
facts it states of a run (cast ops, CPU fallbacks, copies per step, its notes' words), and a 16-bit type slower
than its sibling on a device the tables do not list. Data in, finding and likely_cause out."""

from __future__ import annotations

from typing import Any

from fp16doctor.analysis import diagnose_document
from fp16doctor.knowledge.stated import stated_facts

T4 = {"name": "Tesla T4", "compute_capability": "7.5"}


def _doc(gpu: dict[str, Any] | None, *steps: tuple[str, float], batch: int | None = 64, mode: str = "training",
         software: dict[str, str] | None = None, workload: dict[str, dict[str, Any]] | None = None,
         notes: dict[str, Any] | None = None) -> dict[str, Any]:
    runs = []
    for precision, ms in steps:
        run: dict[str, Any] = {
            "stack": "user", "precision": precision, "device": "gpu:0" if gpu else "cpu", "status": "ok",
            "software": dict(software or {"torch": "2.3.0"}), "step_time_ms": {"median": ms},
            "workload": {"mode": mode, **({"batch_size": batch} if batch else {}),
                         **(workload or {}).get(precision, {})}}
        if notes and precision in notes:
            run["notes"] = notes[precision]
        runs.append(run)
    return {"schema_version": 1, "host": {"gpus": [gpu] if gpu else [], "cpu": {"model": "x86", "flags": ["avx2"]}},
            "runs": runs}


def _verdict(diagnosis: Any, precision: str) -> dict[str, Any]:
    return next(v for v in diagnosis.to_dict()["verdicts"] if v["precision"] == precision)


def _finding(diagnosis: Any, fid: str) -> dict[str, Any] | None:
    return next((f for f in diagnosis.to_dict()["findings"] if f["id"] == fid), None)


def _likely(diagnosis: Any, precision: str) -> str | None:
    return (_verdict(diagnosis, precision)["likely_cause"] or {}).get("id")


# ---------------------------------------------------------------------------------------- batch and device size

def test_a_batch_of_one_on_a_big_gpu_is_launch_bound_without_a_larger_batch_measured() -> None:
    """The issue's T4 decoder reduced to its first report: batch 1, 111 ms float32, 166 ms float16, inference."""
    diagnosis = diagnose_document(_doc(T4, ("float32", 111.14), ("float16", 165.88), batch=1, mode="inference",
                                       software={"fastertransformer": "2.0"}))
    verdict = _verdict(diagnosis, "float16")
    assert verdict["likely_cause"]["id"] == "small_model_overhead"
    assert "batch of 32 or more" in verdict["likely_cause"]["confirm"]
    assert "probably because too little work per step" in verdict["headline"]
    assert "batch of 32 or more" in verdict["headline"]  # the measurement that would confirm it
    finding = _finding(diagnosis, "small_model_overhead")
    assert finding is not None and finding["confidence"] < 0.6  # facts, not a measured larger batch
    assert any("inference at batch 1 on the Tesla T4" in line for line in finding["evidence"])


def test_batch_two_in_training_on_a_v100_is_launch_bound_too() -> None:
    v100 = {"name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0"}
    diagnosis = diagnose_document(_doc(v100, ("float32", 40.0), ("mixed_float16", 46.0), batch=2))
    assert _likely(diagnosis, "mixed_float16") == "small_model_overhead"


def test_a_small_gpu_or_a_real_batch_or_a_16bit_gain_is_no_launch_bound_fact() -> None:
    gtx1050 = {"name": "GeForce GTX 1050", "compute_capability": "6.1"}
    small = diagnose_document(_doc(gtx1050, ("float32", 111.0), ("float16", 166.0), batch=1))
    assert _finding(small, "small_model_overhead") is None
    batched = diagnose_document(_doc(T4, ("float32", 111.0), ("float16", 166.0), batch=64))
    assert _finding(batched, "small_model_overhead") is None
    unknown = diagnose_document(_doc(T4, ("float32", 111.0), ("float16", 166.0), batch=None))
    assert _finding(unknown, "small_model_overhead") is None
    gained = diagnose_document(_doc(T4, ("float32", 111.0), ("float16", 60.0), batch=1))
    assert _finding(gained, "small_model_overhead") is None


# ---------------------------------------------------------------------------------------- the sibling rule

def test_two_16bit_types_on_a_device_the_tables_do_not_list() -> None:
    """An Apple GPU under MLX, no float32 run, bfloat16 1.65x slower than float16: a verdict and a finding (an M4: the
    tables say bfloat16 is converted on M1 and M2 only)."""
    apple = {"name": "Apple M4 Max"}
    diagnosis = diagnose_document(_doc(apple, ("float16", 20.0), ("bfloat16", 33.0), batch=1, mode="inference",
                                       software={"mlx": "0.21.0"}))
    verdict = _verdict(diagnosis, "bfloat16")
    assert verdict["baseline"] == "float16" and verdict["likely_cause"]["id"] == "framework_16bit_path"
    finding = _finding(diagnosis, "framework_16bit_path")
    assert finding is not None and finding["confidence"] < 0.6
    assert any("do not say whether" in line and "float16 ran 1.65x faster" in line for line in finding["evidence"])


def test_with_float32_a_type_behind_its_sibling_is_named_below_twice_float32() -> None:
    unknown = {"name": "Some Accelerator 9000"}
    diagnosis = diagnose_document(_doc(unknown, ("float32", 100.0), ("float16", 70.0), ("bfloat16", 130.0)))
    assert _likely(diagnosis, "bfloat16") == "framework_16bit_path"
    finding = _finding(diagnosis, "framework_16bit_path")
    assert finding is not None and finding["precisions"] == ["bfloat16"]


def test_the_sibling_rule_leaves_a_type_the_device_lacks_to_the_hardware_rules() -> None:
    v100 = {"name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0"}  # no bfloat16 arithmetic
    diagnosis = diagnose_document(_doc(v100, ("float16", 20.0), ("bfloat16", 45.0)))
    assert _finding(diagnosis, "framework_16bit_path") is None
    assert _likely(diagnosis, "bfloat16") == "bf16_unsupported"


# ---------------------------------------------------------------------------------------- stated facts

def test_stated_cast_ops_name_the_casts() -> None:
    a100 = {"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}
    diagnosis = diagnose_document(_doc(a100, ("float32", 100.0), ("mixed_float16", 118.0),
                                       workload={"mixed_float16": {"cast_ops_per_step": 412}}))
    assert _likely(diagnosis, "mixed_float16") == "cast_overhead"
    finding = _finding(diagnosis, "cast_overhead")
    assert finding is not None and any("412 cast ops per step" in line for line in finding["evidence"])
    assert finding["confidence"] == 0.55


def test_a_note_about_casts_is_a_weaker_fact() -> None:
    a100 = {"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}
    doc = _doc(a100, ("float32", 100.0), ("float16", 118.0),
               notes={"float16": "the profile shows weights cast to half every step (aten::to)"})
    diagnosis = diagnose_document(doc)
    assert _likely(diagnosis, "float16") == "cast_overhead"
    finding = _finding(diagnosis, "cast_overhead")
    assert finding is not None and finding["confidence"] == 0.4
    assert any("its notes:" in line for line in finding["evidence"])


def test_the_same_casts_in_float32_are_not_the_16bit_types() -> None:
    a100 = {"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}
    same = {"cast_ops_per_step": 40}
    diagnosis = diagnose_document(_doc(a100, ("float32", 100.0), ("mixed_float16", 118.0),
                                       workload={"float32": same, "mixed_float16": same}))
    assert _finding(diagnosis, "cast_overhead") is None


def test_a_stated_cpu_fallback_names_the_framework_path() -> None:
    diagnosis = diagnose_document(_doc({"name": "Apple M1 Pro"}, ("float32", 100.0), ("float16", 140.0),
                                       workload={"float16": {"cpu_fallback_ops": ["aten::layer_norm"]}}))
    assert _likely(diagnosis, "float16") == "framework_16bit_path"
    finding = _finding(diagnosis, "framework_16bit_path")
    assert finding is not None and any("aten::layer_norm on the CPU" in line for line in finding["evidence"])


def test_a_copy_every_step_names_the_host_side() -> None:
    diagnosis = diagnose_document(_doc(T4, ("float32", 100.0), ("float16", 112.0), batch=256,
                                       notes={"float16": "the loss is moved to the CPU with .item() every step"},
                                       workload={"float16": {"transfers_per_step": 3}}))
    assert _likely(diagnosis, "float16") == "input_pipeline_bound"
    finding = _finding(diagnosis, "input_pipeline_bound")
    assert finding is not None and "pinned memory" in finding["recommendation"]


def test_a_faster_16bit_run_needs_no_stated_fault() -> None:
    diagnosis = diagnose_document(_doc(T4, ("float32", 100.0), ("float16", 50.0),
                                       workload={"float16": {"cast_ops_per_step": 300}}))
    assert _finding(diagnosis, "cast_overhead") is None


def test_the_documents_own_description_is_never_read_as_a_fact() -> None:
    doc = _doc(T4, ("float32", 100.0), ("float16", 118.0))
    doc["note"] = "Maintainer: hundreds of cast ops after AMP; a layer falls back to the CPU"
    diagnosis = diagnose_document(doc)
    assert _finding(diagnosis, "cast_overhead") is None and _finding(diagnosis, "framework_16bit_path") is None


def test_stated_facts_read_fields_and_words() -> None:
    facts = stated_facts({"notes": ["LayerNorm falls back to the CPU for half"],
                          "workload": {"cast_ops_per_step": 412, "transfers_per_step": True,
                                       "cpu_fallback_ops": 2}})
    assert facts.cast_ops == 412 and facts.transfers is None and facts.cpu_fallback == 2
    assert facts.says("cpu_fallback") and facts.structured("casts") and not facts.says("transfer")
    assert not stated_facts({"workload": {"notes": "fast everywhere"}}).noted


def test_a_device_the_tables_lack_gets_what_the_runs_say() -> None:
    diagnosis = diagnose_document(_doc({"name": "Moore Threads MTT S80"}, ("float32", 100.0), ("float16", 130.0)))
    verdict = _verdict(diagnosis, "float16")
    assert verdict["likely_cause"] is None
    assert "do not list Moore Threads MTT S80" in verdict["no_likely_cause"]
    assert "1.30x slower" in verdict["no_likely_cause"]
    assert "do not list Moore Threads MTT S80" in verdict["headline"]


def test_cast_ops_listed_without_times_are_a_stated_count() -> None:
    run = {"ops": {"items": [{"name": "aten::to", "pass": "cast", "calls_per_step": 300},
                             {"name": "aten::_to_copy", "pass": "cast", "calls_per_step": 112},
                             {"name": "aten::mm", "pass": "forward", "ms_per_step": 3.0}]}}
    assert stated_facts(run).cast_ops == 412
    timed = {"ops": {"items": [{"name": "Cast", "pass": "cast", "ms_per_step": 2.0, "calls_per_step": 40}]}}
    assert stated_facts(timed).cast_ops is None  # a timed op is a measurement, for the measured rules


# ---------------------------------------------------------------------------------------- casts from the runs

def test_a_run_stating_far_more_casts_than_its_twin_on_another_stack_pays_for_them() -> None:
    gpu = {"name": "NVIDIA GPU (model not stated)"}
    runs = []
    for stack, casts, fp32_ms, ms in (("old-amp", 541, 390.0, 320.0), ("new-amp", 114, 390.0, 210.0)):
        for precision, step, stated in (("float32", fp32_ms, {}), ("mixed_float16", ms, {"cast_ops_per_step": casts})):
            runs.append({"stack": stack, "precision": precision, "device": "gpu:0", "status": "ok",
                         "software": {"paddlepaddle": "1.6"}, "step_time_ms": {"median": step},
                         "workload": {"name": "resnet50", "batch_size": 128, "mode": "training", **stated}})
    diagnosis = diagnose_document({"schema_version": 1, "host": {"gpus": [gpu]}, "runs": runs})
    finding = _finding(diagnosis, "cast_overhead")
    assert finding is not None and finding["stacks"] == ["old-amp"]
    assert any("541 cast ops per step" in line and "427 extra casts" in line for line in finding["evidence"])


def test_mixed_precision_far_slower_on_a_tiny_training_step_is_its_weight_casts() -> None:
    amd = {"name": "AMD Radeon 8060S", "gfx_arch": "gfx1151"}
    diagnosis = diagnose_document(_doc(amd, ("float32", 2.3), ("mixed_float16", 12.3), ("mixed_bfloat16", 4.0),
                                       batch=None, software={"ocannl": "0.6"}))
    assert _likely(diagnosis, "mixed_float16") == "cast_overhead"
    assert _likely(diagnosis, "mixed_bfloat16") == "cast_overhead"
    # Within 1.5x of float32 the launches both precisions pay say as much: no casts named from the step alone.
    near = diagnose_document(_doc(amd, ("float32", 2.3), ("mixed_float16", 3.0), batch=None))
    assert _finding(near, "cast_overhead") is None
    served = diagnose_document(_doc(amd, ("float32", 2.3), ("mixed_float16", 12.3), batch=None, mode="inference"))
    assert _finding(served, "cast_overhead") is None  # inference keeps no float32 weights to cast each step


def test_an_rtx_card_without_a_model_has_tensor_cores_and_native_fp16() -> None:
    from fp16doctor.knowledge.gpus import gpu_facts

    rtx = gpu_facts("NVIDIA RTX card (model not stated)", None)
    assert rtx.known and rtx.tensor_cores and rtx.native_16bit["float16"] is True
    assert rtx.native_16bit["bfloat16"] is None and rtx.compute_capability is None  # a floor, not a part
    assert not gpu_facts("NVIDIA GPU (model not stated)", None).known
    diagnosis = diagnose_document(_doc({"name": "NVIDIA RTX card (model not stated)"}, ("float32", 555.6),
                                       ("mixed_float16", 5000.0), batch=None, software={"keras_api": "tf_keras"}))
    assert _likely(diagnosis, "mixed_float16") == "framework_16bit_path"


def test_an_old_stack_that_measured_mixed_precision_slower_hands_over_no_mixed_code() -> None:
    v100 = {"name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0"}
    tf18 = {"tensorflow": "1.8.0", "cuda": "9.0"}
    diagnosis = diagnose_document(_doc(v100, ("float32", 330.0), ("mixed_float16", 13000.0), software=tf18))
    old = _finding(diagnosis, "old_stack")
    assert old is not None and "set_global_policy" not in old["recommendation"]
    assert "measure mixed precision again there (mixed_float16 measured 39x slower" in old["recommendation"]


def test_a_library_that_casts_around_missing_cpu_kernels_names_its_casts_before_the_cpu() -> None:
    doc = _doc(None, ("float32", 170.0), ("float16", 240.0), batch=1, mode="inference",
               software={"onnxruntime": "1.10"})
    doc["host"]["cpu"] = {"model": "Intel i5 (model not stated)"}
    diagnosis = diagnose_document(doc)
    assert {"no_fast_fp16_hardware", "cast_overhead"} <= {f["id"] for f in diagnosis.to_dict()["findings"]}
    assert _likely(diagnosis, "float16") == "cast_overhead"
    torch = _doc(None, ("float32", 170.0), ("float16", 240.0), batch=1, mode="inference")
    assert _likely(diagnose_document(torch), "float16") == "no_fast_fp16_hardware"  # PyTorch converts per op
