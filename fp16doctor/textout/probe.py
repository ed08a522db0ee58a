"""What `fp16doctor probe` prints: the host as readable sections (CPU, GPUs, frameworks, Keras config)."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from fp16doctor.workload.protocol import FP16, is_pure

_MISSING = "–"


def _value(value: Any, unit: str = "") -> str:
    if value is None or value == "":
        return _MISSING
    return f"{value}{unit}"


def _section(title: str) -> Text:
    return Text(f"\n{title}", style="bold underline")


def _row(grid: Table, label: str, value: str | Text) -> None:
    """Plain strings are shown as written, never parsed as rich markup (paths and errors hold brackets)."""
    grid.add_row(Text(label), Text(value) if isinstance(value, str) else value)


def _grid() -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    return grid


def _cpu(host: dict[str, Any]) -> list[RenderableType]:
    cpu = host.get("cpu") or {}
    grid = _grid()
    _row(grid, "model", _value(cpu.get("model")))
    _row(grid, "vendor", _value(cpu.get("vendor")))
    cores = _value(cpu.get("cores"))
    if cpu.get("physical_cores"):
        cores += f" logical, {cpu['physical_cores']} physical"
    if cpu.get("cores_usable") and cpu.get("cores_usable") != cpu.get("cores"):
        cores += f" ({cpu['cores_usable']} usable here)"
    if cpu.get("cpu_limit_cores"):
        cores += f", container limited to {cpu['cpu_limit_cores']:g} CPUs"
    _row(grid, "cores", cores)
    flags = cpu.get("flags")
    _row(grid, "low-precision flags", "unknown" if flags is None else " ".join(flags) or "none found")
    _row(grid, "float16 native", _yes_no(cpu.get("fp16_native")))
    _row(grid, "bfloat16 native", _yes_no(cpu.get("bf16_native")))
    if cpu.get("note"):
        _row(grid, "", Text(str(cpu["note"]), style="italic"))
    return [_section("CPU"), grid]


def _yes_no(value: Any) -> Text:
    if value is None:
        return Text("unknown", style="dim")
    return Text("yes", style="green") if value else Text("no", style="yellow")


def _gpus(host: dict[str, Any]) -> list[RenderableType]:
    gpus = host.get("gpus") or []
    nvml = host.get("nvml") or {}
    parts: list[RenderableType] = [_section("GPUs")]
    if not gpus:
        reason = nvml.get("error") or "NVML reports none"
        parts.append(Text(f"No NVIDIA GPU: {reason}.", style="bold yellow"))
        parts.append(Text("Runs on this host use the CPU.", style="dim"))
        return parts
    for gpu in gpus:
        grid = _grid()
        clocks = gpu.get("clocks") or {}
        pcie = gpu.get("pcie") or {}
        _row(grid, "name", Text(str(gpu.get("name") or "unknown"), style="bold"))
        capability = _value(gpu.get("compute_capability")) + _source(gpu, "compute_capability")
        _row(grid, "compute capability", capability)
        _row(grid, "driver", _value(gpu.get("driver_version")))
        cuda = _value(gpu.get("cuda_driver_version")) + _source(gpu, "cuda_driver_version")
        _row(grid, "CUDA (driver API)", cuda)
        _row(grid, "memory", _value(gpu.get("memory_total_mib"), " MiB"))
        sm_clock = _value(clocks.get("sm_max_mhz"), " MHz")
        mem_clock = _value(clocks.get("mem_max_mhz"), " MHz")
        _row(grid, "max clocks", f"SM {sm_clock}, memory {mem_clock}")
        _row(grid, "power limit", _value(gpu.get("power_limit_w"), " W"))
        link = f"gen {_value(pcie.get('gen'))} x{_value(pcie.get('width'))}"
        if pcie.get("gen_current") is not None:
            link += f" (now gen {pcie['gen_current']} x{_value(pcie.get('width_current'))})"
        _row(grid, "PCIe link", link)
        _row(grid, "UUID", _value(gpu.get("uuid")))
        parts += [Text(f"GPU {gpu.get('index', '?')}", style="bold"), grid]
    return parts


def _source(gpu: dict[str, Any], key: str) -> str:
    source = gpu.get(f"{key}_source")
    return f"  ({source})" if source and source != "nvml" else ""


def _frameworks(host: dict[str, Any]) -> list[RenderableType]:
    frameworks = host.get("frameworks") or {}
    python = host.get("python") or {}
    grid = _grid()
    _row(grid, "python", f"{_value(python.get('version'))}  {_value(python.get('executable'))}")
    for name, label in (
        ("numpy", "numpy"),
        ("tensorflow", "TensorFlow"),
        ("keras", "Keras"),
        ("tf_keras", "tf_keras"),
        ("jax", "JAX"),
        ("torch", "PyTorch"),
        ("pillow", "Pillow"),
        ("scipy", "SciPy"),
    ):
        _row(grid, label, _framework_line(name, frameworks.get(name)))
    return [_section("Frameworks"), grid]


def _framework_line(name: str, info: dict[str, Any] | None) -> Text:
    if info is None:
        return Text("not installed", style="dim")
    if info.get("error"):
        version = f"{info['version']} " if info.get("version") else ""
        return Text(f"{version}broken: {info['error']}", style="red")
    line = Text(str(info.get("version") or "?"))
    details: list[str] = []
    if name == "tensorflow":
        if info.get("built_with_cuda"):
            cuda, cudnn = _value(info.get("cuda_version")), _value(info.get("cudnn_version"))
            details.append(f"built for CUDA {cuda}, cuDNN {cudnn}")
        elif info.get("built_with_cuda") is False:
            details.append("CPU-only build")
        details.append(f"sees {info.get('gpus_visible', 0)} GPU(s)")
    elif name == "keras":
        details.append(f"backend {info.get('backend')}")
    elif name == "jax":
        devices = ", ".join(info.get("devices") or []) or "none"
        details.append(f"backend {_value(info.get('backend'))}, devices {devices}")
    elif name == "torch":
        if info.get("cuda"):
            details.append(f"CUDA {info['cuda']}, cuDNN {_value(info.get('cudnn'))}")
        details.append("CUDA available" if info.get("cuda_available") else "no CUDA device")
    if details:
        line.append(f"  ({'; '.join(details)})", style="dim")
    return line


def _backend_words(backend: dict[str, Any]) -> str:
    """"jax 0.10.2 (sees a GPU)", "torch 2.13.0 (CPU only; configured)", "jax broken: ..."."""
    if not backend.get("works"):
        return f"{backend.get('name')} broken"
    parts = ["sees a GPU" if backend.get("gpu") else "CPU only"] + (["configured"] if backend.get("configured") else [])
    return f"{backend.get('name')} {_value(backend.get('version'))} ({'; '.join(parts)})"


def _keras_config(host: dict[str, Any]) -> list[RenderableType]:
    config = host.get("keras_config") or {}
    grid = _grid()
    source = config.get("config_source")
    _row(grid, "keras.json", f"{_value(config.get('config_path'))}  [{_value(source)}]")
    _row(grid, "KERAS_HOME from", _value(config.get("keras_home_source")))
    _row(grid, "backend", f"{_value(config.get('backend'))}  (from {_value(config.get('backend_source'))})")
    floatx = str(config.get("floatx") or _MISSING)
    backends = host.get("keras_backends") or []
    if backends:
        _row(grid, "backends", "; ".join(_backend_words(b) for b in backends))
    _row(grid, "floatx", Text(floatx, style="bold yellow" if is_pure(floatx, FP16) else ""))
    _row(grid, "epsilon", _value(config.get("epsilon")))
    _row(grid, "image_data_format", _value(config.get("image_data_format")))
    parts: list[RenderableType] = [_section("Keras config"), grid]
    if is_pure(floatx, FP16):  # floatx float16 is the pure float16 precision
        parts.append(
            Text(
                "floatx is float16: every Keras model here keeps weights and optimizer state in float16 "
                "(mixed_float16 is the supported route).",
                style="yellow",
            )
        )
    if config.get("error"):
        parts.append(Text(str(config["error"]), style="red"))
    return parts


def probe_text(host: dict[str, Any]) -> RenderableType:
    """The host object as sections: Host, CPU, GPUs, Frameworks, Keras config."""
    head = _grid()
    _row(head, "OS", _value(host.get("os")))
    if host.get("probe_seconds") is not None:
        _row(head, "probed in", f"{host['probe_seconds']:.1f} s")
    return Group(
        Text("Host", style="bold underline"),
        head,
        *_cpu(host),
        *_gpus(host),
        *_frameworks(host),
        *_keras_config(host),
    )


def probe_markdown(host: dict[str, Any], version: str, width: int = 100) -> str:
    """The same sections as plain text in a fenced block, under a heading: what a bug report pastes. The caller
    redacts the host first (home directories, secrets)."""
    from io import StringIO

    from rich.console import Console

    buffer = StringIO()
    Console(file=buffer, width=width, color_system=None, highlight=False, soft_wrap=False,
            legacy_windows=False).print(probe_text(host))
    body = "\n".join(line.rstrip() for line in buffer.getvalue().strip("\n").splitlines())
    return f"### fp16doctor probe (fp16doctor {version})\n\n```text\n{body}\n```\n"
