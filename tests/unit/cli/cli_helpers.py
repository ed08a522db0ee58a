"""Drive the console script's own entry point (cli.main) in-process: argv in, (exit status, stdout, stderr) out."""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path

from fp16doctor import cli

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "docs" / "examples"
SEED = ROOT / "tests" / "data" / "examples" / "seed-titanv-tf1.7.json"


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> Done:
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["fp16doctor", *args]
    code: int | str | None = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main()
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = argv
    return Done(code if isinstance(code, int) else (0 if code is None else 1), out.getvalue(), err.getvalue())
