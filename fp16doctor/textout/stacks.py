"""What `fp16doctor stacks list|show` prints: the catalogue as a table, one stack with every pin."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fp16doctor.stacks import PRECISIONS, StackSpec

_NONE = "–"


def stacks_table(stacks: list[StackSpec]) -> Table:
    table = Table(title="fp16doctor stacks", title_justify="left", header_style="bold")
    columns = ("name", "python", "tensorflow", "keras", "cuda", "cudnn", "gpu", "precisions", "base image")
    for column in columns:
        table.add_column(column, no_wrap=column == "name")
    for spec in stacks:
        precisions = ", ".join(p for p in PRECISIONS if spec.supports_precision(p))
        table.add_row(spec.name, spec.python, spec.tensorflow, spec.keras, spec.cuda or _NONE,
                      spec.cudnn or _NONE, "yes" if spec.gpu else "no", precisions, spec.base_image)
    return table


def stack_text(spec: StackSpec) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    limits = spec.to_dict()["limits"]
    rows = [
        ("base image", spec.base_image),
        ("python", f"{spec.python} ({spec.python_executable})"),
        ("tensorflow", spec.tensorflow),
        ("keras", f"{spec.keras} (backend {spec.keras_backend})"),
        ("cuda / cudnn", f"{spec.cuda or _NONE} / {spec.cudnn or _NONE}"),
        ("gpu", ("yes, required" if spec.needs_gpu else "yes, falls back to the CPU") if spec.gpu else "no"),
        ("mixed_float16", "supported (Keras dtype policy)" if spec.supports_precision("mixed_float16")
         else "not in this Keras: skipped"),
    ]
    if limits:
        rows.append(("gpu limits", f"compute capability {limits['min_compute_capability']} to "
                                   f"{limits['max_compute_capability']}, driver {limits['min_driver']}+"))
    if spec.system_packages:
        rows.append(("apt packages", " ".join(spec.system_packages)))
    if spec.venv:
        rows.append(("venv", spec.venv))
    for key, value in rows:
        grid.add_row(key, value)
    pins = Text("\n".join(spec.requirements) if spec.requirements else _NONE)
    base = Text("\n".join(f"- {item}" for item in spec.base.contents))
    return Group(
        Text(f"{spec.name}", style="bold"),
        Text(spec.description, style="italic"),
        grid,
        Text("\npip packages installed on top (pip install --no-deps)", style="bold underline"),
        pins,
        Text(f"\nbase image contents ({spec.base.os}, glibc {spec.base.glibc}, pip {spec.base.pip})",
             style="bold underline"),
        base,
        Text(f"source: {spec.base.source}", style="dim"),
    )
