"""The HTML report: self-contained, safe to open when it comes from a stranger, and complete."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from report_helpers import HOSTILE_ATTR, HOSTILE_SCRIPT, SEED, fixed_sources, hostile_doc

from fp16doctor.errors import DoctorError
from fp16doctor.report import render_html, write_report
from fp16doctor.report.html import render_view, template_dir, template_dirs
from fp16doctor.report.viewmodel import build_report

EXTERNAL = [
    re.compile(r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE),
    re.compile(r"@import", re.IGNORECASE),
    re.compile(r"url\(\s*['\"]?\s*(?:https?:)?//", re.IGNORECASE),
]


def _render(docs, sources=None) -> str:
    return render_view(build_report(docs, sources or fixed_sources()))


def _embedded(page: str) -> list[dict]:
    match = re.search(r'<script type="application/json" id="fp16doctor-results">(.*?)</script>', page, re.S)
    assert match, "results are embedded"
    return json.loads(match.group(1))


def test_seed_report_has_gpu_both_step_times_and_no_external_loads(seed_doc):
    page = _render([seed_doc])
    assert "NVIDIA TITAN V" in page
    assert "500 ms" in page and "800 ms" in page
    assert "1.60x slower" in page
    for pattern in EXTERNAL:
        assert not pattern.search(page), pattern.pattern
    # the only URL allowed is the SVG namespace, which is an identifier and never fetched
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}


def test_results_embedded_exactly_once_and_round_trip(seed_doc):
    page = _render([seed_doc])
    assert page.count('id="fp16doctor-results"') == 1
    assert _embedded(page) == [seed_doc]


def test_page_forbids_scripts_and_network_by_policy(seed_doc):
    page = _render([seed_doc])
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp and "default-src 'none'" in csp.group(1) and "script-src" not in csp.group(1)
    assert len(re.findall(r"<script\b", page)) == 1  # the JSON block, which never runs


def test_hostile_strings_are_escaped_everywhere():
    doc = hostile_doc()
    page = _render([doc])
    for raw in (HOSTILE_SCRIPT, HOSTILE_ATTR, "<img", "<style>body", "</script><script>"):
        assert raw not in page, raw
    assert len(re.findall(r"<style\b", page)) == 1  # the report's own stylesheet only
    assert html.escape(HOSTILE_SCRIPT) in page or "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    # one script element (inert JSON); hostile text cannot close it early
    assert len(re.findall(r"<script\b", page, re.I)) == 1
    assert len(re.findall(r"</script", page, re.I)) == 1
    # and the embedded JSON still carries the original strings, exactly
    embedded = _embedded(page)[0]
    assert embedded["host"]["gpus"][0]["name"] == HOSTILE_SCRIPT
    assert embedded["runs"][0]["stack"] == HOSTILE_ATTR


def test_hostile_strings_inside_svg_labels_are_escaped():
    page = _render([hostile_doc()])
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    assert svgs
    for svg in svgs:
        assert "<img" not in svg and "onerror=alert(1)>" not in svg


def test_comparison_names_every_machine(seed_doc, cpu_doc, rich_doc):
    page = _render([seed_doc, rich_doc, cpu_doc])
    assert "Across machines" in page
    for name in ("NVIDIA TITAN V", "Example GPU X", "Example EPYC (CPU only)"):
        assert page.count(name) >= 3, name  # heading, verdict, section
    assert len(_embedded(page)) == 3


def test_failed_runs_show_their_error(rich_doc):
    page = _render([rich_doc])
    assert "container exited 137: out of memory" in page
    assert "Keras 2.1.5 has no mixed precision policy" in page
    assert "hunter2" not in page


def test_findings_evidence_and_fix_code(rich_doc):
    page = _render([rich_doc])
    assert page.index("Host builds float16 batches in software") < page.index("Pure float16 via floatx")
    assert "input 400 ms per batch in float16 vs 60 ms in float32" in page
    assert "K.set_floatx(&#39;float32&#39;)" in page  # Keras 2.1.5 code for the tf1.7 stack


def test_environment_and_reproduce_sections(rich_doc):
    page = _render([rich_doc])
    for text in (
        "550.54",
        "12.4",
        "3.5.2",
        "2.1.5",
        "7.0.5",
        "fp16doctor/tf1.7-cuda9.0:0.1.0",
        "fp16doctor diagnose --stack tf1.7-cuda9.0",
    ):
        assert text in page, text


def test_light_dark_and_print_styles(seed_doc):
    page = _render([seed_doc])
    assert "prefers-color-scheme: dark" in page
    assert "@media print" in page


def test_public_render_html_uses_real_sources(seed_doc):
    page = render_html([seed_doc])
    assert "NVIDIA TITAN V" in page and "fp16doctor-results" in page


def test_write_report_html_and_markdown(tmp_path: Path, seed_doc):
    out = tmp_path / "sub" / "report.html"
    write_report([seed_doc], out, "html")
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    md = tmp_path / "summary.md"
    write_report([seed_doc], md, "markdown")
    assert "| stack | precision |" in md.read_text(encoding="utf-8")


def test_write_report_unwritable_is_a_doctor_error(tmp_path: Path, seed_doc):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DoctorError) as info:
        write_report([seed_doc], blocker / "report.html", "html")
    assert info.value.hint
    with pytest.raises(DoctorError):
        write_report([seed_doc], tmp_path, "html")
    with pytest.raises(DoctorError):
        write_report([seed_doc], tmp_path / "x.pdf", "pdf")
    with pytest.raises(DoctorError):
        write_report([], tmp_path / "x.html", "html")


def test_templates_found_in_the_checkout():
    assert template_dir() in template_dirs()
    assert (template_dir() / "report.html.j2").is_file()
    assert SEED.is_file()
