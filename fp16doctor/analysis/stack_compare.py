"""Why a 16-bit precision changed from one stack to the next, on one machine: the ratio to float32 in each stack,
and what changed in the 16-bit run's measured ops between them (`stack_comparisons`).

The rule for a user to check against the report:
- a comparison is one machine, one 16-bit precision and the workload as written (variant `original`), in two
  stacks: within one document every pair of its stacks (older software first; one Keras on two backends, the
  configured backend first), or the same configuration in two
  documents (`fp16doctor compare A.json B.json`: before, then after);
- the ratio in each stack is its verdict's, with the verdict's interval (analysis/verdicts.py), never recomputed;
- the 16-bit step's change is judged by the two runs' own interval (intervals.ratio_interval, unpaired: rounds in two
  stacks never ran side by side);
- ops are matched by the layer's position among the layers of its type and the pass, never by the layer's name:
  Keras 2.1.5/2.2.4 number layers from 1 (`conv2d_1` is the first Conv2D), tf.keras and Keras 3 from 0 (`conv2d`
  is the first, `conv2d_1` the second); ops outside any layer (optimizer, casts, input) are matched by pass;
- the accounting is the within-stack one (analysis/causes.py): an op group's time is its overlap-true wall share where
  both runs have one, its self time otherwise; the changes are net (an op that moved against the step's change is
  listed and subtracts), and what they explain is capped at the step's change, so `explained_share` is at most 1 and
  what nothing explains is said.
Pure: data in, data out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any, ClassVar

from fp16doctor.analysis.busy import busiest
from fp16doctor.analysis.causes import _group_ms
from fp16doctor.analysis.context import SIXTEEN_BIT, Context, OpItem, RunView
from fp16doctor.analysis.intervals import ratio_interval
from fp16doctor.analysis.op_compare import _impls
from fp16doctor.analysis.values import (
    NOT_RESOLVED,
    as_list,
    as_mapping,
    as_number,
    as_str,
    fmt_ms,
    fmt_versus,
    pass_words,
    round_ratio,
)
from fp16doctor.analysis.verdict import Verdict
from fp16doctor.analysis.verdicts import UNEXPLAINED_SAID
from fp16doctor.errors import EXIT_USAGE, DoctorError
from fp16doctor.knowledge.cuda import version_tuple
from fp16doctor.results import HOST_MACHINE
from fp16doctor.workload.protocol import KERAS3_BACKENDS

# Frameworks whose automatic layer names count from 1: multi-backend Keras 2.x names a layer
# `prefix + '_' + str(K.get_uid(prefix))` (keras/engine/topology.py in 2.1.5, base_layer.py from 2.2), and get_uid
# returns 1 for a prefix's first layer. tf.keras (base_layer: `backend.unique_object_name(..., zero_based=True)`) and
# Keras 3 leave the first unnumbered and call the second `_1`.
ONE_BASED_NAMING = frozenset({"keras2"})
# A change smaller than this share of the step's change is not named in the headline (it is still listed).
NAMED_SHARE = 0.05
_SUFFIX = re.compile(r"^(?P<stem>.+?)(?:_(?P<n>\d+))?$")


# ---------------------------------------------------------------------------------------- layer positions


@dataclass(frozen=True)
class LayerPlace:
    """Where a layer sits in its model: its type and its position among the layers of that type (from 0)."""

    type_key: str  # "conv2d", "maxpooling2d": what matches across frameworks ("Conv2D" and a "conv2d" stem alike)
    type_label: str  # "Conv2D" from the model's record, else the name's stem
    position: int | None  # None: a name that says no position (a custom name in a 1-based framework)


def _type_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _places(run: RunView, raw_run: Mapping[str, Any]) -> dict[str, LayerPlace]:
    """Each layer name of the run's model record, with its type and position among its type, in model order."""
    places: dict[str, LayerPlace] = {}
    counts: dict[str, int] = {}
    for record in as_list(as_mapping(raw_run.get("model")).get("layers")):
        name, kind = as_str(as_mapping(record).get("name")), as_str(as_mapping(record).get("type"))
        if name is None or kind is None or name in places:
            continue
        key = _type_key(kind)
        places[name] = LayerPlace(key, kind, counts.get(key, 0))
        counts[key] = counts.get(key, 0) + 1
    return places


