# -*- coding: utf-8 -*-
"""What the workload tells the engine: one line per event, "@@fp16doctor {json}" (protocol.PREFIX).

Events go to stdout, unless a runner names another stream (send_to): the script runner hands the script
its stdout, which becomes the script's log, and keeps a copy of the original for the events. The profiled
window's markers are not events: they go to stdout, with oneDNN's own lines (window.py).

Runs in the target Python (down to 3.5): stdlib only.
"""
from __future__ import print_function

import json
import sys

from protocol import PREFIX

_stream = [None]  # where events go; None: sys.stdout, as it is at each event


class Skip(Exception):
    """This precision or experiment cannot run on this stack at all (not a failure of the run)."""


class NotApplied(RuntimeError):
    """The precision did not take (fp16doctor's failure, not the model's or the script's)."""


def send_to(stream):
    """Every later event goes to `stream` (None: back to sys.stdout)."""
    _stream[0] = stream


def emit(event, **fields):
    fields["event"] = event
    out = _stream[0] or sys.stdout
    out.write(PREFIX + json.dumps(fields, sort_keys=True) + "\n")
    out.flush()


def flush_native_stdout():
    """oneDNN prints with C stdio; flush it so its lines and our markers keep their order."""
    try:
        import ctypes
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):
        pass  # Windows has no CDLL(None): Python's own flush is all there is
