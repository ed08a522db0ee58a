"""What differs between engines stays in the engines: above them nothing tests an engine's kind, except the one
fallback that reads documents written before engines recorded their facts (results._older_docker)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "fp16doctor"
KINDS = {"host", "docker", "slurm"}
FALLBACK = ("results.py", "_older_docker")


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


# Where diagnose reads an engine's options only to record or check what was typed, not to choose what runs.
RECORDS_WHAT_WAS_TYPED = {("diagnose/prepare.py", "_document"), ("diagnose/checks.py", "request_of")}


def option_tests(source: str) -> list[tuple[int, str]]:
    """(line, function) of every condition (if, conditional expression, boolean operand) that reads
    `options.slurm` or `options.docker_hosts`."""
    found: list[tuple[int, str]] = []

    def reads_engine_option(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Attribute) and n.attr in ("slurm", "docker_hosts")
                   and isinstance(n.value, ast.Name) and n.value.id == "options" for n in ast.walk(node))

    class Scan(_InFunctions):

        def _condition(self, node: ast.If | ast.IfExp | ast.While, test: ast.AST) -> None:
            if reads_engine_option(test):
                found.append((node.lineno, self.functions[-1]))
            self.generic_visit(node)

        def visit_If(self, node: ast.If) -> None:
            self._condition(node, node.test)

        def visit_IfExp(self, node: ast.IfExp) -> None:
            self._condition(node, node.test)

    Scan().visit(ast.parse(source))
    return found


def test_diagnose_asks_the_engines_instead_of_testing_their_options() -> None:
    offenders = []
    for path in sorted([*(PACKAGE / "diagnose").glob("*.py"), PACKAGE / "runplan.py"]):
        relative = str(path.relative_to(PACKAGE))
        for line, function in option_tests(path.read_text(encoding="utf-8")):
            if (relative, function) not in RECORDS_WHAT_WAS_TYPED:
                offenders.append(f"fp16doctor/{relative}:{line} ({function})")
    assert offenders == []
    assert option_tests("def f(options):\n    x = 1 if options.slurm else 2\n    if options.docker_hosts:\n"
                        "        pass\n") == [(2, "f"), (3, "f")]