def layer_place(name: str, run: RunView, places: Mapping[str, LayerPlace]) -> LayerPlace:
    """A layer's place: from the model's record where it lists the layer, else from Keras' automatic name and the
    framework's numbering (`conv2d_1` is position 0 in Keras 2, position 1 in tf.keras and Keras 3)."""
    known = places.get(name)
    if known is not None:
        return known
    match = _SUFFIX.match(name)
    stem, number = (match.group("stem"), match.group("n")) if match else (name, None)
    one_based = run.software.framework in ONE_BASED_NAMING
    if number is None:
        return LayerPlace(_type_key(stem), stem, None if one_based else 0)
    return LayerPlace(_type_key(stem), stem, int(number) - (1 if one_based else 0))


# ---------------------------------------------------------------------------------------- the comparison


@dataclass(frozen=True)
class StackSide:
    """One stack's 16-bit run against its float32 partner, as the verdict there judged it."""

    stack: str  # the stack's name, or the results file's label where two files share a stack name
    software: str  # "TensorFlow 2.21.0, Keras 3.15.1, Python 3.11.2"
    ratio: float  # float32 step / 16-bit step, the pair's (the verdict's `ratio`, before its rounding)
    ratio_interval: tuple[float, float] | None
    outcome: str | None
    figure: str  # the verdict's "160x slower", "1.05x faster", "same speed"
    step_ms: float
    fp32_step_ms: float
    measured_ops: bool  # the 16-bit run has measured ops

    def line(self) -> str:
        """"tf1.7-cpu: >= 42x slower than float32 (TensorFlow 1.7.0, Keras 2.1.5, ...)": the stack, where it stood
        against float32 with its interval, and the software it ran, as every table of a comparison heads a side."""
        return (f"{self.stack}: {fmt_versus(self.ratio, self.ratio_interval, self.outcome, than='than float32')} "
                f"({self.software})")

    @property
    def words(self) -> str:
        """'160x slower', 'the same speed', 'a difference not measurable there': where this stack stood against
        float32, in the headline, as its verdict's figure says it."""
        if self.figure == "not measurable":  # the A/A control could not tell it from noise there
            return "a difference not measurable there"
        if self.figure == NOT_RESOLVED:  # the interval reaches past the equivalence band
            return "a difference not resolved there"
        if self.outcome == "no_significant_difference":
            return "the same speed"
        return self.figure or "no ratio"


@dataclass(frozen=True)
class OpChange:
    """One layer (by type and position) and pass: the 16-bit run's time there in each stack."""

    position: int | None  # among the layers of its type, from 0; None for ops outside any layer
    layer_type: str | None
    layer_from: str | None  # the layer's name in each stack (None: no op there)
    layer_to: str | None
    pass_: str
    impl_from: str | None  # the biggest op's implementation (kernel), or its op type where none was recorded
    impl_to: str | None
    ms_from: float | None  # None: the stack listed no op here
    ms_to: float | None
    wall: bool  # the times are overlap-true wall shares (both runs had them)
    against: bool  # moved against the 16-bit step's change

    @property
    def difference_ms(self) -> float:
        return (self.ms_to or 0.0) - (self.ms_from or 0.0)

    @property
    def layer(self) -> str:
        """'Conv2D #1' (the first Conv2D), a layer's own name where it has no position, '(no layer)'."""
        if self.layer_type is None:
            return "(no layer)"
        if self.position is None:
            return self.layer_to or self.layer_from or self.layer_type
        return f"{self.layer_type} #{self.position + 1}"

    @property
    def where(self) -> str:
        """'Conv2D #1 backward weights', 'optimizer ops (outside the layers)'."""
        said = pass_words(self.pass_)
        if self.layer_type is None:
            return f"{said} ops (outside the layers)"
        return f"{self.layer} {said}"

    def sentence(self) -> str:
        """'Conv2D #1 backward weights moved from Conv2DBackpropFilter (40 ms) to ref:any (13.2 s)'."""
        if self.ms_from is None:
            return f"{self.where} appeared ({self.impl_to or 'an op'}, {fmt_ms(self.ms_to)})"
        if self.ms_to is None:
            return f"{self.where} went away ({self.impl_from or 'an op'}, {fmt_ms(self.ms_from)})"
        if self.impl_from != self.impl_to:
            return (f"{self.where} moved from {self.impl_from or 'an op'} ({fmt_ms(self.ms_from)}) to "
                    f"{self.impl_to or 'an op'} ({fmt_ms(self.ms_to)})")
        impl = f" ({self.impl_to} in both)" if self.impl_to else ""
        return f"{self.where} went from {fmt_ms(self.ms_from)} to {fmt_ms(self.ms_to)}{impl}"

    def to_dict(self) -> dict[str, Any]:
        return {"position": self.position, "layer_type": self.layer_type, "layer_from": self.layer_from,
                "layer_to": self.layer_to, "pass": self.pass_, "impl_from": self.impl_from, "impl_to": self.impl_to,
                "ms_from": _round(self.ms_from), "ms_to": _round(self.ms_to),
                "difference_ms": round(self.difference_ms, 3), "time": "wall" if self.wall else "self",
                "against": self.against}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@dataclass(frozen=True)
