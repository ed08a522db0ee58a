"""The prescription: the fastest measured safe configuration per machine and stack, untested ideas labelled as
such with the command that measures them, and no advice that a measurement of the same machine contradicts."""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document
from fp16doctor.invocation import check_diagnose_argv
from fp16doctor.workload.paired import t_quantile

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attribution"))
from attribution_data import XEON  # noqa: E402
from test_analysis_recorded import recorded_doc  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
KERAS3 = {"tensorflow": "2.21.0", "keras": "3.15.1", "keras_backend": "tensorflow"}


def run(precision: str, step: float, machine: str = "host", variant: str = "original", device: str = "cpu",
        **extra: Any) -> dict[str, Any]:
    return {"stack": "host", "precision": precision, "variant": variant, "device": device, "status": "ok",
            "machine": machine, "software": KERAS3,
            "step_time_ms": {"median": step, "p10": step * 0.98, "p90": step * 1.02, "n": 20}, **extra}


def cpu_doc(*runs: dict[str, Any], flags: tuple[str, ...] = ("avx2", "f16c")) -> dict[str, Any]:
    return {"schema_version": 1, "host": {"cpu": {"model": "test CPU", "flags": list(flags)}, "gpus": []},
            "runs": list(runs)}


def only(prescriptions: list[dict[str, Any]], machine: str = "host") -> dict[str, Any]:
    found = [p for p in prescriptions if p["machine"] == machine]
    assert len(found) == 1, prescriptions
    return found[0]


def onednn_off_run(step: float) -> dict[str, Any]:
    return run("float16", step, variant="onednn_off",
               experiment={"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}, "tests": "slow_fp16_kernels"})


def recommends_onednn_off(finding: dict[str, Any]) -> bool:
    text = str(finding.get("recommendation", ""))
    return ("Set `TF_ENABLE_ONEDNN_OPTS=0`" in text or "Set TF_ENABLE_ONEDNN_OPTS=0" in text
            or "Try the switch" in text)


@pytest.mark.parametrize("with_onednn_off", [False, True], ids=["recorded", "plus-onednn-off-run"])
def test_xeon_prescription_is_mixed_bfloat16_and_nothing_recommends_onednn_off(with_onednn_off: bool) -> None:
    """The Xeon recording (windows only: each step time is its profiled window's wall time, no spread): its
    measured best is mixed_bfloat16; oneDNN off makes float16 faster but still far slower than float32."""
    doc = recorded_doc(XEON)
    if with_onednn_off:
        doc["runs"].append(onednn_off_run(823.0))  # the figure docs/benchmarks.md measured on that machine
    diagnosis = diagnose_document(doc)
    prescription = only(diagnosis.to_dict()["prescriptions"])
    chosen = prescription["recommended"]
    assert chosen["precision"] == "mixed_bfloat16" and chosen["setting"] is None
    assert chosen["speedup"] > 1 and chosen["speedup_interval"][0] > 1
    assert "set_dtype_policy('mixed_bfloat16')" in chosen["how"]
    assert prescription["headline"].startswith("Use mixed_bfloat16:")
    for finding in diagnosis.to_dict()["findings"]:
        assert not recommends_onednn_off(finding), finding
        recommends = finding.get("recommends") or {}
        if recommends.get("setting") == "TF_ENABLE_ONEDNN_OPTS=0":
            assert "Do not set" in finding["recommendation"]
            assert recommends["measured_speedup"] < 1
    assert diagnosis.to_dict()["findings"][0]["id"] == "bf16_preferred"  # the prescription's evidence ranks first


def test_avx2_example_prescribes_float32_and_quotes_every_measured_slowdown() -> None:
    doc = json.loads((EXAMPLES / "cpu-epyc-avx2-quick" / "results.json").read_text())
    diagnosis = diagnose_document(doc)
    assert only(diagnosis.to_dict()["prescriptions"])["recommended"]["precision"] == "float32"
    mixed = [f for f in diagnosis.to_dict()["findings"]
             if (f.get("instead_of") or {}).get("precision") == "mixed_float16"]
    assert mixed, "pure_float16_floatx sets mixed_float16 aside, measured slower"
    for finding in mixed:
        assert finding["instead_of"]["measured_speedup"] < 1
        assert finding["recommends"]["precision"] == "float32"  # the prescription, never the slower one
        assert "slower than float32" in finding["recommendation"]
    assert not any("better still" in str(f.get("recommendation")) for f in diagnosis.to_dict()["findings"])


def test_gpu_machines_each_get_their_own_fastest_safe_configuration() -> None:
    a100 = {"cpu": {"flags": ["avx2"]}, "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-40GB",
                                                  "compute_capability": "8.0"}]}
    t4 = {"cpu": {"flags": ["avx2"]}, "gpus": [{"index": 0, "name": "Tesla T4", "compute_capability": "7.5"}]}
    doc = {"schema_version": 1, "host": {"cpu": {"flags": ["avx2"]}, "gpus": []},
           "machines": {"a100": a100, "t4": t4},
           "runs": [run("float32", 100, "a100", device="gpu:0"),
                    run("mixed_float16", 60, "a100", device="gpu:0"),
                    run("mixed_bfloat16", 55, "a100", device="gpu:0"),
                    # fastest of all, but its loss went non-finite: not safe
                    run("float16", 40, "a100", device="gpu:0", loss={"first": 0.7, "last": None, "nan_or_inf": True}),
                    run("float32", 200, "t4", device="gpu:0"),
                    run("mixed_float16", 120, "t4", device="gpu:0"),
                    run("float16", 115, "t4", device="gpu:0", loss={"first": 0.7, "last": 0.5, "nan_or_inf": False})]}
    diagnosis = diagnose_document(doc)
    a100_p, t4_p = only(diagnosis.to_dict()["prescriptions"], "a100"), only(diagnosis.to_dict()["prescriptions"], "t4")
    assert a100_p["recommended"]["precision"] == "mixed_bfloat16"
    unsafe = next(m for m in a100_p["measured"] if m["precision"] == "float16")
    assert unsafe["unsafe"] and unsafe["speedup"] > a100_p["recommended"]["speedup"]
    # Pure float16 is eligible where its loss stayed finite, with its risk said in words.
    assert t4_p["recommended"]["precision"] == "float16"
    assert "pure fp16" in t4_p["recommended"]["caveat"] and "pure fp16" in t4_p["headline"]
    assert t4_p["recommended"]["speedup"] == pytest.approx(200 / 115, rel=1e-3)


