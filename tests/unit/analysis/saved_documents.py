"""Every results document the project keeps (the examples and the test data), for the tests that read each one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def load(path: Path) -> dict[str, Any] | None:
    """The document at `path`, or None where it is no JSON object."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def documents_with(*keys: str) -> list[Path]:
    """The kept documents with runs or with any of `keys` (what an earlier release saved)."""
    paths = sorted([*ROOT.glob("docs/examples/*/results.json"), *ROOT.glob("tests/data/**/*.json")])
    return [p for p in paths if (doc := load(p)) is not None and any(doc.get(k) for k in ("runs", *keys))]
