"""`fp16doctor explain` through its real entry point (cli.main): good files give findings, bad ones a
one-line error, a hint and a non-zero exit, never a traceback. Hypothesis generates the bad ones."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fp16doctor import cli
from fp16doctor.analysis import analyse
from fp16doctor.errors import DoctorError
from fp16doctor.results import validate

DATA = Path(__file__).resolve().parents[2] / "data"
SEED_EXAMPLE = DATA / "examples" / "seed-titanv-tf1.7.json"
CASES_DIR = DATA / "cases"


def run_explain(path: Path, *extra: str) -> tuple[int, str, str]:
    """cli.main() in-process, as the console script runs it: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["fp16doctor", "explain", str(path), *extra]
    code: int | str | None = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main()
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = argv
    return (code if isinstance(code, int) else 1), out.getvalue(), err.getvalue()


def assert_clean_failure(code: int, stdout: str, stderr: str) -> None:
    assert code != 0
    assert "Traceback" not in stderr and "Traceback" not in stdout
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines and lines[0].startswith("error: "), stderr
    assert len(lines) <= 2, stderr  # one line of message, at most one line of hint
    assert len(lines) == 1 or lines[1].startswith("hint: ")


def test_explain_json_on_the_original_question() -> None:
    code, stdout, _ = run_explain(CASES_DIR / "volta-titanv-keras215-floatx16.json", "--json")
    assert code == 0
    ids = {f["id"] for f in json.loads(stdout)["findings"]}
    assert {"pure_float16_floatx", "host_fp16_emulation", "old_stack", "tensor_cores_not_eligible"} <= ids
    assert not ids & {"no_fast_fp16_hardware", "no_tensor_cores", "fp16_faster", "tf32_baseline"}


def test_explain_on_the_seed_example() -> None:
    assert SEED_EXAMPLE.is_file(), f"test data missing: {SEED_EXAMPLE}"
    code, stdout, _ = run_explain(SEED_EXAMPLE, "--json")
    assert code == 0
    ids = [f["id"] for f in json.loads(stdout)["findings"]]
    assert {"pure_float16_floatx", "host_fp16_emulation", "old_stack", "tensor_cores_not_eligible"} <= set(ids)


def test_explain_text_names_measurements_best_case_and_fixes() -> None:
    code, stdout, _ = run_explain(CASES_DIR / "volta-titanv-keras215-floatx16.json", "--full")
    assert code == 0
    assert "800 ms a step" in stdout and "500 ms a step" in stdout
    assert "at most" in stdout and "you measured 1.60x slower" in stdout
    assert "mixed_precision.set_global_policy('mixed_float16')" in stdout


def test_missing_file(tmp_path: Path) -> None:
    code, stdout, stderr = run_explain(tmp_path / "nope.json")
    assert_clean_failure(code, stdout, stderr)
    assert "no such file" in stderr


def test_not_json(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text("{ not json", encoding="utf-8")
    code, stdout, stderr = run_explain(p)
    assert_clean_failure(code, stdout, stderr)
    assert "not valid JSON" in stderr


def test_unknown_schema_version(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"schema_version": 2, "host": {"gpus": []}, "runs": []}), encoding="utf-8")
    code, stdout, stderr = run_explain(p)
    assert_clean_failure(code, stdout, stderr)
    assert "unsupported schema_version 2" in stderr


