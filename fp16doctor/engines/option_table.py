"""Every engine's options (engines/options.py), in engines/registry.ENGINES' order: what the CLI makes diagnose's
options from and what the invocation check reads, without importing an engine (a test holds the two tables
together)."""

from __future__ import annotations

from fp16doctor.engines.docker.options import DockerOptions
from fp16doctor.engines.host_options import HostOptions
from fp16doctor.engines.options import EngineOptions
from fp16doctor.engines.slurm.options import SlurmOptions

ENGINE_OPTIONS: tuple[type[EngineOptions], ...] = (SlurmOptions, HostOptions, DockerOptions)
