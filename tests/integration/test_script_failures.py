"""diagnose --script on real small Keras scripts (CPU, real TensorFlow) that fail under a 16-bit precision or raise
after their measured steps: a failure is a line of every output at the user's own line, with its known cause and
fix, one line without escape codes, never offered again as untested nor said to be retried by --resume; steps
measured before a later crash are kept, and a file the script is handed is never overwritten."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from script_env import fp16doctor

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"
MAX_LINE = 200


def _run(doc: dict[str, Any], precision: str) -> dict[str, Any]:
    return next(r for r in doc["runs"] if r["precision"] == precision and r.get("variant", "original") == "original")


@pytest.mark.parametrize(("script", "precision", "line", "kind", "words"), [
    ("vae_sampling_mixed_dtypes.py", "mixed_bfloat16", 14, "dtype_mixing",
     "a bfloat16 tensor times a float32 one under the mixed_bfloat16 policy"),
    ("positions_int16_arange.py", "float16", 21, "int16_range",
     "`ops.arange` made an int16 range in layer add_positions"),
])
def test_a_precision_the_script_fails_under_is_a_failed_line_at_the_users_line(
        tmp_path: Path, script: str, precision: str, line: int, kind: str, words: str) -> None:
    done = fp16doctor(tmp_path, "diagnose", "--script", str(SCRIPTS / script), "--steps", "5", "--precision",
                       "float32", "--precision", precision, "--no-experiments", "--out", "out")
    assert done.returncode == 3, done.stderr[-3000:]
    place = f"{script}:{line}"
    # The terminal: the failed line in the answer, the one-line error naming the place, no --resume for it.
    assert f"{precision}: failed at {place} (`" in done.stdout and words in " ".join(done.stdout.split())
    assert f"({precision_label(precision)} at {place})" in done.stderr
    assert "--resume does not retry it" in done.stderr and "to retry" not in done.stderr
    for text in (done.stdout, done.stderr):
        assert "\x1b" not in text and max(len(x) for x in text.splitlines()) <= MAX_LINE, text
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert _run(doc, "float32")["status"] == "ok"
    failed = _run(doc, precision)
    assert failed["status"] == "failed" and failed["failure_kind"] == kind and failed["deterministic"] is True
    assert words in failed["error"] and len(failed["error"]) <= MAX_LINE and failed["fix"]
    assert failed["error_location"]["file"] == script and failed["error_location"]["line"] == line
    assert failed["script_log"] == f"script-logs/host-{precision}.log"
    offered = [u.get("precision") for p in doc.get("prescriptions") or [] for u in p.get("untested") or []]
    assert precision not in offered
    # explain and the report of the saved document keep it.
    explained = fp16doctor(tmp_path, "explain", "out/results.json")
    assert explained.returncode == 0 and f"{precision}: failed at {place}" in explained.stdout
    assert f"log: script-logs/host-{precision}.log" in " ".join(explained.stdout.split())
    assert f"failed at {place}" in (tmp_path / "out" / "report.html").read_text()


def precision_label(precision: str) -> str:
    return f"host / {precision} / original"


def test_steps_before_a_later_crash_are_kept_and_a_file_argument_is_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / "ckpt.txt").write_text("the user's own checkpoint\n")
    done = fp16doctor(tmp_path, "diagnose", "--script", str(SCRIPTS / "callback_raises_late.py"), "--steps", "30",
                       "--precision", "float32", "--no-experiments", "--script-arg", "ckpt.txt", "--out", "out")
    assert done.returncode == 0, done.stderr[-3000:]
    run = _run(json.loads((tmp_path / "out" / "results.json").read_text()), "float32")
    workload = run["workload"]
    # The callback raised at batch 25: two warm-up steps, then 23 measured ones, kept.
    assert run["status"] == "ok" and run["step_time_ms"]["n"] == 23 and workload["ended"] == "raised"
    assert workload["ended_by"]["exception"] == "RuntimeError"
    assert workload["ended_by"]["location"]["file"] == "callback_raises_late.py"
    assert any("raised RuntimeError at callback_raises_late.py:" in note for note in workload["notes"])
    # The argument named an existing file: passed as typed, the script wrote a copy, never the user's.
    assert (tmp_path / "ckpt.txt").read_text() == "the user's own checkpoint\n"
    assert json.loads((tmp_path / "out" / "results.json").read_text())["invocation"]["script"]["args"] == ["ckpt.txt"]