def test_windows_bom_is_accepted(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_bytes(b"\xef\xbb\xbf" + (CASES_DIR / "kepler-k40-pytorch-apex.json").read_bytes())
    code, stdout, _ = run_explain(p, "--json")
    assert code == 0 and "no_fast_fp16_hardware" in stdout


def test_markup_like_values_do_not_break_the_error_line(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    doc = {"schema_version": 1, "host": {"gpus": []},
           "runs": [{"stack": "a", "precision": "[/]", "device": "cpu", "status": "ok", "step_time_ms": {"median": 1}}]}
    p.write_text(json.dumps(doc), encoding="utf-8")
    code, stdout, stderr = run_explain(p)
    assert_clean_failure(code, stdout, stderr)
    assert "'[/]'" in stderr


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


def _minimal_doc() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "host": {"gpus": [{"index": 0, "name": "NVIDIA TITAN V", "compute_capability": "7.0"}]},
        "runs": [
            {"stack": "s", "precision": "float32", "device": "gpu:0", "status": "ok", "step_time_ms": {"median": 500}},
            {"stack": "s", "precision": "float16", "device": "gpu:0", "status": "ok", "step_time_ms": {"median": 800}},
        ],
    }


PATHS = [
    ("schema_version",), ("host",), ("host", "gpus"), ("host", "gpus", 0), ("host", "gpus", 0, "name"),
    ("host", "gpus", 0, "compute_capability"), ("runs",), ("runs", 0), ("runs", 0, "precision"),
    ("runs", 0, "status"), ("runs", 0, "step_time_ms"), ("runs", 0, "step_time_ms", "median"),
    ("runs", 1, "software"), ("runs", 1, "workload"), ("runs", 1, "loss"), ("runs", 1, "model"),
    ("runs", 1, "input_time_ms"), ("runs", 1, "first_step_ms"), ("host", "cpu"), ("findings",),
]


LAYER_KEYS = ("type", "in_channels", "out_channels", "kernel", "output_shape", "input_shape", "flops_per_example",
              "params")
SOFTWARE_KEYS = ("python", "tensorflow", "keras", "keras_backend", "keras_api", "cuda", "cudnn", "torch", "jax")
PLAUSIBLE = st.one_of(
    st.dictionaries(st.sampled_from(SOFTWARE_KEYS), st.text(max_size=6) | st.integers() | st.floats(), max_size=5),
    st.lists(st.dictionaries(st.sampled_from(LAYER_KEYS), JSON_VALUES | st.sampled_from(["Conv2D", "Dense"]),
                             max_size=6), max_size=4).map(lambda layers: {"layers": layers}),
    st.fixed_dictionaries({"name": st.sampled_from(["seed_cnn", "x"]), "image_height": st.integers(-5, 10**6),
                           "image_width": st.integers(-5, 10**6), "batch_size": st.integers(-5, 10**4)}),
)
PLAUSIBLE_PATHS = [("runs", 1, "software"), ("runs", 1, "model"), ("runs", 1, "workload"),
                   ("runs", 0, "software"), ("runs", 0, "workload")]


@settings(max_examples=150, deadline=None)
@given(path=st.sampled_from(PLAUSIBLE_PATHS), value=PLAUSIBLE)
def test_analyse_copes_with_odd_versions_layers_and_sizes(path: tuple[Any, ...], value: Any) -> None:
    doc = _minimal_doc()
    _set(doc, path, value)
    try:
        validate(doc)
    except DoctorError:
        return
    for finding in analyse(doc):
        assert 0 < finding["confidence"] < 1 and finding["evidence"]


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=64))
def test_arbitrary_bytes_never_crash(tmp_path: Path, raw: bytes) -> None:
    p = tmp_path / "r.json"
    p.write_bytes(raw)
    code, stdout, stderr = run_explain(p, "--json")
    if code == 0:  # only a valid document (vanishingly rare from random bytes) may succeed
        assert "findings" in json.loads(stdout)
    else:
        assert_clean_failure(code, stdout, stderr)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=JSON_VALUES)
def test_arbitrary_json_is_rejected_cleanly(tmp_path: Path, value: Any) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps(value), encoding="utf-8")
    code, stdout, stderr = run_explain(p)
    assert_clean_failure(code, stdout, stderr)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(PATHS), value=JSON_VALUES)
def test_one_wrong_field_gives_an_error_or_findings_never_a_traceback(
    tmp_path: Path, path: tuple[Any, ...], value: Any
) -> None:
    doc = _minimal_doc()
    _set(doc, path, value)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    code, stdout, stderr = run_explain(p, "--json")
    if code == 0:
        assert isinstance(json.loads(stdout)["findings"], list)
    else:
        assert_clean_failure(code, stdout, stderr)


@settings(max_examples=150, deadline=None)
@given(path=st.sampled_from(PATHS), value=JSON_VALUES)
def test_analyse_never_raises_on_a_valid_document(path: tuple[Any, ...], value: Any) -> None:
    doc = _minimal_doc()
    _set(doc, path, value)
    try:
        validate(doc)
    except DoctorError:  # invalid documents are the CLI's business, tested above
        return
    findings = analyse(doc)
    assert all({"id", "title", "severity", "confidence", "evidence", "recommendation"} <= set(f) for f in findings)