def test_a_configuration_inside_the_noise_is_no_prescription() -> None:
    doc = cpu_doc(run("float32", 100), run("mixed_float16", 98))
    chosen = only(diagnose_document(doc).to_dict()["prescriptions"])["recommended"]
    assert chosen["precision"] == "float32" and chosen["speedup"] == 1.0


def test_controls_are_never_prescribed() -> None:
    doc = cpu_doc(run("float32", 100), run("float32", 40, variant="synthetic_input"), run("float16", 300))
    prescription = only(diagnose_document(doc).to_dict()["prescriptions"])
    assert prescription["recommended"]["variant"] == "original"
    assert all(m["variant"] != "synthetic_input" for m in prescription["measured"])


def test_a_setting_is_prescribed_only_when_it_wins_end_to_end() -> None:
    xla = {"changes": {"jit_compile": True}, "tests": "small_model_overhead"}
    wins = cpu_doc(run("float32", 100), run("mixed_float16", 90), run("mixed_float16", 50, variant="xla",
                                                                        experiment=xla))
    chosen = only(diagnose_document(wins).to_dict()["prescriptions"])["recommended"]
    assert (chosen["precision"], chosen["variant"], chosen["setting"]) == ("mixed_float16", "xla", "jit_compile=True")
    assert "jit_compile=True" in chosen["how"]


def test_a_median_with_no_spread_still_gets_a_prescription_under_the_default_band() -> None:
    doc = cpu_doc({"stack": "host", "precision": "float32", "device": "cpu", "status": "ok",
                   "step_time_ms": {"median": 100.0}},
                  {"stack": "host", "precision": "mixed_float16", "device": "cpu", "status": "ok",
                   "step_time_ms": {"median": 50.0}})
    prescription = only(diagnose_document(doc).to_dict()["prescriptions"])
    assert prescription["recommended"]["precision"] == "mixed_float16"
    assert "default band" in prescription["headline"]


INVOCATION = {"argv": ["fp16doctor", "diagnose", "--quick", "--stack", "cpu", "--stack", "tf2.10-cpu",
                       "--precision", "float16", "--out", "somewhere", "--docker-host", "tcp://ci:s3cret@gpu-box:2376"]}


