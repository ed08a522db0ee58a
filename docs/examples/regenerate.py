"""Render every example's renderings again from its results.json with this checkout's code, and the README's quote.

    python docs/examples/regenerate.py          # rewrite what differs, say which files changed
    python docs/examples/regenerate.py --check  # change nothing; exit 1 naming the stale files

Renderings (made here, so never stale; tests/unit/docs/test_docs_examples_fresh.py fails when one differs):
- `report.html` in every docs/examples/*/ with a results.json: `fp16doctor report results.json --out report.html`;
- `explain.txt` where an example has one: `fp16doctor explain results.json`;
- the README's quotes of answers: `explain`'s answer (what bounds the step, what to do, each configuration against
  float32) of the example a marker names, the code block after each `README_MARKER.format(name)`.

Recordings (kept as they were captured, never rewritten here): `results.json`, `terminal.txt` (a diagnose's own
terminal output on the day, progress lines included), `script-logs/`, `bare-keras-*.json`, each example's README.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent
ROOT = EXAMPLES.parent.parent
README = ROOT / "README.md"
README_MARKER = "<!-- quoted by docs/examples/regenerate.py: explain of {} -->"
QUOTED = re.compile(re.escape(README_MARKER).replace(re.escape("{}"), r"([\w.-]+)"))
# explain's sections after the answer: the quote stops at the first of them.
AFTER_ANSWER = ("How", "Notes", "Findings")
EMBEDDED = re.compile(r'(<script type="application/octet-stream" id="fp16doctor-results" '
                      r'data-encoding="gzip\+base64">)([^<]*)(</script>)')


def _fp16doctor(*args: str) -> str:
    """What `fp16doctor ARGS` prints, run from this checkout as a user runs it."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR")}
    env["NO_COLOR"] = "1"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-m", "fp16doctor", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise SystemExit(f"fp16doctor {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def report_html(results: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.html"
        _fp16doctor("report", str(results.relative_to(ROOT)), "--out", str(out))
        return out.read_text(encoding="utf-8")


def explain_text(results: Path) -> str:
    return _fp16doctor("explain", str(results.relative_to(ROOT)))


def answer_quote(explain: str) -> str:
    """explain's answer: its lines up to the first section after it."""
    lines = explain.splitlines()
    end = next((i for i, line in enumerate(lines) if line.strip() in AFTER_ANSWER and not line.startswith(" ")),
               len(lines))
    return "\n".join(lines[:end]).rstrip() + "\n"


def readme_with(readme: str, name: str, quote: str) -> str:
    """The README with the code block after the marker of example `name` replaced by `quote`."""
    at = readme.index(README_MARKER.format(name))
    start = readme.index("```\n", at) + len("```\n")
    end = readme.index("```\n", start)
    return readme[:start] + quote + readme[end:]


def comparable(page: str) -> str:
    """A report with its compressed results unpacked: the same page whatever zlib packed it."""
    return EMBEDDED.sub(lambda m: m.group(1) + gzip.decompress(base64.b64decode(m.group(2))).decode("utf-8")
                        + m.group(3), page)


def renderings() -> Iterator[tuple[Path, str]]:
    """Each rendering's path and what this checkout renders there."""
    for folder in sorted(p for p in EXAMPLES.iterdir() if (p / "results.json").is_file()):
        results = folder / "results.json"
        yield folder / "report.html", report_html(results)
        if (folder / "explain.txt").is_file():
            yield folder / "explain.txt", explain_text(results)
    readme = README.read_text(encoding="utf-8")
    for name in dict.fromkeys(QUOTED.findall(readme)):
        readme = readme_with(readme, name, answer_quote(explain_text(EXAMPLES / name / "results.json")))
    yield README, readme


def stale(path: Path, rendered: str) -> bool:
    if not path.is_file():
        return True
    now = path.read_text(encoding="utf-8")
    return comparable(now) != comparable(rendered) if path.suffix == ".html" else now != rendered


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a rendering is stale")
    args = parser.parse_args(argv)
    changed = []
    for path, rendered in renderings():
        if stale(path, rendered):
            changed.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(rendered, encoding="utf-8")
    verb = "stale" if args.check else "rewritten"
    print("\n".join(f"{verb}: {p}" for p in changed) or "every rendering is current")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
