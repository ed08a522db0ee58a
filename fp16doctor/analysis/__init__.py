"""The analysis: a results document in, ranked findings out. Pure: no I/O, no framework import.

`analyse(doc)` runs one rule per finding id of CONTRACT.md (see `rules.py`) and ranks what they find:
critical before warning before info, then by confidence. `roofline.estimate(doc)` gives the best-case
fp32/fp16 step times the rules use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fp16doctor.analysis.context import build_context
from fp16doctor.analysis.rules import RULES

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}


def analyse(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Ranked findings for one results document (any optional key may be missing)."""
    ctx = build_context(doc)
    findings = [f for f in (rule(ctx) for rule in RULES.values()) if f is not None]
    findings.sort(key=lambda f: (SEVERITY_RANK.get(f["severity"], 3), -f["confidence"]))
    for rank, finding in enumerate(findings, start=1):
        finding["rank"] = rank
    return findings


__all__ = ["analyse"]
