"""One home for a precision: the table in fp16doctor/workload/protocol.py parses each name once (as Keras'
DTypePolicy does), and every other module asks it questions instead of comparing names."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fp16doctor.workload import protocol

PACKAGE = Path(__file__).resolve().parents[3] / "fp16doctor"
# The check of issue 50: a comparison (==, !=, in) with a quoted 16-bit precision name.
_NAME = r"['\"](float16|mixed_float16|mixed_bfloat16|bfloat16)['\"]"
LITERAL_COMPARISON = re.compile(rf"(==|!=) ?{_NAME}|{_NAME} ?(==|!=|in )|in \({_NAME}")
# The comparisons left where a literal is clearest; the check fails at this many.
LIMIT = 10


def literal_comparisons(root: Path = PACKAGE) -> list[str]:
    """Every line of the package, outside the protocol, that compares with a quoted 16-bit precision name."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "workload" / "protocol.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if LITERAL_COMPARISON.search(line):
                found.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    return found


def test_precisions_are_asked_of_the_table_not_compared_by_name() -> None:
    found = literal_comparisons()
    assert len(found) < LIMIT, (
        f"{len(found)} comparisons with a quoted 16-bit precision name outside workload/protocol.py (0 when this "
        f"check was written; at most {LIMIT - 1}): ask the table (is_16bit, is_mixed, is_pure, family, "
        "compute_dtype) instead\n" + "\n".join(found))


def test_the_check_finds_each_form_of_comparison(tmp_path: Path) -> None:
    package = tmp_path / "fp16doctor"
    (package / "workload").mkdir(parents=True)
    (package / "a.py").write_text(
        'if precision == "float16":\n'
        "    pass\n"
        "if 'mixed_bfloat16' != p:\n"
        '    ok = p in ("bfloat16", "float32")\n'
        'label = "float16"  # a name, not a comparison\n'
        'ok = p == "float32"\n')
    (package / "workload" / "protocol.py").write_text('PURE = name == "float16"\n')
    found = literal_comparisons(package)
    assert [line.split(":")[1] for line in found] == ["1", "3", "4"]


def test_each_name_is_parsed_once_into_its_dtypes_and_how_it_is_applied() -> None:
    rows = {p.name: (p.compute_dtype, p.variable_dtype, p.applied, p.family, p.pure, p.mixed)
            for p in protocol.PRECISION_TABLE}
    assert rows == {
        "float32": ("float32", "float32", protocol.FLOATX, None, False, False),
        "float16": ("float16", "float16", protocol.FLOATX, protocol.FP16, True, False),
        "mixed_float16": ("float16", "float32", protocol.POLICY, protocol.FP16, False, True),
        "bfloat16": ("bfloat16", "bfloat16", protocol.FLOATX, protocol.BF16, True, False),
        "mixed_bfloat16": ("bfloat16", "float32", protocol.POLICY, protocol.BF16, False, True),
    }
    assert protocol.PRECISIONS[0] == "float32"
    assert protocol.MIXED_POLICIES == ("mixed_float16", "mixed_bfloat16")


def test_the_questions_answer_for_any_name_a_document_may_hold() -> None:
    assert [protocol.is_16bit(p) for p in protocol.PRECISIONS] == [False, True, True, True, True]
    assert protocol.is_pure("float16", protocol.FP16) and not protocol.is_pure("float16", protocol.BF16)
    assert protocol.is_mixed("mixed_bfloat16", protocol.BF16) and not protocol.is_mixed("mixed_bfloat16", protocol.FP16)
    assert protocol.is_mixed("mixed_float16") and not protocol.is_mixed("float16")
    for unknown in ("float8", "", None, ["float16"]):
        assert not protocol.is_16bit(unknown) and not protocol.is_mixed(unknown) and not protocol.is_pure(unknown)
        assert protocol.family(unknown) is None and protocol.compute_dtype(unknown) is None


def test_which_keras_takes_each_precision() -> None:
    """Every Keras takes floatx float32 and float16; floatx bfloat16 only Keras 3; a policy only a Keras with a
    dtype-policy API (Keras 2.1.5 has none)."""
    takes = {name: [protocol.keras_takes(name, major, api) for major, api in ((2, False), (2, True), (3, True))]
             for name in protocol.PRECISIONS}
    assert takes == {"float32": [True, True, True], "float16": [True, True, True],
                     "mixed_float16": [False, True, True], "bfloat16": [False, False, True],
                     "mixed_bfloat16": [False, True, True]}
    # A policy the rounds process started with and returns to ("float64", a script's own) is no precision of ours.
    assert protocol.keras_takes("float64", 3, True) and protocol.keras_takes("float64", 2, False)
    # keras.json carries a floatx every Keras takes; bfloat16 is set after import.
    assert [protocol.keras_json_floatx(p) for p in protocol.PRECISIONS] == [
        "float32", "float16", "float32", "float32", "float32"]


def test_one_default_matrix() -> None:
    assert protocol.default_precisions(bfloat16_device=False) == ("float32", "float16", "mixed_float16")
    assert protocol.default_precisions(bfloat16_device=True) == (
        "float32", "float16", "mixed_float16", "mixed_bfloat16")
    assert protocol.DEFAULT_WHERE_BFLOAT16 == ("mixed_bfloat16",)


def test_the_table_parses_a_name_as_keras_dtype_policy_does() -> None:
    """Keras 3's own parse of each policy name (its numpy backend: no framework loads)."""
    code = ("import json, keras\n"
            "print(json.dumps({n: [keras.DTypePolicy(n).compute_dtype, keras.DTypePolicy(n).variable_dtype]\n"
            f"                  for n in {list(protocol.PRECISIONS)!r}}}))\n")
    env = {**os.environ, "KERAS_BACKEND": "numpy"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode != 0 and "No module named 'keras'" in done.stderr:
        pytest.skip("Keras 3 is not installed")
    assert done.returncode == 0, done.stderr
    keras = json.loads(done.stdout.strip().splitlines()[-1])
    assert keras == {p.name: [p.compute_dtype, p.variable_dtype] for p in protocol.PRECISION_TABLE}
