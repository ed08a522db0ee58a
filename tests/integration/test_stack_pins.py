"""Every pin of every stack exists on PyPI for that stack's own Python and platform.

Asks PyPI's simple index (PEP 691 JSON, the API pip itself uses) for each pinned release and accepts it
when a wheel's tags fit the stack's interpreter, glibc and pip (pip before 19.0 knows only manylinux1),
or when a source release's requires-python admits the stack's Python. Needs network access to PyPI
(through the TLS proxy's CA where there is one: SSL_CERT_FILE or the system bundle).
"""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from fp16doctor.stacks import StackSpec, all_stacks

pytestmark = pytest.mark.slow
INDEX = "https://pypi.org/simple"


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


def supported_tags(stack: StackSpec) -> set[Tag]:
    major, minor = _version_tuple(stack.python)[:2]
    abi = f"cp{major}{minor}m" if (major, minor) < (3, 8) else f"cp{major}{minor}"
    plats = platforms(stack)
    tags = set(cpython_tags((major, minor), abis=[abi, "abi3", "none"], platforms=plats))
    tags |= set(compatible_tags((major, minor), interpreter=f"cp{major}{minor}", platforms=plats))
    return tags


@cache
def project_files(name: str) -> tuple[dict[str, Any], ...]:
    request = urllib.request.Request(f"{INDEX}/{canonicalize_name(name)}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return tuple(json.load(response)["files"])


def pin_problem(stack: StackSpec, requirement: str) -> str | None:
    """None when the pin installs for this stack, else what is wrong."""
    name, _, version = requirement.partition("==")
    wanted = Version(version)
    python = stack.python
    tags = supported_tags(stack)
    release: list[dict[str, Any]] = []
    for entry in project_files(name):
        filename = entry["filename"]
        try:
            if filename.endswith(".whl"):
                _, file_version, _, file_tags = parse_wheel_filename(filename)
            elif filename.endswith((".tar.gz", ".zip")):
                _, file_version = parse_sdist_filename(filename)
                file_tags = frozenset()
            else:
                continue
        except ValueError:
            continue
        if file_version != wanted:
            continue
        release.append(entry)
        requires = entry.get("requires-python")
        if requires and not SpecifierSet(requires).contains(python, prereleases=True):
            continue
        if filename.endswith(".whl"):
            if file_tags & tags:
                return None
        else:
            return None  # a source release this Python admits (pip builds it)
    if not release:
        return f"{requirement}: no such release on PyPI"
    names = [e["filename"] for e in release]
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return (f"{requirement}: none of its files ({shown}) installs on Python {python} "
            f"with pip {stack.base.pip} on glibc {stack.base.glibc}")


@pytest.mark.parametrize("stack", all_stacks(), ids=lambda s: s.name)
def test_every_pin_exists_on_pypi_for_the_stacks_python(stack: StackSpec) -> None:
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            problems = [p for p in pool.map(lambda r: pin_problem(stack, r), stack.requirements) if p]
    except OSError as exc:  # URLError is an OSError
        pytest.skip(f"PyPI is not reachable from here: {exc}")
    assert not problems, "\n".join(problems)


def test_the_check_rejects_a_wheel_only_release_for_an_older_python() -> None:
    old = next(s for s in all_stacks() if s.python.startswith("3.5"))
    try:
        problem = pin_problem(old, "numpy==2.0.0")  # wheels for CPython >= 3.9 only
    except OSError as exc:
        pytest.skip(f"PyPI is not reachable from here: {exc}")
    assert problem is not None and "numpy==2.0.0" in problem
