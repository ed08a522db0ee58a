"""One number, one rendering: a ratio shown anywhere (verdict, prescription, tables, charts) reads the same, in its
own direction, with the digits its interval earns."""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from fp16doctor.analysis import diagnose_document
from fp16doctor.analysis.configs import ADOPTABLE
from fp16doctor.analysis.prescription import MeasuredRow
from fp16doctor.analysis.values import ShownRatio, figure, round_ratio
from fp16doctor.analysis.verdict import Verdict
from fp16doctor.analysis.verdicts import complete_saved
from fp16doctor.diagnose import DiagnoseOutcome
from fp16doctor.report import render_html, render_markdown
from fp16doctor.report.sections.verdict import verdict_view
from fp16doctor.textout.diagnose import diagnose_summary_text
from fp16doctor.textout.findings import findings_text

KERAS3 = {"tensorflow": "2.21.0", "keras": "3.15.1", "keras_backend": "tensorflow"}


def run(precision: str, step: float, spread: float = 0.02, **extra: Any) -> dict[str, Any]:
    return {"stack": "host", "precision": precision, "variant": "original", "device": "cpu", "status": "ok",
            "software": KERAS3, **extra,
            "step_time_ms": {"median": step, "p10": step * (1 - spread), "p90": step * (1 + spread), "n": 20}}


def doc(*runs: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": 1, "host": {"cpu": {"model": "test CPU", "flags": ["avx2"]}, "gpus": []},
            "runs": list(runs)}


@pytest.mark.parametrize(("shown", "words"), [
    (ShownRatio(2.24, 2.2, 2.3, "faster"), "2.24x faster (2.20-2.30x)"),
    (ShownRatio(2.24, 1.9, 2.6, "faster"), "2.2x faster (1.9-2.6x)"),
    (ShownRatio(1 / 161.5, 1 / 169.0, 1 / 154.0, "slower"), "162x slower (154-169x)"),
    (ShownRatio(0.62, 0.59, 0.65, "slower"), "1.61x slower (1.54-1.69x)"),
    (ShownRatio(1.0, 0.97, 1.04, "no_significant_difference"), "no significant difference (0.97-1.04x)"),
    (ShownRatio(1 / 166.0, lower_bound=True), ">= 166x slower"),
])
def test_a_ratio_reads_in_its_own_direction(shown: ShownRatio, words: str) -> None:
    assert shown.versus() == words


def test_a_slowdown_is_never_printed_as_a_fraction() -> None:
    for speedup in (0.62, 0.05, 0.0062, 1 / 2400):
        text = ShownRatio.of(speedup, [speedup * 0.95, speedup * 1.05], "slower").versus()  # type: ignore[union-attr]
        assert "slower" in text and "0.0" not in text and not text.startswith("0.")


def test_2400x_slower_keeps_its_digits_from_the_document() -> None:
    # Four decimals stored 1/2400 as 0.0004, read back as "2500x (2500-2500x)".
    diagnosis = diagnose_document(doc(run("float32", 10.0), run("float16", 24000.0)))
    verdict, = diagnosis.to_dict()["verdicts"]
    assert verdict["figure"] == figure(verdict) == "2400x slower"
    row = next(m for m in diagnosis.prescriptions[0].measured if m.precision == "float16")
    assert row.versus() == "2400x slower (2286-2520x)"
    assert round_ratio(1 / 2400) == pytest.approx(1 / 2400, rel=1e-4)


def test_a_slower_configurations_interval_is_printed_slower_too() -> None:
    # 5 paired rounds, float16 3 % slower: its interval reads 1.0x-slower, never the speed-up's 0.97x.
    rounds32, rounds16 = [100.0, 101.0, 99.0, 100.0, 100.5], [103.0, 104.0, 102.2, 103.1, 103.4]
    fp32 = run("float32", 100.0, step_time_ms=None)
    fp32["step_time_ms"] = {"median": 100.0, "rounds": rounds32, "design": "interleaved"}
    fp16 = run("float16", 103.0)
    fp16["step_time_ms"] = {"median": 103.0, "rounds": rounds16, "design": "interleaved"}
    diagnosis = diagnose_document(doc(fp32, fp16))
    headline = diagnosis.to_dict()["prescriptions"][0]["headline"]
    assert "float16, is 1.03x slower than float32 (95% interval 1.029-1.032x, 5 paired rounds)" in headline
    assert "0.9" not in headline
    verdict, = diagnosis.to_dict()["verdicts"]
    assert "95% interval 1.029-1.032x" in verdict["headline"]


