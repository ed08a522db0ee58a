"""Fixtures for the scale-out tests: a fleet of fake engines and a recording progress."""

from __future__ import annotations

import pytest
from fleet_fakes import Fleet, RecordingProgress


@pytest.fixture
def fleet(monkeypatch: pytest.MonkeyPatch) -> Fleet:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    return Fleet(monkeypatch)


@pytest.fixture
def progress() -> RecordingProgress:
    return RecordingProgress()
