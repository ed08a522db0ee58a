"""One run of the results document, read once (`RunView`): its cell, its step, its software, its ops and device time,
tolerant of any optional key missing; context.py pairs the runs and reads the machines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.busy import Contention
from fp16doctor.analysis.intervals import (
    Timing,
    rounds_step_ms,
)
from fp16doctor.analysis.model import ModelInfo, model_for_run
from fp16doctor.analysis.values import (
    as_int,
    as_list,
    as_mapping,
    as_number,
    as_positive,
    as_str,
    median_of,
)
from fp16doctor.attribution.device_time import HOST_TIME, DeviceTime, from_rows, one_row_each
from fp16doctor.knowledge.cuda import version_at_least, version_tuple
from fp16doctor.knowledge.modes import advice_applies, inference_only_library
from fp16doctor.knowledge.stated import StatedFacts, stated_facts
from fp16doctor.results import HOST_MACHINE, machine_id
from fp16doctor.workload.protocol import BF16 as BF16_FAMILY
from fp16doctor.workload.protocol import FP16, PRECISIONS, family, variant_parts

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
    # A custom training loop's (no fit(), fit_generator or train_on_batch): its one "step" is the whole script's time
    # (`workload.timing` "whole_run"), timed once.
    whole_run: bool = False
    # The training step ran compiled as one cluster (`workload.jit_compile`, as the script's model resolved it): a
    # profiler sees the cluster, not the ops inside it.
    compiled: bool = False
    # A custom loop timed step by step (`workload.timing` "loop_calls"): the step function it was timed between.
    loop_step: str | None = None

    @property
    def inference(self) -> bool:
        """Forward passes only: the document says so, or the run's library runs nothing else."""
        return self.mode == "inference" or self.software.inference_library is not None

    def advice_applies(self, advice: str | None) -> bool:
        """Whether advice of this id (knowledge/modes.py) applies to this run's mode and library."""
        return advice_applies(advice, self.inference, self.software.inference_library)

    @property
    def own_process_ms(self) -> float | None:
        """Its own process's median where interleaved rounds gave its step (`step_time_ms.single_process`): what a
        user's own fit() of this configuration measured, beside the rounds' figure every comparison weighs."""
        return self.single[0] if self.single is not None and self.rounds else None

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


def read_run(index: int, run: Mapping[str, Any]) -> RunView | None:
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
        whole_run=workload.get("timing") == "whole_run",
        loop_step=as_str(workload.get("loop_step")) if workload.get("timing") == "loop_calls" else None,
        compiled=workload.get("jit_compile") is True,
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