class StackComparison:
    """One machine and 16-bit precision in two stacks: the ratio in each, and what changed in its ops."""

    machine: str
    precision: str
    variant: str
    from_: StackSide
    to: StackSide
    step_change_ms: float  # the 16-bit step in `to` minus in `from`
    step_change_interval_ms: tuple[float, float | None]  # no upper end where `to` was cut short (a one-sided bound)
    significant: bool  # the 16-bit step's change lies beyond the two runs' interval
    changes: tuple[OpChange, ...]  # biggest change first, both directions
    explained_ms: float  # the changes' net, in the step's direction, capped at the step's change
    wall: bool

    @property
    def measured(self) -> bool:
        return self.from_.measured_ops and self.to.measured_ops

    @property
    def explained_share(self) -> float:
        if not self.significant or not self.step_change_ms:
            return 0.0
        return min(1.0, self.explained_ms / abs(self.step_change_ms))

    @property
    def unexplained_ms(self) -> float:
        return max(0.0, abs(self.step_change_ms) - self.explained_ms) if self.significant else 0.0

    # How a comparison's ops are matched, the same for every document, wherever its table is shown whole.
    MATCHING: ClassVar[str] = (
        "The 16-bit run's ops in each stack are matched by the layer's position among the layers of its type and the "
        "pass, never by name (Keras 2 numbers layers from 1, tf.keras and Keras 3 from 0).")

    def caption(self, shown: int, rest_in: str) -> str:
        """Under its op table of `shown` rows: how the ops were matched, and where the rest are ("in the report")."""
        rest = len(self.changes) - shown
        more = f"; {rest} more {rest_in}" if rest > 0 else ""
        return (f"16-bit ops matched by layer type, position and pass, on "
                f"{'wall-clock shares' if self.wall else 'self times'}{more}")

    def fell_beyond(self) -> float | None:
        """How far the ratio fell from `from` to `to` beyond both intervals, as a share of `from`'s low end
        (0.25: even the best reading of `to` is 25 % below the worst of `from`); None where it did not."""
        if self.from_.ratio_interval is None or self.to.ratio_interval is None:
            return None
        low_from, high_to = self.from_.ratio_interval[0], self.to.ratio_interval[1]
        if low_from <= 0 or high_to >= low_from:
            return None
        return 1 - high_to / low_from

    def named(self) -> tuple[OpChange | None, OpChange | None]:
        """The biggest change in the step's direction and the biggest against it, where each matters."""
        floor = NAMED_SHARE * abs(self.step_change_ms)
        along = next((c for c in self.changes if not c.against and abs(c.difference_ms) >= floor), None)
        against = next((c for c in self.changes if c.against and abs(c.difference_ms) >= floor), None)
        return along, against

    @property
    def headline(self) -> str:
        """'float16 against float32 went from 26x slower (tf2.10-cpu) to 2.2x slower (host); its step from 13.6 s
        to 1004 ms (float32: 518 ms to 449 ms): Conv2D #2 backward weights went from ... ; the ops' net change
        accounts for 12.6 s of the 12.6 s saved'."""
        sentence = (f"{self.precision} against float32 went from {self.from_.words} ({self.from_.stack}) to "
                    f"{self.to.words} ({self.to.stack}); its step from {fmt_ms(self.from_.step_ms)} to "
                    f"{fmt_ms(self.to.step_ms)} (float32: {fmt_ms(self.from_.fp32_step_ms)} to "
                    f"{fmt_ms(self.to.fp32_step_ms)})")
        if not self.significant:
            return f"{sentence}, a change inside the two runs' interval"
        moved = f"{fmt_ms(abs(self.step_change_ms))} {'added' if self.step_change_ms > 0 else 'saved'}"
        if not self.measured:
            missing = " and ".join(s.stack for s in (self.from_, self.to) if not s.measured_ops)
            return f"{sentence}; no op explains the {moved}: {missing} has no measured ops"
        along, against = self.named()
        if along is not None:
            sentence += f": {along.sentence()}"
        if against is not None:
            sentence += f", while {against.sentence()}"
        sentence += f"; the ops' net change accounts for {fmt_ms(self.explained_ms)} of the {moved}"
        if 1 - self.explained_share >= UNEXPLAINED_SAID:
            sentence += f"; {fmt_ms(self.unexplained_ms)} ({1 - self.explained_share:.0%}) of it is unexplained"
        return sentence

    def to_dict(self) -> dict[str, Any]:
        """The `stack_comparisons[]` entry of results.json (docs/results-schema.md)."""
        sides: dict[str, Any] = {}
        for name, side in (("from", self.from_), ("to", self.to)):
            sides[f"ratio_{name}"] = round_ratio(side.ratio)  # significant figures: 1/2400 keeps its digits
            sides[f"ratio_interval_{name}"] = (
                [round_ratio(side.ratio_interval[0]), round_ratio(side.ratio_interval[1])] if side.ratio_interval
                else None)
            sides[f"outcome_{name}"] = side.outcome
            sides[f"figure_{name}"] = side.figure
            sides[f"step_ms_{name}"] = side.step_ms
            sides[f"fp32_step_ms_{name}"] = side.fp32_step_ms
            sides[f"software_{name}"] = side.software
        return {
            "machine": self.machine, "precision": self.precision, "variant": self.variant,
            "from": self.from_.stack, "to": self.to.stack, **sides,
            "step_change_ms": round(self.step_change_ms, 3),
            "step_change_interval_ms": [None if v is None else round(v, 3) for v in self.step_change_interval_ms],
            "significant": self.significant,
            "changes": [c.to_dict() for c in self.changes],
            "explained_ms": round(self.explained_ms, 3),
            "explained_share": round(self.explained_share, 3),
            "unexplained_ms": round(self.unexplained_ms, 3),
            "headline": self.headline,
        }


