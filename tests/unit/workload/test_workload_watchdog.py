"""The step watchdog (workload/step_watchdog.py) and the hooks that arm it (window.StepHooks): a step past the slow-step
bound is ended inside, at the bound, only where the op source survives that; it is recorded as censored."""

from __future__ import annotations

import importlib
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

WORKLOAD = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"


def load(name: str) -> Any:
    if str(WORKLOAD) not in sys.path:  # the workload's modules import each other from beside themselves
        sys.path.insert(0, str(WORKLOAD))
    return importlib.import_module(name)


class Exited(Exception):
    pass


def timer(bound_ms: float | None = 50.0, warmup_steps: int = 2) -> Any:
    return load("timing").StepTimer(warmup_steps, 3, 10, 60.0, 0.05, bound_ms=bound_ms)


def test_the_bound_judges_the_steady_steps_before_any_measured_one() -> None:
    """The steps end_step holds against the bound, and no other: not the first (tracing), not a measured one."""
    t = timer(warmup_steps=2)
    t.begin()
    assert not t.judges_next_step()  # the first step
    t.end_step({"loss": 1.0})
    assert t.judges_next_step()  # the second warm-up step
    t.end_step({"loss": 1.0})
    assert not t.judges_next_step()  # measured steps are timed, never cut
    one = timer(warmup_steps=1)
    one.begin()
    one.end_step({"loss": 1.0})
    assert one.judges_next_step()  # no warm-up after the first: the first steady step is judged
    free = timer(bound_ms=None)
    free.begin()
    free.end_step({"loss": 1.0})
    assert not free.judges_next_step()


def test_the_first_step_bound_is_judged_after_the_first_step_where_nothing_cut_it() -> None:
    """A first step past its bound ends the run after it, and nothing is armed for a step that will not run."""
    t = load("timing").StepTimer(2, 3, 10, 60.0, 0.05, bound_ms=50.0, first_bound_ms=400.0)
    clock = [0.0]
    t.clock = lambda: clock[0]
    t.begin()
    assert not t.judges_next_step()
    clock[0] += 0.5
    assert t.end_step({"loss": 1.0}) is True
    assert t.bound_on == "first_step" and not t.cut and not t.judges_next_step()
    under = load("timing").StepTimer(2, 3, 10, 60.0, 0.05, bound_ms=50.0, first_bound_ms=400.0)
    under.clock = lambda: clock[0]
    under.begin()
    clock[0] += 0.3
    assert under.end_step({"loss": 1.0}) is False
    assert under.judges_next_step()  # the second step, as without a first-step bound
    under.cut_in_step(52.5)
    assert under.bound_on == "steady_step" and under.bound_limit_ms == 50.0


def test_a_step_cut_inside_is_the_one_censored_measurement(capsys: pytest.CaptureFixture[str]) -> None:
    t = timer()
    t.begin()
    t.end_step({"loss": 1.0})
    t.cut_in_step(52.5)
    assert (t.step_ms, t.bound, t.cut, t.done, t.stop_reason) == ([52.5], True, True, True, "slow_step_bound")
    assert t.warmup_ms[-1] == 52.5 and t.bound_limit_ms == 50.0
    assert '"cut_in_step": true' in capsys.readouterr().out


def test_the_watchdog_fires_at_the_bound_and_exits_after_the_report() -> None:
    reported: list[float] = []
    exits: list[int] = []
    dog = load("step_watchdog").StepWatchdog(time.perf_counter, reported.append, exits.append)
    dog.arm(time.perf_counter(), 30.0)
    deadline = time.perf_counter() + 5
    while not exits and time.perf_counter() < deadline:
        time.sleep(0.005)
    assert exits == [0] and len(reported) == 1 and reported[0] >= 30.0


def test_a_step_that_ends_in_time_disarms_it() -> None:
    fired = threading.Event()
    dog = load("step_watchdog").StepWatchdog(time.perf_counter, lambda ms: fired.set(), lambda code: None)
    dog.arm(time.perf_counter(), 80.0)
    dog.disarm()
    assert not fired.wait(0.3)
    dog.arm(time.perf_counter(), 40.0)  # armed again for the next step, it fires for that one
    assert fired.wait(5)


