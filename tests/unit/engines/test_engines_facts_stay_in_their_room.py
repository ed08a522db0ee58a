"""What differs between engines stays in the engines: above them nothing tests an engine's kind or names an engine's
option, except the one fallback that reads documents written before engines recorded their facts
(results._older_docker)."""

from __future__ import annotations

import ast
from pathlib import Path

from fp16doctor.engines.option_table import ENGINE_OPTIONS

PACKAGE = Path(__file__).resolve().parents[3] / "fp16doctor"
KINDS = {"host", "docker", "slurm"}
FALLBACK = ("results.py", "_older_docker")
# `stacks build` builds one stack's image on one Docker engine: a command of the Docker engine's own.
STACKS_BUILD = ("cli.py", "stacks_build")


def _is_kind(node: ast.AST) -> bool:
    """`kind`, `x.kind`, `x.get("kind")` or `x["kind"]`."""
    if isinstance(node, ast.Name):
        return node.id == "kind"
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "kind"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    return False


def _names_an_engine(node: ast.AST) -> bool:
    values = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return any(isinstance(v, ast.Constant) and v.value in KINDS for v in values)


class _InFunctions(ast.NodeVisitor):
    """A visitor that knows the innermost function it is in."""

    def __init__(self) -> None:
        self.functions = ["<module>"]

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()


def kind_tests(source: str) -> list[tuple[int, str]]:
    """(line, innermost enclosing function) of every comparison of an engine kind with an engine's name."""
    found: list[tuple[int, str]] = []

    class Scan(_InFunctions):

        def visit_Compare(self, node: ast.Compare) -> None:
            sides = [node.left, *node.comparators]
            if any(_is_kind(s) for s in sides) and any(_names_an_engine(s) for s in sides):
                found.append((node.lineno, self.functions[-1]))
            self.generic_visit(node)

    Scan().visit(ast.parse(source))
    return found


def test_the_scan_finds_every_form_of_a_kind_test() -> None:
    source = ('def f(run, engine, e):\n    a = run.get("engine").get("kind") == "docker"\n'
              '    b = e.kind != "slurm"\n    c = engine["kind"] in ("host", "docker")\n    kind = 1\n'
              '    return kind == "docker"\n')
    assert [line for line, _ in kind_tests(source)] == [2, 3, 4, 6]


def test_nothing_above_the_engines_asks_which_engine_ran_a_run() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in ("engines", "workload"):
            continue
        for line, function in kind_tests(path.read_text(encoding="utf-8")):
            if (str(relative), function) != FALLBACK:
                offenders.append(f"fp16doctor/{relative}:{line} ({function})")
    assert offenders == []
    assert kind_tests((PACKAGE / FALLBACK[0]).read_text(encoding="utf-8"))  # the fallback is where it says


ENGINE_FLAGS = {o.flag for cls in ENGINE_OPTIONS for o in cls.declared()}
# Modules that hold one engine's own options: only the engines and the table of them import them.
OWN_OPTIONS = {cls.__module__ for cls in ENGINE_OPTIONS}


def engine_words(source: str) -> list[tuple[int, str]]:
    """(line, function) of every string that is an engine's flag (`"--slurm"`, `"--docker-host"`), and of every
    import of one engine's options module."""
    found: list[tuple[int, str]] = []

    class Scan(_InFunctions):

        def visit_Constant(self, node: ast.Constant) -> None:
            if isinstance(node.value, str) and node.value in ENGINE_FLAGS:
                found.append((node.lineno, self.functions[-1]))

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.module in OWN_OPTIONS:
                found.append((node.lineno, self.functions[-1]))

    Scan().visit(ast.parse(source))
    return found


def test_no_engine_option_is_named_above_the_engines() -> None:
    """diagnose, the CLI, the invocation check and the report read every engine's options from their declaration
    (engines/option_table.py); only the fallback for older documents names one."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in ("engines", "workload"):
            continue
        for line, function in engine_words(path.read_text(encoding="utf-8")):
            if (str(relative), function) not in (FALLBACK, STACKS_BUILD):
                offenders.append(f"fp16doctor/{relative}:{line} ({function})")
    assert offenders == []
    assert {"--slurm", "--partition", "--docker-host", "--runtime"} <= ENGINE_FLAGS
    assert engine_words('from fp16doctor.engines.slurm.options import SlurmOptions\n'
                        'def f(argv):\n    return "--docker-host" in argv\n') == [(1, "<module>"), (3, "f")]
