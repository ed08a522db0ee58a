"""The command that measures the same matrix again: the recorded command line, else one rebuilt from the runs."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis import RunRow
from fp16doctor.analysis.runs import precision_rank
from fp16doctor.engines.option_table import ENGINE_OPTIONS
from fp16doctor.engines.spec import is_host_stack
from fp16doctor.report.redact import redact, redact_text
from fp16doctor.report.sections.common import dict_of as _dict
from fp16doctor.report.sections.environment import runs_of
from fp16doctor.report.sections.inputs import DocumentInput
from fp16doctor.workload.protocol import default_precisions


@dataclass(frozen=True)
class ReproduceView:
    command: str
    notes: list[str]


def _str_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _reproduce(doc: Mapping[str, Any], rows: Sequence[RunRow], known: set[str] | None) -> ReproduceView:
    """The recorded command line when there is one; else the command that measures the same matrix."""
    invocation = _dict(doc.get("invocation"))
    argv = _str_list(invocation.get("argv"))
    notes: list[str] = []
    if argv and len(argv) >= 2 and argv[1] == "diagnose":
        # The list as a whole: a secret flag's value is the next word (`--script-arg=--token`, `--script-arg=X`).
        return ReproduceView(shlex.join(["fp16doctor", *(str(a) for a in redact(argv[1:]))]), notes)
    words = ["fp16doctor", "diagnose"]
    size = invocation.get("size") or _size_from_workload(doc)
    if size in ("quick", "full"):
        words.append(f"--{size}")
    elif size == "smoke":
        words += ["--size", "smoke"]
    run_stacks = list(dict.fromkeys(r.stack for r in rows))
    stacks = _str_list(invocation.get("stacks")) or run_stacks
    for stack in dict.fromkeys(stacks):
        if is_host_stack(stack):  # this host's Python on a Keras backend: --backend says which (HostOptions)
            continue
        if known is not None and stack not in known:
            notes.append(
                f"Stack '{stack}' is not one of fp16doctor's pinned stacks (it was described by hand); "
                "pick the closest with `fp16doctor stacks list` and add it with --stack."
            )
            continue
        words += ["--stack", stack]
    if run_stacks and not any(is_host_stack(s) for s in run_stacks) and "--stack" in words:
        words.append("--no-host")
    precisions = _str_list(invocation.get("precisions")) or sorted({r.precision for r in rows}, key=precision_rank)
    if precisions and set(precisions) != set(default_precisions(bfloat16_device=False)):
        for precision in precisions:
            words += ["--precision", precision]
    for cls in ENGINE_OPTIONS:  # each engine's options as the document recorded them
        words += [redact_text(word) for word in cls.rerun_words(invocation)]
    if not argv:
        notes.append(
            "This results file did not record its command line; this is the command that measures the same matrix."
        )
    return ReproduceView(shlex.join(words), notes)


def _size_from_workload(doc: Mapping[str, Any]) -> str | None:
    from fp16doctor.engines.spec import WORKLOAD_SIZES as SIZES

    for run in runs_of(doc):
        wl = _dict(run.get("workload"))
        for size in SIZES.values():
            if (wl.get("image_height"), wl.get("image_width"), wl.get("batch_size")) == (
                size.image_height,
                size.image_width,
                size.batch_size,
            ):
                return size.name
    return None




def build(source: DocumentInput) -> ReproduceView:
    return _reproduce(source.doc, source.diagnosis.runs, source.known_stacks)
