"""Why float16 changed from one stack to the next (`stack_comparisons`): ops matched by the layer's position among
the layers of its type, never by name; net accounting; the ratio in each stack as its verdict gave it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document
from fp16doctor.report import render_html, render_markdown

FLAGS = ["sse4_2", "avx2", "fma", "f16c"]
KERAS_215 = {"python": "2.7.18", "tensorflow": "1.7.0", "keras": "2.1.5", "keras_backend": "tensorflow"}
KERAS_3 = {"python": "3.11.2", "tensorflow": "2.21.0", "keras": "3.15.1", "keras_backend": "tensorflow"}


def op(layer: str | None, pass_: str, ms: float, impl: str | None, name: str = "Conv2DBackpropFilter",
       wall: float | None = None) -> dict[str, Any]:
    item = {"name": f"{layer or 'training'}/{name}", "layer": layer, "pass": pass_, "dtype": "float16",
            "impl": impl, "ms_per_step": ms, "calls_per_step": 1, "op_type": name}
    if wall is not None:
        item["wall_ms_per_step"] = wall
    return item


def model(names: list[tuple[str, str]]) -> dict[str, Any]:
    return {"layers": [{"name": name, "type": kind} for name, kind in names]}


# The seed model's first layers as each Keras names them: Keras 2.1.5 from 1, Keras 3 from 0.
KERAS_215_LAYERS = [("conv2d_1", "Conv2D"), ("activation_1", "Activation"), ("max_pooling2d_1", "MaxPooling2D"),
                    ("conv2d_2", "Conv2D"), ("activation_2", "Activation"), ("dense_1", "Dense")]
KERAS_3_LAYERS = [("conv2d", "Conv2D"), ("activation", "Activation"), ("max_pooling2d", "MaxPooling2D"),
                  ("conv2d_1", "Conv2D"), ("activation_1", "Activation"), ("dense", "Dense")]


def run(stack: str, precision: str, ms: float, software: dict[str, str], **extra: Any) -> dict[str, Any]:
    r: dict[str, Any] = {"stack": stack, "precision": precision, "variant": "original", "device": "cpu",
                         "status": "ok", "software": dict(software),
                         "step_time_ms": {"median": ms, "p10": ms * 0.98, "p90": ms * 1.02, "n": 10}}
    r.update(extra)
    return r


def doc(*runs: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": 1, "host": {"cpu": {"model": "AMD EPYC", "cores": 2, "flags": FLAGS}, "gpus": []},
            "runs": list(runs)}


def tf17_vs_keras3(with_models: bool = True) -> dict[str, Any]:
    """float16 in a Keras 2.1.5 stack (first conv's weight gradient 40 ms) and in Keras 3 (13.2 s on ref:any);
    Keras 3's second conv (`conv2d_1`) is unchanged, and so is Keras 2.1.5's second (`conv2d_2`)."""
    old = [op("conv2d_1", "backward_weights", 40.0, None), op("conv2d_2", "backward_weights", 300.0, None),
           op(None, "optimizer", 20.0, None, "ApplyRMSProp")]
    new = [op("conv2d", "backward_weights", 13200.0, "ref:any"), op("conv2d_1", "backward_weights", 300.0, None),
           op(None, "optimizer", 25.0, None, "ResourceApplyAdam")]
    extra_old = {"model": model(KERAS_215_LAYERS)} if with_models else {}
    extra_new = {"model": model(KERAS_3_LAYERS)} if with_models else {}
    # The document lists the newer stack first: the comparison still goes from the older to the newer.
    return doc(run("cpu", "float32", 90.0, KERAS_3, **extra_new),
               run("cpu", "float16", 13600.0, KERAS_3, ops={"source": "tf_profiler", "items": new}, **extra_new),
               run("tf1.7-cpu", "float32", 130.0, KERAS_215, **extra_old),
               run("tf1.7-cpu", "float16", 400.0, KERAS_215, ops={"source": "tf1_run_metadata", "items": old},
                   **extra_old))


@pytest.mark.parametrize("with_models", [True, False], ids=["model-records", "names-only"])
def test_a_keras_215_conv2d_1_pairs_with_a_keras_3_conv2d(with_models: bool) -> None:
    (comparison,) = diagnose_document(tf17_vs_keras3(with_models)).stack_comparisons
    assert (comparison.from_.stack, comparison.to.stack, comparison.precision) == ("tf1.7-cpu", "cpu", "float16")
    first = next(c for c in comparison.changes if c.position == 0 and c.pass_ == "backward_weights")
    assert (first.layer_from, first.layer_to) == ("conv2d_1", "conv2d")
    assert (first.ms_from, first.ms_to, first.impl_from, first.impl_to) == (
        40.0, 13200.0, "Conv2DBackpropFilter", "ref:any")
    assert first.layer_type in ("Conv2D", "conv2d")
    # The second convolution is `conv2d_2` in Keras 2.1.5 and `conv2d_1` in Keras 3: same time, no change listed.
    assert not [c for c in comparison.changes if c.position == 1]
    assert "#1 backward weights moved from Conv2DBackpropFilter (40 ms) to ref:any (13.2 s)" in comparison.headline
    assert "(tf1.7-cpu) to 151x slower (cpu)" in comparison.headline


def test_the_ratio_in_each_stack_is_its_verdicts() -> None:
    diagnosis = diagnose_document(tf17_vs_keras3())
    (comparison,) = diagnosis.stack_comparisons
    entry = comparison.to_dict()
    for side in ("from", "to"):
        verdict = next(v for v in diagnosis.to_dict()["verdicts"] if v["stack"] == entry[side])
        assert entry[f"ratio_{side}"] == verdict["ratio"]
        assert entry[f"ratio_interval_{side}"] == verdict["ratio_interval"]
    assert entry["changes"][0]["layer_from"] == "conv2d_1" and entry["changes"][0]["layer_to"] == "conv2d"
    assert entry["headline"].startswith("float16 against float32 went from 3.08x slower (tf1.7-cpu) to 151x slower")


def test_net_accounting_names_an_op_that_moved_the_other_way() -> None:
    d = tf17_vs_keras3()
    # Casts got 2 s faster in the newer stack while the first conv got 13.16 s slower.
    d["runs"][1]["ops"]["items"].append(op(None, "cast", 10.0, None, "Cast"))
    d["runs"][3]["ops"]["items"].append(op(None, "cast", 2010.0, None, "Cast"))
    (comparison,) = diagnose_document(d).stack_comparisons
    cast = next(c for c in comparison.changes if c.pass_ == "cast")
    assert cast.against and cast.difference_ms == -2000.0
    assert "while cast ops (outside the layers) went from 2010 ms to 10 ms (Cast in both)" in comparison.headline
    net = sum(c.difference_ms for c in comparison.changes)
    assert comparison.explained_ms == pytest.approx(net)
    assert comparison.explained_ms < sum(c.difference_ms for c in comparison.changes if not c.against)


@pytest.mark.parametrize("scale", [0.25, 1.0, 3.0, 40.0])
def test_explained_share_is_never_above_one(scale: float) -> None:
    d = tf17_vs_keras3()
    for item in d["runs"][1]["ops"]["items"]:
        item["ms_per_step"] *= scale  # self times that add up to far more than the step (threads overlap)
    (comparison,) = diagnose_document(d).stack_comparisons
    assert 0.0 <= comparison.explained_share <= 1.0
    assert comparison.explained_ms <= abs(comparison.step_change_ms) + 1e-9
    if scale < 1:
        assert "of it is unexplained" in comparison.headline


def test_wall_shares_are_preferred_where_both_runs_have_them() -> None:
    d = tf17_vs_keras3()
    d["runs"][1]["ops"]["items"][0]["wall_ms_per_step"] = 9000.0
    d["runs"][3]["ops"]["items"][0]["wall_ms_per_step"] = 35.0
    (comparison,) = diagnose_document(d).stack_comparisons
    first = next(c for c in comparison.changes if c.position == 0)
    assert comparison.wall and (first.ms_from, first.ms_to) == (35.0, 9000.0)
    assert comparison.to_dict()["changes"][0]["time"] == "wall"


def test_a_step_change_inside_the_runs_interval_is_explained_by_nothing() -> None:
    d = tf17_vs_keras3()
    d["runs"][1]["step_time_ms"] = {"median": 401.0, "p10": 380.0, "p90": 420.0, "n": 10}
    (comparison,) = diagnose_document(d).stack_comparisons
    assert not comparison.significant and comparison.explained_share == 0.0
    assert comparison.headline.endswith("a change inside the two runs' interval")


def test_a_stack_without_measured_ops_says_so() -> None:
    d = tf17_vs_keras3()
    del d["runs"][3]["ops"]
    (comparison,) = diagnose_document(d).stack_comparisons
    assert not comparison.changes and comparison.explained_share == 0.0
    assert "tf1.7-cpu has no measured ops" in comparison.headline


def test_every_pair_of_three_stacks_older_first() -> None:
    d = tf17_vs_keras3()
    middle = {"python": "2.7.18", "tensorflow": "1.13.1", "keras": "2.2.4", "keras_backend": "tensorflow"}
    d["runs"] += [run("tf1.13-cpu", "float32", 120.0, middle), run("tf1.13-cpu", "float16", 110.0, middle)]
    pairs = [(c.from_.stack, c.to.stack) for c in diagnose_document(d).stack_comparisons]
    assert pairs == [("tf1.7-cpu", "tf1.13-cpu"), ("tf1.7-cpu", "cpu"), ("tf1.13-cpu", "cpu")]


def test_one_stack_has_no_comparison_and_experiments_are_not_stacks() -> None:
    d = tf17_vs_keras3()
    one = copy.deepcopy(d)
    one["runs"] = one["runs"][:2]
    assert diagnose_document(one).stack_comparisons == []
    d["runs"].append(run("cpu", "float16", 300.0, KERAS_3, variant="onednn_off",
                         experiment={"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}, "tests": "x"}))
    assert len(diagnose_document(d).stack_comparisons) == 1


def test_every_output_renders_the_analysis_sentence() -> None:
    d = tf17_vs_keras3()
    diagnosis = diagnose_document(d)
    (comparison,) = diagnosis.stack_comparisons
    html = render_html([d], [diagnosis])
    assert "Between stacks" in html and "conv2d_1 -&gt; conv2d" in html
    assert comparison.headline.replace("'", "&#39;") in html
    markdown = render_markdown([d], [diagnosis])
    assert "**Between stacks, float16: tf1.7-cpu \u2192 cpu:**" in markdown and "ref:any" in markdown


def test_the_terminal_lists_the_changes_within_80_columns() -> None:
    import io

    from rich.console import Console

    from fp16doctor.textout.findings import findings_text

    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(findings_text(diagnose_document(tf17_vs_keras3()), full=True))
    lines = out.getvalue().splitlines()
    assert "Between stacks" in lines and max(len(line) for line in lines) <= 80
    row = next(line for line in lines if line.strip().startswith("Conv2D #1"))
    assert row.split()[:4] == ["Conv2D", "#1", "bwd", "weights"] and "40 ms" in row and "13.2 s" in row


def test_explain_json_carries_the_stack_comparisons(tmp_path: Path) -> None:
    import contextlib
    import io
    import json
    import sys

    from fp16doctor import cli

    path = tmp_path / "results.json"
    path.write_text(json.dumps(tf17_vs_keras3()), encoding="utf-8")
    out, argv = io.StringIO(), sys.argv
    sys.argv = ["fp16doctor", "explain", str(path), "--json"]
    try:
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
            cli.main()
    finally:
        sys.argv = argv
    assert exited.value.code in (0, None)
    (entry,) = json.loads(out.getvalue())["stack_comparisons"]
    assert (entry["from"], entry["to"]) == ("tf1.7-cpu", "cpu")
    assert entry["changes"][0]["layer_from"] == "conv2d_1" and entry["changes"][0]["layer_to"] == "conv2d"


def test_a_newer_stack_whose_float16_was_cut_short_gives_a_step_change_with_no_upper_end() -> None:
    """A run cut by the slow-step bound is a one-sided bound (analysis/intervals.py): its step change from the
    older stack has a lower end and none above, written as null, never a made-up number."""
    d = tf17_vs_keras3()
    d["runs"][1].update(bound=True, stop_reason="slow_step_bound", first_step_ms=13600.0,
                        step_time_ms={"median": 13600.0, "p10": 13600.0, "p90": 13600.0, "n": 1})
    d["runs"][3]["first_step_ms"] = 900.0
    (comparison,) = diagnose_document(d).stack_comparisons
    low, high = comparison.to_dict()["step_change_interval_ms"]
    assert high is None and low == pytest.approx(13600.0 - 900.0)