class FakeProfiler:
    """The window profiler as the hooks see it; `names` says whether oneDNN would name the running kernel."""

    def __init__(self, names: bool) -> None:
        self.names = names
        self.kind: str | None = None
        self.t0 = 0.0
        self.cuts = 0
        self.model = None
        self.epoch_start = False

    def start(self, kind: str, clock: Any) -> None:
        self.kind = kind

    def stop(self, steps: int, clock: Any) -> None:
        self.kind = None

    def after_step(self) -> None:
        pass

    def cut(self, clock: Any) -> None:
        self.cuts += 1
        self.kind = None

    def names_running_kernel(self) -> bool:
        return self.names

    def names_running_kernel_from_start(self, dtype: str, flags: set[str]) -> bool:
        return self.names and dtype == "float16"

    def result(self, kind: str) -> dict[str, Any]:
        return {"window": {"kind": kind}}


def hooks_after_first_step(names: bool) -> tuple[Any, Any, list[str]]:
    window = load("window")
    t = timer(bound_ms=200.0)
    profiler = FakeProfiler(names)
    hooks = window.StepHooks(t, profiler)
    said: list[str] = []
    hooks.cut_inside_steps(lambda: said.append("snapshot"), lambda: said.append("result"))
    hooks.watchdog.exit_process = lambda code: said.append(f"exit {code}")
    hooks.train_begin(SimpleNamespace())
    assert profiler.kind == "first_step"
    hooks.step_end(SimpleNamespace(), {"loss": 1.0})
    return hooks, profiler, said


def test_the_hooks_cut_a_profiled_step_inside_where_onednn_names_the_kernel() -> None:
    hooks, profiler, said = hooks_after_first_step(names=True)
    assert profiler.kind == "bound_step" and said == ["snapshot"]
    deadline = time.perf_counter() + 5
    while "exit 0" not in said and time.perf_counter() < deadline:
        time.sleep(0.005)
    assert said == ["snapshot", "result", "exit 0"] and profiler.cuts == 1
    fields = hooks.result_fields()
    assert fields["cut_in_step"] is True and fields["bound"] is True
    assert hooks.timer.step_ms[0] >= 200.0 and fields["profile"]["window"]["kind"] == "bound_step"


def test_elsewhere_the_step_runs_to_its_end_as_before() -> None:
    """No oneDNN name for the running kernel (TensorFlow's own kernels, TF1, torch, JAX): no watchdog armed, the
    step that passes the bound ends the run after it."""
    hooks, profiler, said = hooks_after_first_step(names=False)
    time.sleep(0.3)  # beyond the 200 ms bound
    assert said == [] and profiler.cuts == 0
    assert hooks.step_end(SimpleNamespace(), {"loss": 1.0}) is True
    assert hooks.timer.bound and not hooks.timer.cut and "cut_in_step" not in hooks.result_fields()


def test_a_report_that_fails_is_an_error_event_and_a_failed_exit(capsys: pytest.CaptureFixture[str]) -> None:
    def broken(ms: float) -> None:
        raise KeyError("model")

    exits: list[int] = []
    dog = load("step_watchdog").StepWatchdog(time.perf_counter, broken, exits.append)
    dog.arm(time.perf_counter(), 10.0)
    deadline = time.perf_counter() + 5
    while not exits and time.perf_counter() < deadline:
        time.sleep(0.005)
    assert exits == [1]
    out = capsys.readouterr().out
    assert '"event": "error"' in out and "reporting a step cut at the bound: KeyError" in out


