"""How an interleaved rounds process's record enters the runs it timed (engines/rounds.py), from the rounds the phase
plans (diagnose/rounds.py, tested in tests/unit/diagnose/test_diagnose_rounds.py)."""

from __future__ import annotations

from typing import Any

import pytest

from fp16doctor.diagnose.rounds import rounds_plan
from fp16doctor.engines.rounds import AA_CONTROL, merge_rounds, take_experiment_rounds, take_rounds
from fp16doctor.engines.spec import FULL, QUICK, RoundsRequest, RunSpec


def run(precision: str, ms: float, **extra: Any) -> dict[str, Any]:
    return {"stack": "host", "precision": precision, "variant": "original", "status": "ok",
            "step_time_ms": {"median": ms, "p10": ms * 0.9, "p90": ms * 1.1, "n": 5}, **extra}


def test_a_change_to_a_model_that_ran_on_its_own_is_timed_beside_its_precision_and_keeps_its_own_figures() -> None:
    """The matrix's input controls (the full size's, or asked for with --variant): each one whose precision is
    timed joins the rounds (a cut precision's does not), and the rounds go into its record as into the
    precisions', its own process's figures under single_process."""
    runs = [run("float32", 450), run("float16", 1000), run("mixed_float16", 24000.0, bound=True),
            run("float32", 400, variant="synthetic_input"), run("float16", 900, variant="synthetic_input"),
            run("mixed_float16", 20000.0, variant="synthetic_input")]
    spec = rounds_plan(runs, "host", QUICK).spec
    assert spec is not None
    assert spec.rounds_of == ("float32", "float16", "float32+synthetic_input", "float16+synthetic_input")
    rounds = {label: [v, v * 1.01, v * 0.99] for label, v in (
        ("float32", 440.0), ("float16", 990.0), ("float32+synthetic_input", 395.0), ("float16+synthetic_input", 880.0),
        ("float32_aa", 445.0))}
    kept = merge_rounds(runs, {"stack": "host", "variant": "original", "status": "ok", "rounds": rounds}, group=0)
    assert kept is not None
    control = runs[4]["step_time_ms"]
    assert control["design"] == "interleaved" and control["median"] == 880.0 and control["group"] == 0
    assert control["single_process"]["median"] == 900 and "aa_rounds" not in control
    assert "rounds" not in runs[5]["step_time_ms"]  # its precision was cut: not in the rounds
    # --resume with nothing new: these were timed together already.
    assert rounds_plan(runs, "host", QUICK).spec is None
    # A script's rounds run the script as written: its changed runs (--variant xla) keep their own figures.
    fresh = [run("float32", 450), run("float16", 1000), run("float32", 300, variant="xla")]
    script = rounds_plan(fresh, "host", QUICK, builds_changes=False)
    assert script.spec is not None and script.spec.rounds_of == ("float32", "float16")


def test_merge_puts_the_rounds_in_their_runs_and_keeps_the_single_process_figures() -> None:
    runs = [run("float32", 450), run("float16", 1000), run("float32", 400, variant="synthetic_input")]
    record = {"stack": "host", "status": "ok", "order": [["float16", "float32", AA_CONTROL]] * 3,
              "rounds": {"float32": [440.0, 450.0, 460.0], "float16": [990.0, 1010.0, 1000.0],
                         AA_CONTROL: [445.0, 455.0, 450.0]}}
    kept = merge_rounds(runs, record)
    assert kept is not None and kept["precisions"] == ["float32", "float16"]
    f32, f16, synth = runs
    assert f32["step_time_ms"]["design"] == "interleaved" and f32["step_time_ms"]["median"] == 450.0
    assert f32["step_time_ms"]["aa_rounds"] == [445.0, 455.0, 450.0] and "aa_rounds" not in f16["step_time_ms"]
    assert f16["step_time_ms"]["single_process"]["median"] == 1000 and f16["step_time_ms"]["n"] == 3
    assert "rounds" not in synth["step_time_ms"]
    assert f16["step_time_ms"]["rounds_vs_single_process"] == 1.0 and kept["disagree"] == []


