"""Ctrl-C for a diagnose the tests start: a shell that runs the suite as a background job starts it with SIGINT
ignored, every child inherits that, and Python installs no KeyboardInterrupt where SIGINT is ignored at start. The
tests' diagnose gets SIGINT's default back, as a terminal's foreground job has it."""

from __future__ import annotations

import signal


def ctrl_c_reaches_it() -> None:
    """A preexec_fn for subprocess.Popen."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