def test_bf16_units_without_a_bf16_run_are_listed_untested_with_the_command() -> None:
    fp32, fp16 = run("float32", 100), run("float16", 400)
    fp32["stack"] = fp16["stack"] = "cpu"
    doc = cpu_doc(fp32, fp16, flags=("avx2", "f16c", "avx512_bf16", "amx_bf16"))
    doc["invocation"] = INVOCATION
    prescription = only(diagnose_document(doc).to_dict()["prescriptions"])
    idea = next(i for i in prescription["untested"] if i["precision"] == "mixed_bfloat16")
    assert "AMX_BF16" in idea["why"]
    # The invocation's engine and size are kept, its stacks narrowed to this run's, its password never written.
    assert idea["command"] == ("fp16doctor diagnose --stack cpu --no-host --quick --docker-host "
                               "tcp://ci:[REDACTED]@gpu-box:2376 --precision float32 --precision mixed_bfloat16")
    assert prescription["recommended"]["precision"] == "float32"


def test_the_hosts_untested_command_keeps_no_docker_host() -> None:
    # The same invocation, the host's own runs: diagnose refuses --docker-host without --stack.
    doc = cpu_doc(run("float32", 100), run("float16", 400), flags=("avx2", "f16c", "avx512_bf16", "amx_bf16"))
    doc["invocation"] = INVOCATION
    untested = only(diagnose_document(doc).to_dict()["prescriptions"])["untested"]
    idea = next(u for u in untested if u["precision"] == "mixed_bfloat16")
    assert idea["command"] == "fp16doctor diagnose --quick --precision float32 --precision mixed_bfloat16"
    assert all(check_diagnose_argv(u["command"].split()) is None for u in untested if u["command"])


def test_a_scripts_prescription_offers_no_channels_padded_command() -> None:
    # A Titan V run of the user's script with a 3-channel first conv: channels_padded changes the built-in model,
    # which a script's run cannot take (diagnose refuses --variant channels_padded with --script).
    volta = {"cpu": {"flags": ["avx2"]}, "gpus": [{"index": 0, "name": "NVIDIA TITAN V", "compute_capability": "7.0"}]}
    layers = [{"type": "Conv2D", "in_channels": 3, "out_channels": 32, "kernel": [3, 3], "output_shape": [224, 336, 32],
               "flops_per_example": 2.0e8}]
    script = {"name": "script", "script": "train.py", "batch_size": 32}
    runs = [run(p, ms, device="gpu:0", workload=script, model={"layers": layers, "flops_per_example": 2.0e8})
            for p, ms in (("float32", 100), ("mixed_float16", 80))]
    doc = {"schema_version": 1, "host": volta, "runs": runs,
           "invocation": {"argv": ["fp16doctor", "diagnose", "--script", "train.py"]}}
    diagnosis = diagnose_document(doc)
    assert "tensor_cores_not_eligible" in {f["id"] for f in diagnosis.to_dict()["findings"]}
    prescription = only(diagnosis.to_dict()["prescriptions"])
    padded = [u for u in prescription["untested"] if u["variant"] == "channels_padded"]
    assert all(u["command"] is None and u["no_command"] for u in padded), padded
    findings = diagnosis.to_dict()["findings"]
    for text in [str(u["command"]) for u in prescription["untested"]] + [str(f) for f in findings]:
        assert "--variant channels_padded" not in text or "--script" not in text


def test_untested_command_keeps_targeting_from_the_runs_when_no_invocation_is_recorded() -> None:
    fp32 = run("float32", 100, engine={"kind": "docker", "docker_host": "ssh://gpu-box"})
    fp32["stack"] = "tf2.21-gpu"
    doc = cpu_doc(fp32, flags=("avx512_bf16",))
    idea, = only(diagnose_document(doc).to_dict()["prescriptions"])["untested"]
    assert "--stack tf2.21-gpu" in idea["command"] and "--docker-host ssh://gpu-box" in idea["command"]


def test_untested_command_takes_the_engines_own_rerun_options_over_any_inference() -> None:
    # A Slurm node's run: the engine wrote how to run there again; nothing in the record says "docker".
    fp32 = run("float32", 100, engine={"kind": "slurm", "label": "slurm gpu-03",
                                       "rerun": ["--slurm", "--stack", "cpu", "--no-host"]})
    fp32["stack"] = "cpu"
    idea, = only(diagnose_document(cpu_doc(fp32, flags=("avx512_bf16",))).to_dict()["prescriptions"])["untested"]
    assert idea["command"] == ("fp16doctor diagnose --slurm --stack cpu --no-host --precision float32 "
                               "--precision mixed_bfloat16")
    assert check_diagnose_argv(idea["command"].split()) is None


