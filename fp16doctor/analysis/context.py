"""The results document, read once into what the rules ask about: runs, their devices and their pairs."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
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
    rounds_step_ms,
)
from fp16doctor.analysis.model import ModelInfo, model_for_run
from fp16doctor.analysis.values import (
    ShownRatio,
    as_int,
    as_list,
    as_mapping,
    as_number,
    as_positive,
    as_str,
    fmt_ms,
    median_of,
)
from fp16doctor.attribution.device_time import HOST_TIME, DeviceTime, from_rows, one_row_each
from fp16doctor.knowledge.cpu import CPU_BF16_FLAGS, CPU_FP16_FLAGS, CpuModel, match_cpu
from fp16doctor.knowledge.cuda import version_at_least, version_tuple
from fp16doctor.knowledge.gpus import GpuFacts, gpu_facts
from fp16doctor.knowledge.modes import advice_applies, inference_only_library
from fp16doctor.knowledge.stated import StatedFacts, stated_facts
from fp16doctor.results import HOST_MACHINE, machine_id
from fp16doctor.workload.protocol import BF16 as BF16_FAMILY
from fp16doctor.workload.protocol import FP16, PRECISIONS, family, variant_parts

# float32's own input pipeline taking half of its step or more is where its step-to-step spread comes from
# (host_input.INPUT_BOUND_SHARE).
INPUT_NOISE_SHARE = 0.5
# Variants that change what is measured, never what to run (the in-memory input control).
CONTROL_VARIANTS = ("synthetic_input",)
REDUCED = tuple(p for p in PRECISIONS if family(p) == FP16)  # the float16 precisions the fp16 rules judge
BF16 = tuple(p for p in PRECISIONS if family(p) == BF16_FAMILY)
SIXTEEN_BIT = REDUCED + BF16


@dataclass(frozen=True)
class Software:
    python: str | None
    tensorflow: str | None
    keras: str | None
    keras_backend: str | None
    keras_api: str | None
    keras_preprocessing: str | None
    cuda: str | None
    cudnn: str | None
    torch: str | None
    jax: str | None
    os: str | None = None  # the system the run's Python saw (a container's, in a stack)
    # Every name the run's `software` gives, lower-cased (a library such as ctranslate2 beside the frameworks).
    names: tuple[str, ...] = ()

    @classmethod
    def from_run(cls, run: Mapping[str, Any]) -> Software:
        sw = as_mapping(run.get("software"))
        fields = ("python", "tensorflow", "keras", "keras_backend", "keras_api", "keras_preprocessing", "cuda",
                  "cudnn", "torch", "jax", "os")
        return cls(**{k: as_str(sw.get(k)) for k in fields},
                   names=tuple(str(k).strip().lower() for k, v in sw.items() if v))

    @property
    def inference_library(self) -> str | None:
        """The inference-only library the run used (knowledge/modes.py), else None."""
        return inference_only_library(self.names)

    @property
    def known(self) -> bool:
        return any((self.tensorflow, self.keras, self.torch, self.jax))

    @property
    def framework(self) -> str:
        """What drives training: "keras2" (multi-backend Keras), "tf.keras", "keras3", "torch", "jax",
        "tensorflow" (TF 1.x without Keras) or "unknown"."""
        api = (self.keras_api or "").lower()
        if api.startswith("keras3") or version_at_least(self.keras, "3.0"):
            return "keras3"
        if api == "tf_keras":
            return "tf.keras"
        if api == "keras2":
            return "keras2"
        if self.keras:
            if version_at_least(self.keras, "2.4") and version_at_least(self.tensorflow, "2.0"):
                return "tf.keras"  # keras 2.4-2.15 are tf.keras on TF 2.x
            return "keras2"
        if self.torch and not self.tensorflow and not self.jax:
            return "torch"
        if self.jax and not self.tensorflow:
            return "jax"
        if self.tensorflow:
            return "tf.keras" if version_at_least(self.tensorflow, "2.0") else "tensorflow"
        if self.torch:
            return "torch"
        return "unknown"

    def unparsed(self) -> list[str]:
        """The versions given that no version can be read from ("nightly"), so no version table speaks for them."""
        return [f"{name} {value!r}" for name, value in (
            ("TensorFlow", self.tensorflow), ("Keras", self.keras), ("PyTorch", self.torch), ("JAX", self.jax),
            ("CUDA", self.cuda), ("cuDNN", self.cudnn), ("Python", self.python))
            if value and version_tuple(value) is None]

    def label(self) -> str:
        parts = []
        for name, value in (
            ("TensorFlow", self.tensorflow),
            ("Keras", self.keras),
            ("PyTorch", self.torch),
            ("JAX", self.jax),
            ("CUDA", self.cuda),
            ("cuDNN", self.cudnn),
            ("Python", self.python),
        ):
            if value:
                parts.append(f"{name} {value}")
        if self.keras_backend and self.keras:
            parts.append(f"backend {self.keras_backend}")
        return ", ".join(parts) if parts else "unknown software"


@dataclass(frozen=True)
class OpItem:
    """One measured op of a run's profiled window (`runs[].ops.items`)."""

    name: str
    layer: str | None
    pass_: str
    dtype: str | None
    impl: str | None
    tensor_cores: bool | None
    ms_per_step: float
    calls_per_step: float | None
    op_type: str | None
    wall_ms_per_step: float | None = None  # overlap-true wall share, where the source had intervals
    in_flight: bool = False  # still running when its step was cut inside: its time is the most it can have run
    host_time: bool = False  # on a GPU trace, a row that holds the host's time (`"time": "host"`), not the device's

    @property
    def key(self) -> tuple[str, str, str]:
        """What pairs an op with its float32 counterpart: the layer, the pass and the kind of op."""
        return (self.layer or "", self.pass_, _op_kind(self.op_type or self.name))


