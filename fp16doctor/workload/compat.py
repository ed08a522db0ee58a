# -*- coding: utf-8 -*-
"""What Python 2.7 lacks and the workload uses, in one place (the tf1.7-cpu stack runs TensorFlow 1.7 on
Python 2.7.18). Each shim is the Python 3 call where it exists, so Python 3.5 and later run exactly as before.

Runs in the target Python (down to 2.7): stdlib only.
"""
from __future__ import division, print_function

import inspect
import multiprocessing
import os
import time


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
