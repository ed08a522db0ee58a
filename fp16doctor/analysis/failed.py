"""A run that failed, as every output says it: where the user's code raised, why in one line, what to change, where
its log is, and whether the same command would fail the same way again (a deterministic failure: the script's own
fault under that precision, which `--resume` does not fix and no "untested" entry offers to measure again).

Read from the run record (`error`, `error_location`, `fix`, `failure_kind`, `deterministic`, `script_log`,
docs/results-schema.md); a record written before those fields existed is read as well as it allows: its error cut
to one line, its escape codes out, a script's exception taken as deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.values import as_int, as_mapping, as_str
from fp16doctor.engines.failures import NOT_THE_SCRIPTS, one_line, script_cause
from fp16doctor.redaction import redact_secrets
from fp16doctor.results import machine_id

CODE_SHOWN = 80  # characters of the user's line shown beside its place


@dataclass(frozen=True)
class FailedRun:
    """Why one run failed, in the words every output prints."""

    reason: str  # one line, at most MAX_REASON characters, no escape codes
    kind: str  # failure_kind ("dtype_mixing", "int16_range", "timeout", ...); "" where the record names none
    fix: str  # what to change ("" where the cause is not one fp16doctor knows)
    file: str  # the user's file that raised ("train.py"), "" where none was found
    line: int | None
    code: str  # that line's code, shortened
    log: str  # the script's log ("script-logs/host-float16.log"), "" where none was kept
    deterministic: bool  # the script's own fault under this precision: it fails the same way again

    @property
    def where(self) -> str:
        """"train.py:31 (`z_mean + tf.exp(0.5 * z_log_var) * epsilon`)", or ""."""
        if not self.file:
            return ""
        place = f"{self.file}:{self.line}" if self.line is not None else self.file
        code = self.code if len(self.code) <= CODE_SHOWN else self.code[:CODE_SHOWN - 1] + "…"
        return f"{place} (`{code}`)" if code else place

    @property
    def failed_at(self) -> str:
        """"failed at train.py:31 (`...`)", or "failed"."""
        return f"failed at {self.where}" if self.where else "failed"

    @property
    def why(self) -> str:
        """The reason and what to change: "a float32 tensor times ...; cast ..."."""
        return f"{self.reason}; {self.fix}" if self.fix else self.reason

    @property
    def log_words(self) -> str:
        """" (log: script-logs/host-float16.log)", or "" without a log: a path, never shortened."""
        return f" (log: {self.log})" if self.log else ""

    @property
    def explained(self) -> str:
        """The reason, what to change, and where the log is: "a float32 tensor times ...; cast ... (log: ...)"."""
        return self.why + self.log_words


def failed_run(run: Mapping[str, Any]) -> FailedRun | None:
    """The failure of a failed run record; None for any other status."""
    if as_str(run.get("status")) != "failed":
        return None
    kind = as_str(run.get("failure_kind")) or ""
    script = run.get("script_failure")
    flag = run.get("deterministic")
    deterministic = flag if isinstance(flag, bool) else isinstance(script, Mapping) and kind not in NOT_THE_SCRIPTS
    location = as_mapping(run.get("error_location"))
    reason, fix = as_str(run.get("error")) or "failed (no reason recorded)", as_str(run.get("fix")) or ""
    if isinstance(script, Mapping) and not fix and kind in ("", "unknown"):
        # A record from before the known causes were named: its exception read again.
        cause = script_cause(f"{reason}\n{as_str(run.get('traceback')) or ''}", as_str(run.get("precision")) or "")
        if cause is not None:
            reason, kind, fix = cause.reason, cause.kind, cause.fix
    return FailedRun(
        # Said in every output, the report included: a token or a password in a failure's message never is.
        reason=one_line(redact_secrets(reason, opaque=False)),
        kind=kind,
        fix=one_line(fix),
        file=as_str(location.get("file")) or "",
        line=as_int(location.get("line")),
        code=" ".join((as_str(location.get("code")) or "").split()),
        log=as_str(run.get("script_log")) or "",
        deterministic=deterministic,
    )


def drop_failed_untested(runs: Sequence[Any], prescriptions: Sequence[MutableMapping[str, Any]]) -> None:
    """No prescription offers as untested a precision whose run failed deterministically on its machine and stack:
    its command would fail the same way (the failure's own line says what to change)."""
    failed = set()
    for run in runs:
        if not isinstance(run, Mapping):
            continue
        failure = failed_run(run)
        if failure is not None and failure.deterministic:
            failed.add((machine_id(dict(run)), as_str(run.get("stack")), as_str(run.get("precision"))))
    if not failed:
        return
    for p in prescriptions:
        untested = p.get("untested")
        if isinstance(untested, list):
            p["untested"] = [u for u in untested if not (
                isinstance(u, Mapping) and (p.get("machine"), p.get("stack"), u.get("precision")) in failed)]


__all__ = ["FailedRun", "drop_failed_untested", "failed_run"]
