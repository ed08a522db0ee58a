"""The results document, read once into what the rules ask about: runs, their devices and their pairs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from fp16doctor.analysis.busy import Contention, contention_of
from fp16doctor.analysis.intervals import (
    DEFAULT_BAND,
    INPUT_NOISE,
    MACHINE_NOISE,
    MAX_BAND,
    RatioInterval,
    Timing,
    aa_check,
    aa_timing,
    band_of,
    comparison_between,
    ratio_interval,
)
from fp16doctor.analysis.run_view import (  # one run, read once; the context pairs them and re-exports what rules ask
    BF16,
    CONTROL_VARIANTS,
    REDUCED,
    SIXTEEN_BIT,
    OpItem,
    OpsView,
    RunView,
    Software,
    names_a_change,
    read_run,
)
from fp16doctor.analysis.values import (
    ShownRatio,
    as_int,
    as_list,
    as_mapping,
    as_number,
    as_positive,
    as_str,
    fmt_ms,
    named_place,
    on,
)
from fp16doctor.knowledge.cpu import CPU_BF16_FLAGS, CPU_FP16_FLAGS, CpuModel, match_cpu
from fp16doctor.knowledge.gpus import GpuFacts, gpu_facts
from fp16doctor.results import HOST_MACHINE

# float32's own input pipeline taking half of its step or more is where its step-to-step spread comes from
# (host_input.INPUT_BOUND_SHARE).
INPUT_NOISE_SHARE = 0.5


def _process_variation(run: RunView, raw: Mapping[str, Any]) -> float:
    """How far this run's rounds and its own process disagreed (|log| of `rounds_vs_single_process`), 0: unknown."""
    value = as_positive(as_mapping(raw.get("step_time_ms")).get("rounds_vs_single_process"))
    return abs(math.log(value)) if value is not None and run.rounds else 0.0


@dataclass(frozen=True)
class CpuFacts:
    model: str | None
    flags: frozenset[str] | None  # None: not reported

    @property
    def table(self) -> CpuModel | None:
        """What the model name implies (knowledge/cpu.py CPU_MODELS), for documents that report no flags."""
        return match_cpu(self.model)

    @property
    def native_fp16(self) -> bool | None:
        """fp16 arithmetic: by the flags where reported, else by the model's generation, else None."""
        if self.flags is None:
            return None if self.table is None else self.table.native_fp16
        return any(f in self.flags for f in CPU_FP16_FLAGS)

    @property
    def native_bf16(self) -> bool | None:
        """bfloat16 arithmetic: by the flags where reported, else by the model's generation, else None."""
        if self.flags is None:
            return None if self.table is None else self.table.native_bf16
        return bool(self.bf16_flags)

    @property
    def bf16_flags(self) -> list[str]:
        return sorted(f for f in CPU_BF16_FLAGS if self.flags and f in self.flags)


def noise_band(*steps: tuple[float | None, float | None, float | None]) -> float:
    """Relative spread of step-time medians, from each (median, p10, p90), at least DEFAULT_BAND and at most
    MAX_BAND (analysis/intervals.py): a difference between two medians below it is not claimed."""
    spreads = [b for m, p10, p90 in steps if m and (b := band_of(Timing(m, p10, p90))) is not None]
    return min(max([DEFAULT_BAND, *spreads]), MAX_BAND)