# What a run cut by the slow-step bound carries (the timing design): only "at least this slow".
LOWER_BOUND = {"machine": "host", "stack": "host", "variant": "original", "precision": "float16", "outcome": "slower",
               "ratio": 1 / 161.5, "ratio_interval": [0.0, 1 / 161.5], "interval_method": "lower_bound",
               "confidence_level": None, "repeats": 0, "step_ms": 16150.0, "fp32_step_ms": 100.0,
               "difference_ms": 16050.0, "cause": None}


def test_a_lower_bound_verdict_reads_at_least_everywhere() -> None:
    assert figure(LOWER_BOUND) == ">= 162x slower"
    saved = complete_saved(LOWER_BOUND, [])
    assert ">= 162x slower than float32" in saved["headline"] and "0.0" not in saved["headline"]
    assert verdict_view("host", Verdict.of(LOWER_BOUND)).figure == ">= 162x slower"
    entry = {"precision": "float16", "variant": "original", "setting": None, "step_ms": 16150.0,
             "speedup": 1 / 161.5, "speedup_interval": [0.0, 1 / 161.5], "outcome": "slower"}
    assert MeasuredRow.of(entry).versus() == ">= 162x slower"
    assert MeasuredRow.of({**entry, "speedup_interval": [1 / 169.0, 1 / 154.0]}).versus() == "162x slower (154-169x)"


EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "docs" / "examples").glob("*/results.json"))


def _terminal(renderable: Any) -> str:
    out = io.StringIO()
    Console(file=out, width=1000, color_system=None).print(renderable)
    return out.getvalue()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_every_output_of_an_example_prints_a_ratio_the_same_way(path: Path) -> None:
    example = json.loads(path.read_text(encoding="utf-8"))
    diagnosis = diagnose_document(example)
    outcome = DiagnoseOutcome(example, Path("out/results.json"), None, 0, [], diagnosis)
    page = render_html([example])
    outputs = {"explain": _terminal(findings_text(diagnosis)), "terminal": _terminal(diagnose_summary_text(outcome)),
               "html": html.unescape(re.sub(r"<[^>]+>", " ", page)), "markdown": render_markdown([example])}
    charts = html.unescape(" ".join(re.findall(r'<svg class="chart".*?</svg>', page, flags=re.S)))
    for name, text in [*outputs.items(), ("charts", charts)]:
        assert not re.search(r"(?<![\d.])0\.\d+x", text), (name, re.findall(r".{60}(?<![\d.])0\.\d+x", text))
    assert diagnosis.to_dict()["verdicts"]
    for verdict in diagnosis.to_dict()["verdicts"]:
        shown = figure(verdict)
        assert verdict["figure"] == shown
        for name, text in outputs.items():
            assert shown in text, (name, shown)
        if verdict["variant"] == "original" and verdict["outcome"] != "no_significant_difference":
            assert f"measured {shown}" in charts
        if verdict["variant"] not in ADOPTABLE:
            # A control (batches in memory) is no configuration to adopt: the prescription quotes it beside the
            # change it measures (user_changes), with the verdict's figure.
            quoted = [m for p in diagnosis.to_dict()["prescriptions"] for change in p["user_changes"]
                      for m in change.get("in_memory") or []
                      if (p["machine"], p["stack"], m["precision"]) == (verdict["machine"], verdict["stack"],
                                                                        verdict["precision"])]
            assert [m["figure"] for m in quoted] == [shown]
            continue
        entry = next(m for p in diagnosis.to_dict()["prescriptions"] for m in p["measured"]
                     if (p["machine"], p["stack"], m["precision"], m["variant"])
                     == (verdict["machine"], verdict["stack"], verdict["precision"], verdict["variant"]))
        same = {"not measurable": "not measurable", "not resolved": "not resolved"}.get(shown,
                                                                                    "no significant difference")
        expected = shown if verdict["outcome"] != "no_significant_difference" else same
        assert MeasuredRow.of(entry).versus().startswith(expected)


def test_no_difference_on_an_interval_off_1_is_not_measurable_never_a_speed_up_under_1() -> None:
    """The A/A control can refuse an effect whose interval excludes 1 (0.44-0.95x: float16 slower, but no more than
    two identical float32 models differed): it is said as not measurable, its interval as slowdowns."""
    shown = ShownRatio.of(0.6459, [0.44085, 0.94632], "no_significant_difference")
    assert shown is not None and shown.unmeasurable and shown.figure() == "not measurable"
    assert shown.interval_text() == "1.1-2.3x slower"
    assert shown.versus() == "not measurable here now (1.1-2.3x slower)"
    across = ShownRatio.of(0.98, [0.95, 1.02], "no_significant_difference")
    assert across is not None and not across.unmeasurable and across.figure() == "same speed"
    assert across.interval_text() == "0.95-1.02x"


