"""What `diagnose --plan` shows after every pre-flight check: the cells that would run, where, the images their
stacks need, and about how long it would take, as `sbatch --test-only` or `docker compose config` do. Nothing
runs, nothing is built, no engine or scheduler is asked for work, and no file is written.

The estimate rests on priors, each said where it is used: the quick size keeps a wall-time budget (the rounds fill
what the runs leave of it); the full size's runs stop at their measuring limit, so it gives an upper bound; what
no prior covers (an image build, a queue wait, a first step that pays tracing or autotuning) is named, not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fp16doctor.engines.rounds import FULL_ROUNDS_BUDGET_S
from fp16doctor.engines.spec import RunSpec, WorkloadSize
from fp16doctor.options import HOST_STACK, DiagnoseOptions

# --quick is a wall-time budget for the host's matrix: the interleaved rounds fill what the runs left of it.
QUICK_BUDGET_S = 90.0
# Importing the framework in a fresh process: 2.8-3.3 s in the recorded quick diagnoses of 2-core EPYC and Xeon
# machines (runs[].timing.import_s in docs/examples and tests/data/recordings); a run's own set-up and profiled
# window come on top.
IMPORT_PRIOR_S = 3.3


@dataclass(frozen=True)
class DiagnosePlan:
    """The matrix a diagnose would run, where, and about how long; data only (textout/plan.py renders it)."""

    size: str
    cells: tuple[str, ...]  # "host / float16 / original", in the order they would run
    kept: int  # cells --resume keeps from the results already there
    engines: tuple[str, ...]  # where the cells would run
    images: tuple[str, ...]  # the image each container stack runs (built first where an engine lacks it)
    estimate: str  # about how long, and what the figure rests on
    results_path: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.size, "cells": list(self.cells), "kept": self.kept, "engines": list(self.engines),
                "images": list(self.images), "estimate": self.estimate, "results": self.results_path,
                "notes": list(self.notes)}


def _engines(options: DiagnoseOptions, todo: list[RunSpec]) -> tuple[str, ...]:
    where: list[str] = []
    if options.slurm is not None:
        where.append(f"Slurm ({' '.join(options.slurm.sbatch_args()) or 'the default partition'}): one job per "
                     "comparison group, the host's cells on the nodes' Python")
        return tuple(where)
    if any(s.stack == HOST_STACK for s in todo):
        where.append(f"this host's Python ({options.python or 'the one running fp16doctor'})")
    if any(s.stack != HOST_STACK for s in todo):
        for url in options.docker_hosts or ["the local Docker engine (DOCKER_HOST or its socket)"]:
            where.append(f"Docker: {url}")
    return tuple(where)


def _images(options: DiagnoseOptions, todo: list[RunSpec]) -> tuple[str, ...]:
    """Each container stack's image tag: the hash of its build context, so the same tag a build would make."""
    from fp16doctor.engines.context import BuildOptions, build_args, context_files, context_hash, default_ca_bundle
    from fp16doctor.engines.context import image_tag as tag_of
    from fp16doctor.stacks import get_stack

    build = BuildOptions(ca_bundle=options.ca_bundle or default_ca_bundle(), wheelhouse=options.wheelhouse)
    tags = []
    for name in dict.fromkeys(s.stack for s in todo if s.stack != HOST_STACK):
        stack = get_stack(name)
        tags.append(tag_of(stack, context_hash(context_files(stack, build), build_args(stack, build))))
    return tuple(tags)


def _estimate(todo: list[RunSpec], size: WorkloadSize, options: DiagnoseOptions) -> str:
    host = [s for s in todo if s.stack == HOST_STACK and options.slurm is None]
    others = [s for s in todo if s not in host]
    parts: list[str] = []
    if host and size.name == "quick":
        parts.append(f"about {QUICK_BUDGET_S:.0f} s for this host's {len(host)} run(s): the quick budget, which the "
                     "interleaved rounds fill (a CPU whose 16-bit steps take 20 s or more runs past it)")
    elif host:
        per_run = IMPORT_PRIOR_S + size.max_measure_s
        parts.append(f"at most about {(len(host) * per_run + FULL_ROUNDS_BUDGET_S) / 60:.0f} min for this host's "
                     f"{len(host)} run(s) (each stops measuring after {size.max_measure_s:.0f} s; the rounds take "
                     f"{FULL_ROUNDS_BUDGET_S:.0f} s more), plus each run's first step")
    if others:
        per_run = IMPORT_PRIOR_S + size.max_measure_s
        where = "Slurm job" if options.slurm is not None else "container"
        parts.append(f"up to about {len(others) * per_run / 60:.1f} min of measuring for the {len(others)} "
                     f"{where} run(s), plus each {where}'s start and first step")
    if any(s.stack != HOST_STACK for s in todo) and options.slurm is None:
        parts.append("plus a build of each image an engine lacks (minutes each)")
    if options.slurm is not None:
        parts.append("plus the time the jobs wait in the queue")
    return "; ".join(parts) if parts else "nothing left to run"


def describe_plan(todo: list[RunSpec], kept: int, size: WorkloadSize, options: DiagnoseOptions,
                  results_path: Path) -> DiagnosePlan:
    notes: list[str] = []
    if options.experiments:
        notes.append("experiments that change one thing are chosen from what the runs measure, and run after them"
                     + (" if the quick budget has room" if size.name == "quick" else ""))
    notes.append("float32 runs first in each group: its step sets the 16-bit runs' slow-step bound")
    return DiagnosePlan(size.name, tuple(s.label for s in todo), kept, _engines(options, todo),
                        _images(options, todo), _estimate(todo, size, options), str(results_path), tuple(notes))
