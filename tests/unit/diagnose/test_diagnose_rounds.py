"""The interleaved rounds phase (diagnose/rounds.py): which precisions a rounds process times, what it costs and gets
of the size's budget, and where its record goes (into the runs it timed, with what the rounds cost as the engine
timed it)."""

from __future__ import annotations

import copy
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from progress_recorder import Recorder

from fp16doctor.diagnose import HOST_STACK, plan_runs
from fp16doctor.diagnose.rounds import RoundsSink, mark_left_out, rounds_plan
from fp16doctor.engines.rounds import AA_CONTROL
from fp16doctor.engines.spec import FULL, QUICK, RoundsRequest, RunSpec
from fp16doctor.results import ResultsWriter, new_document

QUICK_BUDGET = QUICK.budget_s or 0.0
EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


def run(precision: str, ms: float, **extra: Any) -> dict[str, Any]:
    return {"stack": "host", "precision": precision, "variant": "original", "status": "ok", "device": "cpu",
            "step_time_ms": {"median": ms, "p10": ms * 0.9, "p90": ms * 1.1, "n": 5}, **extra}


def _rounds_record(**extra: Any) -> dict[str, Any]:
    return {"stack": "cpu", "status": "ok", "order": [["float16", "float32", AA_CONTROL]] * 3,
            "rounds": {"float32": [960.0, 970.0, 950.0], "float16": [1600.0, 1590.0, 1610.0],
                       AA_CONTROL: [965.0, 955.0, 960.0]}, **extra}


def _rounds_taken(tmp_path: Path, record: dict[str, Any]) -> tuple[ResultsWriter, Recorder]:
    """A rounds process of float32 and float16 on the `cpu` stack, its `record` handed to the sink."""
    writer = ResultsWriter(tmp_path / "results.json", new_document({"gpus": []}))
    for record_ in (run("float32", 964.0, stack="cpu"), run("float16", 1600.0, stack="cpu")):
        writer.add_run(record_)
    progress = Recorder()
    sink = RoundsSink(writer, progress, alone="each run's own process", measure_load=False)
    sink.start_run(RunSpec("cpu", "float32", "original", QUICK, rounds=RoundsRequest(("float32", "float16"))))
    sink.finish_run(record)
    return writer, progress


@pytest.mark.parametrize(("wall_s", "said"), [(51.0, "3 rounds in 51 s"), (12.4, "3 rounds in 12 s")])
def test_the_rounds_note_says_what_the_engine_timed_them_at(tmp_path: Path, wall_s: float, said: str) -> None:
    """Every engine times its process (the host's, a container's whole life, a job's cells on the node): the note
    and the document's timing_rounds say that time."""
    writer, progress = _rounds_taken(tmp_path, _rounds_record(wall_s=wall_s))
    assert any(note == f"cpu: interleaved rounds: {said}" for note in progress.notes), progress.notes
    assert writer.doc["timing_rounds"][0]["wall_s"] == wall_s


def test_rounds_that_stopped_early_say_how_well_they_knew_every_ratio_and_the_document_keeps_it(
        tmp_path: Path) -> None:
    # As an engine hands it over: the spec's precision (float32) beside the workload's own keys.
    writer, progress = _rounds_taken(tmp_path, _rounds_record(wall_s=31.0, precision="float32", stop_reason="precision",
                                                              stop_precision={"target": 0.05, "widest": 0.042}))
    assert "cpu: interleaved rounds: 3 rounds in 31 s, every ratio known to within 5 % either way" in progress.notes
    assert writer.doc["timing_rounds"][0]["stop_precision"] == {"target": 0.05, "widest": 0.042}


