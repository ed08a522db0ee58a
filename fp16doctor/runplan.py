"""What `diagnose --plan` shows after every pre-flight check: the cells that would run, where, the images their
stacks need, and about how long it would take, as `sbatch --test-only` or `docker compose config` do. Nothing
runs, nothing is built, no engine or scheduler is asked for work, and no file is written.

The estimate rests on priors, each said where it is used: the quick size keeps a wall-time budget (the rounds fill
what the runs leave of it, or stop sooner once every ratio is precise enough); the full size's runs stop at their
measuring limit, so it gives an upper bound; what no prior covers (an image build, a queue wait, a first step that
pays tracing or autotuning) is named, not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fp16doctor.engines.base import Engine
from fp16doctor.engines.registry import Router
from fp16doctor.engines.rounds import FULL_ROUNDS_BUDGET_S, stack_rounds_budget_s
from fp16doctor.engines.spec import RunSpec, WorkloadSize, is_host_stack
from fp16doctor.options import DiagnoseOptions
from fp16doctor.workload.paired import MIN_ROUNDS

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


def _images(options: DiagnoseOptions, todo: list[RunSpec]) -> tuple[str, ...]:
    """Each container stack's image tag: the hash of its build context, so the same tag a build would make."""
    from fp16doctor.engines.context import BuildOptions, build_args, context_files, context_hash, default_ca_bundle
    from fp16doctor.engines.context import image_tag as tag_of
    from fp16doctor.stacks import get_stack

    build = BuildOptions(ca_bundle=options.ca_bundle or default_ca_bundle(), wheelhouse=options.wheelhouse)
    tags = []
    for name in dict.fromkeys(s.stack for s in todo if not is_host_stack(s.stack)):
        stack = get_stack(name)
        tags.append(tag_of(stack, context_hash(context_files(stack, build), build_args(stack, build))))
    return tuple(tags)


def _estimate(routed: list[tuple[Engine, list[RunSpec]]], size: WorkloadSize, in_rounds: tuple[RunSpec, ...] = ()
              ) -> str:
    parts: list[str] = []
    for engine, cells in routed:
        per_run = IMPORT_PRIOR_S + size.max_measure_s
        if engine.runs_here and not engine.queued and size.budget_s is not None:
            sooner = (f", or stop sooner once every ratio is known to within {size.rounds_precision * 100:.0f} %"
                      if size.rounds_precision is not None else "")
            parts.append(f"about {size.budget_s:.0f} s for this host's {len(cells)} run(s): the {size.name} budget"
                         f"{' on a GPU' if size.gpu else ''}, which the interleaved rounds fill{sooner} (where this "
                         "machine's steps make their minimum end past it, diagnose says so before they start)")
            if size.gpu:
                alone = [s.label for s in cells if s not in in_rounds]
                rounds = (f"one rounds process that times and profiles {', '.join(s.rounds_label for s in in_rounds)} "
                          "beside them" if in_rounds else "one rounds process that times them again together")
                parts.append(f"within it: {', '.join(alone)} in a process of its own each, then {rounds} (at least "
                             f"{MIN_ROUNDS} rounds), then the experiments, each priced from this machine's steps "
                             "before it runs and kept only where it fits what is left (the rest said with the command "
                             "that runs it)")
        elif engine.runs_here and not engine.queued:
            parts.append(f"at most about {(len(cells) * per_run + FULL_ROUNDS_BUDGET_S) / 60:.0f} min for this host's "
                         f"{len(cells)} run(s) (each stops measuring after {size.max_measure_s:.0f} s; the rounds take "
                         f"{FULL_ROUNDS_BUDGET_S:.0f} s more), plus each run's first step")
        else:
            parts.append(f"up to about {len(cells) * per_run / 60:.1f} min of measuring for the {len(cells)} "
                         f"{engine.run_noun} run(s), plus each {engine.run_noun}'s start and first step")
        if engine.also_costs:
            parts.append(engine.also_costs)
    return "; ".join(parts) if parts else "nothing left to run"


def describe_plan(todo: list[RunSpec], kept: int, size: WorkloadSize, options: DiagnoseOptions,
                  results_path: Path, router: Router, backend_trials: tuple[str, ...] = (),
                  in_rounds: tuple[RunSpec, ...] = ()) -> DiagnosePlan:
    notes: list[str] = []
    if backend_trials:
        per_backend = IMPORT_PRIOR_S + stack_rounds_budget_s(size)
        notes.append(f"then the other Keras backends that see the GPU ({', '.join(backend_trials)}): float32 and the "
                     "precision prescribed so far, with batches in memory, in one interleaved rounds process per "
                     f"backend, beside the estimate above: about {len(backend_trials) * per_backend:.0f} s more, plus "
                     "each model's first step")
    if options.experiments:
        control = ", and the in-memory input control," if size.budget_s is not None and not size.gpu else ""
        notes.append(f"experiments that change one thing{control} are chosen from what the runs measure, and run "
                     "after them" + (f" if the {size.name} budget has room" if size.budget_s is not None else ""))
    notes.append("float32 runs first in each group: its step sets the 16-bit runs' slow-step bound")
    routed = router.route(todo)
    where = tuple(line for engine, _ in routed for line in engine.where())
    return DiagnosePlan(size.name, tuple(s.label for s in todo), kept, where, _images(options, todo),
                        _estimate(routed, size, in_rounds), str(results_path), tuple(notes))
