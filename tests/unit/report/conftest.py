"""Fixtures for the report tests."""

from __future__ import annotations

from typing import Any

import pytest
from report_helpers import fixed_sources, load_fixture

from fp16doctor.report.viewmodel import Sources


@pytest.fixture
def seed_doc() -> dict[str, Any]:
    return load_fixture("seed")


@pytest.fixture
def rich_doc() -> dict[str, Any]:
    return load_fixture("synthetic-two-stacks")


@pytest.fixture
def cpu_doc() -> dict[str, Any]:
    return load_fixture("cpu-only")


@pytest.fixture
def sources() -> Sources:
    return fixed_sources()