def _op_kind(name: str) -> str:
    """Conv2DBackpropFilter / _MklNativeConv2DBackpropFilterWithBias / convolution -> conv; what precision and
    implementation prefixes would otherwise keep apart."""
    lowered = name.lower()
    for kind in ("conv", "matmul", "gemm", "inner_product", "pool", "relu", "softmax", "sigmoid", "cast",
                 "reorder", "transpose", "bias", "apply", "reduce", "sum"):
        if kind in lowered:
            return {"gemm": "matmul", "inner_product": "matmul"}.get(kind, kind)
    if lowered == "dot" or lowered.startswith("dot_general"):  # XLA's matrix product (JAX's dot_general)
        return "matmul"
    return lowered


@dataclass(frozen=True)
class OpsView:
    source: str | None
    coverage: float | None
    window_kind: str | None
    items: tuple[OpItem, ...]
    window_ms: float | None = None  # the window's wall time per step
    on_gpu: bool = False  # a GPU trace: the rows hold the device's time (coverage: its busy share of the window)

    def total_ms(self) -> float:
        return sum(i.ms_per_step for i in self.items)


def _gpu_trace(ops: Mapping[str, Any], on_gpu: bool) -> bool:
    return on_gpu and ops.get("source") == "torch_profiler"


def _ops_view(value: Any, on_gpu: bool = False) -> OpsView | None:
    ops = as_mapping(value)
    items = []
    raw_items = [as_mapping(raw) for raw in as_list(ops.get("items"))]
    # A GPU trace recorded before each device activity had one row: its kernels counted once (device_time.py).
    for raw in one_row_each(raw_items) if _gpu_trace(ops, on_gpu) else raw_items:
        item = as_mapping(raw)
        ms = as_number(item.get("ms_per_step"))
        name = as_str(item.get("name"))
        if ms is None or ms < 0 or name is None:
            continue
        tc = item.get("tensor_cores")
        wall = as_number(item.get("wall_ms_per_step"))
        items.append(OpItem(name, as_str(item.get("layer")), as_str(item.get("pass")) or "other",
                            as_str(item.get("dtype")), as_str(item.get("impl")),
                            tc if isinstance(tc, bool) else None, ms, as_number(item.get("calls_per_step")),
                            as_str(item.get("op_type")), wall if wall is not None and wall >= 0 else None,
                            item.get("in_flight") is True, item.get("time") == HOST_TIME))
    if not items:
        return None
    window = as_mapping(ops.get("window"))
    coverage = as_number(ops.get("coverage"))
    wall_ms = as_positive(window.get("wall_ms"))
    if _gpu_trace(ops, on_gpu) and wall_ms:
        # The device rows' share of the window, each kernel once (a record's own figure may count one twice).
        coverage = min(sum(i.ms_per_step for i in items if not i.host_time) / wall_ms, 1.0)
    return OpsView(as_str(ops.get("source")), coverage, as_str(window.get("kind")), tuple(items), wall_ms,
                   on_gpu=_gpu_trace(ops, on_gpu))


