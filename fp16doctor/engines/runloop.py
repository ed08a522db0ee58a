"""The one run loop every engine drives: read the workload's stdout, parse its protocol lines, keep the
profiled window's oneDNN lines, and stop the run at its time limit (the watchdog).

An engine launches the workload its own way (a child process, a container, a process on a Slurm node)
and hands this loop a `Launched`: the run's stdout lines, how to wait for its exit status, and how to
stop it. What the loop found comes back as a `Streamed`; the engine turns it into the run record.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from fp16doctor.engines.base import EventCallback, WindowCapture, parse_protocol_line
from fp16doctor.engines.failures import classify


class Launched(Protocol):
    """One started run, as the loop sees it."""

    def lines(self) -> Iterator[str]:
        """The run's stdout, line by line, until it ends (or is stopped)."""
        ...

    def wait(self) -> int | None:
        """The exit status once the lines ended (None when there is none to be had)."""
        ...

    def stop(self) -> None:
        """Stop the run and whatever it started (called from the watchdog's thread too)."""
        ...


@dataclass
class Streamed:
    """What one run said: its final `result` or `error` event, how it ended, its profiled window."""

    capture: WindowCapture = field(default_factory=WindowCapture)
    final: dict[str, Any] | None = None
    exit_code: int | None = None
    timed_out: bool = False

    @property
    def result(self) -> dict[str, Any] | None:
        """The workload's measured run, when it reported one."""
        if self.final is not None and self.final.get("event") == "result" and isinstance(self.final.get("run"), dict):
            return dict(self.final["run"])
        return None

    @property
    def error_event(self) -> dict[str, Any] | None:
        return self.final if self.final is not None and self.final.get("event") == "error" else None


def stream(launched: Launched, on_event: EventCallback, timeout_s: float | None) -> Streamed:
    """Drive one run to its end; `on_event` gets every protocol event as it arrives. The time limit
    holds even when the workload goes silent (a hung driver call prints nothing). An exception here
    (KeyboardInterrupt included) stops the run before it propagates."""
    streamed = Streamed()
    expired = threading.Event()

    def _expire() -> None:
        expired.set()
        launched.stop()

    watchdog = threading.Timer(timeout_s, _expire) if timeout_s else None
    if watchdog is not None:
        watchdog.daemon = True
        watchdog.start()
    try:
        for line in launched.lines():
            event = parse_protocol_line(line)
            if event is None:
                streamed.capture.feed(line)
                continue
            if event["event"] in ("result", "error"):
                streamed.final = event
            on_event(event)
        streamed.exit_code = launched.wait()
    except BaseException:
        launched.stop()
        raise
    finally:
        if watchdog is not None:
            watchdog.cancel()
    streamed.timed_out = expired.is_set()
    return streamed


def failure_kind(streamed: Streamed, output: str, oom_killed: bool = False) -> str:
    """The failure's stable id (engines/failures.py), from the run's output and how it ended."""
    if streamed.timed_out:
        return "timeout"
    error = streamed.error_event or {}
    detail = "\n".join(str(error.get(k, "")) for k in ("error", "traceback"))
    return classify(output + "\n" + detail, streamed.exit_code, oom_killed).kind