@dataclass(frozen=True)
class _Run:
    """A 16-bit run and its float32 partner, with the verdict on them and the document they are in."""

    reduced: RunView
    fp32: RunView
    speedup: float  # the pair's float32 step / 16-bit step, unrounded (the verdict's `ratio` is rounded)
    verdict: Verdict
    doc: Mapping[str, Any]
    label: str  # what the comparison calls its stack


def _side(run: _Run) -> StackSide:
    assert run.reduced.step_ms is not None and run.fp32.step_ms is not None
    return StackSide(
        stack=run.label, software=run.reduced.software.label(),
        ratio=run.speedup, ratio_interval=run.verdict.ratio_interval,
        outcome=run.verdict.outcome, figure=run.verdict.figure,
        step_ms=run.reduced.step_ms, fp32_step_ms=run.fp32.step_ms, measured_ops=run.reduced.ops is not None)


_Key = tuple[str | None, int | None, str, str | None]  # (type, position, pass, name where no position is known)


@dataclass(frozen=True)
class _Group:
    items: list[OpItem]
    layer: str | None  # the layer's name in this stack
    layer_type: str | None  # "Conv2D"


def _grouped(run: _Run) -> dict[_Key, _Group]:
    """The 16-bit run's ops by layer type, position and pass; ops outside the layers by pass alone."""
    assert run.reduced.ops is not None
    raw_runs = as_list(run.doc.get("runs"))
    raw = as_mapping(raw_runs[run.reduced.index]) if run.reduced.index < len(raw_runs) else {}
    places = _places(run.reduced, raw)
    groups: dict[_Key, _Group] = {}
    for item in run.reduced.ops.items:
        if item.layer:
            place = layer_place(item.layer, run.reduced, places)
            key: _Key = (place.type_key, place.position, item.pass_,
                         None if place.position is not None else item.layer)
            groups.setdefault(key, _Group([], item.layer, place.type_label)).items.append(item)
        else:
            groups.setdefault((None, None, item.pass_, None), _Group([], None, None)).items.append(item)
    return groups


