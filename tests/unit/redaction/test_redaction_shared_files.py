"""What the repository shares (examples, recorded test data) carries no path of the machine that made it."""

from __future__ import annotations


def test_no_path_of_the_machine_that_recorded_them_in_examples_or_test_data() -> None:
    """Examples and recordings are shared: the checkout's absolute path or root's home never appear in them."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    shape = re.compile(rb"/work/main/|/root/|/home/[a-z][a-z0-9_-]*/")
    found = [str(p.relative_to(root)) for folder in ("docs/examples", "tests/data") for p in (root / folder).rglob("*")
             if p.is_file() and p.suffix in (".json", ".html", ".md", ".txt", ".log") and shape.search(p.read_bytes())]
    assert found == []
