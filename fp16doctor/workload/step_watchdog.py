# -*- coding: utf-8 -*-
"""The step watchdog: ends the run inside a step that passes the slow-step bound, instead of after it.

A float16 step that runs oneDNN's reference kernel takes 20-28 s on a Xeon where float32's takes 150 ms; waiting
for it to finish costs the whole step. The watchdog is armed when such a step starts and fires at the bound: it
records the step as cut (its time is a lower bound), lets the runner report the run, and ends the process there.
The main thread is inside the framework's step, so only another thread can act, and only a process exit can stop
the step. Whoever arms it must know that the op source survives that exit (window.StepHooks decides).

Runs in the target Python (down to 3.5): stdlib only.
"""
from __future__ import division, print_function

import os
import sys
import threading
import traceback

from events import emit, flush_native_stdout


class StepWatchdog(object):
    """One timer at a time, armed for the step that starts at `start` (the timer's clock) and fired `limit_ms`
    later unless disarmed first. `on_cut(elapsed_ms)` runs on the watchdog's thread, with the lock held, then
    the process exits with status 0: the runner has reported the run by then."""

    def __init__(self, clock, on_cut, exit_process=os._exit):
        self.clock = clock
        self.on_cut = on_cut
        self.exit_process = exit_process
        # Held while a cut is reported: a step that ends meanwhile waits at disarm() until the process exits.
        self.lock = threading.Lock()
        self.timer = None
        self.start = None
        self.armed = 0  # which arming is current; a timer that fires for an older one does nothing
        self.fired = False

    def arm(self, start, limit_ms):
        with self.lock:
            self._cancel()
            if self.fired:
                return
            self.armed += 1
            self.start = start
            delay = max(0.0, start + limit_ms / 1000.0 - self.clock())
            self.timer = threading.Timer(delay, self._fire, args=(self.armed,))
            self.timer.daemon = True  # never keeps a finished run alive
            self.timer.start()

    def disarm(self):
        with self.lock:
            self._cancel()

    def _cancel(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.armed += 1

    def _fire(self, armed):
        with self.lock:
            if armed != self.armed or self.fired:
                return
            self.fired = True
            elapsed_ms = (self.clock() - self.start) * 1000.0
            status = 0
            try:
                self.on_cut(elapsed_ms)
            except Exception as exc:  # noqa: BLE001  (the engine must hear why, or it sees a silent exit)
                emit("error", status="failed", error="reporting a step cut at the bound: %s: %s"
                     % (exc.__class__.__name__, exc), traceback=traceback.format_exc()[-4000:])
                status = 1
            sys.stdout.flush()
            flush_native_stdout()
            self.exit_process(status)