def _changes(before: _Run, after: _Run, step_change_ms: float) -> tuple[tuple[OpChange, ...], float, bool]:
    """Every matched group's change, biggest first; their net in the step's direction, capped at the step's change;
    whether the times are wall shares."""
    if before.reduced.ops is None or after.reduced.ops is None:
        return (), 0.0, False
    # Wall shares where both windows have them (causes.py: ops that ran at once share their time).
    wall = (any(i.wall_ms_per_step is not None for i in before.reduced.ops.items)
            and any(i.wall_ms_per_step is not None for i in after.reduced.ops.items))
    ours, theirs = _grouped(before), _grouped(after)
    rising = step_change_ms >= 0
    changes = []
    for key in dict.fromkeys([*ours, *theirs]):
        mine, other = ours.get(key), theirs.get(key)
        ms_from = _group_ms(mine.items, wall) if mine else None
        ms_to = _group_ms(other.items, wall) if other else None
        difference = (ms_to or 0.0) - (ms_from or 0.0)
        if not difference:
            continue
        group = other or mine
        assert group is not None
        changes.append(OpChange(
            position=key[1], layer_type=group.layer_type,
            layer_from=mine.layer if mine else None, layer_to=other.layer if other else None, pass_=key[2],
            impl_from=next(iter(_impls(mine.items)), None) if mine else None,
            impl_to=next(iter(_impls(other.items)), None) if other else None,
            ms_from=ms_from, ms_to=ms_to, wall=wall, against=(difference > 0) != rising))
    changes.sort(key=lambda c: -abs(c.difference_ms))
    net = sum(c.difference_ms for c in changes)
    explained = min(abs(step_change_ms), max(0.0, net if rising else -net))
    return tuple(changes), explained, wall


def compare_runs(before: _Run, after: _Run) -> StackComparison:
    """One configuration in two stacks (or two documents): `before` is `from`, `after` is `to`."""
    side_from, side_to = _side(before), _side(after)
    # The two 16-bit runs never ran side by side: their rounds are unpaired.
    timing_from = replace(before.reduced.timing, design=None, aa_rounds=())
    timing_to = replace(after.reduced.timing, design=None, aa_rounds=())
    interval = ratio_interval(timing_from, timing_to)
    step_change = side_to.step_ms - side_from.step_ms
    significant = interval.outcome != "no_significant_difference"
    changes, explained, wall = _changes(before, after, step_change)
    return StackComparison(
        machine=before.reduced.machine, precision=before.reduced.precision, variant=before.reduced.variant,
        from_=side_from, to=side_to, step_change_ms=step_change,
        step_change_interval_ms=(interval.difference_low_ms, interval.difference_high_ms),
        significant=significant, changes=changes, explained_ms=explained if significant else 0.0, wall=wall)


def _verdict_for(run: RunView, verdicts: Sequence[Verdict]) -> Verdict | None:
    for verdict in verdicts:
        if (verdict.machine, verdict.stack, verdict.variant, verdict.precision) == (
                run.machine, run.stack, run.variant, run.precision):
            return verdict
    return None


def _runs(ctx: Context, verdicts: Sequence[Verdict]) -> list[_Run]:
    """Every 16-bit run of the workload as written with a float32 partner and a verdict, in pair order."""
    found = []
    for pair in ctx.pairs:
        reduced = pair.reduced
        if reduced.variant != "original" or reduced.experiment or reduced.precision not in SIXTEEN_BIT:
            continue
        verdict = _verdict_for(reduced, verdicts)
        if verdict is not None:
            found.append(_Run(reduced, pair.fp32, pair.speedup, verdict, ctx.doc, reduced.stack))
    return found


def _age(run: _Run, configured: str | None) -> tuple[tuple[int, ...], int, tuple[int, ...]]:
    """Older Keras first; one Keras on several backends (host stacks such as `host-jax`), the configured backend
    first, then the others in Keras' own order; then the older framework. What says no version keeps the document's
    order, last."""
    sw = run.reduced.software
    framework = sw.tensorflow or sw.torch or sw.jax
    unknown = (1 << 30,)
    backend = sw.keras_backend
    rank = 0 if backend in (None, configured) else 1 + (
        KERAS3_BACKENDS.index(backend) if backend in KERAS3_BACKENDS else len(KERAS3_BACKENDS))
    return version_tuple(sw.keras) or unknown, rank, version_tuple(framework) or unknown


