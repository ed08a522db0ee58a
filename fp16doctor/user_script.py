"""`diagnose --script`: the user's own training script checked, hashed and described; its failures explained.

The script runs unchanged under workload/script_runner.py (one process per precision, like the seed
workload). Here, on fp16doctor's side: a missing script is a usage error, its path is shown with the
home directory as ~, its content is never stored (only its SHA-256), and when every run failed for one
reason, that reason becomes the one-line error: Keras 2 API a newer Keras rejects (naming the stacks of
the catalogue that still have it), or a script that fails under float32 as well.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from pathlib import Path
from typing import Any

from fp16doctor.engines.spec import ScriptSpec
from fp16doctor.errors import EXIT_USAGE, DoctorError
from fp16doctor.knowledge.keras_api import accepts
from fp16doctor.results import Run

SCRIPT_LOG_DIR = "script-logs"
MIN_STEPS = 3  # a median worth the name
HINT_TAIL_LINES = 3


def display_path(path: str | Path) -> str:
    """The path as a report may show it: the home directory becomes ~."""
    text = str(path)
    home = os.path.expanduser("~")
    if home not in ("", "/", "~") and (text == home or text.startswith(home.rstrip("/") + "/")):
        return "~" + text[len(home.rstrip("/")):]
    return text


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


COPY_MAX_BYTES = 256 * 1024 * 1024  # a file argument larger than this is read in place (a data set), not copied


def _copied(arg: str, cwd: Path) -> tuple[str, str] | None:
    """(the argument, its file) where a relative argument names an existing file inside `cwd` that each run gets
    a copy of (ScriptSpec.copies); None otherwise."""
    if arg.startswith("-") or os.path.isabs(arg):
        return None
    candidate = cwd / arg
    rel = os.path.normpath(arg)
    if rel.startswith(os.pardir) or not candidate.is_file():
        return None
    try:
        small = candidate.stat().st_size <= COPY_MAX_BYTES
    except OSError:
        return None
    return (rel, str(candidate.resolve())) if small else None


def _absolute_if_path(arg: str, cwd: Path) -> str:
    # The script runs in a scratch directory, so a relative path the user typed (and that exists here) is handed
    # over absolute: a folder (its data), a large file, a path outside this folder. A file that each run gets a copy
    # of (_copied) is passed exactly as typed, as is anything else.
    if arg.startswith("-") or os.path.isabs(arg) or _copied(arg, cwd) is not None:
        return arg
    candidate = cwd / arg
    return str(candidate.resolve()) if candidate.exists() else arg


def prepare_script(
    script: Path, args: list[str], steps: int | None, out_dir: Path, data_dir: str | None,
    make_log_dir: bool = True,
) -> ScriptSpec:
    """Check the script and describe it for the engines; DoctorError (usage) when it cannot run."""
    if not script.exists():
        raise DoctorError(f"--script {script}: no such file",
                          hint="pass the path of your training script, e.g. --script ./train.py",
                          exit_code=EXIT_USAGE)
    if not script.is_file():
        raise DoctorError(f"--script {script} is not a file",
                          hint="pass the training script itself (a .py file), not its folder",
                          exit_code=EXIT_USAGE)
    if steps is not None and steps < MIN_STEPS:
        raise DoctorError(f"--steps {steps} is too few to time", hint=f"pass --steps {MIN_STEPS} or more (20 "
                          "gives a steady median)", exit_code=EXIT_USAGE)
    path = script.resolve()
    try:
        digest = sha256_of(path)
    except OSError as exc:
        raise DoctorError(f"cannot read --script {script} ({exc.strerror or exc.__class__.__name__})",
                          hint="check the file's permissions", exit_code=EXIT_USAGE) from None
    log_dir = out_dir / SCRIPT_LOG_DIR
    if make_log_dir:  # diagnose --plan creates nothing
        log_dir.mkdir(parents=True, exist_ok=True)
    cwd = Path.cwd()
    read_only = [str(path.parent)] + ([data_dir] if data_dir else [])
    return ScriptSpec(
        path=str(path),
        args=tuple(_absolute_if_path(a, cwd) for a in args),
        sha256=digest,
        steps=steps,
        log_dir=str(log_dir.resolve()),
        read_only_dirs=tuple(dict.fromkeys(read_only)),
        label=display_path(path),
        copies=tuple(dict.fromkeys(c for c in (_copied(a, cwd) for a in args) if c is not None)),
    )


def invocation_entry(spec: ScriptSpec) -> dict[str, Any]:
    """What results.json's invocation says about the script: where, which version, never its content."""
    return {"path": display_path(spec.path), "sha256": spec.sha256, "args": [display_path(a) for a in spec.args],
            "steps": spec.steps, "logs": display_path(spec.log_dir or "")}


def _tail_hint(failure: dict[str, Any], log: str | None) -> str:
    lines = [ln.strip() for ln in str(failure.get("output_tail") or "").splitlines() if ln.strip()]
    tail = " | ".join(lines[-HINT_TAIL_LINES:]) or "(it printed nothing)"
    where = f" (all of it: {display_path(log)})" if log else ""
    return f"its last lines: {tail}{where}"


