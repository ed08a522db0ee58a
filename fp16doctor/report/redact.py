"""The report's redaction is fp16doctor.redaction's, shared with results.json."""

from __future__ import annotations

from fp16doctor.redaction import REDACTED, SECRET_KEY, redact, redact_text

__all__ = ["REDACTED", "SECRET_KEY", "redact", "redact_text"]
