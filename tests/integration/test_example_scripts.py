"""diagnose --script on six scripts of our own, each after the model of a public keras.io example with its data
replaced by seeded random arrays of the same kind (tests/data/scripts/examples; CPU, real TensorFlow, the smoke
size): what each answer must and must not say. Only what holds on any CPU, idle or busy, is asserted: which runs
ran or failed and where, what the findings name, what the answer refuses to prescribe; never a timing, nor which
precision is faster."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from script_env import fp16doctor

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "scripts" / "examples"
MAX_LINE = 200
# The precisions a default diagnose runs on every CPU (mixed_bfloat16 joins them where the CPU has bfloat16).
EVERYWHERE = {"float32", "float16", "mixed_float16"}
# The documented exit statuses of a diagnose that ran (docs/results-schema.md): 0 all ran, 3 some runs failed.
DONE, SOME_FAILED = 0, 3


@dataclass
class Diagnosed:
    script: str
    done: subprocess.CompletedProcess[str]
    doc: dict[str, Any]
    explained: subprocess.CompletedProcess[str]
    report: str

    def run(self, precision: str) -> dict[str, Any]:
        return next(r for r in self.doc["runs"] if r["precision"] == precision
                    and r.get("variant", "original") == "original" and not r.get("experiment"))

    def finding(self, finding_id: str) -> dict[str, Any] | None:
        return next((f for f in self.doc.get("findings") or [] if f["id"] == finding_id), None)

    def untested(self) -> list[dict[str, Any]]:
        return [u for p in self.doc.get("prescriptions") or [] for u in p.get("untested") or []]

    def place(self, code: str) -> str:
        """`script:line` of the script's line that holds `code`."""
        lines = (EXAMPLES / self.script).read_text().splitlines()
        return f"{self.script}:{next(n for n, text in enumerate(lines, 1) if code in text)}"


def _diagnose(cwd: Path, script: str, *options: str) -> Diagnosed:
    done = fp16doctor(cwd, "diagnose", "--size", "smoke", "--script", str(EXAMPLES / script), "--out", "out",
                       *options)
    assert done.returncode in (DONE, SOME_FAILED), done.stderr[-3000:]
    doc = json.loads((cwd / "out" / "results.json").read_text())
    explained = fp16doctor(cwd, "explain", "out/results.json")
    assert explained.returncode == 0, explained.stderr[-3000:]
    return Diagnosed(script, done, doc, explained, (cwd / "out" / "report.html").read_text())


def _holds_for_every_script(d: Diagnosed, asked: frozenset[str] = frozenset(EVERYWHERE)) -> None:
    """A run per precision, the exit status its failures call for, a failure at the script's own line and never
    offered again as untested, no built-in workload named, the terminal's lines short and plain."""
    runs = [r for r in d.doc["runs"] if r.get("variant", "original") == "original" and not r.get("experiment")]
    precisions = [r["precision"] for r in runs]
    assert sorted(precisions) == sorted(d.doc["invocation"]["precisions"]) and asked <= set(precisions)
    assert d.run("float32")["status"] == "ok" and all(r["status"] in ("ok", "failed") for r in d.doc["runs"])
    failed = [r for r in d.doc["runs"] if r["status"] == "failed"]
    assert d.done.returncode == (SOME_FAILED if failed else DONE), d.done.stderr[-3000:]
    offered = {u.get("precision") for u in d.untested()}
    for run in failed:
        assert run["error_location"]["file"] == d.script and isinstance(run["error_location"]["line"], int), run
        assert run["precision"] not in offered
        assert f"{run['precision']}: failed at {d.script}:" in d.done.stdout
        assert f"{run['precision']}: failed at {d.script}:" in d.explained.stdout
    for text in (d.done.stdout, d.done.stderr, d.explained.stdout, d.report):
        assert "seed workload" not in " ".join(text.split()).lower()
    for text in (d.done.stdout, d.done.stderr, d.explained.stdout):
        assert "\x1b" not in text
    for text in (d.done.stdout, d.explained.stdout):
        assert not _long_lines(text), text


def _long_lines(text: str) -> list[str]:
    """The lines over MAX_LINE, a command to copy aside (the answer keeps a command whole: this script's path)."""
    return [line for line in text.splitlines()
            if len(line) > MAX_LINE and not line.lstrip().startswith("fp16doctor diagnose ")]


def _no_rounded_ids(d: Diagnosed) -> None:
    assert d.finding("integer_ids_rounded") is None
    assert "integer_ids_rounded" not in d.done.stdout + d.explained.stdout


def _transformer(d: Diagnosed) -> None:
    """Word ids as floats through a custom embedding layer: every 16-bit configuration that ran rounds them, and is
    named for it and never prescribed. floatx float16 also makes the layer's `ops.arange` int16, where TensorFlow
    has no such kernel: that run fails at the script's fit line."""
    assert d.run("mixed_float16")["status"] == "ok"  # no id of this seed rounds past the vocabulary's end
    float16 = d.run("float16")
    if float16["status"] == "failed":
        assert float16["failure_kind"] == "int16_range" and float16["deterministic"] is True
        assert f"{d.script}:{float16['error_location']['line']}" == d.place("model.fit(")
    finding = d.finding("integer_ids_rounded")
    assert finding is not None and finding["severity"] == "critical"
    rounded = {(r["precision"], r.get("variant") or "original") for r in finding["runs"]}
    assert ("mixed_float16", "original") in rounded
    for text in (d.done.stdout, d.explained.stdout):
        assert "integer_ids_rounded" in text and 'dtype="int32"' in " ".join(text.split())
    for prescription in d.doc["prescriptions"]:
        recommended = prescription["recommended"]
        assert recommended["precision"] == "float32", prescription["headline"]
        assert (recommended["precision"], recommended["variant"]) not in rounded
        for measured in prescription["measured"]:
            if (measured["precision"], measured["variant"]) in rounded:
                assert "integer_ids_rounded" in (measured.get("unsafe") or ""), measured