def test_the_rounds_process_has_a_live_row_saying_what_it_is_timing_ended_without_a_line(tmp_path: Path) -> None:
    """A rounds process may run for most of the quick budget: its row says which configuration it warms up or times
    in which round, and ends with no line of its own (the runs it made or timed print theirs)."""
    import io

    from rich.console import Console

    from fp16doctor.progress import LiveProgress

    writer = ResultsWriter(tmp_path / "results.json", new_document({"gpus": []}))
    for record_ in (run("float32", 964.0, stack="cpu"), run("float16", 1600.0, stack="cpu")):
        writer.add_run(record_)
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, width=200), enabled=True)
    sink = RoundsSink(writer, progress, alone="each run's own process", measure_load=False)
    spec = RunSpec("cpu", "float32", "original", QUICK, rounds=RoundsRequest(("float32", "float16")))
    sink.start_run(spec)
    sink.event({"event": "step", "phase": "warmup", "config": "float16", "ms": 1612.4})
    assert progress.rows[spec.label].status == "warm-up: float16 1612 ms"
    sink.event({"event": "step", "phase": "round", "index": 2, "config": "float32_aa", "ms": 961.0})
    assert progress.rows[spec.label].status == "round 3: float32_aa 961 ms"
    sink.finish_run(_rounds_record(wall_s=40.0))
    assert progress.rows == {} and "✓" not in out.getvalue()


def test_every_unbound_precision_with_float32_first_and_the_rest_said() -> None:
    runs = [run("float32", 450), run("float16", 1000), run("mixed_float16", 24000.0),
            run("mixed_bfloat16", 20000.0, bound=True), run("float32", 400, variant="synthetic_input"),
            run("float16", 600, variant="onednn_off", experiment={"changes": {}})]
    plan = rounds_plan(runs, "host", QUICK)
    spec, notes = plan.spec, plan.messages()
    # float32's in-memory control beside it, as a configuration of its own; another setting's run is not here.
    assert spec is not None and spec.rounds_of == ("float32", "float16", "float32+synthetic_input")
    assert "--rounds-of" in spec.workload_args()
    assert any(n.startswith("mixed_float16 left out") and "own process" in n for n in notes)
    assert any(n.startswith("mixed_bfloat16 left out") and "slow-step bound" in n for n in notes)
    # ... and each left-out run says so in the document, the experiment and the other variant untouched.
    assert mark_left_out(runs, "host", plan) and not mark_left_out(runs, "host", plan)
    assert "slow-step bound" in runs[3]["rounds_left_out"] and "own process" in runs[2]["rounds_left_out"]
    assert not any("rounds_left_out" in r for r in (runs[0], runs[1], runs[4], runs[5]))


def test_a_group_whose_16_bit_runs_were_all_cut_has_no_rounds_and_says_why() -> None:
    """On a CPU where float16 is pathological (oneDNN's reference kernels), every 16-bit run is cut by the bound:
    nothing is left to pair with float32, and each cut run keeps why it has no rounds (float32's input control
    alone is no reason for a rounds process)."""
    runs = [run("float32", 150), run("float16", 24500.0, bound=True), run("mixed_float16", 23800.0, bound=True),
            run("float32", 120, variant="synthetic_input")]
    plan = rounds_plan(runs, "host", QUICK)
    assert plan.spec is None
    assert sorted(plan.left_out) == ["float16", "mixed_float16"]
    assert mark_left_out(runs, "host", plan)
    assert all("slow-step bound" in r["rounds_left_out"] for r in runs[1:3]) and "rounds_left_out" not in runs[3]


def test_a_run_cut_after_its_first_step_is_left_out_of_the_rounds_like_any_cut_run() -> None:
    # The first-step bound: float16's one step is its first (27.6 s, tracing included), no steady step to pair.
    first = run("float16", 27600.0, bound=True, bound_on="first_step", first_step_ms=27600.0,
                warmup_step_ms=[27600.0], stop_reason="slow_step_bound")
    runs = [run("float32", 150), first, run("mixed_bfloat16", 160)]
    plan = rounds_plan(runs, "host", QUICK)
    assert plan.spec is not None and plan.spec.rounds_of == ("float32", "mixed_bfloat16")
    assert mark_left_out(runs, "host", plan) and "slow-step bound" in first["rounds_left_out"]


def test_no_rounds_without_a_float32_to_pair_with_or_a_second_precision() -> None:
    assert rounds_plan([run("float16", 100)], "host", QUICK).spec is None
    assert rounds_plan([run("float32", 100), run("float16", 100, status="failed")], "host", QUICK).spec is None


