"""The host engine's options, declared once (engines/options.py). `--python` is diagnose's own, since every engine's
host cells run on it (a Slurm job's nodes included)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from fp16doctor.engines.options import EngineOptions, Said, option
from fp16doctor.engines.spec import host_stack
from fp16doctor.workload.protocol import KERAS3_BACKENDS


@dataclass(frozen=True)
class HostOptions(EngineOptions):
    """This machine's own Python, one child process per run."""

    panel: ClassVar[str] = "What to run"
    per_stack: ClassVar[tuple[str, ...]] = ("--backend",)

    # Each Keras 3 backend a host stack of its own: `host` for the configured one, `host-jax`, ... (engines/spec.py
    # host_stack): a backend cannot change inside a process.
    backends: tuple[str, ...] = option(
        "--backend", "Run this host's matrix on this Keras 3 backend, each a stack of its own (host for the"
        " configured one, host-jax, ...); repeatable.", default=(), metavar="NAME", choices=KERAS3_BACKENDS)

    def usage_error(self, *, include_host: bool) -> Said | None:
        if self.backends and not include_host:
            return ("--backend runs this host's Python on each backend, and --no-host leaves it out",
                    "drop --no-host, or drop --backend (a pinned stack has one)")
        return None

    def record(self) -> dict[str, Any]:
        return {"backends": list(self.backends)} if self.backends else {}

    @classmethod
    def rerun_words(cls, invocation: dict[str, Any]) -> list[str]:
        backends = invocation.get("backends")
        if not isinstance(backends, list):
            return []
        return [word for name in backends if name in KERAS3_BACKENDS for word in ("--backend", name)]

    def host_stacks(self, configured_backend: str | None) -> tuple[str, ...]:
        return tuple(dict.fromkeys(host_stack(b, configured_backend) for b in self.backends))
