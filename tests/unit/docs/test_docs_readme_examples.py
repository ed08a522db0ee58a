"""The README quotes figures from the examples in docs/examples/: each quoted ratio, step time and difference
matches the example's own results.json, so an example measured again cannot leave the README behind."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
README = re.sub(r"\s+", " ", (ROOT / "README.md").read_text(encoding="utf-8"))

# (a README sentence with named figures, the example it quotes, the 16-bit precision of the verdict). Figures:
# slower / faster (a ratio), step / fp32_step (the two steps), explained / difference (the measured part of the
# difference, and the difference); a figure's unit is its `<name>_unit` group, else its partner's, else ms.
_MEASURED = (r"\(measured: (?P<explained>[\d.]+) (?P<explained_unit>ms|s) of the (?P<difference>[\d.]+) "
             r"(?P<difference_unit>ms|s) difference\)")
# The answer's line per configuration: "float16: 5.1x slower (4.6-5.6x), 935 ms vs 184 ms  [N1] cause: ... (734 ms of
# 751 ms)".
_ANSWER = r"\([\d.-]+x\), (?P<step>\d+) ms vs (?P<fp32_step>\d+) ms(?: \[N\d\])? cause: "
_CAUSE = (r"\((?P<explained>[\d.]+) (?P<explained_unit>ms|s) of (?P<difference>[\d.]+) (?P<difference_unit>ms|s)\)")
QUOTED = [
    (r"(?<!\w)float16: (?P<slower>[\d.]+)x slower " + _ANSWER + r"the framework's 16-bit kernels [^(]*"
     + _CAUSE, "cpu-epyc-avx512bf16-quick", "float16"),
    (r"mixed_float16: (?P<slower>[\d.]+)x slower " + _ANSWER + r"the framework's 16-bit kernels [^(]*" + _CAUSE,
     "cpu-epyc-avx512bf16-quick", "mixed_float16"),
    (r"mixed_bfloat16: (?P<faster>[\d.]+)x faster " + _ANSWER + r"16-bit kernels saved time " + _CAUSE,
     "cpu-epyc-avx512bf16-quick", "mixed_bfloat16"),
    (r"(?<!\w)float16 is (?P<slower>[\d.]+)x slower than float32 \((?P<step>\d+) (?P<step_unit>s) vs "
     r"(?P<fp32_step>[\d.]+) s per step\): [^(]*" + _MEASURED,
     "cpu-epyc-avx2-tf2.10-seed-script", "float16"),
    (r"(?<!\w)float16 (?P<slower>[\d.]+)x slower at its quick size, `slow_16bit_compute`, (?P<explained>[\d.]+) of "
     r"the (?P<difference>[\d.]+) (?P<difference_unit>s) difference",
     "cpu-epyc-avx2-tf2.10-quick", "float16"),
    (r"KERAS_BACKEND=torch: float16 is (?P<slower>[\d.]+)x slower than float32: [^(]*" + _MEASURED,
     "cpu-epyc-avx2-quick-torch", "float16"),
    (r"KERAS_BACKEND=jax: float16 is no faster or slower than float32 \(",
     "cpu-epyc-avx2-quick-jax", "float16"),
    (r"on this script mixed_bfloat16 is (?P<faster>[\d.]+)x faster than float32",
     "cpu-epyc-avx512bf16-script-quick", "mixed_bfloat16"),
    (r"on this script mixed_bfloat16 is [\d.]+x faster than float32 \([\d.-]+x\), float16 (?P<slower>[\d.]+)x slower",
     "cpu-epyc-avx512bf16-script-quick", "float16"),
    (r"float16 [\d.]+x slower and mixed_float16 (?P<slower>[\d.]+)x slower, each from 30 paired rounds",
     "cpu-epyc-avx512bf16-script-quick", "mixed_float16"),
]
_PARTNER = {"fp32_step": "step", "explained": "difference"}
_MS_PER = {"ms": 1.0, "s": 1000.0}


def _verdict(example: str, precision: str) -> dict[str, Any]:
    doc = json.loads((ROOT / "docs" / "examples" / example / "results.json").read_text(encoding="utf-8"))
    found = [v for v in doc["verdicts"] if v["precision"] == precision and v["variant"] == "original"]
    assert len(found) == 1, f"{example} has no one verdict for {precision}"
    return found[0]


def _close(printed: str, actual: float, what: str) -> None:
    """As printed: within one unit of its last digit (the stored ratio itself is rounded to 4 digits)."""
    digits = len(printed.split(".")[1]) if "." in printed else 0
    assert abs(float(printed) - actual) <= 10.0 ** -digits, (
        f"the README says {what} {printed}, the example {actual:.4g}")


@pytest.mark.parametrize(("sentence", "example", "precision"), QUOTED, ids=[f"{e}-{p}-{i}" for i, (_, e, p) in
                                                                            enumerate(QUOTED)])
def test_the_readme_quotes_its_examples_as_they_were_measured(sentence: str, example: str, precision: str) -> None:
    assert f"docs/examples/{example}" in README, f"the README quotes {example} without naming it"
    quoted = list(re.finditer(sentence, README))
    assert quoted, f"the README no longer says this of {example}: update QUOTED with it: {sentence}"
    verdict = _verdict(example, precision)
    for match in quoted:
        figures = match.groupdict()
        if "slower" not in figures and "faster" not in figures:
            assert verdict["outcome"] == "no_significant_difference"
        if figures.get("slower"):
            assert verdict["outcome"] == "slower"
            _close(figures["slower"], 1 / verdict["ratio"], f"{precision} is slower by")
        if figures.get("faster"):
            assert verdict["outcome"] == "faster"
            _close(figures["faster"], verdict["ratio"], f"{precision} is faster by")
        # "measured: E ms of the D ms difference" is the leading cause's share; other causes the verdict lists
        # may explain more of it.
        causes = verdict.get("causes") or []
        explained = (causes[0]["explains_ms"] if causes else abs(verdict["difference_ms"]) - verdict["unexplained_ms"])
        for name, actual_ms in (("step", verdict["step_ms"]), ("fp32_step", verdict["fp32_step_ms"]),
                                ("difference", abs(verdict["difference_ms"])), ("explained", explained)):
            if figures.get(name):
                unit = figures.get(f"{name}_unit") or figures.get(f"{_PARTNER.get(name)}_unit") or "ms"
                _close(figures[name], actual_ms / _MS_PER[unit], f"{precision}'s {name} in {unit}")


def test_the_readme_names_no_scratch_folder() -> None:
    # Commands and hints show the example's own folders or a placeholder, not where someone once ran them.
    assert re.findall(r"/tmp/[\w.-]+", README) == []


def test_the_readme_quotes_what_the_three_stack_example_says_changed_between_stacks() -> None:
    """The README's "Between stacks" lines are the example's own: its first comparison's sentence as the analysis
    wrote it, and the one-sided bounds of the two twins' float16 as their verdicts give them."""
    example = "cpu-epyc-avx2-three-stacks-quick"
    assert f"docs/examples/{example}" in README
    doc = json.loads((ROOT / "docs" / "examples" / example / "results.json").read_text(encoding="utf-8"))
    first = doc["stack_comparisons"][0]
    assert (first["from"], first["to"], first["precision"]) == ("tf1.7-cpu", "tf1.13-cpu", "float16")
    assert " ".join(first["headline"].split()) in README
    bounds = {v["stack"]: v for v in doc["verdicts"] if v["precision"] == "float16" and v["bound"]}
    for stack, keras in (("tf1.7-cpu", "2.1.5"), ("tf1.13-cpu", "2.2.4")):
        slower = round(1 / bounds[stack]["ratio"])
        assert f"at least {slower}x" in README and f"Keras {keras}" in README, (stack, slower)


def test_the_readme_quotes_the_xeons_quick_diagnose_as_it_ran() -> None:
    """Its prescription, its wall time, the experiment it ran and its 16-bit runs cut inside their first step."""
    example = "cpu-xeon-amx-quick"
    doc = json.loads((ROOT / "docs" / "examples" / example / "results.json").read_text(encoding="utf-8"))
    (prescription,) = doc["prescriptions"]
    said = re.search(r"prescribes (\w+) in (\d+) s \(\[docs/examples/" + example, " ".join(README.split()))
    assert said, "the README no longer quotes the Xeon's quick diagnose"
    assert said.group(1) == prescription["recommended"]["precision"]
    assert int(said.group(2)) == round(doc["invocation"]["elapsed_s"])
    runs = {(r["precision"], r["variant"]): r for r in doc["runs"]}
    assert runs[("float16", "onednn_off")]["status"] == "ok"
    assert all(runs[(p, "original")]["cut_in_step"] and runs[(p, "original")]["bound_on"] == "first_step"
               for p in ("float16", "mixed_float16"))
