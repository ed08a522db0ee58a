"""The host's reading of a --script bound for a Python 2.7 stack (diagnose/py2_syntax.py): each Python 3-only
construct found, with its line; Python 2 syntax, which the host cannot parse, left to the stack's own Python; the
scripts fp16doctor itself runs on Python 2.7 read as valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from fp16doctor.diagnose.py2_syntax import python2_problem

ROOT = Path(__file__).resolve().parents[3]

PYTHON_3_ONLY = [
    ('x = 1\ny = f"{x}"\n', "an f-string", 2),
    ("x: int = 1\n", "a variable annotation", 1),
    ("def f(a: int):\n    return a\n", "a function annotation", 1),
    ("def f() -> int:\n    return 1\n", "a function annotation", 1),
    ("def f(a, *, b):\n    return b\n", "a keyword-only argument", 1),
    ("def f(a, /, b):\n    return b\n", "a positional-only parameter (/)", 1),
    ("def f():\n    x = 1\n    def g():\n        nonlocal x\n", "nonlocal", 4),
    ("async def f():\n    pass\n", "async/await", 1),
    ("def g():\n    yield from range(3)\n", "yield from", 2),
    ("try:\n    pass\nexcept ValueError as e:\n    raise KeyError() from e\n", "raise ... from", 4),
    ("a, *rest = [1, 2, 3]\n", "a starred assignment (a, *rest = ...)", 1),
    ("for a, *b in []:\n    pass\n", "a starred assignment (a, *rest = ...)", 1),
    ("x = [*range(2), *range(3)]\n", "unpacking in a display ([*a, *b])", 1),
    ("x = {**{}, 'a': 1}\n", "dict unpacking ({**a})", 1),
    ("f(*a, *b)\n", "more than one * unpacking in a call, or one before a positional argument", 1),
    ("f(*a, b)\n", "more than one * unpacking in a call, or one before a positional argument", 1),
    ("f(**a, b=1)\n", "more than one ** unpacking in a call, or one before a keyword argument", 1),
    ("x = a @ b\n", "the @ operator", 1),
    ("if (n := 3):\n    pass\n", "an assignment expression (:=)", 1),
    ("class A(metaclass=type):\n    pass\n", "a class keyword argument (metaclass=...)", 1),
    ("print('a', end='')\n", "print(...) with keywords or * without `from __future__ import print_function`", 1),
    ("x = ...\n", "... outside a subscript", 1),
    ("x = 1_000\n", "an underscore in a number (1_000)", 1),
    ("x = rb'a'\n", "an rb'' string prefix (Python 2 reads br'')", 1),
    ("match x:\n    case 1:\n        pass\n", "a match statement", 1),
    ("@x[0]\ndef f():\n    pass\n", "a decorator expression", 2),
]


@pytest.mark.parametrize(("source", "what", "line"), PYTHON_3_ONLY, ids=[w for _, w, _ in PYTHON_3_ONLY])
def test_each_python_3_only_construct_is_named_with_its_line(source: str, what: str, line: int) -> None:
    assert python2_problem(source.encode()) == (what, line)


def test_the_first_construct_is_the_one_named() -> None:
    source = b"import os\nx: int = 1\ny = f'{x}'\n"
    assert python2_problem(source) == ("a variable annotation", 2)


def test_non_ascii_text_needs_a_coding_declaration_on_python_2() -> None:
    text = "x = 1\n# caf\u00e9\n".encode()
    assert python2_problem(text) == (
        "non-ASCII text without a coding declaration (add `# -*- coding: utf-8 -*-` first)", 2)
    assert python2_problem(b"# -*- coding: utf-8 -*-\n" + text) is None
    assert python2_problem(b"#!/usr/bin/env python\n# vim: set fileencoding=utf-8 :\n" + text) is None
    assert python2_problem(b"\xef\xbb\xbf" + text) is None


@pytest.mark.parametrize("source", [
    "from __future__ import print_function\nprint('a', end='')\nprint(*[1, 2])\n",
    "print('a')\nprint('a', 'b')\nprint()\n",
    "x = y[...]\nz = y[..., 0]\n",
    "f(a, *args, **kwargs)\nf(key=1, *args)\nf(*args, key=1, **kw)\n",
    "class A(object):\n    @staticmethod\n    @mod.deco(1)\n    def f(a, b=2, *args, **kw):\n        return {a: b}\n",
    "try:\n    pass\nexcept (ValueError, KeyError) as exc:\n    raise\n",
    "x = {1, 2}\ny = {k: v for k, v in []}\nz = b'\\x00' + u'text'\n",
    "lambda a, b=1, *c, **d: a\n",
])
def test_code_valid_in_python_2_7_and_3_passes(source: str) -> None:
    assert python2_problem(source.encode()) is None


@pytest.mark.parametrize("source", [
    "print 'hello'\n",
    "try:\n    pass\nexcept ValueError, e:\n    pass\n",
    "x = 0777\n",
    "x = ur'raw'\n",
    "exec 'x = 1'\n",
])
def test_python_2_syntax_the_host_cannot_parse_is_left_to_the_stack(source: str) -> None:
    assert python2_problem(source.encode()) is None


def test_the_scripts_fp16doctor_runs_on_python_2_7_read_as_valid() -> None:
    files = [*sorted((ROOT / "fp16doctor" / "workload").glob("*.py")), ROOT / "tests/data/scripts/keras2_fit_py27.py"]
    assert len(files) > 10
    for path in files:
        assert python2_problem(path.read_bytes()) is None, path
