"""What every section of the report shares: tolerant readers that redact, and small phrases."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fp16doctor.report.redact import redact_text


def dict_of(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def list_of(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if number == number and number not in (float("inf"), float("-inf")) else None


def positive(value: Any) -> float | None:
    number = num(value)
    return number if number is not None and number > 0 else None


def text(value: Any) -> str:
    """A redacted display string for any JSON value; empty when missing."""
    if value is None:
        return ""
    return redact_text(str(value))


def host_gpus(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [g for g in list_of(dict_of(doc.get("host")).get("gpus")) if isinstance(g, dict)]

