"""Every run as every output lists it: its measured numbers and its comparison with the float32 run the analysis
paired it with (same machine, stack, device and variant; context.py). The report's run table, the terminal's
"Runs" and "Measured" and the markdown summary render these rows; none of them reads a run or pairs runs itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from fp16doctor.analysis.context import Context, Pair, RunView, Software
from fp16doctor.analysis.failed import FailedRun, failed_run
from fp16doctor.analysis.values import NOT_COMPARED, ShownRatio, as_list, as_mapping, as_str, fmt_ms, variant_words
from fp16doctor.results import HOST_MACHINE, engine_label, machine_id
from fp16doctor.workload.protocol import PRECISIONS, variant_base


def precision_rank(precision: str) -> int:
    """float32 first, then the 16-bit precisions in results.PRECISIONS' order; unknown ones last."""
    return PRECISIONS.index(precision) if precision in PRECISIONS else len(PRECISIONS)


@dataclass(frozen=True)
class DeviceStep:
    """A GPU run's profiled step as every output draws it: the device's kernels, its copies, and the time it was
    idle (the host's), each counted once (runs[].device_time)."""

    compute_ms: float
    copies_ms: float
    idle_ms: float
    step_ms: float
    pageable: bool | None

    @property
    def busy_ms(self) -> float:
        return self.compute_ms + self.copies_ms

    @property
    def busy_share(self) -> float:
        return min(self.busy_ms / self.step_ms, 1.0) if self.step_ms > 0 else 0.0

    def words(self) -> str:
        """"GPU busy 36 ms of the 295 ms profiled step (12%): kernels 21 ms, copies 15 ms (pageable); idle 259 ms"."""
        copies = f"copies {fmt_ms(self.copies_ms)}{' (pageable)' if self.pageable else ''}"
        return (f"GPU busy {fmt_ms(self.busy_ms)} of the {fmt_ms(self.step_ms)} profiled step "
                f"({self.busy_share:.0%}): kernels {fmt_ms(self.compute_ms)}, {copies}; idle {fmt_ms(self.idle_ms)}")


def _device_step(view: RunView) -> DeviceStep | None:
    dt = view.device_time
    if dt is None or not dt.step_ms or dt.host_ms is None:
        return None
    copies = dt.busy_ms - dt.compute_ms
    return DeviceStep(dt.compute_ms, copies, dt.host_ms, dt.step_ms, dt.h2d_pageable)


# How to read each chart drawn from a machine's run rows (the report's machine cards): one caption per chart, the
# same words for every document. "split_missing" stands where no run measured its input time; "speedup_best_case"
# where the roofline gave some run a best case to draw beside it.
CHART_CAPTIONS = {
    "step_time": "Median step time per stack and precision; whiskers span p10–p90. Shorter is faster.",
    "split": "Where a step goes: time the host spends producing one batch, and the rest (compute, transfer, "
             "framework).",
    "split_missing": "Input time was not measured for these runs, so the input/compute split cannot be drawn.",
    "device": "Where a profiled GPU step goes: the device's kernels and copies, each counted once, and the time the "
              "device sat idle, which the host spent building batches, dispatching work or waiting.",
    "speedup": "Speedup over float32 of the same stack. Right of the 1× line is faster.",
    "speedup_best_case": "Speedup over float32 of the same stack, beside the roofline's best case for this model on "
                         "this GPU. Right of the 1× line is faster.",
}


@dataclass(frozen=True)
class RunRow:
    """One run of the document, in the document's order."""

    index: int  # its place in `runs`
    machine: str  # results.machine_id: "host", or a remote engine's machine
    stack: str
    precision: str  # "?" where the record names none
    variant: str
    device: str
    engine: str  # "docker tcp://gpu-box:2376 gpu 1", "host"; "" where the record names none
    gpu_name: str | None  # the GPU a remote engine's run recorded
    status: str
    error: str | None
    step_ms: float | None  # its step as every output quotes it (RunView.step_ms), for a completed run only
    p10_ms: float | None
    p90_ms: float | None
    samples: int | None
    batch_size: int | None
    first_step_ms: float | None
    input_ms: float | None
    gpu_util_pct: float | None
    loss_nan: bool
    bound: bool  # cut short by the slow-step bound: one step measured
    software: Software | None = None
    image: str | None = None  # the container image it ran in
    stack_description: str | None = None  # the catalogue's words for a stack run in Docker (engine.stack_description)
    fp32_index: int | None = None  # the float32 run it is compared with (a 16-bit run's partner)
    speedup: float | None = None  # float32 step / this step, as the analysis measured the pair (above 1: faster)
    speedup_relative_width: float | None = None  # its interval's width over the speedup: the digits it earns
    outcome: str | None = None  # the pair's: "slower" | "faster" | "no_significant_difference"
    shown: ShownRatio | None = None  # the pair's ratio as every output prints it
    refused: bool = False  # the pair's comparison was refused (timed apart): no figure, "not compared"
    device_step: DeviceStep | None = None  # a GPU run's profiled step split into kernels, copies and idle
    failure: FailedRun | None = None  # a failed run's reason, the user's line, its fix and log (failed.py)
    # A float32 run of a combined variant (synthetic_input+xla) is compared with the float32 run that lacks its last
    # change (protocol.variant_base): that run's variant; None for every other row.
    base_variant: str | None = None
    own_process_ms: float | None = None  # RunView.own_process_ms, for a completed run
    # Why the interleaved rounds did not time it (`rounds_left_out`), where they timed the others: its ratio rests
    # on its own process.
    left_out_of_rounds: str | None = None
    whole_run: bool = False  # RunView.whole_run: its step is the whole script's time, timed once
    loop_step: str | None = None  # RunView.loop_step: a custom loop's step function, its steps timed between calls

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.step_ms is not None

    @property
    def is_baseline(self) -> bool:
        """A completed float32 run: the one every 16-bit run of its cell is measured against (not one of a combined
        variant, measured against the float32 run it changes)."""
        return self.ok and self.precision == "float32" and self.base_variant is None

    @property
    def images_per_s(self) -> float | None:
        return self.batch_size * 1000.0 / self.step_ms if (self.batch_size and self.step_ms) else None

    @property
    def input_share(self) -> float | None:
        """Host time producing one batch over the step, at most 1."""
        return min(self.input_ms / self.step_ms, 1.0) if (self.input_ms and self.step_ms) else None

    @property
    def versus_fp32(self) -> str:
        """The "vs float32" column in every output: "2.00x slower", "166x faster", "same speed", "baseline", or a
        dash with no partner: the verdict's own figure for the pair (ShownRatio)."""
        if self.is_baseline:
            return "baseline"
        if self.refused:
            return NOT_COMPARED
        if self.shown is None:
            return "\u2014"
        return self.shown.figure()

    @property
    def versus_name(self) -> str:
        """What its "vs" figure is against: "float32", or "float32 with batches in memory" for a combined variant."""
        return "float32" + (f" with {variant_words(self.base_variant)}" if self.base_variant else "")

    @property
    def label(self) -> str:
        """"host / float16", "host / float16 / xla": how the runs' notes and lists name a run."""
        variant = "" if self.variant == "original" else f" / {self.variant}"
        return f"{self.stack} / {self.precision}{variant}"


