"""What runs inside the 2018 stacks must be valid Python 3.5 (no f-strings, variable annotations ...), and valid
Python 2.7 too: the built-in workload and the script runner (the tf1.7-cpu and tf1.13-cpu stacks run TensorFlow 1.7
and 1.13 on Python 2.7.18)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

WORKLOAD = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"
# What else must run in a Python 3.5 stack: the Keras 2 style test scripts (the script runner sits in WORKLOAD).
SCRIPTS = Path(__file__).resolve().parents[2] / "data" / "scripts"
PY35_SCRIPTS = [SCRIPTS / "keras2_style.py", SCRIPTS / "seed_question.py"]
# The test script the Python 2.7 stacks run (tests/integration/test_docker_tf1_twin.py).
PY27_SCRIPTS = [SCRIPTS / "keras2_fit_py27.py"]


def _vermin() -> list[str]:
    exe = shutil.which("vermin") or str(Path(sys.executable).with_name("vermin"))
    # A dev-extra tool, not an optional one: without it the check would pass unchecked.
    assert Path(exe).exists(), "vermin is not installed (pip install -e '.[dev]')"
    return [exe]


def test_workload_is_valid_python_3_5() -> None:
    assert (WORKLOAD / "script_runner.py").exists()
    result = subprocess.run([*_vermin(), "-t=3.5-", "--no-tips", "--violations", "--eval-annotations",
                             "--no-parse-comments", str(WORKLOAD), *map(str, PY35_SCRIPTS)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_catches_python_3_6_syntax(tmp_path: Path) -> None:
    (tmp_path / "new.py").write_text('name = "x"\nprint(f"{name}")\n')
    result = subprocess.run([*_vermin(), "-t=3.5-", "--no-tips", "--violations", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "f-strings" in result.stdout


def test_the_workload_and_the_script_runner_are_valid_python_2_7() -> None:
    files = sorted(WORKLOAD.glob("*.py"))
    for name in ("run_workload.py", "compat.py", "script_runner.py", "script_rounds.py"):
        assert WORKLOAD / name in files
    result = subprocess.run([*_vermin(), "-t=2.7-", "-t=3.5-", "--no-tips", "--violations", "--eval-annotations",
                             "--no-parse-comments", *map(str, files + PY27_SCRIPTS)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_catches_a_python_3_only_call(tmp_path: Path) -> None:
    (tmp_path / "new.py").write_text("import time\nstarted = time.perf_counter()\n")
    result = subprocess.run([*_vermin(), "-t=2.7-", "-t=3.5-", "--no-tips", "--violations", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "perf_counter" in result.stdout
