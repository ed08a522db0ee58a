"""`fp16doctor report` through the real entry point: files in, one report out, errors as one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from report_helpers import FIXTURES, SEED


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fp16doctor", "report", *args], capture_output=True, text=True, timeout=120
    )


def test_two_files_make_one_comparison(tmp_path: Path) -> None:
    out = tmp_path / "compare.html"
    done = _cli(str(SEED), str(FIXTURES / "cpu-only.json"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    page = out.read_text(encoding="utf-8")
    assert "NVIDIA TITAN V" in page and "Example EPYC (CPU only)" in page and "Across machines" in page


def test_markdown_format(tmp_path: Path) -> None:
    out = tmp_path / "summary.md"
    done = _cli(str(SEED), "--out", str(out), "--format", "markdown")
    assert done.returncode == 0, done.stderr
    assert "## fp16doctor: float16 vs float32 on NVIDIA TITAN V" in out.read_text(encoding="utf-8")


def test_unwritable_output_is_one_line_with_a_hint(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    done = _cli(str(SEED), "--out", str(blocker / "r.html"))
    assert done.returncode != 0
    assert "cannot write the report" in done.stderr and "hint" in done.stderr
    assert "Traceback" not in done.stderr
