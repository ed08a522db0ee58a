"""`fp16doctor compare A.json B.json` through its real entry point (cli.main): one machine before and after, the
ratio in each with its interval, the ops that changed, and its exit codes (0, 2 for bad input, 4 for
--fail-if-slower tripped beyond the intervals)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cli_helpers
import pytest

from fp16doctor.errors import EXIT_SLOWER, EXIT_USAGE

ROOT, EXAMPLES = cli_helpers.ROOT, cli_helpers.EXAMPLES
FLAGS = ["sse4_2", "avx2", "fma", "f16c"]
KERAS_215 = {"python": "2.7.18", "tensorflow": "1.7.0", "keras": "2.1.5", "keras_backend": "tensorflow"}
KERAS_3 = {"python": "3.11.2", "tensorflow": "2.21.0", "keras": "3.15.1", "keras_backend": "tensorflow"}


def run_cli(*argv: str) -> tuple[int, str, str]:
    """The console script's entry point in-process (cli_helpers.run_cli): (exit code, stdout, stderr)."""
    done = cli_helpers.run_cli(*argv)
    return done.code, done.stdout, done.stderr


def one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), stderr
    return lines[0]


def document(fp16_ms: float, software: dict[str, str], first_conv: str, cpu: str = "AMD EPYC") -> dict[str, Any]:
    """float32 at 100 ms and float16 at `fp16_ms` (p10-p90 +-2 %, so each ratio is judged with the 5 % band); the
    float16 run's first conv weight gradient takes 40 ms, its optimizer the rest."""
    def run(precision: str, ms: float, **extra: Any) -> dict[str, Any]:
        return {"stack": "host", "precision": precision, "variant": "original", "device": "cpu", "status": "ok",
                "software": software, "step_time_ms": {"median": ms, "p10": ms * 0.98, "p90": ms * 1.02, "n": 10},
                **extra}
    items = [{"name": f"{first_conv}/Conv2DBackpropFilter", "layer": first_conv, "pass": "backward_weights",
              "dtype": "float16", "ms_per_step": 40.0 + (fp16_ms - 200.0), "op_type": "Conv2DBackpropFilter"},
             {"name": "training/Apply", "layer": None, "pass": "optimizer", "dtype": "float16",
              "ms_per_step": 150.0, "op_type": "ApplyRMSProp"}]
    return {"schema_version": 1, "host": {"cpu": {"model": cpu, "cores": 2, "flags": FLAGS}, "gpus": []},
            "runs": [run("float32", 100.0), run("float16", fp16_ms, ops={"source": "tf_profiler", "items": items})]}


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture
def before_after(tmp_path: Path) -> tuple[Path, Path]:
    """Keras 2.1.5 (float16 2x slower) before, Keras 3 (3x slower) after: one machine."""
    return (write(tmp_path / "tf1.7" / "results.json", document(200.0, KERAS_215, "conv2d_1")),
            write(tmp_path / "keras3" / "results.json", document(300.0, KERAS_3, "conv2d")))


def test_compare_prints_the_ratio_before_and_after_and_the_op_that_changed(before_after: tuple[Path, Path]) -> None:
    code, stdout, stderr = run_cli("compare", *map(str, before_after))
    assert code == 0, stderr
    assert "Comparing tf1.7 (before) with keras3 (after) on AMD EPYC, 2 cores" in stdout
    assert "before  tf1.7: 2.00x slower than float32 (1.90-2.10x)" in stdout
    assert "after   keras3: 3.00x slower than float32 (2.86-3.15x)" in stdout
    # Keras 2.1.5's conv2d_1 is Keras 3's conv2d: the first Conv2D, whatever each named it.
    assert "conv2d #1 backward weights went from 40 ms to 140 ms (Conv2DBackpropFilter in both)" in stdout


def test_compare_json_shape(before_after: tuple[Path, Path]) -> None:
    code, stdout, _ = run_cli("compare", *map(str, before_after), "--json")
    assert code == 0
    result = json.loads(stdout)
    assert (result["from"], result["to"], result["machine"]) == ("tf1.7", "keras3", "AMD EPYC, 2 cores")
    (entry,) = result["stack_comparisons"]
    assert (entry["machine"], entry["precision"], entry["from"], entry["to"]) == ("host", "float16", "tf1.7", "keras3")
    assert entry["ratio_from"] == 0.5 and entry["ratio_interval_from"] == [0.47619, 0.525]  # 5 significant figures
    assert entry["ratio_to"] == pytest.approx(0.3333, abs=1e-4) and len(entry["ratio_interval_to"]) == 2
    (change,) = entry["changes"]  # the optimizer did not change
    assert change == {"position": 0, "layer_type": "conv2d", "layer_from": "conv2d_1", "layer_to": "conv2d",
                      "pass": "backward_weights", "impl_from": "Conv2DBackpropFilter",
                      "impl_to": "Conv2DBackpropFilter", "ms_from": 40.0, "ms_to": 140.0, "difference_ms": 100.0,
                      "time": "self", "against": False}
    assert entry["explained_share"] == 1.0 and entry["headline"].startswith("float16 against float32 went from")
    assert "slower" not in result  # only with --fail-if-slower