def _vae(d: Diagnosed) -> None:
    """The sampling layer's noise is drawn in float32 and meets the layer's float16 inputs under the mixed policy:
    a failed line at the script's own line, with its cause and fix, never offered again as untested."""
    place = d.place("return z_mean + ops.exp(0.5 * z_log_var) * epsilon")
    assert d.run("float16")["status"] == "ok"  # floatx float16 draws the noise in float16 too
    failed = d.run("mixed_float16")
    assert failed["status"] == "failed" and failed["failure_kind"] == "dtype_mixing" and failed["deterministic"]
    assert f"{d.script}:{failed['error_location']['line']}" == place and failed["fix"]
    assert "a float16 tensor times a float32 one" in failed["error"] and len(failed["error"]) <= MAX_LINE
    assert failed["script_log"] == "script-logs/host-mixed_float16.log"
    assert f"mixed_float16: failed at {place} (`" in d.done.stdout
    assert f"(host / mixed_float16 / original at {place})" in d.done.stderr
    assert "--resume does not retry it" in d.done.stderr and "to retry" not in d.done.stderr
    assert f"mixed_float16: failed at {place}" in d.explained.stdout and f"failed at {place}" in d.report
    for text in (d.done.stdout, d.explained.stdout):
        assert not any("untested" in line and "mixed_float16" in line for line in text.splitlines()), text
    assert not _long_lines(d.done.stdout + d.done.stderr), d.done.stderr
    # A subclassed model with no call() of its own is never "built": it is described from its parts all the same.
    assert d.run("float32")["model"]["params"] > 0 and "could not be described" not in d.done.stdout + d.done.stderr
    _no_rounded_ids(d)


def _all_ran(d: Diagnosed) -> None:
    for precision in EVERYWHERE:
        run = d.run(precision)
        assert run["status"] == "ok" and run["step_time_ms"]["median"] > 0, run


def _plain(d: Diagnosed) -> None:
    """Float inputs of real values: every precision runs, and nothing is said of integer ids."""
    _all_ran(d)
    _no_rounded_ids(d)


def _collaborative(d: Diagnosed) -> None:
    """User and movie ids declared int32, beyond what float16 holds exactly (movies up to 9,723): Keras never casts
    them, so no configuration is said to round them."""
    _all_ran(d)
    for precision in EVERYWHERE:
        inputs = {i["name"]: i for i in d.run(precision)["model"]["inputs"]}
        assert inputs["movie"]["dtype"] == "int32" and inputs["movie"]["values"]["max_abs"] > 2048, inputs
    _no_rounded_ids(d)


def _jit(d: Diagnosed) -> None:
    """A model compiled with jit_compile=True runs under every precision, the policy applied to its layers."""
    _all_ran(d)
    assert list(d.run("mixed_float16")["workload"]["layer_dtypes"]) == ["float16 compute, float32 variables"]
    _no_rounded_ids(d)


CASES: dict[str, Callable[[Diagnosed], None]] = {
    "text_classification_transformer.py": _transformer,
    "vae_custom_train_step.py": _vae,
    "lstm_weather_forecast.py": _plain,
    "cnn1d_timeseries_classifier.py": _plain,
    "collaborative_filtering_int_ids.py": _collaborative,
    "mnist_convnet_jit.py": _jit,
}


@pytest.mark.parametrize("script", list(CASES))
def test_an_example_scripts_answer_says_what_it_must(tmp_path: Path, script: str) -> None:
    diagnosed = _diagnose(tmp_path, script, "--no-experiments")
    _holds_for_every_script(diagnosed)
    CASES[script](diagnosed)


@pytest.fixture(scope="module")
def rare_words(tmp_path_factory: pytest.TempPathFactory) -> Diagnosed:
    """The Transformer with the rarest words in every batch: mixed_float16 rounds ids 19,993-19,999 to 20,000, past
    the end of the embedding table, and fails at the embedding's line (float16, which fails first on its int16
    range, is left out)."""
    return _diagnose(tmp_path_factory.mktemp("rare-words"), "text_classification_transformer.py",
                     "--script-arg=--rare-words", "--precision", "float32", "--precision", "mixed_float16",
                     "--no-experiments")


def test_ids_rounded_past_the_table_fail_at_the_scripts_line(rare_words: Diagnosed) -> None:
    d = rare_words
    _holds_for_every_script(d, frozenset({"float32", "mixed_float16"}))
    place = d.place("return self.token_embedding(ids) + positions")
    assert d.done.returncode == SOME_FAILED
    failed = d.run("mixed_float16")
    assert failed["status"] == "failed" and failed["deterministic"] is True
    assert f"{d.script}:{failed['error_location']['line']}" == place
    assert f"mixed_float16: failed at {place} (`" in d.done.stdout
    assert f"mixed_float16 / original at {place}" in d.done.stderr
    assert all(p["recommended"]["precision"] == "float32" for p in d.doc["prescriptions"])


def test_ids_rounded_past_the_table_are_named_as_rounded_ids(rare_words: Diagnosed) -> None:
    finding = rare_words.finding("integer_ids_rounded")
    assert finding is not None and "mixed_float16" in {r["precision"] for r in finding["runs"]}
    assert "integer_ids_rounded" in rare_words.done.stdout
    assert rare_words.run("mixed_float16")["failure_kind"] == "ids_out_of_range"
