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

# A command-line flag whose name says secret: `--token`, `--api-key`, `-password`.
_SECRET_FLAG = (r"--?[A-Za-z0-9_.-]*(?:pass(?:word|wd|phrase)?|secret|token|api[_-]?key|access[_-]?key|auth)"
                r"[A-Za-z0-9_.-]*")
# An option that hands its value on to another program (`--script-arg`, `--slurm-arg`): a secret flag given
# through it (`--script-arg=--token --script-arg=abc123`) has its value in the next one.
_FORWARD = r"--[A-Za-z0-9-]*-args?"

# `--token VALUE` on a command line, also forwarded (prose such as "password authentication failed" is left alone).
_FLAG = re.compile(
    rf"(?P<key>{_SECRET_FLAG})(?P<sep>\s+(?:{_FORWARD}(?:=|\s+))?)(?P<value>[^\s-][^\s]*)",
    re.IGNORECASE,
)
# The same in an argument list, one word per item: the flag alone (perhaps forwarded), then its value.
_FLAG_WORD = re.compile(rf"(?:{_FORWARD}=)?{_SECRET_FLAG}", re.IGNORECASE)
_FORWARD_WORD = re.compile(_FORWARD)
_FORWARDED_VALUE = re.compile(rf"(?P<option>{_FORWARD}=)(?P<value>[^-].*)", re.DOTALL)

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
    home directories alone (the results file has had them through redact_home_paths already);
    `opaque=False` keeps long unbroken names that only look like secrets (a oneDNN op type such as
    `_MklNativeConv2DBackpropFilter` is data the analysis reads back)."""
    if isinstance(value, dict):
        return {k: redact(v, str(k), homes, opaque) for k, v in value.items()}
    if isinstance(value, list):
        return _redact_flag_values([redact(v, key, homes, opaque) for v in value])
    if key and SECRET_KEY.search(key) and value not in (None, "", True, False):
        return REDACTED
    if isinstance(value, str) and key.endswith("sha256") and _HEX_DIGEST.fullmatch(value):
        return value  # a content digest named as one (workload.script_sha256) identifies, it does not unlock
    if isinstance(value, str):
        return redact_secrets(redact_home(value) if homes else value, opaque)
    return value


def _redact_flag_values(words: list[Any]) -> list[Any]:
    """In an argument list (argv, a script's arguments, a command), the item after a secret-named flag is
    its value, also where an option forwards both (`--script-arg=--token`, `--script-arg abc123`)."""
    out = list(words)
    for index, word in enumerate(words[:-1]):
        if not (isinstance(word, str) and _FLAG_WORD.fullmatch(word)):
            continue
        at = index + 1
        if isinstance(out[at], str) and _FORWARD_WORD.fullmatch(out[at]) and at + 1 < len(out):
            at += 1  # `--script-arg` `abc123`
        value = out[at]
        if not isinstance(value, str):
            continue
        forwarded = _FORWARDED_VALUE.fullmatch(value)
        if forwarded:
            out[at] = f"{forwarded['option']}{REDACTED}"
        elif value and not value.startswith("-"):  # another flag: this one had no value
            out[at] = REDACTED
    return out


def redact_home_paths(value: Any, relative_to: Iterable[str] = ()) -> Any:
    """`redact_home` through a JSON-shaped value (keys stay). A value that is a path inside one of the
    folders `relative_to` (the output directory, where results.json lies) becomes relative to it
    (`script-logs/host-float32.log`): it names no home and still finds the file from the results' folder."""
    folders = sorted({f.rstrip("/") for f in relative_to if f and f.rstrip("/")}, key=len, reverse=True)
    home = _own_home()

    def text(item: str) -> str:
        for folder in folders:
            if item.startswith(folder + "/") and item.rstrip("/") != folder:
                return item[len(folder) + 1:]
        return redact_home(item, home or "")

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return text(item) if isinstance(item, str) else item

    return walk(value)
