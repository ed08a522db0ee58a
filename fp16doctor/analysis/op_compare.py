"""Where the time went: each 16-bit run's measured ops beside its float32 partner's, per layer and pass.

Numbers only, no judgement: the report's "Where the time went" and the terminal summary render these rows;
which op is a *cause* is the accounting's business (causes.py). Pure, like the rest of the analysis.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.context import Context, OpItem, OpsView, Pair, RunView, build_context
from fp16doctor.analysis.values import as_list, as_mapping, as_number, as_str, fmt_ms, fmt_pct, pair_words
from fp16doctor.results import LOW_COVERAGE

# The share of the window's wall time the listed ops must cover before their sum stands for the step; below
# it the report says that much of the step is not attributed (the attribution stage warns at the same level).


@dataclass(frozen=True)
class OpDiff:
    """One layer and pass: what the 16-bit run and its float32 partner spent there per step."""

    layer: str  # the Keras layer, or the op's own name when the profiler gave no layer
    pass_: str
    reduced_ms: float | None  # None: the 16-bit run listed no op here
    fp32_ms: float | None  # None: the float32 run listed no op here (or has no measured ops at all)
    difference_ms: float | None  # 16-bit - float32 (a float32 op missing counts 0); None when not comparable
    impls: tuple[str, ...]  # the 16-bit run's implementations (kernels), biggest first
    fp32_impls: tuple[str, ...]
    tensor_cores: bool | None  # the 16-bit kernels' Tensor Core use: true if any said so, null if none knew
    dtypes: tuple[str, ...]
    ops: int  # how many measured ops (both runs) the row sums
    rows: int = 1  # more than one: the rest of a table, summed


# How to read a table of these rows ("where the time went"), the same for every document, wherever it is shown.
OPS_HEADING = "Where the time went"  # every output's heading over these tables
OPS_READING = ("Measured per op in a profiled window, summed per layer and pass, per step; biggest differences first. "
               "An op's time is what the profiler saw it take: ops that ran at the same time can add up to more than "
               "the step.")

# What a run's profiled window was, in the words of every output.
WINDOW_WORDS = {
    "after_timing": "a profiled window after the timed steps",
    "first_step": "the first step of a run cut short (its only step, profiled)",
    "bound_step": "the warm-up step that cut the run short (its measured step, profiled)",
    "rounds": "a profiled window after its warm-up in the interleaved rounds' process",
}


@dataclass(frozen=True)
class OpsSide:
    """How one run's ops were measured."""

    source: str | None  # "tf_profiler", or "tf_profiler + onednn_verbose" when two were merged
    coverage: float | None
    window_kind: str | None  # "after_timing", or "first_step" / "bound_step": the step that met the slow-run bound
    window_steps: int | None
    total_ms: float
    on_gpu: bool = False  # a GPU trace: coverage is the device's busy share of the window

    @property
    def window(self) -> str:
        """"a profiled window after the timed steps (3 steps)"."""
        kind = self.window_kind or ""
        # "rounds_<precision>": profiled in the interleaved rounds' process, the precision having none of its own.
        words = WINDOW_WORDS.get("rounds" if kind.startswith("rounds_") else kind, "a profiled window")
        if self.window_steps and self.window_kind not in ("first_step", "bound_step"):
            words += f" ({self.window_steps} step{'s' if self.window_steps != 1 else ''})"
        return words


