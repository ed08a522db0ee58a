"""The one error root: every failure a user can act on is a DoctorError with a hint."""

from __future__ import annotations

# Exit codes, named once (the CLI is the only place that turns them into process exits).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3  # diagnose finished, but some runs failed (results were still written)
EXIT_SLOWER = 4  # compare --fail-if-slower: a configuration got slower by more than allowed, beyond its interval
EXIT_INTERRUPTED = 130


class DoctorError(Exception):
    """A failure explained to the user: one line of message, one line of hint."""

    def __init__(self, message: str, hint: str = "", exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message