def _stacks_accepting(names: list[str], on_gpu: bool) -> tuple[list[str], bool]:
    """The catalogue's stacks whose Keras accepts all of `names`, those that run on the failing run's kind
    of device first, and whether each of them needs a GPU."""
    from fp16doctor.stacks import all_stacks

    stacks = [s for s in all_stacks() if accepts(s.keras, names)]
    stacks.sort(key=lambda s: s.gpu != on_gpu)  # stable: the catalogue's order within each kind
    return [s.name for s in stacks], bool(stacks) and all(s.needs_gpu for s in stacks)


def rerun_in_stack(script: ScriptSpec | None, stack: str) -> str:
    """The command that runs the same script, with the same arguments, in `stack`: what a container must
    see of this machine besides the script's folder (--data) is the folder holding the path arguments
    that lie outside it."""
    if script is None:
        return f"fp16doctor diagnose --script ... --stack {stack} --no-host"
    words = ["fp16doctor", "diagnose", "--script", display_path(script.path)]
    for arg in script.args:
        words += [f"--script-arg={arg}"] if arg.startswith("-") else ["--script-arg", arg]
    data = list(script.read_only_dirs[1:])
    if not data:
        folder = os.path.dirname(script.path)
        named = [a for a in script.args if os.path.isabs(a)] + [source for _, source in script.copies]
        outside = [a for a in named if os.path.exists(a) and os.path.commonpath([folder, a]) != folder]
        if outside:
            common = os.path.commonpath(outside)
            data = [common if os.path.isdir(common) else os.path.dirname(common)]
    for folder in data:
        words += ["--data", folder]
    words += ["--stack", stack, "--no-host"]
    return " ".join(w if w.startswith("~/") else shlex.quote(w) for w in words)


def _keras2_api_error(run: dict[str, Any], script: ScriptSpec | None) -> DoctorError:
    failure = run["script_failure"]
    names = list(failure.get("arguments") or failure.get("methods") or [])
    if failure.get("kind") == "keras2_arguments":
        callee = failure.get("callable") or "the optimizer"
        what = f"{callee}({', '.join(f'{n}=...' for n in names)})"
    else:
        what = ", ".join(f"Model.{n}" for n in names)
    keras = failure.get("keras") or (run.get("software") or {}).get("keras")
    stacks, need_gpu = _stacks_accepting(names, Run.of(run).on_gpu)
    message = (f"the script uses {what}, which Keras {keras or '(this version)'} rejects "
               f"({run.get('error', '')}); {', '.join(names)} exist in the Keras 2 stacks: "
               f"{', '.join(stacks) or 'none in the catalogue'}{' (each needs an NVIDIA GPU)' if need_gpu else ''}")
    hint = (f"run it where that API exists ({rerun_in_stack(script, stacks[0])})"
            if stacks else "update the script to this Keras's API")
    if failure.get("kind") == "keras2_arguments":
        hint += ", or write learning_rate= and drop decay= for this Keras"
    return DoctorError(message, hint=hint)


def script_failure(runs: list[dict[str, Any]], script: ScriptSpec | None = None) -> DoctorError | None:
    """The one reason to report when the script could not be compared anywhere: judged per stack (each
    stack is its own Keras), an error only when no stack has a working comparison; a stack that failed
    beside one that worked is left to its run records and the report."""
    stacks: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        stacks.setdefault(Run.of(run).stack, []).append(run)
    errors = [(stack, error) for stack, group in stacks.items()
              if (error := _stack_failure(group, script)) is not None]
    if not errors or len(errors) < len(stacks):
        return None
    stack, error = errors[0]
    if len(stacks) > 1:
        error.message = f"on stack {stack}, {error.message}"
    return error


def _stack_failure(runs: list[dict[str, Any]], script: ScriptSpec | None) -> DoctorError | None:
    """The one reason to report when no run of the script worked on a stack, or when float32 failed too."""
    failed = [r for r in runs if Run.of(r).status == "failed" and isinstance(r.get("script_failure"), dict)]
    if not failed:
        return None
    ok = [r for r in runs if Run.of(r).ok]
    api = [r for r in failed if r["script_failure"].get("kind") in ("keras2_arguments", "keras2_methods")]
    if api and not ok:
        return _keras2_api_error(api[0], script)
    fp32 = [r for r in failed if Run.of(r).precision == "float32" and r["script_failure"].get("kind") == "exception"]
    if fp32:
        run = fp32[0]
        others = [r for r in failed if Run.of(r).precision != "float32"]
        lead = "the script fails under float32 as well" if others else "the script fails under float32"
        where = run.get("error_location")
        if isinstance(where, dict) and where.get("file"):
            lead += f" at {where['file']}:{where.get('line')}"
        return DoctorError(f"{lead}: it is the script's fault, not the precision's ({run.get('error')})",
                           hint=_tail_hint(run["script_failure"], run.get("script_log")))
    if not ok:
        run = failed[0]
        return DoctorError(f"no run of the script worked: {run.get('error')}",
                           hint=_tail_hint(run["script_failure"], run.get("script_log")))
    return None


def run_notes(runs: list[dict[str, Any]]) -> list[str]:
    """What the runner could not measure or changed its mind about, once per distinct note."""
    notes: list[str] = []
    seen: set[str] = set()
    for run in runs:
        for note in (run.get("workload") or {}).get("notes") or []:
            if note not in seen:
                seen.add(note)
                notes.append(f"{run.get('stack')} / {run.get('precision')}: {note}")
    return notes