def test_a_first_step_is_cut_inside_at_its_own_bound_where_onednn_computes_the_dtype_from_the_start() -> None:
    """The pathological CPU's first float16 step (19-44 s on the Xeon): where oneDNN will name the running kernel
    before any trace says so (TensorFlow hands float16 to oneDNN there), the watchdog is armed for the first step at
    the first-step bound; the step is the run's one censored measurement, on the first step."""
    window = load("window")
    t = load("timing").StepTimer(2, 3, 10, 60.0, 0.05, bound_ms=50.0, first_bound_ms=200.0)
    profiler = FakeProfiler(names=True)
    hooks = window.StepHooks(t, profiler)
    said: list[str] = []
    hooks.cut_inside_steps(lambda: said.append("snapshot"), lambda: said.append("result"), "float16")
    hooks.watchdog.exit_process = lambda code: said.append(f"exit {code}")
    assert t.judges_first_step()
    hooks.train_begin(SimpleNamespace())
    assert profiler.kind == "first_step" and said == ["snapshot"]
    deadline = time.perf_counter() + 5
    while "exit 0" not in said and time.perf_counter() < deadline:
        time.sleep(0.005)
    assert said == ["snapshot", "result", "exit 0"] and profiler.cuts == 1
    assert t.bound_on == "first_step" and t.cut and t.bound_limit_ms == 200.0
    assert t.first_step_ms == t.step_ms[0] >= 200.0 and t.warmup_ms == [t.first_step_ms]
    fields = hooks.result_fields()
    assert fields["cut_in_step"] is True and fields["bound_on"] == "first_step"
    assert fields["profile"]["window"]["kind"] == "first_step"


@pytest.mark.parametrize("dtype", ["bfloat16", ""])
def test_a_first_step_in_a_dtype_onednn_is_not_known_to_run_goes_to_its_end(dtype: str) -> None:
    window = load("window")
    t = load("timing").StepTimer(2, 3, 10, 60.0, 0.05, bound_ms=50.0, first_bound_ms=100.0)
    profiler = FakeProfiler(names=True)
    hooks = window.StepHooks(t, profiler)
    said: list[str] = []
    hooks.cut_inside_steps(lambda: said.append("snapshot"), lambda: said.append("result"), dtype)
    hooks.watchdog.exit_process = lambda code: said.append(f"exit {code}")
    hooks.train_begin(SimpleNamespace())
    time.sleep(0.25)  # beyond the 100 ms first-step bound
    assert said == [] and profiler.cuts == 0
    assert hooks.step_end(SimpleNamespace(), {"loss": 1.0}) is True
    assert t.bound_on == "first_step" and not t.cut


# The flags of the CPUs met (their /proc/cpuinfo, the 16-bit ones): the Xeons with AVX512-FP16 and AMX-BF16, the
# EPYC with AVX-512 BF16, the EPYC with AVX2 only.
XEON = {"avx512f", "avx512bw", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile", "f16c"}
EPYC_BF16 = {"avx512f", "avx512bw", "avx512_bf16", "f16c"}
EPYC_AVX2 = {"avx2", "f16c"}


@pytest.mark.parametrize(("flags", "float16", "bfloat16"), [
    (XEON, True, True), (EPYC_BF16, False, True), (EPYC_AVX2, False, False),
    ({"avx_ne_convert"}, True, True), ({"avx512bw", "amx_fp16"}, True, False)])
def test_which_16_bit_dtypes_tensorflow_hands_to_onednn_follows_its_own_rule(
        flags: set[str], float16: bool, bfloat16: bool) -> None:
    computes = load("window").onednn_computes
    assert computes("float16", flags) is float16 and computes("bfloat16", flags) is bfloat16
    assert not computes("float32", flags) and not computes("", flags)


def test_the_rule_is_taken_only_for_tensorflow_2_15_on_with_onednn_creation_lines(
        monkeypatch: pytest.MonkeyPatch) -> None:
    window = load("window")
    profiler = window.WindowProfiler.__new__(window.WindowProfiler)
    profiler.backend, profiler.onednn, profiler.tf_version = "tensorflow", True, (2, 21)
    monkeypatch.setenv("ONEDNN_VERBOSE", "profile_create,profile_exec")
    assert profiler.names_running_kernel_from_start("float16", XEON)
    assert not profiler.names_running_kernel_from_start("float16", EPYC_AVX2)
    profiler.tf_version = (2, 10)
    assert not profiler.names_running_kernel_from_start("float16", XEON)
    profiler.tf_version, profiler.onednn = (2, 21), False
    assert not profiler.names_running_kernel_from_start("float16", XEON)
    profiler.onednn = True
    monkeypatch.setenv("ONEDNN_VERBOSE", "profile_exec")
    assert not profiler.names_running_kernel_from_start("float16", XEON)
