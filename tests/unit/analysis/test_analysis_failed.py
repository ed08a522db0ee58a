"""A failed run as every output says it (analysis/failed.py): a line of the answer with the user's file and line,
the reason in one line, its fix and its log; never left out of `explain`, never offered again as untested where the
script itself failed under that precision, and a record written before those fields existed read as well as it
allows."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

from fp16doctor import cli
from fp16doctor.analysis import diagnose_document
from fp16doctor.analysis.failed import failed_run
from fp16doctor.report import render_html, render_markdown
from fp16doctor.textout.diagnose import failed_runs_message, run_notes

SOFTWARE = {"keras": "3.15.1", "tensorflow": "2.21.0", "keras_backend": "tensorflow"}
LOCATION = {"file": "vae.py", "line": 31, "code": "return z_mean + tf.exp(0.5 * z_log_var) * epsilon"}


def _run(precision: str, **fields: Any) -> dict[str, Any]:
    return {"stack": "host", "precision": precision, "device": "cpu", "workload": {"name": "script"},
            "software": SOFTWARE, **fields}


def _document() -> dict[str, Any]:
    """float32 measured; mixed_bfloat16 failed in the script's own line (a record as diagnose writes it now); float16
    failed in a record written before the failure's fields existed (escape codes, the whole message)."""
    return {
        "schema_version": 1,
        "host": {"cpu": {"model": "AMD EPYC", "cores": 2, "flags": ["avx512_bf16"]}, "gpus": []},
        "invocation": {"argv": ["fp16doctor", "diagnose", "--script", "vae.py"]},
        "runs": [
            _run("float32", status="ok", step_time_ms={"median": 100.0, "p10": 95.0, "p90": 105.0, "n": 10}),
            _run("mixed_bfloat16", status="failed", failure_kind="dtype_mixing", deterministic=True,
                 error="a bfloat16 tensor times a float32 one under the mixed_bfloat16 policy",
                 fix="cast the float32 one to the other's dtype where they meet (`tf.cast(t, other.dtype)`)",
                 error_location=LOCATION, script_log="script-logs/host-mixed_bfloat16.log",
                 script_failure={"kind": "exception", "exception": "TypeError"}),
            _run("float16", status="failed", failure_kind="unknown",
                 error="\x1b[1mInvalidArgumentError: No OpKernel was registered to support Op 'Range' used by "
                       "{{node StatefulPartitionedCall/functional_1/pos_1/range}} with these attrs: [Tidx=DT_INT16]\n"
                       "Registered devices: [CPU]\nRegistered kernels:\n" + "  device='CPU'; Tidx in [DT_INT64]\n" * 40,
                 script_failure={"kind": "exception", "exception": "InvalidArgumentError"}),
        ],
    }


def test_a_failed_run_reads_as_its_place_its_reason_its_fix_and_its_log() -> None:
    doc = _document()
    new, old = failed_run(doc["runs"][1]), failed_run(doc["runs"][2])
    assert new is not None and old is not None and failed_run(doc["runs"][0]) is None
    assert new.failed_at == "failed at vae.py:31 (`return z_mean + tf.exp(0.5 * z_log_var) * epsilon`)"
    assert new.explained == ("a bfloat16 tensor times a float32 one under the mixed_bfloat16 policy; cast the float32 "
                             "one to the other's dtype where they meet (`tf.cast(t, other.dtype)`) "
                             "(log: script-logs/host-mixed_bfloat16.log)")
    assert new.deterministic
    # An older record: its exception read again for a known cause, one line, no escape codes.
    assert old.kind == "int16_range" and "layer pos_1 under floatx float16" in old.reason
    assert 'dtype="int32"' in old.fix and old.failed_at == "failed" and old.deterministic