def test_rounds_already_in_the_file_are_not_run_again() -> None:
    timed = {"median": 100, "rounds": [100, 101, 99], "design": "interleaved"}
    runs = [run("float32", 100, step_time_ms=timed), run("float16", 200, step_time_ms={**timed, "median": 200})]
    assert rounds_plan(runs, "host", QUICK).messages() == []
    assert rounds_plan(runs, "host", QUICK).spec is None


def test_a_precision_with_no_run_of_its_own_joins_the_rounds_and_is_profiled_there() -> None:
    plan = rounds_plan([run("float32", 200), run("float16", 950)], "host", QUICK, profiled=("mixed_bfloat16",))
    assert plan.spec is not None and plan.spec.rounds_of == ("float32", "float16", "mixed_bfloat16")
    assert plan.spec.rounds_profiled == ("mixed_bfloat16",)
    assert plan.spec.workload_args()[-2:] == ["--profile-rounds", "mixed_bfloat16"]
    # Without float32 to pair with there are no rounds: the caller runs it on its own instead.
    assert rounds_plan([run("float16", 950)], "host", QUICK, profiled=("mixed_bfloat16",)).spec is None


def test_a_precision_the_device_computes_natively_is_profiled_in_the_rounds_where_the_budget_binds() -> None:
    """mixed_bfloat16 on a CPU with AVX512-BF16 is expected to meet no pathology: at a budgeted size on this machine
    its steps and its profiled window come from the host's rounds process, with no process of its own; elsewhere
    (the full size, another stack, no float32 beside it) it keeps its own."""
    from fp16doctor.diagnose.rounds import profiled_in_rounds

    bf16_cpu = {"cpu": {"flags": ["avx512f", "avx512_bf16"]}, "gpus": []}
    specs = plan_runs([HOST_STACK, "cpu"], ["float32", "float16", "mixed_bfloat16"], QUICK, None, None)
    assert [(s.stack, s.precision) for s in profiled_in_rounds(specs, bf16_cpu, True)] == [
        ("host", "float16"), ("host", "mixed_bfloat16")]
    assert profiled_in_rounds(specs, bf16_cpu, False) == []  # the budget does not bind (full size, queued)
    assert profiled_in_rounds([s for s in specs if s.precision != "float32"], bf16_cpu, True) == []


def test_float16_is_profiled_in_the_rounds_only_where_tensorflow_computes_it_in_its_own_kernels() -> None:
    """On a CPU without float16 arithmetic TensorFlow runs float16 in its own kernels (2-6x float32's step where
    measured); with AVX512-FP16 it hands float16 to oneDNN, whose reference kernels took 160x on a Xeon: there it
    keeps a run of its own, bounded and cut. Other backends, GPUs and unknown flags keep theirs too."""
    from fp16doctor.diagnose.rounds import profiled_in_rounds

    specs = plan_runs([HOST_STACK], ["float32", "float16", "mixed_float16", "mixed_bfloat16"], QUICK, None, None)
    epyc = {"cpu": {"flags": ["avx2", "avx512f", "avx512_bf16"]}, "gpus": [],
            "frameworks": {"keras": {"backend": "tensorflow"}}}
    assert [s.precision for s in profiled_in_rounds(specs, epyc, True)] == [
        "float16", "mixed_float16", "mixed_bfloat16"]
    avx2 = {"cpu": {"flags": ["avx2", "f16c"]}, "gpus": []}
    assert [s.precision for s in profiled_in_rounds(specs, avx2, True)] == ["float16", "mixed_float16"]
    xeon = {"cpu": {"flags": ["avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16"]}, "gpus": []}
    assert [s.precision for s in profiled_in_rounds(specs, xeon, True)] == ["mixed_bfloat16"]
    assert [s.precision for s in profiled_in_rounds(specs, epyc, True, backend="torch")] == ["mixed_bfloat16"]
    assert profiled_in_rounds(specs, {"cpu": {}, "gpus": []}, True) == []
    # A GPU that computes float16 at float32's rate or faster (7.5) takes float16 and mixed_float16 in the rounds;
    # one at 1/64 of it (6.1) keeps their runs of their own, bounded.
    gpu = {"cpu": {"flags": ["avx2"]}, "gpus": [{"compute_capability": "7.5"}]}
    assert [s.precision for s in profiled_in_rounds(specs, gpu, True)] == ["float16", "mixed_float16"]
    pascal = {"cpu": {"flags": ["avx2"]}, "gpus": [{"name": "NVIDIA GeForce GTX 1080", "compute_capability": "6.1"}]}
    assert profiled_in_rounds(specs, pascal, True) == []


