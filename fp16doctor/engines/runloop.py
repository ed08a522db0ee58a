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

from fp16doctor.engines.artifacts import WindowCapture
from fp16doctor.engines.base import EventCallback, merge_workload_result, parse_protocol_line
from fp16doctor.engines.failures import NOT_THE_SCRIPTS, classify, log_tail, one_line, plain, script_cause


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


def to_record(record: dict[str, Any], streamed: Streamed, output: str, timeout_s: float | None,
              oom_killed: bool = False) -> dict[str, Any]:
    """The run record from what a run said, the same for every engine: the workload's result merged into
    `record` (status ok; the engine then attaches its ops), or the run skipped or failed, in one wording, its
    failure classified (engines/failures.py) from `output` (what the run printed besides the protocol) and the
    workload's own error event."""
    result, error = streamed.result, streamed.error_event
    if result is not None and error is None and not streamed.timed_out:
        merged = merge_workload_result(record, result)
        merged.setdefault("status", "ok")
        if streamed.exit_code not in (0, None):
            merged["exit_code"] = streamed.exit_code  # it ended badly after its result: the measurement stands
        return merged
    ended = dict(record)
    if error is not None and error.get("status") == "skipped":
        ended.update(status="skipped", error=str(error.get("error") or "skipped by the workload"))
        return ended
    detail = "\n".join(str(error[k]) for k in ("error", "traceback") if error and error.get(k)) if error else ""
    script = error.get("script_failure") if error is not None else None
    script = script if isinstance(script, dict) else None
    # A user's script that raised under a 16-bit precision: the known ways it breaks there first, with their fix.
    cause = script_cause(detail, str(record.get("precision"))) if script and script.get("kind") == "exception" \
        else None
    failure = cause or classify(output + "\n" + detail, streamed.exit_code, oom_killed)
    if streamed.timed_out:
        reason, kind = f"the run exceeded its {timeout_s or 0:.0f} s limit and was killed", "timeout"
    elif failure.kind == "unknown" and error is not None and error.get("error"):
        reason, kind = str(error["error"]), failure.kind
    else:
        reason, kind = failure.reason, failure.kind
    ended.update(status="failed", error=one_line(reason), failure_kind=kind)
    if failure.fix and not streamed.timed_out:
        ended["fix"] = failure.fix
    if streamed.exit_code is not None:
        ended["exit_code"] = streamed.exit_code  # negative: killed by that signal
    if error is not None:
        ended.update({k: plain(str(error[k])) if k == "traceback" else error[k]
                      for k in ("traceback", "script_failure") if error.get(k)})
    if script is not None:
        location = script.get("location")
        if isinstance(location, dict) and location.get("file") and isinstance(location.get("line"), int):
            ended["error_location"] = location
        # The script's own fault under this precision: the same command fails the same way again.
        ended["deterministic"] = not (streamed.timed_out or oom_killed or kind in NOT_THE_SCRIPTS)
    tail = log_tail(plain(output + ("\n" + detail if detail else "")))
    if tail:
        ended["log_tail"] = tail
    return ended