def test_fail_if_slower_trips_beyond_the_intervals(before_after: tuple[Path, Path]) -> None:
    # 0.5 (0.476-0.525) -> 0.333 (0.317-0.350): even the best reading after is 26 % below the worst before.
    code, stdout, stderr = run_cli("compare", *map(str, before_after), "--fail-if-slower", "10", "--json")
    assert code == EXIT_SLOWER == 4
    assert "slower than tf1.7 by more than 10 %: float16 (2.00x slower -> 3.00x slower, 26% beyond" in \
        one_line_error(stderr)
    assert json.loads(stdout)["slower"][0]["fell_beyond_intervals"] == pytest.approx(0.265, abs=1e-3)
    code, _, stderr = run_cli("compare", *map(str, before_after), "--fail-if-slower", "30")
    assert code == 0, stderr


def test_fail_if_slower_within_the_interval_is_no_failure(tmp_path: Path) -> None:
    # 2.00x -> 2.10x slower: 5 % by the medians, but the two intervals overlap.
    before = write(tmp_path / "a.json", document(200.0, KERAS_3, "conv2d"))
    after = write(tmp_path / "b.json", document(210.0, KERAS_3, "conv2d"))
    code, stdout, stderr = run_cli("compare", str(before), str(after), "--fail-if-slower", "1")
    assert code == 0, stderr
    assert "before  a.json: 2.00x slower" in stdout and "after   b.json: 2.10x slower" in stdout


def test_faster_after_never_trips(before_after: tuple[Path, Path]) -> None:
    code, _, stderr = run_cli("compare", str(before_after[1]), str(before_after[0]), "--fail-if-slower", "0")
    assert code == 0, stderr


def test_bad_input_is_a_usage_error_with_a_hint(tmp_path: Path, before_after: tuple[Path, Path]) -> None:
    code, _, stderr = run_cli("compare", str(tmp_path / "missing.json"), str(before_after[0]))
    assert code == EXIT_USAGE and "no such file" in one_line_error(stderr)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    code, _, stderr = run_cli("compare", str(before_after[0]), str(broken))
    assert code == EXIT_USAGE and "not valid JSON" in one_line_error(stderr)
    elsewhere = write(tmp_path / "xeon.json", document(300.0, KERAS_3, "conv2d", cpu="Intel Xeon"))
    code, stdout, stderr = run_cli("compare", str(before_after[0]), str(elsewhere))
    assert code == EXIT_USAGE and not stdout
    assert "were measured on different machines (CPU: AMD EPYC vs Intel Xeon)" in one_line_error(stderr)
    code, _, _ = run_cli("compare", str(before_after[0]), str(before_after[1]), "--fail-if-slower", "-5")
    assert code == EXIT_USAGE


def test_compare_on_two_stacks_measured_on_the_example_machine() -> None:
    """The examples: TensorFlow 2.10 (tf.keras) and TensorFlow 2.21 (Keras 3) on one 2-core AVX2 EPYC."""
    code, stdout, stderr = run_cli("compare", str(EXAMPLES / "cpu-epyc-avx2-tf2.10-quick" / "results.json"),
                                   str(EXAMPLES / "cpu-epyc-avx2-quick" / "results.json"), "--json")
    assert code == 0, stderr
    (entry,) = json.loads(stdout)["stack_comparisons"]
    assert (entry["from"], entry["to"], entry["precision"]) == ("tf2.10-cpu", "host", "float16")
    assert entry["step_change_ms"] < 0 and 0 <= entry["explained_share"] <= 1
    top = entry["changes"][0]
    assert top["layer_type"] == "Conv2D" and top["layer_from"] == top["layer_to"]  # both count from 0


def test_keras_2_1_5s_layers_pair_with_keras_3s_by_position_not_by_name() -> None:
    """TensorFlow 1.7 / Keras 2.1.5 (numbers its layers from 1) against TensorFlow 2.21 / Keras 3 (from 0), one
    machine: the first convolution is conv2d_1 in one and conv2d in the other, and its float16 weight gradient is
    one change, not two unmatched ops."""
    code, stdout, stderr = run_cli("compare", str(EXAMPLES / "cpu-epyc-avx2-tf1.7-quick" / "results.json"),
                                   str(EXAMPLES / "cpu-epyc-avx2-quick" / "results.json"), "--json")
    assert code == 0, stderr
    (entry,) = json.loads(stdout)["stack_comparisons"]
    assert (entry["from"], entry["to"], entry["precision"]) == ("tf1.7-cpu", "host", "float16")
    first = next(c for c in entry["changes"] if (c["layer_type"], c["position"], c["pass"])
                 == ("Conv2D", 0, "backward_weights"))
    assert (first["layer_from"], first["layer_to"]) == ("conv2d_1", "conv2d")
    assert first["ms_from"] > first["ms_to"] > 0 and first["impl_from"] == "Conv2DBackpropFilter"
    second = next(c for c in entry["changes"] if (c["layer_type"], c["position"]) == ("Conv2D", 1))
    assert (second["layer_from"], second["layer_to"]) == ("conv2d_2", "conv2d_1")


def test_the_readme_quotes_compare_as_it_prints() -> None:
    """The README's `compare` block is the command's output on the examples, line for line."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = next(line for line in readme.splitlines() if line.startswith("$ fp16doctor compare "))
    block = readme.split(command + "\n", 1)[1].split("```", 1)[0]
    code, stdout, stderr = run_cli("compare", *(str(ROOT / path) for path in command.split()[3:]))
    assert code == 0, stderr
    assert [line.rstrip() for line in stdout.strip().splitlines()] == [
        line.rstrip() for line in block.strip().splitlines()]
