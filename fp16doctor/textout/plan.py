"""What `fp16doctor diagnose --plan` prints: the matrix, where it would run, the images, the estimate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text


class Plan(Protocol):
    """What the text reads of a diagnose plan (runplan.DiagnosePlan has it; runplan sits above)."""

    @property
    def size(self) -> str: ...
    @property
    def cells(self) -> Sequence[str]: ...
    @property
    def kept(self) -> int: ...
    @property
    def engines(self) -> Sequence[str]: ...
    @property
    def images(self) -> Sequence[str]: ...
    @property
    def estimate(self) -> str: ...
    @property
    def results_path(self) -> str: ...
    @property
    def notes(self) -> Sequence[str]: ...


def plan_text(plan: Plan) -> RenderableType:
    kept = f", {plan.kept} already in {plan.results_path} (--resume)" if plan.kept else ""
    parts: list[RenderableType] = [
        Text(f"diagnose would run {len(plan.cells)} cell(s) at size {plan.size}{kept}; nothing was run or created",
             style="bold")]
    cells = Table(show_header=False, show_edge=False, pad_edge=False, box=None)
    cells.add_column(justify="right", style="dim", no_wrap=True)
    cells.add_column()
    for index, cell in enumerate(plan.cells, start=1):
        cells.add_row(f"{index}.", cell)
    parts.append(cells)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    for engine in plan.engines:
        grid.add_row("where", engine)
    for image in plan.images:
        grid.add_row("image", image)
    grid.add_row("time", plan.estimate)
    grid.add_row("results", plan.results_path)
    for note in plan.notes:
        grid.add_row("note", note)
    parts.append(grid)
    return Group(*parts)