@dataclass(frozen=True)
class Pair:
    """A reduced-precision run and the float32 run it is compared with (same stack, device and variant)."""

    fp32: RunView
    reduced: RunView
    # The float32 run whose A/A control judges the comparison: fp32 itself, or, where a change is compared with the
    # 16-bit run it changes (float16 with channels padded against float16), float32 in the same rounds.
    control: RunView | None = None

    @property
    def ratio(self) -> float:
        """reduced step / float32 step: above 1 means fp16 is slower (from the rounds, where the runs have them)."""
        return 1.0 / self.interval.speedup

    @property
    def speedup(self) -> float:
        return 1.0 / self.ratio

    @cached_property
    def interval(self) -> RatioInterval:
        """float32's step over this one's, with the interval the two records support (intervals.py): across two
        processes widened by the variation the document measured there, and checked against the A/A control."""
        between = max(self.fp32.process_variation, self.reduced.process_variation)
        interval = ratio_interval(self.fp32.timing, self.reduced.timing, between, self.fp32.between_pool)
        floor = self.noise_floor
        if floor is None or interval.is_bound:
            return interval
        source = self.noise_source
        return replace(interval, aa=aa_check(interval, floor, source or self.fp32.probe_note,
                                             INPUT_NOISE if source else MACHINE_NOISE))

    @property
    def noise_source(self) -> str | None:
        """Where float32's step-to-step spread comes from when the run's own input pipeline is most of its step (the
        host builds every batch, and its time varies with it): said instead of the machine's load."""
        fp32 = self.control or self.fp32
        if not (fp32.input_ms and fp32.step_ms) or fp32.input_ms < INPUT_NOISE_SHARE * fp32.step_ms:
            return None
        spread = (f"; from {fmt_ms(fp32.input_p10_ms)} to {fmt_ms(fp32.input_p90_ms)}, p10 to p90"
                  if fp32.input_p10_ms and fp32.input_p90_ms else "")
        return (f"that spread is float32's own input pipeline's: the host builds each batch in "
                f"{fmt_ms(fp32.input_ms)} ({fp32.input_ms / fp32.step_ms:.0%} of the step{spread}), inside every step")

    @property
    def step_ms(self) -> float | None:
        """The 16-bit step its ratio and difference come from, as its verdict keeps and every output quotes it (the
        paired rounds' geometric mean, its own process's median, or a cut run's step); the run's own without one."""
        other = self.interval.other_ms
        return round(other, 3) if other is not None else self.reduced.step_ms

    @property
    def fp32_step_ms(self) -> float | None:
        """float32's step its ratio and difference come from (as `step_ms`)."""
        fp32 = self.interval.fp32_ms
        return round(fp32, 3) if fp32 is not None else self.fp32.step_ms

    @cached_property
    def noise_floor(self) -> RatioInterval | None:
        """float32 against its A/A control in the same rounds: the interval of two identical configurations."""
        fp32 = self.control or self.fp32
        if not fp32.aa_rounds or fp32.design != "interleaved":
            return None
        if self.control is not None and not self.control.group == self.fp32.group == self.reduced.group:
            return None  # the control ran in other rounds than the two compared
        # float32's own model against the control, paired round by round in each process that timed them, with the
        # between-process part its ratios carry where they came from more than one.
        alone = replace(fp32.timing, aa_rounds=())
        return ratio_interval(alone, aa_timing(fp32.timing), 0.0, fp32.between_pool)

    @cached_property
    def shown(self) -> ShownRatio:
        """The ratio as every output prints it: a run cut short on its first step (older results: that step pays
        tracing) or timed only as a lower bound reads ">= 166x slower"."""
        iv = self.interval
        return ShownRatio(iv.speedup, iv.low, iv.high, iv.outcome,
                          lower_bound=iv.method == "lower_bound" or self.reduced.bound_on_first_step,
                          control_failed=iv.aa is not None and not iv.aa.passed)

    @property
    def slower(self) -> bool:
        return self.interval.outcome == "slower"

    @property
    def faster(self) -> bool:
        return self.interval.outcome == "faster"

    def describe(self) -> str:
        r, iv = self.reduced, self.interval
        verdict = "no measurable difference" if self.shown.equivalent else self.shown.figure()
        step = f" ({iv.compared})" if iv.compared else ""
        return (
            f"{r.precision} step {fmt_ms(iv.other_ms)} vs {self.fp32.precision} {fmt_ms(iv.fp32_ms)}{step}{on(r.place)}"
            f"{'' if r.variant == 'original' else ' (' + r.variant + ')'}: {verdict}"
        )