@dataclass(frozen=True)
class RunView:
    index: int
    stack: str
    precision: str
    variant: str
    device: str
    status: str
    step_ms: float | None  # its rounds' geometric mean where rounds timed it (rounds_step_ms), else its median
    p10_ms: float | None
    p90_ms: float | None
    steps: int | None
    first_step_ms: float | None
    input_ms: float | None
    input_p10_ms: float | None
    input_p90_ms: float | None
    gpu_util_pct: float | None
    loss_first: float | None
    loss_last: float | None
    loss_nan: bool | None
    error: str | None
    software: Software
    workload_name: str | None
    batch_size: int | None
    images: int | None  # examples per epoch, when the workload says
    model: ModelInfo | None
    machine: str = HOST_MACHINE
    bound: bool = False  # cut short by the slow-run rule: its step time is a lower bound
    censored: bool = False  # its one step was ended inside, at the bound (`cut_in_step`): it lasted at least step_ms
    bound_on: str | None = None  # which step met the bound (`bound_on`): "first_step" | "steady_step"; None: not said
    ops: OpsView | None = None
    device_time: DeviceTime | None = None  # a GPU run's device busy time per step (`device_time`)
    batch_dtype: str | None = None  # the dtype of the batches the host built (`batch_dtype`)
    variant_applied: Mapping[str, Any] | None = None  # what the workload applied of its variant (`variant_applied`)
    channels: int | None = None  # the workload's image channels (`workload.channels`)
    experiment: Mapping[str, Any] | None = None
    loss_scale_last: float | None = None
    loss_scale_first: float | None = None
    step_losses: tuple[float, ...] = ()
    image_size: tuple[int, int] | None = None  # (height, width) of the workload's images
    rounds: tuple[float, ...] = ()  # one step median per round, in order (`step_time_ms.rounds`)
    aa_rounds: tuple[float, ...] = ()  # float32's A/A control: a second float32 model in the same rounds
    design: str | None = None  # how its rounds ran beside float32's: "interleaved" | "sequential"
    group: int | None = None  # the rounds process that timed them (`step_time_ms.group`, timing_rounds[].group)
    round_groups: tuple[int, ...] = ()  # each round's process, where they came from more than one
    # What its own process measured where rounds replaced its statistics (`step_time_ms.single_process`).
    single: tuple[float, float | None, float | None] | None = None
    # The variation (log) between two timings of one configuration that the document measured on this run's
    # machine and stack (its runs' `rounds_vs_single_process`, the largest); 0: none measured.
    process_variation: float = 0.0
    probe_note: str | None = None  # what the machine was doing while its rounds ran (timing_rounds[].machine_load)
    contention: Contention | None = None  # what else used the CPU while its rounds measured (busy.py)
    # Where it ran, as sentences name it: "" in a document with one machine and stack (said once, by the report's
    # header), else its stack, and its machine where that is not the host (place_words).
    place: str = ""
    # The between-process variance (log ratio squared) of its comparison, pooled over float32's ratios timed in the
    # same rounds processes, with its degrees of freedom (intervals.comparison_between); (0, 0): none measured.
    between_pool: tuple[float, int] = (0.0, 0)
    mode: str | None = None  # `workload.mode`: "training" | "inference"; None: not said (fp16doctor trains)
    # What the document states of the workload: casts, CPU fallbacks, copies per step, notes (knowledge/stated.py).
    stated: StatedFacts = StatedFacts()

    @property
    def inference(self) -> bool:
        """Forward passes only: the document says so, or the run's library runs nothing else."""
        return self.mode == "inference" or self.software.inference_library is not None

    def advice_applies(self, advice: str | None) -> bool:
        """Whether advice of this id (knowledge/modes.py) applies to this run's mode and library."""
        return advice_applies(advice, self.inference, self.software.inference_library)

    @property
    def timing(self) -> Timing:
        assert self.step_ms is not None
        single = Timing(*self.single) if self.single is not None else None
        return Timing(self.step_ms, self.p10_ms, self.p90_ms, self.rounds, self.design, self.aa_rounds, single,
                      self.first_step_ms, self.bound or self.censored, self.censored, self.group, self.round_groups)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.step_ms is not None

    @property
    def bound_on_first_step(self) -> bool:
        """Cut short by its first step (tracing and autotuning in it), not by a later warm-up step (whose own time
        is then the step time, apart from the first's): the record's `bound_on` where it says, else its one step
        being its first; a record that says neither is taken as the first."""
        if not self.bound:
            return False
        if self.bound_on in ("first_step", "steady_step"):
            return self.bound_on == "first_step"
        if self.first_step_ms is None or self.step_ms is None:
            return True
        return abs(self.step_ms - self.first_step_ms) < 0.01

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("gpu")

    @property
    def label(self) -> str:
        variant = "" if self.variant == "original" else f", {self.variant}"
        machine = "" if self.machine == HOST_MACHINE else f" on {self.machine}"  # evidence names each machine
        return f"{self.stack} / {self.precision}{variant}{machine}"