def test_rounds_far_from_the_runs_own_process_are_said() -> None:
    runs = [run("float32", 100), run("float16", 500)]
    record = {"stack": "host", "status": "ok", "rounds": {"float32": [100.0] * 3, "float16": [100.0] * 3}}
    kept = merge_rounds(runs, record)
    assert kept is not None and kept["disagree"] == ["float16"]
    assert runs[1]["step_time_ms"]["rounds_vs_single_process"] == 0.2


def test_what_the_machine_did_during_the_rounds_is_kept_beside_them() -> None:
    load = {"seconds": 14.3, "cores": 2, "before": {"load_1min": 0.2}, "after": {"load_1min": 1.1},
            "busiest_others": [{"pid": 7, "name": "updatedb", "cpu_pct": 60.0}]}
    record = {"stack": "host", "status": "ok", "rounds": {"float32": [100.0] * 3, "float16": [200.0] * 3},
              "machine_load": load}
    kept = merge_rounds([run("float32", 100), run("float16", 200)], record)
    assert kept is not None and kept["machine_load"] == load


def test_a_failed_rounds_process_changes_nothing() -> None:
    runs = [run("float32", 450), run("float16", 1000)]
    assert merge_rounds(runs, {"status": "failed", "error": "boom"}) is None
    assert "rounds" not in runs[0]["step_time_ms"]


def test_a_scripts_rounds_run_the_script_runner_with_the_rounds_and_no_profile_or_bound() -> None:
    from dataclasses import replace

    from fp16doctor.engines.spec import ScriptSpec, script_runner_args

    spec = rounds_plan([run("float32", 10), run("float16", 12)], "host", QUICK).spec
    assert spec is not None and spec.rounds is not None
    script = ScriptSpec("/home/u/train.py", ("--epochs", "3"), log_dir="/out/logs")
    spec = replace(spec, script=script, rounds=replace(spec.rounds, budget_s=30.0))
    args = script_runner_args(spec, "/scratch/work", "/out/logs/x.log")
    cut = args.index("--")
    assert args[cut:] == ["--", "/home/u/train.py", "--epochs", "3"]  # the script's own arguments stay last
    assert args[args.index("--rounds-of") + 1] == "float32,float16" and "--rounds-budget-s" in args[:cut]
    assert "--bound-ms" not in args
    # A quick size's rounds stop once every ratio is known to within 5 %; the full size's fill their budget.
    assert args[args.index("--rounds-precision") + 1] == "0.05"
    assert "--rounds-precision" not in replace(spec, size=FULL).rounds_args()
    # Its own log and scratch names: never a precision's run's.
    assert script.log_name(spec) == "host-interleaved-rounds.log" and spec.slug == "host-interleaved-rounds"


def test_the_rounds_budget_counts_what_a_script_does_before_training_once_per_model() -> None:
    from fp16doctor.diagnose.budget import script_setup_s
    from fp16doctor.results import Run

    script_run = run("float32", 10, workload={"name": "script"}, timing={"import_s": 2.0, "script_s": 6.5},
                     first_step_ms=500.0, warmup_step_ms=[500.0, 20.0], step_ms_all=[10.0] * 96)
    assert script_setup_s(Run.of(script_run)) == pytest.approx(6.5 - 2.0 - (500 + 20 + 960) / 1000)
    assert script_setup_s(Run.of(run("float32", 10, timing={"import_s": 2.0}))) == 0.0  # the built-in workload


