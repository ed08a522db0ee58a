"""The one in-between shape every parser produces: an op with its total time in the window."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)


@dataclass
class OpRecord:
    name: str
    pass_: str
    total_ms: float  # in the whole window
    calls: int  # in the whole window
    layer: str | None = None
    dtype: str | None = None
    impl: str | None = None
    tensor_cores: bool | None = None
    op_type: str | None = None
    shape: str | None = None
    # ms, any common origin: the instants the op itself ran (a nested op's time is the nested op's, not its caller's)
    intervals: list[tuple[float, float]] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)
    wall_ms: float | None = None  # in the whole window: its overlap-true share of wall time (overlap_wall_ms)

    def item(self, steps: int) -> dict[str, object]:
        """The results' ``ops.items[]`` entry (docs/results-schema.md), per step."""
        entry: dict[str, object] = {
            "name": self.name,
            "layer": self.layer,
            "pass": self.pass_,
            "dtype": self.dtype,
            "impl": self.impl,
            "tensor_cores": self.tensor_cores,
            "ms_per_step": round(self.total_ms / steps, 4),
            "calls_per_step": round(self.calls / steps, 3),
        }
        if self.wall_ms is not None:
            entry["wall_ms_per_step"] = round(self.wall_ms / steps, 4)
        if self.op_type:
            entry["op_type"] = self.op_type
        if self.shape:
            entry["shape"] = self.shape
        entry.update(self.extra)
        return entry


def union_ms(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length of the union of intervals."""
    total = 0.0
    end = None
    start = None
    for lo, hi in sorted(intervals):
        if end is None or lo > end:
            if end is not None and start is not None:
                total += end - start
            start, end = lo, hi
        elif hi > end:
            end = hi
    if end is not None and start is not None:
        total += end - start
    return total


@dataclass
class _Open(Generic[Key]):
    end: float
    key: Key
    resume: float  # where its own time resumes: its start, or the end of its last child so far


def self_segments(spans: Iterable[tuple[float, float, Key]]) -> list[tuple[float, float, Key]]:
    """The spans of one thread, nested as calls are, cut to each span's own time: the parts where no span inside
    it runs. A child that outlasts its parent is cut at the parent's end (one thread runs one thing at a time)."""
    own: list[tuple[float, float, Key]] = []
    open_: list[_Open[Key]] = []

    def close() -> None:
        done = open_.pop()
        if done.end > done.resume:
            own.append((done.resume, done.end, done.key))
        if open_:
            open_[-1].resume = max(open_[-1].resume, done.end)

    for start, end, key in sorted(spans, key=lambda s: (s[0], -s[1])):
        while open_ and open_[-1].end <= start:
            close()
        if open_:
            parent = open_[-1]
            end = min(end, parent.end)
            if start > parent.resume:
                own.append((parent.resume, start, parent.key))
            parent.resume = end  # the parent's own time resumes only once this child is done
        open_.append(_Open(end, key, start))
    while open_:
        close()
    return own


def overlap_wall_ms(records: Sequence[OpRecord]) -> list[float | None]:
    """Each record's overlap-true wall time: an instant in which n of the listed intervals run at once counts 1/n
    for each, so the records' times add up to the union of their intervals (the covered wall time), where their
    self times add up to thread time (TensorFlow runs independent ops at once). None: a record without
    intervals, whose wall share is unknown."""
    bounds: list[tuple[float, int, int]] = []
    for index, record in enumerate(records):
        for lo, hi in record.intervals:
            if hi > lo:
                bounds += [(lo, 1, index), (hi, -1, index)]
    bounds.sort(key=lambda b: (b[0], b[1]))  # at one instant, what ends leaves before what starts comes in
    wall = [0.0] * len(records)
    active: dict[int, int] = {}
    running = 0
    last = 0.0
    for instant, step, index in bounds:
        if running and instant > last:
            each = (instant - last) / running
            for open_index, count in active.items():
                wall[open_index] += each * count
        last = instant
        running += step
        count = active.get(index, 0) + step
        if count:
            active[index] = count
        else:
            active.pop(index, None)
    return [wall[i] if record.intervals else None for i, record in enumerate(records)]