@dataclass(frozen=True)
class MachineFacts:
    """One machine's hardware as its runs' records say: the host, or a Docker engine's machine."""

    cpu: CpuFacts
    gpus: dict[int, GpuFacts]
    drivers: dict[int, str | None]
    os: str | None


@dataclass
class Context:
    doc: Mapping[str, Any]
    runs: list[RunView]
    gpus: dict[int, GpuFacts]  # the host's (machine "host")
    cpu: CpuFacts
    os: str | None
    drivers: dict[int, str | None] = field(default_factory=dict)
    pairs: list[Pair] = field(default_factory=list)
    # Where a machine, stack and variant has no float32 run: each other 16-bit run against the fastest 16-bit run
    # there, its `fp32` side that baseline. Rules keep to `pairs`; the accounting and the verdicts
    # read both, naming the baseline.
    peer_pairs: list[Pair] = field(default_factory=list)
    machines: dict[str, MachineFacts] = field(default_factory=dict)

    def place(self, machine: str, stack: str) -> str:
        """A machine and stack as sentences name them: "" where the document has only that one (RunView.place)."""
        return named_place({(r.machine, r.stack) for r in self.runs}, machine, stack)

    def machine_of(self, run: RunView) -> MachineFacts:
        """A run is judged against its own machine's hardware, never the local host's by default."""
        found = self.machines.get(run.machine)
        if found is not None:
            return found
        return MachineFacts(CpuFacts(None, None), {}, {}, None)

    def cpu_for(self, run: RunView) -> CpuFacts:
        return self.machine_of(run).cpu

    def _gpu_index(self, run: RunView) -> tuple[MachineFacts, int] | None:
        """The GPU entry a "gpu:N" run used on its machine: N if listed, else the first GPU (one-GPU hosts)."""
        machine = self.machine_of(run)
        if not run.on_gpu or not machine.gpus:
            return None
        parsed = _to_int(run.device.split(":", 1)[1]) if ":" in run.device else None
        index = parsed if parsed is not None else 0
        return machine, index if index in machine.gpus else next(iter(machine.gpus))

    def gpu_for(self, run: RunView) -> GpuFacts | None:
        found = self._gpu_index(run)
        return None if found is None else found[0].gpus[found[1]]

    def driver_for(self, run: RunView) -> str | None:
        found = self._gpu_index(run)
        return None if found is None else found[0].drivers.get(found[1])

    def ok_runs(self) -> list[RunView]:
        return [r for r in self.runs if r.ok]

    def reduced_runs(self) -> list[RunView]:
        """The float16 runs (pure and mixed); bfloat16 runs have rules of their own."""
        return [r for r in self.runs if r.precision in REDUCED]

    def fp16_pairs(self) -> list[Pair]:
        return [p for p in self.pairs if p.reduced.precision in REDUCED]

    def changed_pairs(self) -> list[Pair]:
        """Each 16-bit run of a change a document measured (an experiment naming its `changes`, no control) whose
        variant has no float32 run of its own, against float32 as written on its machine and stack: what adopting
        that change with that precision measured."""
        found = []
        for run in self.ok_runs():
            if run.precision not in SIXTEEN_BIT or not names_a_change(run):
                continue
            same = [r for r in self.ok_runs() if (r.machine, r.stack, r.device) == (run.machine, run.stack, run.device)]
            if any(r.precision == "float32" and r.variant == run.variant for r in same):
                continue  # paired within its variant already
            base = next((r for r in same if r.precision == "float32" and r.variant == "original"
                         and not r.experiment), None)
            if base is not None:
                found.append(Pair(base, run))
        return found

    @property
    def windows(self) -> bool:
        return bool(self.os and "windows" in self.os.lower())