def _unread_row(index: int, run: Mapping[str, object]) -> RunRow:
    """A run the analysis could not read (no precision): listed with what it says, compared with nothing."""
    return RunRow(index, machine_id(dict(run)), as_str(run.get("stack")) or "?", "?",
                  as_str(run.get("variant")) or "original", as_str(run.get("device")) or "",
                  engine_label(run), None, as_str(run.get("status")) or "unknown", as_str(run.get("error")),
                  None, None, None, None, None, None, None, None, False, False, failure=failed_run(run))


def _row(view: RunView, run: Mapping[str, object], pair: Pair | None) -> RunRow:
    engine = as_mapping(run.get("engine"))
    ok = view.ok
    row = RunRow(
        index=view.index,
        machine=view.machine,
        stack=view.stack,
        precision=view.precision,
        variant=view.variant,
        device=as_str(run.get("device")) or "",
        engine=engine_label(run),
        gpu_name=as_str(engine.get("gpu_name")),
        status=view.status,
        error=view.error,
        step_ms=view.step_ms if ok else None,
        p10_ms=view.p10_ms if ok else None,
        p90_ms=view.p90_ms if ok else None,
        samples=view.steps,
        batch_size=view.batch_size if view.batch_size and view.batch_size > 0 else None,
        first_step_ms=view.first_step_ms,
        input_ms=view.input_ms,
        gpu_util_pct=view.gpu_util_pct,
        loss_nan=view.loss_nan is True,
        bound=view.bound,
        software=view.software,
        image=as_str(engine.get("image")),
        stack_description=as_str(engine.get("stack_description")),
        device_step=_device_step(view),
        failure=failed_run(run),
        own_process_ms=view.own_process_ms if ok else None,
        left_out_of_rounds=as_str(run.get("rounds_left_out")) if ok else None,
        whole_run=view.whole_run,
        loop_step=view.loop_step,
    )
    if pair is None:
        return row
    return replace(row, fp32_index=pair.fp32.index, base_variant=pair.fp32.variant if pair.fp32.variant != view.variant
                   and view.precision == "float32" else None, speedup=pair.speedup, outcome=pair.interval.outcome,
                   speedup_relative_width=pair.interval.relative_width, shown=pair.shown,
                   refused=pair.interval.refused is not None)


def run_rows(ctx: Context) -> list[RunRow]:
    """One row per run of the document, each 16-bit run beside the float32 partner the analysis paired it with."""
    views = {v.index: v for v in ctx.runs}
    pairs = {p.reduced.index: p for p in [*ctx.pairs, *_combined_pairs(ctx)]}
    return [_row(views[i], run, pairs.get(i)) if i in views else _unread_row(i, run)
            for i, run in enumerate(as_list(ctx.doc.get("runs"))) if isinstance(run, Mapping)]


def _combined_pairs(ctx: Context) -> list[Pair]:
    """Each float32 run of a combined variant (synthetic_input+xla) against the float32 run of its machine, stack
    and device that lacks its last change (float32 with batches in memory), as its experiment is compared."""
    found = []
    for run in ctx.ok_runs():
        base_variant = variant_base(run.variant)
        if run.precision != "float32" or base_variant == "original":
            continue
        base = next((r for r in ctx.ok_runs() if (r.machine, r.stack, r.device, r.precision, r.variant) == (
            run.machine, run.stack, run.device, "float32", base_variant)), None)
        if base is not None:
            found.append(Pair(base, run))
    return found


def rows_on(rows: Sequence[RunRow], machine: str) -> list[RunRow]:
    """The rows of one machine (`machine` as results.machine_id names it; "" is the results' own host)."""
    return [r for r in rows if r.machine == (machine or HOST_MACHINE)]


def machines_of(rows: Sequence[RunRow]) -> list[str]:
    """The machines the rows ran on, in first-seen order."""
    return list(dict.fromkeys(r.machine for r in rows))


def partner_of(rows: Sequence[RunRow], row: RunRow) -> RunRow | None:
    return next((r for r in rows if r.index == row.fp32_index), None) if row.fp32_index is not None else None


__all__ = ["CHART_CAPTIONS",
           "DeviceStep", "RunRow", "engine_label", "machines_of", "partner_of", "precision_rank", "rows_on", "run_rows"]