def test_a_recommendation_of_an_unmeasured_configuration_says_it_is_untested() -> None:
    doc = recorded_doc(XEON)  # no mixed_float16 run
    floatx = next(f for f in diagnose_document(doc).to_dict()["findings"] if f["id"] == "pure_float16_floatx")
    assert floatx["recommends"] == {"precision": "mixed_float16", "variant": "original", "setting": None,
                                    "measured_speedup": None}
    assert "Untested: mixed_float16" in floatx["recommendation"]
    assert "`fp16doctor diagnose --precision float32 --precision mixed_float16` measures it" in floatx["recommendation"]
    assert "set_dtype_policy('mixed_float16')" not in floatx["recommendation"]  # no code for what nobody measured


def test_the_interleaved_example_prescribes_its_measured_mixed_bfloat16_from_its_rounds() -> None:
    """Measured on a 2-core AVX-512 BF16 EPYC (docs/examples/cpu-epyc-avx512bf16-quick): every verdict rests on
    its paired rounds, and the prescription is recomputed from them alone."""
    doc = json.loads((EXAMPLES / "cpu-epyc-avx512bf16-quick" / "results.json").read_text())
    diagnosis = diagnose_document(doc)
    assert all(v["interval_method"] == "paired_rounds" and v["repeats"] >= 3 for v in diagnosis.to_dict()["verdicts"])
    assert all(v["noise_floor_interval"][0] < 1 < v["noise_floor_interval"][1] for v in diagnosis.to_dict()["verdicts"])
    assert only(diagnosis.to_dict()["prescriptions"])["recommended"]["precision"] == "mixed_bfloat16"
    # Recomputed from the rounds alone: a t interval on the per-round log ratios against float32's own model.
    step = {r["precision"]: r["step_time_ms"] for r in doc["runs"] if r.get("variant", "original") == "original"}
    logs = [math.log(a / b) for a, b in zip(step["float32"]["rounds"], step["mixed_bfloat16"]["rounds"],
                                            strict=False)]
    mean, half = statistics.fmean(logs), t_quantile(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    assert only(diagnosis.to_dict()["prescriptions"])["recommended"]["speedup_interval"] == pytest.approx(
        [math.exp(mean - half), math.exp(mean + half)], abs=1e-4)



def test_a_smoke_size_prescription_says_its_timings_are_a_pipeline_check() -> None:
    doc = cpu_doc(run("float32", 20), run("mixed_float16", 60))
    assert "smoke size" not in only(diagnose_document(doc).to_dict()["prescriptions"])["headline"]
    doc["invocation"] = {"argv": ["fp16doctor", "diagnose", "--size", "smoke"], "size": "smoke"}
    headline = only(diagnose_document(doc).to_dict()["prescriptions"])["headline"]
    assert headline.startswith("Use float32:") and "the smoke size checks that everything runs" in headline
    assert "--quick or --full" in headline


def test_a_stack_that_ran_a_mixed_policy_is_never_said_to_have_none() -> None:
    """Unknown is unknown: a document names Keras 2.4 and no TensorFlow (so the tables would read multi-backend
    Keras, with no mixed precision API), and measured mixed_float16 on it: nothing says the stack has none, and a
    remedy steering to mixed precision is held to the measured run, not listed as unmeasurable."""
    def run(precision: str, ms: float) -> dict:
        return {"stack": "user", "precision": precision, "device": "gpu:0", "status": "ok",
                "software": {"keras": "2.4"}, "workload": {"batch_size": 64, "mode": "training"},
                "step_time_ms": {"median": ms, "p10": ms * 0.98, "p90": ms * 1.02}}

    doc = {"schema_version": 1, "host": {"gpus": [{"index": 0, "name": "Tesla V100-SXM2-16GB",
                                                     "compute_capability": "7.0"}]},
           "runs": [run("float32", 200.0), run("mixed_float16", 100.0), run("float16", 90.0)]}
    diagnosis = diagnose_document(doc)
    said = json.dumps({k: diagnosis.to_dict()[k] for k in ("findings", "prescriptions")})
    assert "no mixed precision API" not in said
    assert {m["precision"] for m in diagnosis.to_dict()["prescriptions"][0]["measured"]} >= {"mixed_float16", "float16"}
