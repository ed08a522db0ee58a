"""A saved record read into a frozen fact and written back as it was: the one way the typed facts (finding.py,
verdict.py, prescription.py) keep what results.json holds."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


def text(value: Any) -> str | None:
    """A saved text as it was written; None where absent (or not a text)."""
    return value if isinstance(value, str) else None


def frozen(value: Any) -> Any:
    """A saved value made read-only: a mapping a MappingProxyType, a list a tuple, all the way down."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(frozen(v) for v in value)
    return value


def thawed(value: Any) -> Any:
    """A frozen value as JSON holds it again (`frozen` undone)."""
    if isinstance(value, Mapping):
        return {k: thawed(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thawed(v) for v in value]
    return value


__all__ = ["frozen", "text", "thawed"]
