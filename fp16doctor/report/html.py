"""Jinja2 rendering of the report view: templates found in the wheel or the source checkout, autoescape on."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from fp16doctor.analysis.values import fmt_ms, fmt_pct, fmt_rate, fmt_signed_ms
from fp16doctor.errors import DoctorError
from fp16doctor.report.viewmodel import ReportView

_PACKAGE = Path(__file__).resolve().parent.parent


def template_dirs() -> list[Path]:
    """Where the templates may be: shipped in the wheel (pyproject force-include), or the repository root."""
    return [_PACKAGE / "_data" / "templates", _PACKAGE.parent / "templates"]


def template_dir() -> Path:
    for candidate in template_dirs():
        if (candidate / "report.html.j2").is_file():
            return candidate
    raise DoctorError(
        "the report templates are missing from this installation",
        hint="reinstall fp16doctor (the wheel ships them as fp16doctor/_data/templates)",
    )


@lru_cache(maxsize=4)
def _environment(directory: Path) -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(directory)),
        autoescape=True,  # every value from a results file is text, never markup
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["ms"] = fmt_ms
    env.filters["delta"] = fmt_signed_ms
    env.filters["pct"] = fmt_pct
    env.filters["rate"] = fmt_rate
    env.filters["confidence"] = fmt_pct
    return env


def render_view(view: ReportView) -> str:
    template = _environment(template_dir()).get_template("report.html.j2")
    return template.render(report=view)
