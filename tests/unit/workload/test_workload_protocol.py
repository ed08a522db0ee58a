"""One protocol module (fp16doctor/workload/protocol.py) that the engine and the workload both import: what
they agree on is written there once, and the workload can import it inside the oldest stack."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from fp16doctor.results import VARIANT_CHANGES
from fp16doctor.workload import protocol

PACKAGE = Path(__file__).resolve().parents[3] / "fp16doctor"
PROTOCOL = PACKAGE / "workload" / "protocol.py"
# What crosses the process boundary, by value.
SHARED_STRINGS = {protocol.PREFIX, protocol.WINDOW_MARKER, protocol.WINDOW_START, protocol.WINDOW_END,
                  protocol.AA_CONTROL, protocol.SEED_WORKLOAD, protocol.PROFILE_DIR_ENV, protocol.SCRATCH_ENV}
SHARED_TUPLES = {protocol.PRECISIONS, protocol.VARIANTS, protocol.SCRIPT_VARIANTS, protocol.ONEDNN_PREFIXES,
                 protocol.MIXED_POLICIES, protocol.MODEL_VARIANTS, protocol.default_precisions(bfloat16_device=False),
                 protocol.default_precisions(bfloat16_device=True)}


def _copies(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and node.value in SHARED_STRINGS:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Tuple | ast.List):
            try:
                value = tuple(ast.literal_eval(node))
            except ValueError:
                continue
            if all(isinstance(v, str) for v in value) and value in SHARED_TUPLES:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {value!r}")
    return found


def test_no_module_but_the_protocol_writes_what_both_sides_agree_on() -> None:
    copies = [c for path in sorted(PACKAGE.rglob("*.py")) if path != PROTOCOL for c in _copies(path)]
    assert copies == []


def test_the_check_finds_a_copy() -> None:
    copy = PACKAGE / "workload" / "_copy_under_test.py"
    try:
        copy.write_text('PREFIX = "@@fp16doctor "\nVARIANTS = ("original", "onednn_off", "tf32_off", "xla")\n')
        assert len(_copies(copy)) == 2
    finally:
        copy.unlink()


def test_the_protocol_imports_nothing_so_the_oldest_stack_runs_it_as_it_is() -> None:
    tree = ast.parse(PROTOCOL.read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def test_every_experiment_says_what_it_changes() -> None:
    assert set(VARIANT_CHANGES) == set(protocol.VARIANTS) - {"original", "synthetic_input"}
    assert set(protocol.SCRIPT_VARIANTS) <= set(protocol.VARIANTS)
    assert set(protocol.MIXED_POLICIES) <= set(protocol.PRECISIONS)
    # Every variant is a process's setting (its own rounds) or a change to one model (the original's rounds).
    assert set(protocol.ROUNDS_VARIANTS) | set(protocol.MODEL_VARIANTS) == set(protocol.VARIANTS)
    assert not set(protocol.ROUNDS_VARIANTS) & set(protocol.MODEL_VARIANTS)


def test_each_workload_module_imports_its_siblings_from_beside_itself() -> None:
    """The way the workload runs everywhere: its folder as a script's, in a fresh interpreter, nothing of
    fp16doctor installed (a container holds only /opt/fp16doctor/workload)."""
    workload = PACKAGE / "workload"
    # The script runner last: once loaded it takes the folder off the path (the user's script comes next).
    names = sorted((p.stem for p in workload.glob("*.py") if p.stem != "__init__"), key=lambda n: n == "script_runner")
    code = f"import sys; sys.path.insert(0, {str(workload)!r}); sys.modules['fp16doctor'] = None\n"
    code += "".join(f"import {name}\n" for name in names)
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=workload.parent)
    assert done.returncode == 0, done.stderr
