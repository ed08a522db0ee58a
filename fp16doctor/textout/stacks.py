"""What `fp16doctor stacks list|show` prints: the catalogue as a table, one stack with every pin."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fp16doctor.stacks import StackSpec

_NONE = "–"


def stacks_table(stacks: list[StackSpec]) -> Table:
    """The catalogue in an 80-column terminal; `stacks show NAME` has the base image and every pin."""
    table = Table(title="fp16doctor stacks", title_justify="left", header_style="bold", show_edge=False,
                  pad_edge=False)
    for column in ("name", "python", "TF", "keras", "CUDA/cuDNN", "GPU", "mixed_float16"):
        table.add_column(column, no_wrap=True)
    for spec in stacks:
        cuda = f"{spec.cuda}/{spec.cudnn}" if spec.cuda else _NONE
        table.add_row(spec.name, spec.python, spec.tensorflow, spec.keras, cuda, "yes" if spec.gpu else "no",
                      "yes" if spec.supports_precision("mixed_float16") else "no")
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
    if spec.pip_bootstrap:
        rows.append(("pip bootstrap", " ".join(spec.pip_bootstrap)))
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