def stack_comparisons(ctx: Context, verdicts: Sequence[Verdict]) -> list[StackComparison]:
    """Every pair of stacks measured on one machine and 16-bit precision in one document, older stack first."""
    keras = as_mapping(as_mapping(as_mapping(ctx.doc.get("host")).get("frameworks")).get("keras"))
    configured = as_str(keras.get("backend"))
    cells: dict[tuple[str, str], list[_Run]] = {}
    for run in _runs(ctx, verdicts):
        cells.setdefault((run.reduced.machine, run.reduced.precision), []).append(run)
    found = []
    for runs in cells.values():
        ordered = sorted(runs, key=lambda run: _age(run, configured))
        for i, before in enumerate(ordered):
            for after in ordered[i + 1:]:
                if before.reduced.stack != after.reduced.stack:
                    found.append(compare_runs(before, after))
    return found


# ---------------------------------------------------------------------------------------- two documents


@dataclass(frozen=True)
class DocumentComparison:
    """`fp16doctor compare A.json B.json`: one machine before and after."""

    label_from: str
    label_to: str
    machine: str  # how the machine is named: "AMD EPYC, 2 cores" or its GPUs
    comparisons: tuple[StackComparison, ...]
    only_from: tuple[str, ...]  # configurations measured only before ("float16 on host")
    only_to: tuple[str, ...]
    # A document measured on a busy machine: "B.json measured on a busy machine: other processes used 48 % ..."
    busy: tuple[str, ...] = ()

    def slower_than(self, pct: float) -> list[tuple[StackComparison, float]]:
        """The configurations whose ratio fell by more than `pct` % beyond both intervals, with the fall."""
        fallen = [(c, c.fell_beyond()) for c in self.comparisons]
        return [(c, f) for c, f in fallen if f is not None and f * 100 > pct]

    def to_dict(self, fail_if_slower: float | None = None) -> dict[str, Any]:
        """`compare --json`: the two files, the machine, the comparisons and, with a threshold, what fell past it."""
        out: dict[str, Any] = {"from": self.label_from, "to": self.label_to, "machine": self.machine,
                               "stack_comparisons": [c.to_dict() for c in self.comparisons],
                               "only_from": list(self.only_from), "only_to": list(self.only_to),
                               "busy": list(self.busy)}
        if fail_if_slower is not None:
            out["fail_if_slower"] = fail_if_slower
            out["slower"] = [{"machine": c.machine, "precision": c.precision, "from": c.from_.stack,
                              "to": c.to.stack, "fell_beyond_intervals": round(fall, 4)}
                             for c, fall in self.slower_than(fail_if_slower)]
        return out


def file_label(path: PurePath) -> str:
    """What a results file is called in a comparison: its folder for a `results.json`, else its name."""
    return (path.parent.name or path.name) if path.name == "results.json" else path.name


def _machine_record(doc: Mapping[str, Any], machine: str) -> Mapping[str, Any]:
    recorded = as_mapping(as_mapping(doc.get("machines")).get(machine))
    if recorded:
        return recorded
    return as_mapping(doc.get("host")) if machine == HOST_MACHINE else {}


