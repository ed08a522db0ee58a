"""The one in-between shape every parser produces: an op with its total time in the window."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


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
    intervals: list[tuple[float, float]] = field(default_factory=list)  # ms, any common origin
    extra: dict[str, object] = field(default_factory=dict)

    def item(self, steps: int) -> dict[str, object]:
        """The results' ``ops.items[]`` entry (CONTRACT.md), per step."""
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