def names_a_change(run: RunView) -> bool:
    """An experiment that names the change it makes (a layout, a graph rewrite, a switch), no control, nor a change
    combined with one (synthetic_input+xla measures the switch with batches in memory: nothing to adopt)."""
    changes = (run.experiment or {}).get("changes")
    return (run.variant != "original" and not any(p in CONTROL_VARIANTS for p in variant_parts(run.variant))
            and isinstance(changes, Mapping) and bool(changes))


def _image_size(workload: Mapping[str, Any]) -> tuple[int, int] | None:
    height, width = as_int(workload.get("image_height")), as_int(workload.get("image_width"))
    return (height, width) if height and width else None


def _device_time(run: Mapping[str, Any], on_gpu: bool) -> DeviceTime | None:
    """The run's `device_time`, else (a GPU document recorded before it) its kernel rows' sum, each once."""
    recorded = DeviceTime.from_dict(run.get("device_time"))
    if recorded is not None or not on_gpu:
        return recorded
    ops = as_mapping(run.get("ops"))
    if not _gpu_trace(ops, on_gpu):
        return None
    window = as_mapping(ops.get("window"))
    return from_rows([as_mapping(i) for i in as_list(ops.get("items"))], as_positive(window.get("wall_ms")))


def _run_view(index: int, run: Mapping[str, Any]) -> RunView | None:
    precision = as_str(run.get("precision"))
    if precision is None:
        return None
    step = as_mapping(run.get("step_time_ms"))
    loss = as_mapping(run.get("loss"))
    workload = as_mapping(run.get("workload"))
    nan = loss.get("nan_or_inf")
    on_gpu = (as_str(run.get("device")) or "").lower().startswith("gpu")
    rounds = tuple(v for v in (as_positive(x) for x in as_list(step.get("rounds"))) if v is not None)
    return RunView(
        index=index,
        stack=as_str(run.get("stack")) or "unknown",
        precision=precision,
        variant=as_str(run.get("variant")) or "original",
        device=(as_str(run.get("device")) or "unknown").lower(),
        status=as_str(run.get("status")) or "ok",
        # Where rounds timed it, the figure its comparisons weigh, so that every line quotes one step for it.
        step_ms=rounds_step_ms(rounds) or median_of(run.get("step_time_ms")),
        p10_ms=as_positive(step.get("p10")),
        p90_ms=as_positive(step.get("p90")),
        steps=as_int(step.get("n")),
        first_step_ms=as_positive(run.get("first_step_ms")),
        input_ms=median_of(run.get("input_time_ms")),
        input_p10_ms=as_positive(as_mapping(run.get("input_time_ms")).get("p10")),
        input_p90_ms=as_positive(as_mapping(run.get("input_time_ms")).get("p90")),
        gpu_util_pct=median_of(run.get("gpu_utilization_pct")),
        loss_first=as_number(loss.get("first")),
        loss_last=as_number(loss.get("last")),
        loss_nan=nan if isinstance(nan, bool) else None,
        error=as_str(run.get("error")),
        software=Software.from_run(run),
        workload_name=as_str(workload.get("name")),
        batch_size=as_int(workload.get("batch_size")),
        images=as_int(workload.get("images")),
        model=model_for_run(run),
        machine=machine_id(dict(run)),
        bound=run.get("bound") is True or workload.get("stop_reason") == "slow_step_bound"
        or run.get("stop_reason") == "slow_step_bound" or _censored(run),
        censored=_censored(run),
        bound_on=as_str(run.get("bound_on")),
        ops=_ops_view(run.get("ops"), on_gpu),
        device_time=_device_time(run, on_gpu),
        batch_dtype=as_str(run.get("batch_dtype")),
        variant_applied=as_mapping(run.get("variant_applied")) or None,
        channels=as_int(workload.get("channels")),
        experiment=as_mapping(run.get("experiment")) or None,
        loss_scale_first=as_number(loss.get("scale_first")),
        loss_scale_last=as_number(loss.get("scale_last")),
        image_size=_image_size(workload),
        step_losses=tuple(v for v in (as_number(x) for x in as_list(run.get("losses"))) if v is not None),
        rounds=rounds,
        design=as_str(step.get("design")),
        group=as_int(step.get("group")),
        round_groups=_round_groups(step),
        aa_rounds=tuple(v for v in (as_positive(x) for x in as_list(step.get("aa_rounds"))) if v is not None),
        single=_single(step),
        mode=_mode(workload.get("mode")),
        stated=stated_facts(run),
    )