def test_the_rounds_leave_the_planned_experiments_room_and_never_go_under_their_minimum() -> None:
    """Cheapest evidence first: the experiments test the cause, more rounds only narrow an interval. Where the
    budget binds, the rounds get what is left after their start-up and the experiments to come."""
    from fp16doctor.diagnose.rounds import rounds_budget_s
    from fp16doctor.engines.rounds import FULL_ROUNDS_BUDGET_S, ROUNDS_MIN_BUDGET_S

    runs: list[dict[str, Any]] = [
        {"stack": "host", "precision": "float32", "variant": "original", "status": "ok", "first_step_ms": 800.0,
         "step_time_ms": {"median": 120.0}, "timing": {"import_s": 3.0}}]
    deadline = time.monotonic() + 60.0
    free = rounds_budget_s(QUICK, "host", runs, deadline)
    reserved = rounds_budget_s(QUICK, "host", runs, deadline, reserve_s=20.0)
    assert free - reserved == pytest.approx(20.0, abs=0.5)
    assert rounds_budget_s(QUICK, "host", runs, deadline, reserve_s=500.0) == ROUNDS_MIN_BUDGET_S
    assert rounds_budget_s(FULL, "host", runs, deadline, reserve_s=500.0) == FULL_ROUNDS_BUDGET_S


def test_a_precision_profiled_in_the_rounds_is_priced_at_float32s_figures() -> None:
    """It has no run of its own to price it: a share of float32's first step beyond its step (the tracing: the
    rounds process spreads its one-time work over building every model) and a step of its own, its warm-up, the
    profiled window in the warm-up's call (its steps, the profiler's own cost) and its share of the minimum rounds
    come out of the rounds' budget."""
    from fp16doctor.diagnose.budget import rounds_warmup_steps
    from fp16doctor.diagnose.rounds import ROUNDS_TRACING_SHARE, WINDOW_OVERHEAD_S, rounds_budget_s

    runs: list[dict[str, Any]] = [
        {"stack": "host", "precision": "float32", "variant": "original", "status": "ok", "first_step_ms": 800.0,
         "step_time_ms": {"median": 120.0}, "timing": {"import_s": 3.0}}]
    deadline = time.monotonic() + 60.0
    free = rounds_budget_s(QUICK, "host", runs, deadline)
    with_bf16 = rounds_budget_s(QUICK, "host", runs, deadline, profiled=("mixed_bfloat16",))
    block = 0.4 + 0.12  # a block aimed at 0.4 s, after its dropped step
    tracing = ROUNDS_TRACING_SHARE * (0.8 - 0.12)
    one = tracing + 0.12 + (rounds_warmup_steps(QUICK) + QUICK.profile_steps) * 0.12 + WINDOW_OVERHEAD_S \
        + 4 * block
    assert free - with_bf16 == pytest.approx(one, abs=0.05)
    # float16 with no run of its own is priced at six times float32's step (its prior on a CPU without fp16, where
    # oneDNN has AVX-512 for float32 or the CPU is not known).
    with_f16 = rounds_budget_s(QUICK, "host", runs, deadline, profiled=("float16",))
    step = 6 * 0.12
    one = tracing + step + (rounds_warmup_steps(QUICK) + QUICK.profile_steps) * step + WINDOW_OVERHEAD_S \
        + 4 * 2 * step
    assert free - with_f16 == pytest.approx(one, abs=0.05)
    # On an AVX2-only CPU float32's own step is slower and float16's prior smaller.
    avx2 = [{**runs[0], "engine": {"cpu": {"flags": ["avx", "avx2", "f16c", "fma"]}}}]
    with_f16_avx2 = rounds_budget_s(QUICK, "host", avx2, deadline, profiled=("float16",))
    assert free - with_f16_avx2 < free - with_f16


