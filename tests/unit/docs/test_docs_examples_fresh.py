"""The examples cannot go stale: every rendering under docs/examples (each report.html, explain.txt) and the README's
quote of the H200 answer are what this checkout prints from the example's results.json.

On a failure, run `python docs/examples/regenerate.py` and review the diff.
"""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "docs" / "examples" / "regenerate.py"


def _regenerate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("regenerate_examples", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_committed_rendering_is_what_the_code_prints() -> None:
    regenerate = _regenerate()
    stale = []
    seen = set()
    for path, rendered in regenerate.renderings():
        seen.add(path.name)
        if regenerate.stale(path, rendered):
            now = path.read_text(encoding="utf-8") if path.is_file() else ""
            diff = difflib.unified_diff(regenerate.comparable(now).splitlines(),
                                        regenerate.comparable(rendered).splitlines(), lineterm="", n=1)
            stale.append(f"{path.relative_to(ROOT)}:\n" + "\n".join(list(diff)[:20]))
    assert {"report.html", "explain.txt", "README.md"} <= seen, seen
    assert not stale, "stale renderings (python docs/examples/regenerate.py):\n" + "\n\n".join(stale)


def test_the_readme_quotes_the_h200_answer_from_its_first_line() -> None:
    regenerate = _regenerate()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    name = "gpu-h200-keras-torch-full"
    explain = (regenerate.EXAMPLES / name / "explain.txt").read_text(encoding="utf-8")
    quote = regenerate.answer_quote(explain)
    assert regenerate.README_MARKER.format(name) in readme and quote in readme
    assert quote.startswith("What bounds the step\n") and "GPU busy 3 %" in quote and "3.7x faster" in quote
    assert "638 ms in float16 vs 162 ms" in quote


def test_a_changed_rendering_is_caught(tmp_path: Path) -> None:
    regenerate = _regenerate()
    page = tmp_path / "report.html"
    page.write_text("<p>float16 is 1.6x slower</p>", encoding="utf-8")
    assert regenerate.stale(page, "<p>float16 is 1.5x slower</p>")
    assert not regenerate.stale(page, "<p>float16 is 1.6x slower</p>")
    assert regenerate.stale(tmp_path / "missing.txt", "")


def test_every_answer_the_readme_shows_is_one_it_regenerates() -> None:
    """No transcript of an older release's summary: each answer block in the README sits under a marker."""
    regenerate = _regenerate()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = regenerate.QUOTED.findall(readme)
    assert {"gpu-h200-keras-torch-full", "cpu-epyc-avx512bf16-quick", "cpu-epyc-avx512bf16-script-quick"} <= set(quoted)
    blocks = readme.split("```")[1::2]
    answers = [b for b in blocks if "What to do\n" in b]
    assert len(answers) == len(quoted), "an answer block without its marker"