WORKLOAD_MODES = ("training", "inference")


def _round_groups(step: Mapping[str, Any]) -> tuple[int, ...]:
    """Each round's process (`step_time_ms.round_groups`), where the document says them for every round."""
    groups = [as_int(g) for g in as_list(step.get("round_groups"))]
    return tuple(g for g in groups if g is not None) if None not in groups else ()


def _censored(run: Mapping[str, Any]) -> bool:
    """The run's one step was cut inside at the slow-step bound: its time says only how long it lasted at least."""
    return run.get("cut_in_step") is True or as_mapping(run.get("step_time_ms")).get("censored") is True


def _mode(value: Any) -> str | None:
    text = (as_str(value) or "").strip().lower()
    return text if text in WORKLOAD_MODES else None


def _single(step: Mapping[str, Any]) -> tuple[float, float | None, float | None] | None:
    single = as_mapping(step.get("single_process"))
    median = as_positive(single.get("median"))
    return None if median is None else (median, as_positive(single.get("p10")), as_positive(single.get("p90")))


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


def place_words(machine: str, stack: str) -> str:
    """A machine and stack as sentences name them: the stack alone on the host, else 'stack on machine'."""
    return stack if machine == HOST_MACHINE else f"{stack} on {machine}"


def named_place(places: Collection[tuple[str, str]], machine: str, stack: str) -> str:
    """The place a sentence names among a document's `places`: nothing where it is the only one, else its words."""
    return place_words(machine, stack) if len(set(places)) > 1 or (machine, stack) not in places else ""


def on(place: str) -> str:
    """' on <place>' after a sentence's subject, or nothing where the document has one place."""
    return f" on {place}" if place else ""


def _placed(runs: list[RunView]) -> list[RunView]:
    """Each run with the place its sentences name, where the document tells more than one apart."""
    places = {(r.machine, r.stack) for r in runs}
    return [replace(r, place=named_place(places, r.machine, r.stack)) for r in runs] if len(places) > 1 else runs


def build_context(doc: Mapping[str, Any]) -> Context:
    host_record = as_mapping(doc.get("host"))
    host = _machine_facts(host_record)
    runs = _placed(_with_design_facts(doc, [v for v in (_run_view(i, as_mapping(r))
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
