"""What runs inside the 2018 stacks must be valid Python 3.5 (no f-strings, variable annotations ...)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

WORKLOAD = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"


def _vermin() -> list[str]:
    exe = shutil.which("vermin") or str(Path(sys.executable).with_name("vermin"))
    # A dev-extra tool, not an optional one: without it the check would pass unchecked.
    assert Path(exe).exists(), "vermin is not installed (pip install -e '.[dev]')"
    return [exe]


def test_workload_is_valid_python_3_5() -> None:
    result = subprocess.run([*_vermin(), "-t=3.5-", "--no-tips", "--violations", "--eval-annotations",
                             "--no-parse-comments", str(WORKLOAD)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_catches_python_3_6_syntax(tmp_path: Path) -> None:
    (tmp_path / "new.py").write_text('name = "x"\nprint(f"{name}")\n')
    result = subprocess.run([*_vermin(), "-t=3.5-", "--no-tips", "--violations", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "f-strings" in result.stdout
