"""What the repository shares (tests, docs, examples, recorded data) carries no path of the machine that made it.

The test spells out no such path itself: it asks this machine for its own (the checkout, the folder it lies in,
the home directory) and looks for them, plus any home-directory shape in the recorded data and examples."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SHARED = ("tests", "docs", "benchmarks", "compose", "templates")
SHARED_FILES = ("README.md", "Dockerfile", "pyproject.toml")
RECORDED = ("docs/examples", "tests/data")  # written by the tool itself: no home directory of any user belongs there
SKIPPED = {"__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache"}


def _machine_paths() -> list[str]:
    """This machine's own absolute paths, as a checkout's files could have picked them up."""
    paths = [str(ROOT) + "/"]
    folder = ROOT.parent  # where the checkouts lie (several clones of one project side by side)
    if len(folder.parts) > 1 and str(folder) not in (tempfile.gettempdir(), "/var/tmp"):
        paths.append(str(folder) + "/")
    home = Path.home()
    if len(home.parts) > 1:
        paths.append(str(home) + "/")
    return paths


def _shared_files() -> list[Path]:
    files = [ROOT / name for name in SHARED_FILES if (ROOT / name).is_file()]
    for folder in SHARED:
        files += [p for p in (ROOT / folder).rglob("*") if p.is_file() and not SKIPPED & set(p.parts)]
    return files


def test_no_path_of_this_machine_in_the_shared_files() -> None:
    paths = [p.encode() for p in _machine_paths()]
    found = [f"{p.relative_to(ROOT)}: {path.decode()}" for p in _shared_files() for path in paths
             if path in p.read_bytes()]
    assert found == []


def test_no_home_directory_in_examples_or_recorded_data() -> None:
    shape = re.compile(rb"(?<![\w.~-])/(?:home|Users)/[a-z][a-z0-9_-]*/")
    found = [str(p.relative_to(ROOT)) for folder in RECORDED for p in (ROOT / folder).rglob("*")
             if p.is_file() and p.suffix in (".json", ".html", ".md", ".txt", ".log") and shape.search(p.read_bytes())]
    assert found == []


def test_the_scan_sees_the_files_it_should_and_would_catch_a_path() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _shared_files()}
    assert {"README.md", "tests/data/examples/seed-titanv-tf1.7.json", "docs/results-schema.md"} <= names
    assert any(n.startswith("docs/examples/") and n.endswith("report.html") for n in names)
    assert str(ROOT) + "/" in _machine_paths() and str(Path.home()) + "/" in _machine_paths()