def _to_int(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def _machine_facts(record: Mapping[str, Any]) -> MachineFacts:
    gpus: dict[int, GpuFacts] = {}
    drivers: dict[int, str | None] = {}
    for position, gpu in enumerate(as_list(record.get("gpus"))):
        gpu = as_mapping(gpu)
        index = as_int(gpu.get("index"))
        key = index if index is not None else position
        gpus[key] = gpu_facts(as_str(gpu.get("name")), as_str(gpu.get("compute_capability")),
                              as_str(gpu.get("gfx_arch")))
        drivers[key] = as_str(gpu.get("driver_version"))
    cpu = as_mapping(record.get("cpu"))
    raw_flags = cpu.get("flags")
    flags = (
        frozenset(str(f).lower() for f in raw_flags if isinstance(f, str))
        if isinstance(raw_flags, (list, tuple))
        else None
    )
    return MachineFacts(CpuFacts(as_str(cpu.get("model")), flags), gpus, drivers, as_str(record.get("os")))


def _engine_machine(run: Mapping[str, Any]) -> Mapping[str, Any]:
    """A remote engine's machine as its run recorded it (GPU name, compute capability, driver)."""
    engine = as_mapping(run.get("engine"))
    gpus = []
    if as_str(engine.get("gpu_name")):
        gpus.append({"index": engine.get("gpu_index", 0), "name": engine.get("gpu_name"),
                     "compute_capability": engine.get("gpu_compute_capability"),
                     "driver_version": engine.get("gpu_driver_version")})
    return {"gpus": gpus, "cpu": as_mapping(engine.get("cpu"))}


def _with_design_facts(doc: Mapping[str, Any], runs: list[RunView]) -> list[RunView]:
    """Each run with what the document measured of its machine and stack as a whole: the variation between two
    timings of one configuration, and what the machine was doing while the rounds ran."""
    raw = as_list(doc.get("runs"))
    variation: dict[tuple[str, str], float] = {}
    for run in runs:
        key = (run.machine, run.stack)
        variation[key] = max(variation.get(key, 0.0), _process_variation(run, as_mapping(raw[run.index])))
    notes: dict[str | int, str] = {}
    busy: dict[str | int, Contention] = {}
    for entry in as_list(doc.get("timing_rounds")):
        entry = as_mapping(entry)
        note = load_words(as_mapping(entry.get("machine_load")))
        group = as_int(entry.get("group"))
        if note and as_str(entry.get("stack")):
            notes.setdefault(str(entry.get("stack")), note)  # a document without groups: its stack's rounds
            if group is not None:
                notes[group] = note
        contention = contention_of(entry)
        if contention is not None and as_str(entry.get("stack")):
            busy.setdefault(str(entry.get("stack")), contention)
            if group is not None:
                busy[group] = contention
    runs = [replace(r, process_variation=variation.get((r.machine, r.stack), 0.0),
                    probe_note=notes.get(r.group) if r.group is not None else notes.get(r.stack),
                    contention=busy.get(r.group) if r.group is not None else busy.get(r.stack))
            for r in runs]
    return _with_between_pools(runs)


def _with_between_pools(runs: list[RunView]) -> list[RunView]:
    """Each run timed in rounds from two or more processes with its comparison's pooled between-process variance:
    float32's ratios to every run its first rounds process timed (its `group`) and to its A/A control."""
    pools: dict[tuple[str, str, int], tuple[float, int]] = {}
    for fp32 in sorted(runs, key=lambda r: not r.aa_rounds):  # the original's float32 first: it has the control
        if fp32.precision != "float32" or not fp32.ok or fp32.group is None or len(set(fp32.round_groups)) < 2 \
                or (fp32.machine, fp32.stack, fp32.group) in pools:
            continue
        others = [r.timing for r in runs if r is not fp32 and r.ok and r.group == fp32.group
                  and (r.machine, r.stack) == (fp32.machine, fp32.stack) and r.design == "interleaved"]
        pools[(fp32.machine, fp32.stack, fp32.group)] = comparison_between(fp32.timing, others)
    if not pools:
        return runs
    return [replace(r, between_pool=pools.get((r.machine, r.stack, r.group), (0.0, 0))) if r.group is not None
            else r for r in runs]


def load_words(load: Mapping[str, Any]) -> str | None:
    """What the machine was doing while the rounds ran, in words (`timing_rounds[].machine_load`): the load
    average before and after, the busiest other processes, the CPU frequency; None where nothing was read."""
    parts = []
    before, after = as_mapping(load.get("before")), as_mapping(load.get("after"))
    la_before, la_after = as_number(before.get("load_1min")), as_number(after.get("load_1min"))
    cores = as_int(load.get("cores"))
    if la_before is not None or la_after is not None:
        text = " -> ".join(f"{v:.2f}" for v in (la_before, la_after) if v is not None)
        parts.append(f"load average {text}" + (f" on {cores} cores" if cores else ""))
    busiest = [as_mapping(p) for p in as_list(load.get("busiest_others"))]
    named = [f"{as_str(p.get('name')) or '?'} ({as_number(p.get('cpu_pct')) or 0:.0f} % of a core)"
             for p in busiest[:3] if as_str(p.get("name"))]
    if named:
        parts.append("busiest other processes " + ", ".join(named))
    mhz = [v for v in (as_number(before.get("cpu_mhz")), as_number(after.get("cpu_mhz"))) if v is not None]
    if mhz:
        parts.append("CPU clock " + " -> ".join(f"{v:.0f} MHz" for v in mhz))
    return "; ".join(parts) if parts else None


def _placed(runs: list[RunView]) -> list[RunView]:
    """Each run with the place its sentences name, where the document tells more than one apart."""
    places = {(r.machine, r.stack) for r in runs}
    return [replace(r, place=named_place(places, r.machine, r.stack)) for r in runs] if len(places) > 1 else runs


def build_context(doc: Mapping[str, Any]) -> Context:
    host_record = as_mapping(doc.get("host"))
    host = _machine_facts(host_record)
    runs = _placed(_with_design_facts(doc, [v for v in (read_run(i, as_mapping(r))
                                                        for i, r in enumerate(as_list(doc.get("runs")))) if v]))
    ctx = Context(doc, runs, host.gpus, host.cpu, host.os, host.drivers)
    recorded = as_mapping(doc.get("machines"))
    ctx.machines[HOST_MACHINE] = host
    for name, facts in recorded.items():
        if name != HOST_MACHINE and isinstance(facts, Mapping):
            ctx.machines[str(name)] = _machine_facts(facts)
    raw_runs = as_list(doc.get("runs"))
    for run in runs:
        if run.machine not in ctx.machines:
            ctx.machines[run.machine] = _machine_facts(_engine_machine(as_mapping(raw_runs[run.index])))
    by_key: dict[tuple[str, str, str, str], dict[str, RunView]] = {}
    for run in ctx.ok_runs():
        by_key.setdefault((run.machine, run.stack, run.device, run.variant), {})[run.precision] = run
    for cell in by_key.values():
        fp32 = cell.get("float32")
        if fp32 is None:
            # No float32 run here: the 16-bit types are compared with each other, against the fastest of them, so
            # every verdict is a slowdown whose cause the rules can name.
            present = sorted((cell[p] for p in SIXTEEN_BIT if p in cell), key=lambda r: r.step_ms or math.inf)
            ctx.peer_pairs += [Pair(present[0], other) for other in present[1:]]
            continue
        for precision in SIXTEEN_BIT:
            if precision in cell:
                ctx.pairs.append(Pair(fp32, cell[precision]))
    return ctx


__all__ = ["BF16", "CONTROL_VARIANTS", "REDUCED", "SIXTEEN_BIT", "Context", "CpuFacts", "MachineFacts", "OpItem",
           "OpsView", "Pair", "RunView", "Software", "build_context", "load_words", "names_a_change",
           "noise_band"]
