"""The suite as CI collects it: `pytest` over all of tests/ imports each test module by its bare name (no
packages), so two test files of one name in two folders stop the whole run at collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def test_every_test_module_has_a_name_of_its_own() -> None:
    names = Counter(p.name for p in TESTS.rglob("*.py")
                    if "data" not in p.relative_to(TESTS).parts and p.name not in ("__init__.py", "conftest.py")
                    and "fake_" not in str(p.relative_to(TESTS)))
    assert [name for name, count in names.items() if count > 1] == []