def test_a_process_setting_gets_rounds_of_its_own_and_they_touch_only_its_runs() -> None:
    """oneDNN off is read when TensorFlow loads: its precisions are timed together in a process of that setting,
    and their rounds pair with each other only (their group), never with the original's."""
    off = {"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}, "tests": "slow_fp16_kernels"}
    runs = [run("float32", 150), run("float16", 900), run("float32", 360, variant="onednn_off", experiment=off),
            run("float16", 950, variant="onednn_off", experiment=off)]
    plan = rounds_plan(runs, "host", QUICK, variant="onednn_off")
    assert plan.spec is not None and plan.spec.rounds_of == ("float32", "float16")
    assert plan.spec.workload_args()[:4] == ["--precision", "float32", "--variant", "onednn_off"]
    record = {"stack": "host", "variant": "onednn_off", "status": "ok",
              "rounds": {"float32": [350.0, 360.0, 370.0], "float16": [940.0, 950.0, 960.0],
                         AA_CONTROL: [355.0, 365.0, 360.0]}}
    kept = merge_rounds(runs, record, group=1)
    assert kept is not None and (kept["variant"], kept["group"]) == ("onednn_off", 1)
    assert [r["step_time_ms"].get("group") for r in runs] == [None, None, 1, 1]
    assert runs[2]["step_time_ms"]["aa_rounds"] == [355.0, 365.0, 360.0]


def test_a_settings_experiments_are_made_from_its_rounds_with_no_process_of_their_own() -> None:
    off = {"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}, "tests": "slow_fp16_kernels"}
    specs = [RunSpec("host", p, "onednn_off", QUICK, experiment=off) for p in ("float32", "float16")]
    original = run("float32", 150, workload={"name": "seed_cnn", "batch_size": 32})
    doc: dict[str, Any] = {"runs": [original], "timing_rounds": [{"stack": "host", "group": 0}]}
    record = {"stack": "host", "precision": "float32", "variant": "onednn_off", "status": "ok", "device": "cpu",
              "machine": "host", "engine": {"kind": "host"}, "software": {"tensorflow": "2.21.0"}, "wall_s": 12.0,
              "order": [["float16", "float32", AA_CONTROL]] * 3,
              "rounds": {"float32": [350.0, 360.0, 370.0], "float16": [940.0, 950.0, 960.0],
                         AA_CONTROL: [355.0, 365.0, 360.0]},
              "warmup": {"float32": {"first_step_ms": 1900.0, "step_ms": 361.0},
                         "float16": {"first_step_ms": 2600.0, "step_ms": 951.0}},
              "losses": {"float32": [0.70, 0.69], "float16": [0.71, None]}}
    made, notes = take_experiment_rounds(doc, record, specs)
    assert made is not None and [r["precision"] for r in made] == ["float32", "float16"]
    f32, f16 = made
    assert f16["experiment"] == off and f16["variant"] == "onednn_off" and f16["timed_by"] == "interleaved_rounds"
    assert f16["step_time_ms"] == {"median": 950.0, "p10": 942.0, "p90": 958.0, "n": 3,
                                   "rounds": [940.0, 950.0, 960.0], "design": "interleaved", "group": 1}
    assert f32["step_time_ms"]["aa_rounds"] == [355.0, 365.0, 360.0] and f32["first_step_ms"] == 1900.0
    assert f16["loss"] == {"first": 0.71, "last": None, "nan_or_inf": True}
    assert f16["workload"] == {"name": "seed_cnn", "batch_size": 32} and f16["engine"] == {"kind": "host"}
    assert doc["timing_rounds"][1]["group"] == 1 and "3 rounds in 12 s" in notes[0]
    # A failed rounds process makes nothing: its experiments then need processes of their own.
    made, notes = take_experiment_rounds(doc, {"status": "failed", "error": "boom"}, specs)
    assert made is None and "failed (boom)" in notes[0] and len(doc["timing_rounds"]) == 2


def test_a_setting_that_cannot_apply_here_skips_its_experiments_with_the_workloads_reason() -> None:
    specs = [RunSpec("host", p, "onednn_off", QUICK, experiment={"changes": {}, "tests": None})
             for p in ("float32", "float16")]
    why = "onednn_off: the jax backend does not run its ops through oneDNN by default"
    made, _ = take_experiment_rounds({"runs": []}, {"stack": "host", "variant": "onednn_off", "status": "skipped",
                                                   "error": why}, specs)
    assert made is not None and [(r["precision"], r["status"], r["error"]) for r in made] == [
        ("float32", "skipped", why), ("float16", "skipped", why)]


def test_rounds_timed_again_keep_the_runs_own_process_figures() -> None:
    """--resume times a group again once a missing precision has run: the runs timed before keep what their own
    process measured under single_process, never the earlier rounds."""
    runs = [run("float32", 450), run("float16", 1000)]
    record = {"stack": "host", "status": "ok", "rounds": {"float32": [440.0, 450.0, 460.0],
                                                         "float16": [990.0, 1010.0, 1000.0]}}
    merge_rounds(runs, record, group=0)
    again = {"stack": "host", "status": "ok", "rounds": {"float32": [400.0, 410.0, 420.0],
                                                        "float16": [900.0, 910.0, 920.0]}}
    merge_rounds(runs, again, group=1)
    step = runs[0]["step_time_ms"]
    assert step["median"] == 410.0 and step["group"] == 1
    assert step["single_process"] == pytest.approx({"median": 450, "p10": 405.0, "p90": 495.0, "n": 5})


def test_the_original_rounds_make_the_record_of_a_precision_they_profiled() -> None:
    """Its steps from the rounds, its window's ops, model and input from the rounds process; the runs with a
    process of their own get the rounds as before, and a made record is never merged again as if it had one."""
    runs = [run("float32", 200, workload={"name": "seed_cnn"}), run("float16", 950)]
    doc: dict[str, Any] = {"runs": runs}
    specs = [RunSpec("host", "mixed_bfloat16", "original", QUICK), RunSpec("tf2.21", "mixed_bfloat16", "original",
                                                                             QUICK)]
    record = {"stack": "host", "precision": "float32", "variant": "original", "status": "ok", "device": "cpu",
              "engine": {"kind": "host"}, "wall_s": 30.0, "order": [["float32"]] * 3,
              "rounds": {"float32": [190.0, 200.0, 210.0], "float16": [940.0, 950.0, 960.0],
                         "mixed_bfloat16": [100.0, 101.0, 102.0], AA_CONTROL: [195.0, 200.0, 205.0]},
              "warmup": {"mixed_bfloat16": {"first_step_ms": 1300.0, "step_ms": 101.0}},
              "own_run": {"mixed_bfloat16": {"ops": {"source": "tf_profiler", "items": [{"layer": "conv2d_13"}]},
                                             "model": {"layers": [{"name": "conv2d_12"}, {"name": "conv2d_13"}]},
                                             "layer_names": {"conv2d_12": "conv2d", "conv2d_13": "conv2d_1"},
                                             "input_time_ms": {"median": 12.0}, "batch_dtype": "float32",
                                             "window_step_ms": [98.0, 99.0], "profile": {"artifacts": ["xplane"]},
                                             "device": "cpu"}}}
    kept, notes, made = take_rounds(doc, record, alone="each run's own process", creates=specs)
    assert kept is not None and [r["precision"] for r in made] == ["mixed_bfloat16"]  # the host's alone
    bf16 = made[0]
    assert bf16["timed_by"] == "interleaved_rounds" and bf16["step_time_ms"]["median"] == 101.0
    # Its layers named as a process of its own names them (the rounds process built three models before it).
    assert bf16["ops"] == {"source": "tf_profiler", "items": [{"layer": "conv2d_1"}]}
    assert bf16["model"] == {"layers": [{"name": "conv2d"}, {"name": "conv2d_1"}]} and "layer_names" not in bf16
    assert bf16["window_step_ms"] == [98.0, 99.0]
    assert bf16["input_time_ms"] == {"median": 12.0} and bf16["first_step_ms"] == 1300.0
    assert bf16["workload"] == {"name": "seed_cnn"} and "experiment" not in bf16
    assert runs[1]["step_time_ms"]["single_process"]["median"] == 950
    runs.append(bf16)
    merge_rounds(runs, record, group=1)
    assert "single_process" not in bf16["step_time_ms"]


def test_a_rounds_process_profiling_precisions_takes_float32s_bound_for_their_warm_ups() -> None:
    from dataclasses import replace

    from fp16doctor.engines.spec import with_slow_step_bound

    runs = [run("float32", 200, first_step_ms=1500.0)]
    spec = RunSpec("host", "float32", "original", QUICK,
                   rounds=RoundsRequest(("float32", "float16"), profiled=("float16",)))
    bounded = with_slow_step_bound(spec, runs)
    assert (bounded.reference_ms, bounded.reference_first_step_ms) == (200, 1500.0)
    assert "--bound-ms" in bounded.workload_args() and "--first-bound-ms" in bounded.workload_args()
    # Every precision had a run of its own: nothing to bound.
    plain = replace(spec, rounds=RoundsRequest(("float32", "float16")))
    assert with_slow_step_bound(plain, runs) == plain


def test_a_second_process_adds_its_rounds_to_the_runs_the_first_timed_each_round_keeping_its_process() -> None:
    """Rounds repeated in a fresh process (`repeat_of`): the same runs get both processes' rounds, float32's A/A
    control round by round beside its own, a record made from the first process's rounds included, and the
    document keeps the second process's entry saying which it repeats."""
    runs = [run("float32", 450), run("float16", 1000), run("float32", 400, variant="synthetic_input")]
    first = {"float32": [440.0, 445.0, 450.0], "float16": [990.0, 1000.0, 1010.0], "float32_aa": [441.0, 446.0, 449.0]}
    doc: dict[str, Any] = {"runs": runs}
    made_from_rounds = {**run("mixed_bfloat16", 0), "timed_by": "interleaved_rounds"}
    take_rounds(doc, {"stack": "host", "variant": "original", "status": "ok", "rounds": first}, alone="own")
    made_from_rounds["step_time_ms"] = {"median": 300.0, "rounds": [300.0, 301.0, 299.0], "design": "interleaved",
                                        "group": 0}
    runs.append(made_from_rounds)
    second = {"float32": [460.0, 461.0, 462.0, 463.0], "float16": [1100.0, 1101.0, 1102.0, 1103.0],
              "mixed_bfloat16": [310.0, 311.0, 312.0, 313.0], "float32_aa": [459.0, 460.0, 461.0, 462.0]}
    kept, notes, made = take_rounds(doc, {"stack": "host", "variant": "original", "status": "ok", "rounds": second},
                                    alone="own", repeat_of=0)
    assert kept is not None and kept["group"] == 1 and kept["repeat_of"] == 0 and made == []
    assert any("second process" in note for note in notes)
    fp32, fp16, bf16 = runs[0]["step_time_ms"], runs[1]["step_time_ms"], runs[3]["step_time_ms"]
    assert fp32["rounds"] == [440.0, 445.0, 450.0, 460.0, 461.0, 462.0, 463.0]
    assert fp32["round_groups"] == fp16["round_groups"] == [0, 0, 0, 1, 1, 1, 1] and fp32["group"] == 0
    assert fp32["aa_rounds"] == [441.0, 446.0, 449.0, 459.0, 460.0, 461.0, 462.0]
    assert fp32["n"] == 7 and fp32["median"] == 460.0 and fp32["single_process"]["median"] == 450
    assert bf16["rounds"][-4:] == [310.0, 311.0, 312.0, 313.0] and bf16["round_groups"] == [0, 0, 0, 1, 1, 1, 1]
    assert "rounds" not in runs[2]["step_time_ms"]  # not timed in either process


def test_a_second_process_that_failed_leaves_the_first_processes_rounds_alone() -> None:
    runs = [run("float32", 450), run("float16", 1000)]
    doc: dict[str, Any] = {"runs": runs}
    take_rounds(doc, {"stack": "host", "variant": "original", "status": "ok",
                      "rounds": {"float32": [440.0, 445.0, 450.0], "float16": [990.0, 1000.0, 1010.0]}}, alone="own")
    before = dict(runs[0]["step_time_ms"])
    kept, notes, _ = take_rounds(doc, {"stack": "host", "status": "failed", "error": "boom"}, alone="own",
                                 repeat_of=0)
    assert kept is None and runs[0]["step_time_ms"] == before and "within one process" in notes[0]