@pytest.mark.parametrize(("interval", "aa", "figure", "spread"), [
    ([0.95, 1.02], None, "same speed", "0.95-1.02x"),  # inside 1/1.1-1.1x either way: equivalent
    ([0.92, 1.06], {"passed": False}, "not resolved", "0.92-1.06x, point 1.02x slower"),  # A/A cannot see it
    ([0.97, 1.12], None, "not resolved", "0.97-1.12x, point 1.02x slower"),  # past the band
    ([0.85, 1.18], {"passed": True}, "not resolved", "0.85-1.18x, point 1.02x slower"),
])
def test_same_speed_only_inside_the_equivalence_band(interval: list[float], aa: dict[str, bool] | None, figure: str,
                                                     spread: str) -> None:
    """An interval that cannot tell is "not resolved", with its point estimate, never "same speed": equality is said
    only of an interval inside the equivalence band, with an A/A control that can see an effect that size."""
    shown = ShownRatio.of(0.98, interval, "no_significant_difference", aa=aa)
    assert shown is not None and shown.figure() == figure and shown.interval_text() == spread
    assert shown.versus().startswith("no significant difference" if figure == "same speed" else "not resolved")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_every_output_of_an_example_quotes_one_step_per_configuration(path: Path) -> None:
    """A run timed in rounds has one step in every output: the figure its verdict quotes (the rounds' geometric
    mean), never its rounds' median beside it (314 against 303 ms for one float32 on the H200)."""
    from fp16doctor.analysis.intervals import rounds_step_ms
    from fp16doctor.analysis.values import fmt_ms

    example = json.loads(path.read_text(encoding="utf-8"))
    diagnosis = diagnose_document(example)
    words = _terminal(findings_text(diagnosis, full=True)) + json.dumps(diagnosis.to_dict()["findings"],
                                                                         ensure_ascii=False)
    for row in diagnosis.runs:
        run = example["runs"][row.index]
        rounds = (run.get("step_time_ms") or {}).get("rounds") or []
        shown = rounds_step_ms(rounds)
        if not row.ok or shown is None:
            continue
        assert row.step_ms == shown
        median = fmt_ms(run["step_time_ms"]["median"])
        if median != fmt_ms(shown):
            assert f"{median} step" not in words and f"median {median}" not in words, (row.label, median)
    for verdict in diagnosis.to_dict()["verdicts"]:
        own = next((r for r in diagnosis.runs if r.ok and (r.machine, r.stack, r.precision, r.variant)
                    == (verdict["machine"], verdict["stack"], verdict["precision"], verdict["variant"])), None)
        if own is not None and verdict.get("interval_method") == "paired_rounds":
            assert fmt_ms(verdict["step_ms"]) == fmt_ms(own.step_ms), (own.label, verdict["step_ms"])


def test_a_one_sided_bound_reads_in_its_own_direction() -> None:
    from fp16doctor.analysis.values import ShownRatio

    slower = ShownRatio.of(0.147, [0.0, 0.147], "slower", method="lower_bound")
    faster = ShownRatio.of(3.57, None, "faster", method="lower_bound")
    assert slower is not None and faster is not None
    assert (slower.figure(), faster.figure()) == (">= 6.8x slower", ">= 3.6x faster")
    assert faster.interval_text() is None


def test_a_stack_comparison_says_each_stacks_ratio_as_its_verdict_does() -> None:
    """float16 on the cpu stack is "not measurable (1.1-2.3x slower)" in its verdict; the comparison between stacks
    called it "the same speed"."""
    example = json.loads((EXAMPLES[0].parents[1] / "cpu-epyc-avx2-three-stacks-quick" / "results.json")
                         .read_text(encoding="utf-8"))
    diagnosis = diagnose_document(example)
    words = " ".join(c.headline for c in diagnosis.stack_comparisons)
    assert "to a difference not measurable there (cpu)" in words and "the same speed (cpu)" not in words


def test_a_pair_is_named_by_one_rule_in_every_table_and_card() -> None:
    from fp16doctor.analysis.values import pair_words

    assert pair_words("float16") == "float16 vs float32"
    assert pair_words("float16", "tf2.21", "synthetic_input", "gpu-node") == \
        "float16 vs float32, stack tf2.21, synthetic_input, on gpu-node"
    # The report's finding card and every output's op table name the same pair the same way.
    doc = json.loads((EXAMPLES[0].parent.parent / "cpu-epyc-avx2-three-stacks-quick" / "results.json").read_text())
    diagnosis = diagnose_document(doc)
    titles = {c.title for c in diagnosis.comparisons}
    assert any(", stack " in t for t in titles)
    scopes = {pair_words(f.precision, f.stack or "host", f.variant or "original", f.machine or "host")
              for f in diagnosis.findings if f.precision}
    assert titles & scopes
