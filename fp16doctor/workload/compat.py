# -*- coding: utf-8 -*-
"""What Python 2.7 lacks and the workload uses, in one place (the tf1.7-cpu stack runs TensorFlow 1.7 on
Python 2.7.18). Each shim is the Python 3 call where it exists, so Python 3.5 and later run exactly as before.

Runs in the target Python (down to 2.7): stdlib only.
"""
from __future__ import division, print_function

import importlib
import inspect
import multiprocessing
import os
import runpy
import sys
import time

PY2 = sys.version_info[0] == 2
# Python 2.7: the modules of the scripts run_script ran. A module object that goes away clears its globals to
# None there (Python 3.4 and later leave them), and runpy's module goes away as soon as the run ends.
_ran = []


def perf_counter():
    """time.perf_counter (Python >= 3.3), looked up at each call so a test's fake clock is seen; Python 2.7 has
    none, and time.time is its finest wall clock (gettimeofday, microseconds on Linux)."""
    return getattr(time, "perf_counter", time.time)()


def parameter_names(func):
    """The names a callable accepts: inspect.signature (Python >= 3.3), else Python 2.7's getargspec."""
    signature = getattr(inspect, "signature", None)
    if signature is not None:
        return list(signature(func).parameters)
    spec = inspect.getargspec(func)
    return list(spec.args) + [name for name in (spec.varargs, spec.keywords) if name]


def cpu_count():
    """os.cpu_count (Python >= 3.4), else multiprocessing's (Python 2.7); None where neither can tell."""
    count = getattr(os, "cpu_count", None)
    if count is not None:
        return count()
    try:
        return multiprocessing.cpu_count()
    except NotImplementedError:
        return None


def find_spec(fullname):
    """importlib.util.find_spec (Python >= 3.4); None on Python 2.7, which has no module specs (PEP 451: its
    import system asks a finder's find_module and the loader's load_module, PEP 302)."""
    try:
        util = importlib.import_module("importlib.util")
    except ImportError:
        return None
    return util.find_spec(fullname)


def run_script(path):
    """Run the file at `path` as __main__ and return its globals: runpy.run_path(path, run_name="__main__") on
    Python 3. On Python 2.7 runpy's temporary module is dropped when the run ends, and Python 2 then sets every
    global of the script to None: a function, generator or callback the script made, called after its run (a
    kept fit() call replayed in rounds), would find its modules gone. So the script runs in a module kept alive
    here, with what runpy gives it (__name__, __file__, __package__, __loader__; sys.modules["__main__"] during
    the run), compiled as runpy compiles it (no __future__ flag of this file carried over)."""
    if not PY2:
        return runpy.run_path(path, run_name="__main__")
    import imp  # Python 2.7 only (removed in Python 3.12)

    with open(path, "rb") as fh:
        code = compile(fh.read(), path, "exec", 0, True)
    module = imp.new_module("__main__")
    module.__dict__.update(__file__=path, __package__=None, __loader__=None)
    _ran.append(module)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
    return dict(module.__dict__)
