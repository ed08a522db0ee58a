"""The host engine: runs the workload in a fresh process of this machine's own Python."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, ClassVar

from fp16doctor.engines.artifacts import attach_ops, split_script_log
from fp16doctor.engines.base import EngineSetup, EventCallback, RunSink, base_run_record, stamp_engine
from fp16doctor.engines.host_options import HostOptions
from fp16doctor.engines.options import EngineOptions
from fp16doctor.engines.runloop import stream, to_record
from fp16doctor.engines.spec import (
    RUN_TIMEOUT_S,
    SCRIPT_RUNNER,
    RunSpec,
    host_rerun,
    is_host_stack,
    script_runner_args,
    stack_backend,
    with_slow_step_bound,
)
from fp16doctor.results import HOST_MACHINE
from fp16doctor.workload.protocol import SCRATCH_ENV

WORKLOAD_DIR = Path(__file__).resolve().parent.parent / "workload"
WORKLOAD_SCRIPT = WORKLOAD_DIR / "run_workload.py"
LOG_TAIL_CHARS = 3000

# Opens a GPU utilisation sampler for a GPU index; it yields an object with .summary() -> dict | None.
SamplerFactory = Callable[[int], AbstractContextManager[Any]]


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fp16doctor"


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-LOG_TAIL_CHARS:].decode("utf-8", errors="replace")


class HostEngine:
    """One run = one child process; results come back over the workload's stdout protocol."""

    kind: ClassVar[str] = "host"
    options_class: ClassVar[type[EngineOptions]] = HostOptions
    runs_here: ClassVar[bool] = True
    one_run: ClassVar[str] = "its own process"
    run_noun: ClassVar[str] = "run"
    also_costs: ClassVar[str] = ""
    queued: ClassVar[bool] = False

    def __init__(
        self,
        python: str | None = None,
        cache_dir: Path | None = None,
        backend: str | None = None,
        sampler: SamplerFactory | None = None,
        timeout_s: float = RUN_TIMEOUT_S,
        script: Path = WORKLOAD_SCRIPT,
        keep_profiles: Path | None = None,
        gpu_index: int | None = None,
        gpu_uuid: str | None = None,
    ) -> None:
        self.python = python or sys.executable
        self.script = script
        self.cache_dir = cache_dir or default_cache_dir()
        self.backend = backend
        self.sampler = sampler
        self.timeout_s = timeout_s
        self.keep_profiles = keep_profiles  # copy each run's raw profile below here (else deleted)
        self.gpu_index = gpu_index  # the GPU run_groups samples (NVML's index), None: no GPU
        self.gpu_uuid = gpu_uuid

    def backend_of(self, spec: RunSpec) -> str | None:
        """The Keras backend a cell runs on: the one its stack names (`host-jax`), else the configured one."""
        return stack_backend(spec.stack) or self.backend

    def command(self, spec: RunSpec, scratch: Path | None = None, profile_dir: Path | None = None) -> list[str]:
        backend = self.backend_of(spec)
        if spec.script is not None:
            # The user's script: its working directory and (without a log_dir) its log go in scratch.
            assert scratch is not None
            cmd = [self.python, "-u", str(WORKLOAD_DIR / SCRIPT_RUNNER),
                   *script_runner_args(spec, str(scratch / "work"), str(script_log_path(spec, scratch)),
                                       str(profile_dir) if profile_dir is not None else None)]
            return cmd[:3] + (["--backend", backend] if backend else []) + cmd[3:]
        cmd = [self.python, "-u", str(self.script), *spec.workload_args(), "--cache-dir", str(self.cache_dir)]
        if backend:
            cmd += ["--backend", backend]
        if profile_dir is not None:
            cmd += ["--profile-dir", str(profile_dir)]
        return cmd

    def environment(self, spec: RunSpec) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": env.get("TF_CPP_MIN_LOG_LEVEL", "2")})
        env.update(spec.extra_env)
        return env

    def run(self, spec: RunSpec, on_event: EventCallback, gpu_index: int | None = None) -> dict[str, Any]:
        record = base_run_record(spec, device="cpu")
        record["engine"] = {"kind": self.kind, "python": self.python}
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="fp16doctor-run-") as tmp:
            stderr_path = Path(tmp) / "stderr.log"
            profile_dir = Path(tmp) / "profile"
            sampling: AbstractContextManager[Any] = (
                self.sampler(gpu_index) if self.sampler is not None and gpu_index is not None else nullcontext()
            )
            with open(stderr_path, "wb") as stderr_file, sampling as sampler:
                # A new session (POSIX): Ctrl-C reaches us, and we stop the child ourselves.
                proc = subprocess.Popen(
                    self.command(spec, Path(tmp), profile_dir),
                    stdout=subprocess.PIPE,
                    stderr=stderr_file,
                    env={**self.environment(spec), SCRATCH_ENV: tmp},  # removed with tmp, even if killed
                    text=True,
                    encoding="utf-8",
                    errors="replace",  # a stray byte in the workload's output must not lose the run
                    bufsize=1,
                    start_new_session=True,
                )
                warm = False

                def _on_event(event: dict[str, Any]) -> None:
                    nonlocal warm
                    if not warm and event.get("phase") == "measure" and hasattr(sampler, "clear"):
                        # Utilisation counts from the first measured step: import and warm-up
                        # would pull the median down.
                        sampler.clear()
                        warm = True
                    on_event(event)

                streamed = stream(_ChildProcess(proc), _on_event, self.timeout_s)
            usage = sampler.summary() if sampler is not None else None
            if spec.script is not None:
                # The script's stdout went to its log, oneDNN's window lines with it.
                split_script_log(script_log_path(spec, Path(tmp)), streamed.capture)
            record = to_record(record, streamed, _tail(stderr_path), self.timeout_s)
            if record["status"] == "ok":
                if usage:
                    record.update(usage)
                if "profile" in record:
                    on_event({"event": "phase", "phase": "attribution"})
                keep = self.keep_profiles / spec.slug if self.keep_profiles is not None else None
                attach_ops(record, streamed.capture, profile_dir, keep)
        record["wall_s"] = round(time.monotonic() - started, 3)
        if spec.script is not None and spec.script.log_dir:
            record["script_log"] = str(script_log_path(spec, Path(tmp)))
        return record

    # --- the engine protocol (engines/base.Engine)

    @classmethod
    def from_setup(cls, setup: EngineSetup) -> HostEngine:
        sampler = None
        if setup.host_gpus:
            from fp16doctor.probe.nvml import UtilizationSampler

            sampler = UtilizationSampler
        gpu = setup.host_gpus[0] if setup.host_gpus else None
        return cls(python=setup.python, backend=setup.backend, sampler=sampler,
                   keep_profiles=setup.out_dir / "profiles" if setup.keep_profiles else None,
                   gpu_index=0 if gpu else None, gpu_uuid=gpu.get("uuid") if gpu else None)

    @classmethod
    def takes(cls, spec: RunSpec) -> bool:
        return is_host_stack(spec.stack)

    def check(self) -> None:
        """--python is checked with what the user typed (a usage error), its Keras by the probe."""

    def describe(self) -> dict[str, Any]:
        """Each host run names its interpreter in its own record."""
        return {}

    def findings(self) -> list[dict[str, Any]]:
        return []

    def where(self) -> list[str]:
        return [f"this host's Python ({self.python})"]

    def has_gpus(self) -> bool | None:
        return self.gpu_index is not None

    def prepare(self, stack: str) -> None:
        """The host's own Python needs nothing prepared."""

    def run_groups(self, groups: list[list[RunSpec]], sink: RunSink) -> None:
        """Each comparison group in turn, float32 first: its step sets the others' slow-step bound."""
        for group in groups:
            for spec in group:
                spec = with_slow_step_bound(spec, sink.runs())
                sink.start_run(spec)
                record = self.run(spec, sink.event, gpu_index=self.gpu_index)
                if self.gpu_uuid and str(record.get("device", "")).startswith("gpu"):
                    record.setdefault("engine", {})["gpu_uuid"] = self.gpu_uuid
                sink.finish_run(stamp_engine(record, HOST_MACHINE, self.kind, host_rerun(spec.stack)))

    def cancel(self) -> None:
        """A host run stops with the Ctrl-C that reaches this process (engines/runloop.stream)."""

    def cleanup(self) -> None:
        """Every run's scratch folder went with it."""


def script_log_path(spec: RunSpec, scratch: Path) -> Path:
    """Where the runner writes the script's own output: the script's log_dir, else the run's scratch."""
    assert spec.script is not None
    return Path(spec.script.log_dir or scratch) / spec.script.log_name(spec)


class _ChildProcess:
    """A workload child process as the run loop drives it."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def lines(self) -> Iterator[str]:
        assert self.proc.stdout is not None
        try:
            yield from self.proc.stdout
        finally:
            self.proc.stdout.close()

    def wait(self) -> int | None:
        return self.proc.wait()

    def stop(self) -> None:
        _stop(self.proc)


def _stop(proc: subprocess.Popen[str]) -> None:
    """Stop the workload and whatever it started (its own session on POSIX; the process on Windows)."""
    if proc.poll() is not None:
        return
    killpg = getattr(os, "killpg", None)
    try:
        if killpg is not None:
            killpg(proc.pid, signal.SIGTERM)
        else:
            proc.terminate()
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            if killpg is not None:
                killpg(proc.pid, getattr(signal, "SIGKILL", signal.SIGTERM))
            else:
                proc.kill()
        except ProcessLookupError:
            pass
        proc.wait()