# The AVX2 EPYC's prepare on a slow day (docs/benchmarks.md: 11.7-13.7 s); its float32 step that day against the
# example's: 813-859 ms against 449 ms.
AVX2_PREPARE_S = 13.7
AVX2_SLOW_DAY = 859.0 / 448.894


def _avx2_float32(scale: float) -> dict[str, Any]:
    """The AVX2-only EPYC's float32 run of its own (docs/examples/cpu-epyc-avx2-quick), its times `scale` times."""
    doc: dict[str, Any] = json.loads((EXAMPLES / "cpu-epyc-avx2-quick" / "results.json").read_text())
    run = copy.deepcopy(next(r for r in doc["runs"] if r["precision"] == "float32" and r["variant"] == "original"))
    run["first_step_ms"] *= scale
    run["step_time_ms"]["median"] *= scale
    run["wall_s"] *= scale
    run["timing"]["import_s"] *= scale
    return run


def test_on_the_avx2_epyc_the_rounds_minimum_fits_the_quick_budget_and_a_slow_day_is_said_first() -> None:
    """Where float16 and mixed_float16 are profiled in the rounds alone (TensorFlow computes float16 in its own
    kernels on an AVX2 EPYC), the rounds process's minimum after float32's own run fits what 90 s leave at that
    machine's measured costs; on a day its steps ran at about half speed the planner says before the rounds how far
    past the budget their minimum will end, with the step that makes it so."""
    from fp16doctor.diagnose.rounds import rounds_overrun_note, rounds_overrun_s

    profiled = ("float16", "mixed_float16")
    for scale in (1.0, AVX2_SLOW_DAY):
        run = _avx2_float32(scale)
        deadline = time.monotonic() - (AVX2_PREPARE_S + run["wall_s"]) + QUICK_BUDGET
        over = rounds_overrun_s(QUICK, "host", [run], deadline, profiled)
        note = rounds_overrun_note(QUICK, "host", [run], deadline, profiled)
        if scale == 1.0:
            assert over == 0.0 and note is None
        else:
            assert 10.0 < over < 40.0
            assert note is not None and "past the 90 s quick budget" in note and "float32 steps in 859 ms" in note


def test_the_rounds_end_leaves_what_attributing_this_machines_windows_takes() -> None:
    """Each profiled window is priced at what float32's own window took to attribute here (profile.attribution_s),
    at the prior before one was attributed."""
    from fp16doctor.diagnose.rounds import ATTRIBUTION_PER_WINDOW_S, attribution_per_window_s, rounds_end_s

    run: dict[str, Any] = {"stack": "host", "precision": "float32", "variant": "original", "status": "ok",
                           "profile": {"attribution_s": 2.5}}
    assert attribution_per_window_s([run], "host") == 2.5
    assert attribution_per_window_s([], "host") == ATTRIBUTION_PER_WINDOW_S
    deadline = time.monotonic() + 60.0
    assert rounds_end_s(deadline, 0.0, 0, 2.5) - rounds_end_s(deadline, 0.0, 3, 2.5) == pytest.approx(7.5, abs=0.05)


def test_a_second_rounds_process_is_priced_without_windows_and_only_where_both_minimums_fit() -> None:
    """Its import, each model's first step and warm-up and the minimum rounds, no profiled window (the first process
    made them), and its exit; where the budget cannot hold both processes' minimum beside the experiments, none."""
    from fp16doctor.diagnose.rounds import AFTER_ROUNDS_S, repeat_fits, rounds_overrun_s

    runs: list[dict[str, Any]] = [
        {"stack": "host", "precision": "float32", "variant": "original", "status": "ok", "first_step_ms": 800.0,
         "step_time_ms": {"median": 120.0}, "timing": {"import_s": 10.0}}]
    roomy = time.monotonic() + 80.0
    cost = repeat_fits(QUICK, "host", runs, roomy, 0.0, ("mixed_bfloat16",))
    assert cost is not None and cost > 10.0 + AFTER_ROUNDS_S  # the import at least
    with_windows = rounds_overrun_s(QUICK, "host", runs, 0.0, ("mixed_bfloat16",)) - time.monotonic()
    assert cost < with_windows  # the first process's minimum, its windows and their attribution included
    assert repeat_fits(QUICK, "host", runs, roomy, 80.0 - cost, ("mixed_bfloat16",)) is None  # the experiments first
    assert repeat_fits(QUICK, "host", runs, None, 0.0) is None  # no budget binds: one process


