"""The log: stdlib logging under the `fp16doctor` logger. `-v` shows it on stderr; diagnose keeps it in
OUT/diagnose.log once its checks have passed, so a failed remote run leaves something to attach to a bug report.
Every line is redacted as results.json is: home directories as ~, secrets as [REDACTED].

Modules log with `logging.getLogger(__name__)`; only the CLI (`configure`) and diagnose (`log_to`, `logged`) set
where the lines go.
"""

from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path
from typing import Any

from fp16doctor import __version__
from fp16doctor.redaction import redact, redact_home, redact_secrets

LOGGER = "fp16doctor"
LOG_FILE = "diagnose.log"
_LINE = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
_ROLE = "_fp16doctor_role"  # marks the handlers this module owns, so a second call replaces them


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # opaque=False: long op names (`_MklNativeConv2DBackpropFilter`) are data here too, as in results.json.
        return redact_secrets(redact_home(super().format(record)), opaque=False)


def _replace(role: str, handler: logging.Handler | None) -> None:
    logger = logging.getLogger(LOGGER)
    for old in [h for h in logger.handlers if getattr(h, _ROLE, None) == role]:
        logger.removeHandler(old)
        old.close()
    if handler is not None:
        setattr(handler, _ROLE, role)
        handler.setFormatter(RedactingFormatter(_LINE))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a line is logged: the progress display (rich's Live) redirects it
    to print lines above itself, which a stream bound once would bypass."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure(verbosity: int) -> None:
    """-v: engine events, builds and submissions on stderr; -vv: debug too. Without it the terminal shows only
    the progress display."""
    if verbosity <= 0:
        _replace("stderr", None)
        return
    handler = _StderrHandler()
    handler.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
    _replace("stderr", handler)


def log_to(out_dir: Path) -> Path:
    """Keep the log in OUT/diagnose.log from now on (appended: --resume adds to the first invocation's log)."""
    path = out_dir / LOG_FILE
    handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    _replace("file", handler)
    # The command line as results.json's invocation.argv shows it: a secret-named flag's value redacted.
    logging.getLogger(LOGGER).info("fp16doctor %s: %s", __version__, shlex.join(redact(["fp16doctor", *sys.argv[1:]])))
    return path


def close_log() -> None:
    _replace("file", None)


_progress_log = logging.getLogger(f"{LOGGER}.progress")


class LoggedProgress:
    """Diagnose's Progress, passed through, with what it shows kept in the log: notes, each run's start, its
    result (status, step time, error and the tail of its output) and, at debug level, its events."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress

    def note(self, message: str) -> None:
        _progress_log.info("%s", message)
        self.progress.note(message)

    def start_run(self, spec: Any, total: int, index: int) -> None:
        _progress_log.info("run %d/%d started: %s", index, total, getattr(spec, "label", spec))
        self.progress.start_run(spec, total, index)

    def event(self, event: dict[str, Any]) -> None:
        if event.get("event") != "step":  # one line per step would bury the rest
            _progress_log.debug("event %s", event)
        self.progress.event(event)

    def finish_run(self, record: dict[str, Any]) -> None:
        median = (record.get("step_time_ms") or {}).get("median")
        _progress_log.info("run finished: %s / %s / %s on %s: %s%s%s", record.get("stack"), record.get("precision"),
                           record.get("variant", "original"), (record.get("engine") or {}).get("kind", "?"),
                           record.get("status"), f", {median:.1f} ms/step" if isinstance(median, float) else "",
                           f", {record['error']}" if record.get("error") else "")
        tail = record.get("log_tail")
        if tail:
            text = tail if isinstance(tail, str) else "\n".join(map(str, tail))
            _progress_log.info("its output ended with:\n%s", text)
        self.progress.finish_run(record)
