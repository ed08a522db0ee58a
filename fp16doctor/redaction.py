"""Secrets and home directories never reach a shared file: values are redacted by pattern.

Reports and results.json are attached to public issues, so anything that looks like a token, key or
password is replaced with REDACTED wherever it appears: environment values, paths, command lines,
error messages, and the raw results embedded in the HTML. Redaction is by shape, not by a list of known
variables, so a secret pasted into an unexpected field is caught too. A home directory (this user's,
or any /home/NAME or /Users/NAME) becomes `~`, which names no one and still works in a shell.

Pure functions on strings and JSON-shaped values: the report (report/) and the results writer
(results.py) both call them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"
HOME = "~"

# Other people's homes, as they appear in a results file from another machine (Linux, macOS).
_HOME_SHAPES = re.compile(r"(?<![A-Za-z0-9_.~-])/(?:home|Users)/[^/\s\"':;,]+(?=/|$|[\s\"':;,])")

# A key whose name says it holds a secret: its whole value goes, whatever it looks like.
# ("pass" alone is not one: runs[].ops.items[].pass names a training pass.)
SECRET_KEY = re.compile(
    r"(pass(word|wd|phrase)|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|"
    r"credential|auth|session[_-]?id|cookie|signature)",
    re.IGNORECASE,
)

# `NAME=value`, `NAME: value`, `--name value`, `"name": "value"` where NAME says secret.
_ASSIGNMENT = re.compile(
    r"""(?P<key>[A-Za-z0-9_.-]*(?:pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|access[_-]?key|"""
    r"""private[_-]?key|credentials?|auth)[A-Za-z0-9_.-]*)"""
    r"""(?P<sep>["']?\s*[=:]\s*["']?)(?P<value>[^\s"'&;,]+)""",
    re.IGNORECASE,
)

# `--token VALUE` on a command line (prose such as "password authentication failed" is left alone).
_FLAG = re.compile(
    r"(?P<key>--?[A-Za-z0-9_.-]*(?:pass(?:word|wd|phrase)?|secret|token|api[_-]?key|access[_-]?key|auth)"
    r"[A-Za-z0-9_.-]*)(?P<sep>\s+)(?P<value>[^\s-][^\s]*)",
    re.IGNORECASE,
)

# Credentials in URLs: scheme://user:password@host keeps the user and host.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]+)@")

# Token formats with a recognisable shape (vendors publish these prefixes so scanners can find them).
_TOKEN_SHAPES = [
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),  # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),
    re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b"),  # GitLab personal access token
    re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),  # Slack
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"),  # OpenAI-style secret keys
    re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"),  # Hugging Face
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),  # Google API key
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),  # JWT
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{12,}"),  # Authorization header values
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.DOTALL),
]

# Anything else long, unbroken and mixing letters with digits looks like a secret. Content digests
# (sha256:...) and UUIDs are identifiers, not secrets, and are kept so a run can be traced.
_LONG_OPAQUE = re.compile(r"(?<![A-Za-z0-9:+/_=-])[A-Za-z0-9+/_=-]{32,}(?![A-Za-z0-9+/_=-])")
_DIGEST_PREFIX = re.compile(r"(sha256|sha512|sha1|md5):$", re.IGNORECASE)
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


def _looks_opaque(candidate: str) -> bool:
    has_digit = any(c.isdigit() for c in candidate)
    has_alpha = any(c.isalpha() for c in candidate)
    # Paths and dotted names are split by / _ - and read as words; a secret is one dense blob.
    longest_word = max((len(w) for w in re.split(r"[/_\-.=+]", candidate)), default=0)
    return has_digit and has_alpha and longest_word >= 24


def _own_home() -> str | None:
    home = os.path.expanduser("~")
    # "/" as a home (some service accounts) would turn every absolute path into "~...".
    return home.rstrip("/") if home not in ("", "/", "~") else None


def redact_home(text: str, home: str | None = None) -> str:
    """This user's home directory, and anything shaped like /home/NAME or /Users/NAME, as `~`."""
    if not text:
        return text
    home = _own_home() if home is None else home.rstrip("/")
    if home:
        text = re.sub(rf"(?<![A-Za-z0-9_.~/-]){re.escape(home)}(?=/|$|[\s\"':;,])", HOME, text)
    return _HOME_SHAPES.sub(HOME, text)


def redact_text(text: str) -> str:
    """Replace every secret-looking part of one string with REDACTED, and home directories with ~."""
    if not text:
        return text
    return redact_secrets(redact_home(text))


def redact_secrets(text: str, opaque: bool = True) -> str:
    """Replace every secret-looking part of one string with REDACTED (reads nothing but the string); with
    `opaque=False`, only what is a secret by its shape or its name, not by its length alone."""
    if not text:
        return text
    out = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    for shape in _TOKEN_SHAPES:
        out = shape.sub(REDACTED, out)
    out = _ASSIGNMENT.sub(lambda m: f"{m['key']}{m['sep']}{REDACTED}", out)
    out = _FLAG.sub(lambda m: f"{m['key']}{m['sep']}{REDACTED}", out)

    if not opaque:
        return out

    def _opaque(m: re.Match[str]) -> str:
        if _DIGEST_PREFIX.search(out[max(0, m.start() - 8) : m.start()]):
            return m.group(0)
        return REDACTED if _looks_opaque(m.group(0)) else m.group(0)

    return _LONG_OPAQUE.sub(_opaque, out)


def redact(value: Any, key: str = "", homes: bool = True, opaque: bool = True) -> Any:
    """Redact a JSON-shaped value recursively; a secret-named key loses its whole value. `homes=False` leaves
    home directories alone (the results file keeps paths into its own folder whole: redact_home_paths);
    `opaque=False` keeps long unbroken names that only look like secrets (a oneDNN op type such as
    `_MklNativeConv2DBackpropFilter` is data the analysis reads back)."""
    if isinstance(value, dict):
        return {k: redact(v, str(k), homes, opaque) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, key, homes, opaque) for v in value]
    if key and SECRET_KEY.search(key) and value not in (None, "", True, False):
        return REDACTED
    if isinstance(value, str) and key.endswith("sha256") and _HEX_DIGEST.fullmatch(value):
        return value  # a content digest named as one (workload.script_sha256) identifies, it does not unlock
    if isinstance(value, str):
        return redact_secrets(redact_home(value) if homes else value, opaque)
    return value


def redact_home_paths(value: Any, keep: Iterable[str] = ()) -> Any:
    """`redact_home` through a JSON-shaped value (keys stay), leaving the paths in `keep` (the user's
    own output directory, which later commands read back) exactly as they are."""
    kept = sorted({k.rstrip("/") for k in keep if k and k.rstrip("/")}, key=len, reverse=True)
    home = _own_home()

    def text(item: str) -> str:
        parts = [item]
        for path in kept:  # split around each kept path; only the pieces between are redacted
            parts = [piece for part in parts for piece in _split_keep(part, path)]
        return "".join(part if part in kept else redact_home(part, home or "") for part in parts)

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return text(item) if isinstance(item, str) else item

    return walk(value)


def _split_keep(text: str, path: str) -> list[str]:
    """text cut into the pieces before, between and after each whole occurrence of `path`."""
    pieces = re.split(rf"({re.escape(path)})(?![A-Za-z0-9_.~-])", text)
    return [piece for piece in pieces if piece]