def _hardware(record: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies a machine's hardware (never its OS or kernel, which an upgrade may change)."""
    cpu = as_mapping(record.get("cpu"))
    facts: dict[str, Any] = {}
    if as_str(cpu.get("model")):
        facts["CPU"] = as_str(cpu.get("model"))
    if as_number(cpu.get("cores")) is not None:
        facts["cores"] = as_number(cpu.get("cores"))
    flags = cpu.get("flags")
    if isinstance(flags, list):
        facts["CPU flags"] = sorted({str(f).lower() for f in flags})
    gpus = [as_mapping(g) for g in as_list(record.get("gpus"))]
    if "gpus" in record:
        facts["GPUs"] = sorted(f"{as_str(g.get('name')) or '?'} ({as_str(g.get('compute_capability')) or '?'})"
                               for g in gpus)
    return facts


def _differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What two machines' records both say and say differently ('CPU: AMD EPYC vs Intel Xeon')."""
    return [f"{key}: {_words(a[key])} vs {_words(b[key])}" for key in a if key in b and a[key] != b[key]]


def _words(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _machine_words(facts: Mapping[str, Any]) -> str:
    gpus = facts.get("GPUs") or []
    cores = facts.get("cores")
    cpu = f"{facts.get('CPU') or 'an unnamed CPU'}" + (f", {cores:g} cores" if cores else "")
    return f"{', '.join(gpus)} ({cpu})" if gpus else cpu


def _configuration(run: _Run) -> str:
    where = run.reduced.stack if run.reduced.machine == HOST_MACHINE else \
        f"{run.reduced.stack} on {run.reduced.machine}"
    return f"{run.reduced.precision} on {where}"


def compare_documents(before: tuple[Context, Sequence[Verdict], str],
                      after: tuple[Context, Sequence[Verdict], str]) -> DocumentComparison:
    """Two documents of one machine: each 16-bit configuration's ratio in each, and what changed in its ops.

    Configurations pair by machine (same hardware), precision and stack; a stack measured alone on each side
    pairs with the other's (an upgrade renames it). Raises DoctorError (a usage error) when the two documents
    share no machine."""
    (ctx_a, verdicts_a, label_a), (ctx_b, verdicts_b, label_b) = before, after
    runs_a, runs_b = _runs(ctx_a, verdicts_a), _runs(ctx_b, verdicts_b)
    machines_a = {r.reduced.machine: _hardware(_machine_record(ctx_a.doc, r.reduced.machine)) for r in runs_a}
    machines_b = {r.reduced.machine: _hardware(_machine_record(ctx_b.doc, r.reduced.machine)) for r in runs_b}
    if not machines_a or not machines_b:
        empty = label_a if not machines_a else label_b
        raise DoctorError(f"{empty} has no 16-bit run with a float32 partner to compare",
                          hint="compare two results files of `fp16doctor diagnose` that each measured float32 and a "
                               "16-bit precision", exit_code=EXIT_USAGE)
    # One machine: the same hardware in both (ids are per document: both files call their own host "host").
    same = {ma: mb for ma, fa in machines_a.items() for mb, fb in machines_b.items() if not _differences(fa, fb)}
    if not same:
        ma, fa = next(iter(machines_a.items()))
        fb = next(iter(machines_b.values()))
        raise DoctorError(
            f"{label_a} and {label_b} were measured on different machines ({'; '.join(_differences(fa, fb))})",
            hint="compare takes one machine before and after a change; `fp16doctor report A.json B.json --out "
                 "report.html` puts different machines side by side", exit_code=EXIT_USAGE)
    comparisons: list[StackComparison] = []
    matched_a: set[int] = set()
    matched_b: set[int] = set()
    for ma, mb in same.items():
        mine = [r for r in runs_a if r.reduced.machine == ma]
        theirs = [r for r in runs_b if r.reduced.machine == mb]
        for precision in dict.fromkeys(r.reduced.precision for r in mine):
            here = [r for r in mine if r.reduced.precision == precision]
            there = [r for r in theirs if r.reduced.precision == precision]
            for run in here:
                partner = next((r for r in there if r.reduced.stack == run.reduced.stack), None)
                if partner is None and len(here) == 1 and len(there) == 1:
                    partner = there[0]  # one stack each: the upgrade is the change (tf2.10-cpu -> host)
                if partner is None or id(partner) in matched_b:
                    continue
                matched_a.add(id(run))
                matched_b.add(id(partner))
                named_a, named_b = run.label, partner.label
                if named_a == named_b:  # the same stack name in both files: the files tell them apart
                    named_a, named_b = label_a, label_b
                comparisons.append(compare_runs(replace(run, label=named_a), replace(partner, label=named_b)))
    only_a = tuple(_configuration(r) for r in runs_a if id(r) not in matched_a)
    only_b = tuple(_configuration(r) for r in runs_b if id(r) not in matched_b)
    machine = _machine_words(machines_a[next(iter(same))])
    busy = tuple(f"{label} {contention.document_words()}" for label, contention in
                 ((label_a, busiest(ctx_a.doc)), (label_b, busiest(ctx_b.doc))) if contention is not None)
    return DocumentComparison(label_a, label_b, machine, tuple(comparisons), only_a, only_b, busy)


__all__ = ["DocumentComparison", "LayerPlace", "OpChange", "StackComparison", "StackSide", "compare_documents",
           "compare_runs", "file_label", "layer_place", "stack_comparisons"]