@dataclass(frozen=True)
class OpComparison:
    machine: str
    stack: str
    variant: str
    precision: str
    step_ms: float
    fp32_step_ms: float
    bound: bool  # the 16-bit run was cut short: its step time is a lower bound
    reduced: OpsSide
    fp32: OpsSide | None  # None: the float32 partner has no measured ops
    rows: tuple[OpDiff, ...]  # biggest absolute difference first

    @property
    def low_coverage(self) -> bool:
        sides = [self.reduced, *([self.fp32] if self.fp32 else [])]
        return any(s.coverage is not None and s.coverage < LOW_COVERAGE for s in sides)

    @property
    def window(self) -> str:
        """Both runs' windows: "float16: a profiled window ... (3 steps); float32: ..."."""
        words = f"{self.precision}: {self.reduced.window}"
        return words + (f"; float32: {self.fp32.window}" if self.fp32 is not None else "")

    @property
    def title(self) -> str:
        """"float16 vs float32", with the stack, the variant and the machine where they need saying (pair_words)."""
        return pair_words(self.precision, self.stack, self.variant, self.machine)

    def caption(self) -> str:
        """What a table of these rows stands on: both steps, what measured the ops and how much of the window they
        cover, and the windows ("float16 step 665 ms, float32 303 ms; ops from torch_profiler, coverage 4 % (float32
        12 %); window: ...")."""
        bound = " (cut short: at least this long)" if self.bound else ""
        source = f"ops from {self.reduced.source or 'unknown'}"
        if self.reduced.coverage is not None:
            source += f", coverage {fmt_pct(self.reduced.coverage)}"
        fp32 = self.fp32
        if fp32 is not None and fp32.source and fp32.source != self.reduced.source:
            source += f"; float32's from {fp32.source}" + (f", coverage {fmt_pct(fp32.coverage)}"
                                                          if fp32.coverage is not None else "")
        elif fp32 is not None and fp32.coverage is not None:
            source += f" (float32 {fmt_pct(fp32.coverage)})"
        return (f"{self.precision} step {fmt_ms(self.step_ms)}{bound}, float32 {fmt_ms(self.fp32_step_ms)}; {source}; "
                f"window: {self.window}")

    @property
    def caveats(self) -> list[str]:
        """What a reader must know before reading the rows as the step's split."""
        notes = []
        if self.fp32 is None:
            notes.append("The float32 run has no measured ops, so only the 16-bit side is shown.")
        for label, side in (("16-bit", self.reduced), ("float32", self.fp32)):
            if side is not None and side.coverage is not None and side.coverage < LOW_COVERAGE:
                if side.on_gpu:
                    notes.append(f"The {label} run's GPU was busy {side.coverage:.0%} of its window; the rest of that "
                                 "step the device sat idle while the host built batches, dispatched or waited.")
                    continue
                notes.append(f"Low coverage: the {label} run's listed ops account for only {side.coverage:.0%} of "
                             "its window's wall time; the rest of that step is not attributed to any op.")
        return notes

    def top(self, count: int) -> tuple[tuple[OpDiff, ...], OpDiff | None]:
        """The `count` biggest rows and the rest summed into one row (None when nothing is left)."""
        head, rest = self.rows[:count], self.rows[count:]
        if not rest:
            return head, None

        def total(values: list[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return sum(known) if known else None

        summed = OpDiff(
            f"{len(rest)} more", "", total([r.reduced_ms for r in rest]), total([r.fp32_ms for r in rest]),
            total([r.difference_ms for r in rest]),
            (), (), None, (), sum(r.ops for r in rest), rows=len(rest),
        )
        return head, summed


# The function-call scopes a tf.function's ops are named under ("StatefulPartitionedCall/adam/Square_2"): an op
# outside the model's layers (the optimizer's) is shown by the rest of its name.
_CALL_SCOPES = re.compile(r"^((Stateful)?PartitionedCall(_\d+)?/)+")


def shown_name(name: str) -> str:
    """An op's name as a table shows it where it has no layer: without TensorFlow's function-call scopes."""
    return _CALL_SCOPES.sub("", name) or name


# A kernel's template arguments name its dtype ("max_pool_backward_nchw<c10::Half, float, int>"): a layerless row is
# matched with its twin of the other precision by its name without them.
_DTYPE_ARGUMENT = re.compile(r"\b(c10::Half|c10::BFloat16|at::Half|at::BFloat16|__half|__nv_bfloat16|half|float|"
                             r"double)\b")


def twin_name(name: str) -> str:
    return _DTYPE_ARGUMENT.sub("T", name)


def _group(items: Sequence[OpItem]) -> dict[tuple[str, str], list[OpItem]]:
    grouped: dict[tuple[str, str], list[OpItem]] = {}
    for item in items:
        grouped.setdefault((item.layer or "", item.pass_ if item.layer else f"{item.pass_}\0{twin_name(item.name)}"),
                           []).append(item)
    return grouped


def _impls(items: Sequence[OpItem]) -> tuple[str, ...]:
    ranked = sorted(items, key=lambda i: -i.ms_per_step)
    # Where no implementation name was recorded (TensorFlow's own CPU kernels carry none), the op type is
    # what names the kernel that ran.
    names = [i.impl or i.op_type for i in ranked]
    return tuple(dict.fromkeys(n for n in names if n))


def _tensor_cores(items: Sequence[OpItem]) -> bool | None:
    known = [i.tensor_cores for i in items if i.tensor_cores is not None]
    if not known:
        return None
    return any(known)


def _side(run: RunView, ops: OpsView, raw_run: Mapping[str, Any]) -> OpsSide:
    raw = as_mapping(raw_run.get("ops"))
    window = as_mapping(raw.get("window"))
    merged = [s for s in (as_str(x) for x in as_list(raw.get("sources"))) if s]
    source = " + ".join(merged) if len(merged) > 1 else ops.source
    steps = as_number(window.get("steps"))
    return OpsSide(source, ops.coverage, ops.window_kind or ("first_step" if run.bound else None),
                   int(steps) if steps is not None and steps > 0 else None, ops.total_ms(), ops.on_gpu)


def compare(pair: Pair, doc: Mapping[str, Any]) -> OpComparison | None:
    """The per layer and pass table of one 16-bit run against its float32 partner, headed by the two steps its
    verdict quotes (those its ratio comes from; a cut run's own steps); None without 16-bit ops."""
    reduced, fp32 = pair.reduced, pair.fp32
    if reduced.ops is None or reduced.step_ms is None or fp32.step_ms is None:
        return None
    # A cut run's bound compares first steps (tracing in both): its table keeps each run's own step.
    cut = pair.interval.is_bound
    raw_runs = as_list(doc.get("runs"))
    ours = _group(reduced.ops.items)
    theirs = _group(fp32.ops.items) if fp32.ops is not None else {}
    rows = []
    for key in dict.fromkeys([*ours, *theirs]):
        mine, other = ours.get(key, []), theirs.get(key, [])
        sample = (mine or other)[0]
        reduced_ms = sum(i.ms_per_step for i in mine) if mine else None
        fp32_ms = sum(i.ms_per_step for i in other) if other else None
        rows.append(OpDiff(
            layer=sample.layer or shown_name(sample.name),
            pass_=sample.pass_,
            reduced_ms=reduced_ms,
            fp32_ms=fp32_ms,
            # An op only the 16-bit run listed is time float32 did not spend (a cast, a reorder). One only
            # float32 listed is not claimed as saved: the 16-bit window may not have caught it (a cut-short
            # run's first step, low coverage).
            difference_ms=(reduced_ms or 0.0) - (fp32_ms or 0.0) if fp32.ops is not None and mine else None,
            impls=_impls(mine),
            fp32_impls=_impls(other),
            tensor_cores=_tensor_cores(mine),
            dtypes=tuple(dict.fromkeys(i.dtype for i in mine if i.dtype)),
            ops=len(mine) + len(other),
        ))
    rows.sort(key=lambda r: (-abs(r.difference_ms or 0.0), -(r.reduced_ms or 0.0)))
    fp32_side = (_side(fp32, fp32.ops, as_mapping(raw_runs[fp32.index])) if fp32.ops is not None
                 and fp32.index < len(raw_runs) else None)
    return OpComparison(
        machine=reduced.machine,
        stack=reduced.stack,
        variant=reduced.variant,
        precision=reduced.precision,
        step_ms=reduced.step_ms if cut else pair.step_ms or reduced.step_ms,
        fp32_step_ms=fp32.step_ms if cut else pair.fp32_step_ms or fp32.step_ms,
        bound=reduced.bound,
        reduced=_side(reduced, reduced.ops, as_mapping(raw_runs[reduced.index]) if reduced.index < len(raw_runs)
                      else {}),
        fp32=fp32_side,
        rows=tuple(rows),
    )


def op_comparisons(doc: Mapping[str, Any]) -> list[OpComparison]:
    """Every 16-bit run with measured ops and a float32 partner (same machine, stack and variant), in the
    analysis' pair order."""
    return comparisons_of(build_context(doc))


def comparisons_of(ctx: Context) -> list[OpComparison]:
    found = [compare(pair, ctx.doc) for pair in ctx.pairs]
    return [c for c in found if c is not None]


__all__ = ["OPS_HEADING", "LOW_COVERAGE", "OPS_READING", "WINDOW_WORDS", "OpComparison", "OpDiff", "OpsSide", "compare",
           "comparisons_of", "op_comparisons"]
