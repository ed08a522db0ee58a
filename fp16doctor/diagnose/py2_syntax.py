"""Whether a --script can be read by Python 2.7, judged on a machine that has no Python 2.7 to compile it with.

The Python 2 stacks (tf1.7-cpu, tf1.13-cpu) compile the script with their own Python 2.7.18 only once their
image is built and a container runs. Before anything is built or run, this machine's Python 3 parser reads it
and looks for what Python 3 added and Python 2.7's compile() rejects: f-strings, annotations, keyword-only
arguments, nonlocal, async/await, yield from, `raise ... from`, starred assignment and PEP 448 unpacking, the
@ operator, :=, match, class keyword arguments (metaclass=), print(...) with keywords but without
`from __future__ import print_function`, non-ASCII source without a coding declaration, and the rest listed
in `_node_problem`. It is a reading, not Python 2.7's compiler: a script this machine's Python 3 cannot parse
(a print statement, `except E, e:`: Python 2 syntax) is left to the stack's Python 2.7, and what
Python 2.7 rejects beyond this list is said by the run.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

# PEP 263: the coding declaration Python 2 needs in the first two lines of a file with non-ASCII bytes.
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+", re.MULTILINE)
_UTF8_BOM = b"\xef\xbb\xbf"


def python2_problem(source: bytes) -> tuple[str, int] | None:
    """The first Python 3-only construct in `source` that Python 2.7 cannot compile, as (what, line), or None
    when none was found (including when this machine's Python 3 cannot parse the source at all)."""
    problem = _encoding_problem(source)
    if problem is not None:
        return problem
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None  # not Python 3 (maybe Python 2 syntax): only the stack's Python 2.7 can tell
    found = [p for p in (_token_problem(source), _tree_problem(tree)) if p is not None]
    return min(found, key=lambda p: p[1]) if found else None


def _encoding_problem(source: bytes) -> tuple[str, int] | None:
    if source.startswith(_UTF8_BOM):
        return None
    lines = source.splitlines()
    if any(_CODING.match(line) for line in lines[:2]):
        return None
    for number, line in enumerate(lines, 1):
        if any(byte > 0x7F for byte in line):
            return "non-ASCII text without a coding declaration (add `# -*- coding: utf-8 -*-` first)", number
    return None


def _token_problem(source: bytes) -> tuple[str, int] | None:
    """What the tree no longer shows: 1_000 (digit underscores), rb'' (Python 2 reads only br'')."""
    try:
        for tok in tokenize.tokenize(io.BytesIO(source).readline):
            if tok.type == tokenize.NUMBER and "_" in tok.string:
                return "an underscore in a number (1_000)", tok.start[0]
            if tok.type == tokenize.STRING:
                prefix = re.match(r"[A-Za-z]*", tok.string)
                if prefix is not None and prefix.group(0).lower() == "rb":
                    return "an rb'' string prefix (Python 2 reads br'')", tok.start[0]
    except (tokenize.TokenError, SyntaxError):
        return None
    return None


def _tree_problem(tree: ast.Module) -> tuple[str, int] | None:
    print_function = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
                         and any(alias.name == "print_function" for alias in node.names)
                         for node in tree.body)
    allowed_ellipsis = _ellipses_in_subscripts(tree)
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        what = _node_problem(node, print_function, allowed_ellipsis)
        if what is not None:
            found.append((what, getattr(node, "lineno", 0)))
    return min(found, key=lambda p: p[1]) if found else None


def _ellipses_in_subscripts(tree: ast.Module) -> set[int]:
    """Python 2 reads `...` only inside a subscript: x[...], x[..., 0]."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            allowed.update(id(p) for p in parts if isinstance(p, ast.Constant) and p.value is Ellipsis)
    return allowed


def _is_dotted_name(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _node_problem(node: ast.AST, print_function: bool, allowed_ellipsis: set[int]) -> str | None:
    if isinstance(node, ast.JoinedStr):
        return "an f-string"
    if isinstance(node, ast.AnnAssign):
        return "a variable annotation"
    if isinstance(node, (ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith)):
        return "async/await"
    if isinstance(node, ast.comprehension) and node.is_async:
        return "an async comprehension"
    if isinstance(node, (ast.FunctionDef, ast.Lambda)):
        return _signature_problem(node)
    if isinstance(node, ast.Nonlocal):
        return "nonlocal"
    if isinstance(node, ast.YieldFrom):
        return "yield from"
    if isinstance(node, ast.NamedExpr):
        return "an assignment expression (:=)"
    if isinstance(node, ast.Raise) and node.cause is not None:
        return "raise ... from"
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
        return "the @ operator"
    if isinstance(node, ast.ClassDef):
        if node.keywords:
            return "a class keyword argument (metaclass=...)"
        if any(not _is_dotted_name(d) and not (isinstance(d, ast.Call) and _is_dotted_name(d.func))
               for d in node.decorator_list):
            return "a decorator expression"
    if isinstance(node, (ast.Assign, ast.For)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(n, ast.Starred) for t in targets for n in ast.walk(t)):
            return "a starred assignment (a, *rest = ...)"
    if isinstance(node, (ast.Set, ast.List, ast.Tuple)) and not isinstance(getattr(node, "ctx", None), ast.Store) \
            and any(isinstance(e, ast.Starred) for e in node.elts):
        return "unpacking in a display ([*a, *b])"
    if isinstance(node, ast.Dict) and any(k is None for k in node.keys):
        return "dict unpacking ({**a})"
    if isinstance(node, ast.Call):
        return _call_problem(node, print_function)
    if isinstance(node, ast.Constant) and node.value is Ellipsis and id(node) not in allowed_ellipsis:
        return "... outside a subscript"
    if isinstance(node, ast.Name) and not node.id.isascii():
        return "a non-ASCII name"
    kind = type(node).__name__
    if kind in ("Match", "TryStar", "TypeAlias"):
        return {"Match": "a match statement", "TryStar": "except*", "TypeAlias": "a type statement"}[kind]
    return None


def _signature_problem(node: ast.FunctionDef | ast.Lambda) -> str | None:
    args = node.args
    if args.kwonlyargs:
        return "a keyword-only argument"
    if args.posonlyargs:
        return "a positional-only parameter (/)"
    if isinstance(node, ast.FunctionDef):
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        if node.returns is not None or any(a is not None and a.annotation is not None for a in every):
            return "a function annotation"
        if getattr(node, "type_params", None):
            return "a type parameter list"
        if any(not _is_dotted_name(d) and not (isinstance(d, ast.Call) and _is_dotted_name(d.func))
               for d in node.decorator_list):
            return "a decorator expression"
    return None


def _call_problem(node: ast.Call, print_function: bool) -> str | None:
    starred = [i for i, a in enumerate(node.args) if isinstance(a, ast.Starred)]
    if len(starred) > 1 or (starred and starred[0] != len(node.args) - 1):
        return "more than one * unpacking in a call, or one before a positional argument"
    double = [i for i, k in enumerate(node.keywords) if k.arg is None]
    if len(double) > 1 or (double and double[0] != len(node.keywords) - 1):
        return "more than one ** unpacking in a call, or one before a keyword argument"
    if isinstance(node.func, ast.Name) and node.func.id == "print" and not print_function \
            and (node.keywords or starred):
        return "print(...) with keywords or * without `from __future__ import print_function`"
    return None