def _long_step_runs() -> list[dict[str, Any]]:
    """A script's three runs with 3 s steps, as a --quick diagnose on a 2-core CPU times them: each took about 26 s
    of the 90 s budget."""
    def one(precision: str, step_ms: float) -> dict[str, Any]:
        return run(precision, step_ms, first_step_ms=step_ms + 900.0, timing={"import_s": 4.0, "script_s": 25.0},
                   workload={"name": "script", "timing": None}, wall_s=26.0)
    return [one("float32", 3000.0), one("float16", 3400.0), one("mixed_float16", 3100.0)]


def test_rounds_minutes_past_the_budget_leave_the_slowest_precisions_out_with_the_budget_to_ask() -> None:
    """Where the rounds' minimum would end the diagnose further past the budget than an unsettled comparison may
    take (a third of it), the slowest 16-bit precision leaves first, each said with its step and the --budget that
    would time them all; where they fit, none leaves."""
    from fp16doctor.diagnose.rounds import rounds_left_out_for_time, rounds_overrun_s

    runs = _long_step_runs()
    deadline = time.monotonic() + 12.0  # the runs of their own took the rest of the 90 s
    assert rounds_overrun_s(QUICK, "host", runs, deadline) > QUICK_BUDGET / 3
    left = rounds_left_out_for_time(QUICK, "host", runs, deadline)
    assert list(left)[0] == "float16"  # its 3400 ms steps first
    assert "float32" not in left
    why = left["float16"]
    assert "3400 ms steps" in why and "past the 90 s quick budget" in why
    assert "its ratio rests on its own process" in why
    needed = int(why.rsplit("--budget ", 1)[1].split(" ")[0])
    assert needed % 10 == 0 and needed > QUICK_BUDGET
    assert rounds_left_out_for_time(QUICK, "host", runs, time.monotonic() + 600.0) == {}
    roomy = replace(QUICK, wall_budget_s=float(needed))
    assert rounds_left_out_for_time(roomy, "host", runs, deadline + needed - QUICK_BUDGET) == {}


def test_a_users_budget_and_rounds_replace_the_sizes_and_reach_the_rounds_process() -> None:
    """--budget replaces the size's wall budget (only where the size has one), --rounds the minimum of rounds each
    rounds process times (its maximum with it, where more)."""
    assert replace(QUICK, wall_budget_s=300.0).budget_s == 300.0
    assert replace(FULL, wall_budget_s=300.0).budget_s is None and not FULL.has_budget
    spec = RunSpec("host", "float32", "original", replace(QUICK, rounds=40),
                   rounds=RoundsRequest(("float32", "float16")))
    args = spec.rounds_args()
    assert args[args.index("--min-rounds") + 1] == "40" and args[args.index("--max-rounds") + 1] == "40"
    plain = RunSpec("host", "float32", "original", QUICK, rounds=RoundsRequest(("float32", "float16"))).rounds_args()
    assert plain[plain.index("--min-rounds") + 1] == "3" and "--max-rounds" not in plain


def test_a_custom_loop_gets_no_rounds_and_says_why() -> None:
    """A script timed as a whole (no fit() to replay) gets no interleaved rounds: they would run the whole script
    again for each precision, to fail at its end."""
    runs = [run(p, ms, workload={"name": "script", "api": ["custom_loop"], "timing": "whole_run", "whole_run_ms": ms})
            for p, ms in (("float32", 507.0), ("float16", 667.0))]
    plan = rounds_plan(runs, "host", QUICK)
    assert plan.spec is None and "custom training loop" in plan.notes[0]