def test_each_failed_precision_is_a_line_of_the_answer_after_the_measured_ones() -> None:
    answer = diagnose_document(_document()).answer
    failed = [line for line in answer.precisions if line.failed]
    assert [line.label for line in failed] == ["mixed_bfloat16", "float16"]
    assert failed[0].text == "mixed_bfloat16: failed at vae.py:31 (`return z_mean + tf.exp(0.5 * z_log_var) * epsilon`)"
    assert failed[0].cause.startswith("a bfloat16 tensor times a float32 one") and "log:" in failed[0].cause
    assert failed[1].text == "float16: failed"


def test_a_precision_the_script_failed_in_is_not_offered_as_untested() -> None:
    """This CPU has AVX512-BF16, which would suggest measuring mixed_bfloat16: it was, and failed in the script."""
    prescriptions = diagnose_document(_document()).to_dict()["prescriptions"]
    offered = [u.get("precision") for p in prescriptions for u in p.get("untested") or []]
    assert "mixed_bfloat16" not in offered and "float16" not in offered
    doc = _document()
    doc["runs"][1].update(deterministic=False, failure_kind="timeout")  # a run that may pass another time
    doc["runs"] = doc["runs"][:2]
    prescriptions = diagnose_document(doc).to_dict()["prescriptions"]
    assert "mixed_bfloat16" in [u.get("precision") for p in prescriptions for u in p.get("untested") or []]


def _explain(path: Path) -> str:
    out, argv = io.StringIO(), sys.argv
    sys.argv = ["fp16doctor", "explain", str(path)]
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            cli.main()
    finally:
        sys.argv = argv
    return out.getvalue()


def test_explain_the_summary_and_the_reports_keep_every_failed_precision(tmp_path: Path) -> None:
    doc = _document()
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    text = _explain(path)
    assert "mixed_bfloat16: failed at vae.py:31" in text and "float16: failed" in text
    assert "log: script-logs/host-mixed_bfloat16.log" in " ".join(text.split()) and "\x1b" not in text
    assert max(len(line) for line in text.splitlines()) <= 200
    assert "failed at vae.py:31" in render_markdown([doc])
    assert "failed at vae.py:31" in render_html([doc])
    assert run_notes(diagnose_document(doc).runs) == []  # said once, in the answer


def test_the_error_line_says_what_to_change_not_to_retry_a_failure_that_would_recur() -> None:
    class Outcome:
        def __init__(self, doc: dict[str, Any]) -> None:
            self.diagnosis = diagnose_document(doc)
            self.results_path = Path("out/results.json")

    said = failed_runs_message(Outcome(_document()))  # type: ignore[arg-type]
    assert said is not None
    message, hint = said
    assert "host / mixed_bfloat16 / original at vae.py:31" in message
    assert "--resume does not retry it" in hint and "to retry" not in hint
    doc = _document()
    doc["runs"][2].update(failure_kind="timeout", deterministic=False)
    message, hint = failed_runs_message(Outcome(doc)) or ("", "")  # type: ignore[arg-type]
    assert "--resume to retry host / float16 / original" in hint and "what to change" in hint


def test_the_error_line_stays_one_line_of_200_characters_with_several_long_places() -> None:
    """Two runs failing at a long file's lines: the one-line error names the runs without their places (each is on
    its line of the answer above), so "error: " and the message stay within 200 characters."""
    class Outcome:
        def __init__(self, doc: dict[str, Any]) -> None:
            self.diagnosis = diagnose_document(doc)
            self.results_path = Path("out/results.json")

    doc = _document()
    for run in doc["runs"]:
        if isinstance(run.get("error_location"), dict):
            run["error_location"]["file"] = "text_classification_with_a_transformer_block_and_positions.py"
    doc["runs"][2].update(status="failed", error_location={"file": doc["runs"][1]["error_location"]["file"],
                                                           "line": 80}, script_failure={"kind": "exception"})
    message, _ = failed_runs_message(Outcome(doc)) or ("", "")  # type: ignore[arg-type]
    assert message.startswith("2 run(s) failed (") and len("error: " + message) <= 200, message
