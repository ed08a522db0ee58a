"""Every pin of every stack exists on the package index for that stack's own Python and platform.

Asks pip itself (`pip index versions`, through whatever index pip is configured to use: pip.conf,
PIP_INDEX_URL, a mirror) which releases it would install for the stack's interpreter, ABI and the
manylinux tags its glibc and pip accept (pip before 19.0 knows only manylinux1); a source release
counts when its requires-python admits the stack's Python. Needs that index to be reachable.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import pytest

from fp16doctor.stacks import StackSpec, all_stacks

pytestmark = pytest.mark.slow
PIP_INDEX = [sys.executable, "-m", "pip", "index", "versions", "--disable-pip-version-check"]


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:3] if p.isdigit())


def platforms(stack: StackSpec) -> list[str]:
    """The manylinux platform tags the stack's pip accepts on its glibc, newest first."""
    glibc_minor = _version_tuple(stack.base.glibc)[1]
    pip = _version_tuple(stack.base.pip)
    tags: list[str] = []
    if pip >= (20, 3):  # PEP 600 manylinux_2_X tags
        tags += [f"manylinux_2_{minor}_x86_64" for minor in range(glibc_minor, 4, -1)]
    if pip >= (19, 3) and glibc_minor >= 17:
        tags.append("manylinux2014_x86_64")
    if pip >= (19, 0) and glibc_minor >= 12:
        tags.append("manylinux2010_x86_64")
    tags.append("manylinux1_x86_64")
    return tags


def python_version(stack: StackSpec) -> str:
    return ".".join(str(p) for p in _version_tuple(stack.python))


def cpython_abi(major: int, minor: int) -> str:
    """The ABI tag of the stack's CPython on Linux: Python 2's are built with 4-byte unicode (the "u" of cp27mu,
    Debian's python2.7 and PyPI's manylinux wheels alike), pymalloc's "m" until 3.8 dropped it."""
    if major == 2:
        return f"cp{major}{minor}mu"
    return f"cp{major}{minor}m" if (major, minor) < (3, 8) else f"cp{major}{minor}"


def target_options(stack: StackSpec) -> list[str]:
    """pip's options that make it choose files for the stack's interpreter instead of this one."""
    major, minor = _version_tuple(stack.python)[:2]
    abi = cpython_abi(major, minor)
    # The whole version where the stack records it: a requires-python may exclude early patch releases
    # (cryptography 44 and later: ">=3.9,!=3.9.0,!=3.9.1").
    options = ["--python-version", python_version(stack), "--implementation", "cp"]
    for tag in (abi, "abi3", "none"):
        options += ["--abi", tag]
    for platform in platforms(stack):
        options += ["--platform", platform]
    return options


@cache
def versions(name: str, options: tuple[str, ...]) -> frozenset[str]:
    """The versions pip would pick from for `name` with these options (empty: none at all)."""
    done = subprocess.run([*PIP_INDEX, name, *options], capture_output=True, text=True, timeout=300)
    listed = re.search(r"^Available versions: (.+)$", done.stdout, re.MULTILINE)
    if done.returncode != 0 and "No matching distribution" not in done.stderr:
        raise OSError(f"pip index versions {name} failed: {done.stderr.strip()[-300:]}")
    return frozenset(v.strip() for v in listed.group(1).split(",")) if listed else frozenset()


def pin_problem(stack: StackSpec, requirement: str) -> str | None:
    """None when the pin installs for this stack, else what is wrong."""
    name, _, version = requirement.partition("==")
    wheels = versions(name, ("--only-binary", ":all:", *target_options(stack)))
    if version in wheels:
        return None
    sources = versions(name, ("--no-binary", ":all:", "--python-version", python_version(stack)))
    if version in sources:
        return None  # a source release this Python admits (pip builds it)
    if version not in versions(name, ("--ignore-requires-python",)):
        return f"{requirement}: no such release on the package index"
    return (f"{requirement}: no file of it installs on Python {stack.python} "
            f"with pip {stack.base.pip} on glibc {stack.base.glibc}")


def index_reachable() -> str | None:
    """None when pip's index answers, else why not."""
    try:
        if versions("pip", ()):
            return None
        return "pip's configured index lists no pip at all"
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)


@pytest.mark.parametrize("stack", all_stacks(), ids=lambda s: s.name)
def test_every_pin_exists_on_the_index_for_the_stacks_python(stack: StackSpec) -> None:
    unreachable = index_reachable()
    if unreachable:
        pytest.skip(f"the package index is not reachable from here: {unreachable}")
    with ThreadPoolExecutor(max_workers=8) as pool:
        problems = [p for p in pool.map(lambda r: pin_problem(stack, r), stack.pip_bootstrap + stack.requirements)
                    if p]
    assert not problems, "\n".join(problems)


def test_the_check_rejects_a_wheel_only_release_for_an_older_python() -> None:
    old = next(s for s in all_stacks() if s.python.startswith("3.5"))
    unreachable = index_reachable()
    if unreachable:
        pytest.skip(f"the package index is not reachable from here: {unreachable}")
    problem = pin_problem(old, "numpy==2.0.0")  # wheels for CPython >= 3.9 only
    assert problem is not None and "numpy==2.0.0" in problem


def test_python_2_takes_the_wide_unicode_abi() -> None:
    # PyPI's TensorFlow 1.7.0 for Python 2.7 exists only as cp27mu: cp27m would find no wheel at all.
    assert [cpython_abi(2, 7), cpython_abi(3, 5), cpython_abi(3, 11)] == ["cp27mu", "cp35m", "cp311"]
