"""How a configuration was timed, said beside its figure: a custom loop's whole-script time, once each, and a
precision the interleaved rounds left out (long steps past the budget) with why and the --budget that times it."""

from __future__ import annotations

from typing import Any

from fp16doctor.analysis import diagnose_document


def _doc(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"schema_version": 1, "invocation": {"argv": ["fp16doctor", "diagnose", "--quick"], "size": "quick"},
            "host": {"cpu": {"model": "AMD EPYC", "cores": 2, "flags": ["avx2", "f16c"]}, "gpus": []}, "runs": runs}


def _run(precision: str, ms: float, **extra: Any) -> dict[str, Any]:
    return {"stack": "host", "precision": precision, "variant": "original", "device": "cpu", "status": "ok",
            "step_time_ms": {"median": ms, "p10": ms, "p90": ms, "n": extra.pop("n", 1)}, **extra}


def test_a_custom_loops_figures_are_the_whole_script_once_each_in_the_answer() -> None:
    whole = {"name": "script", "timing": "whole_run", "per_step": False}
    doc = _doc([_run("float32", 507.0, workload={**whole, "whole_run_ms": 507.0}),
                _run("mixed_float16", 610.0, workload={**whole, "whole_run_ms": 610.0})])
    diagnosis = diagnose_document(doc)
    text = diagnosis.answer.text()
    line = next(row for row in text.splitlines() if row.strip().startswith("mixed_float16:"))
    assert "the whole script 610 ms vs 507 ms" in line
    assert "Timed as the whole script, once each, less the Keras import" in " ".join(text.split())
    row = next(r for r in diagnosis.runs if r.precision == "mixed_float16")
    assert row.whole_run


def test_a_fit_scripts_answer_says_nothing_of_a_whole_script() -> None:
    doc = _doc([_run("float32", 100.0, n=20, workload={"name": "script", "per_step": True}),
                _run("mixed_float16", 120.0, n=20, workload={"name": "script", "per_step": True})])
    assert "whole script" not in diagnose_document(doc).answer.text()


def test_a_precision_left_out_of_the_rounds_says_why_with_the_budget_that_times_it() -> None:
    why = ("its 3 rounds (3005 ms steps) would end this diagnose about 108 s past the 90 s quick budget; its ratio "
           "rests on its own process (--budget 210 times them)")
    doc = _doc([_run("float32", 3003.0, n=3), _run("mixed_float16", 3005.0, n=3, rounds_left_out=why)])
    text = " ".join(diagnose_document(doc).answer.text().split())
    assert f"mixed_float16 was not timed in the interleaved rounds: {why}" in text
    cut = _doc([_run("float32", 100.0, n=5), _run("float16", 5200.0, n=1, bound=True,
                                                  rounds_left_out="cut short by the slow-step bound")])
    assert "not timed in the interleaved rounds" not in diagnose_document(cut).answer.text()  # its line says the cut


def test_a_compiled_step_is_said_as_one_cluster_not_as_its_few_listed_ops() -> None:
    """A jit_compile=True step: the profile lists 0.3 ms of input ops around a 12 ms cluster. The bound line says
    the step ran as one cluster the profiler does not see into, and the ledger keeps `compiled` through a round trip."""
    from fp16doctor.analysis.ledger import Ledger

    ops = {"source": "tf_profiler", "coverage": 0.03, "window_kind": "steps", "items": [
        {"name": "GatherV2", "layer": None, "pass": "forward", "dtype": "float32", "impl": None, "ms_per_step": 0.3,
         "op_type": "GatherV2"}]}
    runs = [_run(p, ms, n=20, ops=ops, workload={"name": "script", "per_step": True, "jit_compile": True})
            for p, ms in (("float32", 12.0), ("mixed_float16", 17.0))]
    diagnosis = diagnose_document(_doc(runs))
    bound = " ".join(diagnosis.answer.text().split("What to do")[0].split())
    assert "the step ran compiled (jit_compile=True), one cluster the profiler does not see into" in bound
    assert "largest ops" not in bound
    ledger = diagnosis.ledgers[0]
    assert ledger.compiled and Ledger.of(ledger.to_dict()) == ledger


def test_a_loop_timed_step_by_step_names_its_step_function_in_the_answer() -> None:
    loop = {"name": "script", "api": ["custom_loop"], "per_step": True, "timing": "loop_calls",
            "loop_step": "train_step"}
    doc = _doc([_run("float32", 8.2, n=16, workload=loop), _run("mixed_float16", 10.7, n=5, workload=loop)])
    text = " ".join(diagnose_document(doc).answer.text().split())
    assert "each step timed end to end between two calls of its step function train_step" in text
    assert "whole script" not in text


def test_a_precision_left_out_of_the_rounds_says_which_float32_its_line_quotes() -> None:
    """float16 left out of the rounds is set against float32's own process (76 ms), while the rounds timed float32 at
    48 ms and every other line quotes that: the note says both, so no reader meets two float32 figures unexplained."""
    fp32 = _run("float32", 45.24, n=3)
    fp32["step_time_ms"].update(rounds=[45.24, 36.108, 67.284], design="interleaved", group=0,
                                aa_rounds=[46.461, 34.307, 35.061],
                                single_process={"median": 75.656, "n": 20, "p10": 71.935, "p90": 93.407})
    fp16 = _run("float16", 219.724, n=5, rounds_left_out="its 3 rounds (220 ms steps) would end this diagnose "
                "about 15 s past the 45 s smoke budget; its ratio rests on its own process (--budget 70 times them)")
    text = " ".join(diagnose_document(_doc([fp32, fp16])).answer.text().split())
    assert "220 ms vs 76 ms" in text
    assert ("so its line sets it against float32's 76 ms in a process of its own, where the rounds timed float32 at "
            "48 ms") in text
