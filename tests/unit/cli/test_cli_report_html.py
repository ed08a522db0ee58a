"""`explain` and `report` read a report.html as they read its results.json: the report embeds its documents."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import EXAMPLES, SEED, run_cli

from fp16doctor.errors import EXIT_ERROR, EXIT_USAGE

EXAMPLE = EXAMPLES / "cpu-epyc-avx512bf16-quick"


def test_explain_of_a_report_gives_what_explain_of_its_results_gives(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    assert run_cli("report", str(SEED), "--out", str(page)).code == 0
    from_html = run_cli("explain", str(page), "--json")
    from_json = run_cli("explain", str(SEED), "--json")
    assert from_html.code == 0, from_html.stderr
    assert json.loads(from_html.stdout) == json.loads(from_json.stdout)
    assert "float16 is" in run_cli("explain", str(page)).stdout


def test_explain_reads_the_examples_reports() -> None:
    done = run_cli("explain", str(EXAMPLE / "report.html"), "--json")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["prescriptions"][0]["recommended"]["precision"] == "mixed_bfloat16"


def test_a_report_made_from_a_report_carries_the_same_diagnosis(tmp_path: Path) -> None:
    first = tmp_path / "first.html"
    assert run_cli("report", str(SEED), "--out", str(first)).code == 0
    again = tmp_path / "again.md"
    done = run_cli("report", str(first), "-o", str(again), "-f", "markdown")
    assert done.code == 0, done.stderr
    again_md = again.read_text(encoding="utf-8")  # the same diagnosis: its verdict, as the detail words it
    assert "on NVIDIA TITAN V" in again_md and "- float16 is 1.60x slower than float32 (800 ms vs 500 ms" in again_md


def test_a_comparison_report_is_reported_again_whole_but_explained_one_document_at_a_time(tmp_path: Path) -> None:
    both = tmp_path / "both.html"
    assert run_cli("report", str(SEED), str(EXAMPLE / "results.json"), "--out", str(both)).code == 0
    stdout = run_cli("report", str(both), "--out", "-", "--format", "markdown")
    assert stdout.code == 0 and "NVIDIA TITAN V" in stdout.stdout and "AMD EPYC" in stdout.stdout
    explained = run_cli("explain", str(both))
    assert explained.code == EXIT_USAGE
    assert "a comparison report of 2 diagnoses" in explained.stderr and "hint:" in explained.stderr


def test_report_to_stdout_writes_no_file_and_prints_the_page(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    done = run_cli("report", str(SEED), "--out", "-")
    assert done.code == 0 and done.stdout.lstrip().startswith("<!DOCTYPE html>") and list(tmp_path.iterdir()) == []


def test_an_html_page_that_is_no_report_is_one_line_with_a_hint(tmp_path: Path) -> None:
    page = tmp_path / "index.html"
    page.write_text("<!DOCTYPE html><html><body><script>var x = 1;</script></body></html>")
    done = run_cli("explain", str(page))
    assert done.code == EXIT_ERROR
    assert "an HTML file without fp16doctor's embedded results" in done.stderr and "Traceback" not in done.stderr
