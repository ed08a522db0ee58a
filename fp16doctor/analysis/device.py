"""Host or device, said first: where a GPU pair's steps go, from each run's device time (attribution/device_time.py),
and what the precision can change through the device's work alone (Amdahl). A classification and a bound, never a
cause that charges time: the causes stay the findings' (causes.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.context import Pair, RunView
from fp16doctor.analysis.ledger import (
    COPIES,
    HOST_BATCH,
    KERNELS,
    LAUNCH_GAPS,
    UNPLACED,
    Ledger,
    moved_words,
    named_changes,
    part_change,
)
from fp16doctor.analysis.values import fmt_ms, fmt_signed_ms, idle_split_words, listed_words
from fp16doctor.attribution.device_time import IDLE_WORDS, IdleSplit

# The device busy under half of the 16-bit run's step: the host sets its pace (the TF Profiler calls a step
# highly input-bound from 20 % of it on input, kHighlyInfeedBoundThresholdInPercent; idle half the step is well
# past that). At 80 % busy or more the device sets it; in between neither does alone.
HOST_BOUND_BELOW = 0.5
# A profiled window's step this far from the timed step is said to be the window's (the busy share is of it).
WINDOW_APART = 0.1
DEVICE_BOUND_FROM = 0.8


def amdahl(share: float, ratio: float) -> float:
    """The most a step can speed up when the share `share` of it speeds up `ratio` times: 1 / ((1 - f) + f / r)."""
    return 1.0 / ((1.0 - share) + share / ratio)


def precision_bound(share: float | None, ratio: float | None, basis: str) -> dict[str, Any]:
    """A verdict's `precision_bound`: Amdahl on the device side, measured or estimated (`basis`)."""
    bound = amdahl(share, ratio) if share is not None and ratio else None
    return {"max_speedup": round(bound, 4) if bound is not None else None,
            "device_share": round(share, 4) if share is not None else None,
            "device_ratio": round(ratio, 4) if ratio is not None else None, "basis": basis}


@dataclass(frozen=True)
class Accounted:
    """A GPU pair's timed difference over the step's parts, each counted once, as one source placed them: the two
    ledgers' part changes ("ledgers": the parts line's own figures, the unplaced time what no part places), or the
    device split's ("device_split": the host's batch only from the trace's host rows or idle timestamps, the rest
    host time no op in the trace accounts for). `accounting` decides which."""

    kernels_ms: float
    copies_ms: float
    host_batch_ms: float
    launch_gaps_ms: float
    unplaced_ms: float
    source: str  # "ledgers" | "device_split"

    def to_dict(self) -> dict[str, Any]:
        """A verdict's `accounted` (its keys as results.json has always named them)."""
        return {"kernels_ms": round(self.kernels_ms, 3), "copies_ms": round(self.copies_ms, 3),
                "host_rows_ms": round(self.host_batch_ms, 3), "launch_gaps_ms": round(self.launch_gaps_ms, 3),
                "unplaced_host_ms": round(self.unplaced_ms, 3), "source": self.source}

    def words(self) -> str:
        """"of the timed difference, host batch +477 ms, unplaced −100 ms, copies −8.5 ms and kernels −6.2 ms" from the
        ledgers, the changes their parts line names (ledger.named_changes); from the device split
        "of the timed difference, −6.2 ms is the kernels', −8.5 ms the batch's copy and +377 ms host time no op in
        the trace accounts for"."""
        if self.source == "ledgers":
            moved = [moved_words(name, ms) for name, ms in named_changes(
                ((KERNELS, self.kernels_ms), (COPIES, self.copies_ms), (HOST_BATCH, self.host_batch_ms),
                 (LAUNCH_GAPS, self.launch_gaps_ms), (UNPLACED, self.unplaced_ms)))]
            if not moved:
                return ""
            return f"of the timed difference, {listed_words(moved)}"
        return (f"of the timed difference, {fmt_signed_ms(self.kernels_ms)} is the kernels', "
                f"{fmt_signed_ms(self.copies_ms)} the batch's copy"
                + (f", {fmt_signed_ms(self.host_batch_ms)} the host's batch" if round(self.host_batch_ms, 3) else "")
                + (f", {fmt_signed_ms(self.launch_gaps_ms)} launch and dispatch gaps"
                   if round(self.launch_gaps_ms, 3) else "")
                + f" and {fmt_signed_ms(self.unplaced_ms)} host time no op in the trace accounts for")

    @classmethod
    def of_ledgers(cls, base: Ledger, mine: Ledger) -> Accounted:
        """The step's change over the two ledgers' parts: each part's change and the unplaced time's (ledger.
        part_change), adding up to the ledgers' step change."""
        return cls(part_change(mine, base, KERNELS), part_change(mine, base, COPIES),
                   part_change(mine, base, HOST_BATCH), part_change(mine, base, LAUNCH_GAPS),
                   part_change(mine, base, UNPLACED), "ledgers")


def bound_by(run: RunView) -> str | None:
    """"host", "device", or None (no device time, or neither sets the pace alone)."""
    share = run.device_time.busy_share if run.device_time is not None else None
    if share is None:
        return None
    if share < HOST_BOUND_BELOW:
        return "host"
    return "device" if share >= DEVICE_BOUND_FROM else None


@dataclass(frozen=True)
class DeviceSplit:
    """One 16-bit run's device time against its float32 partner's, per step of their profiled windows."""

    busy_ms: float
    fp32_busy_ms: float
    step_ms: float | None  # the 16-bit window's step
    fp32_step_ms: float | None
    bound_by: str | None
    method: str  # the device time's: "interval_union" | "kernel_sum"
    copies_ms: float = 0.0  # the 16-bit run's copies (host to device and back), per step
    fp32_copies_ms: float = 0.0
    host_rows_difference_ms: float = 0.0  # the trace's host spans (`"time": "host"` rows), 16-bit less float32
    idle: IdleSplit | None = None  # the 16-bit run's idle time, split by what the device waited on
    fp32_idle: IdleSplit | None = None

    def idle_words(self) -> str | None:
        """"the device idled 46 ms a step: 30 ms waiting on the host's data, 12 ms in launch and dispatch gaps, 4.0 ms
        other; waiting on the host's data dominates"; None without a split."""
        idle = self.idle
        if idle is None or idle.total_ms <= 0:
            return None
        text = f"the device idled {fmt_ms(idle.total_ms)} a step"
        if idle.waiting_on_data_ms is None and idle.launch_gaps_ms is None:
            return text + (" (not split: the recorded rows have neither the host's batch spans nor timestamps; a "
                           "new profile splits it)")
        text += ": " + idle_split_words({"waiting_on_data_ms": idle.waiting_on_data_ms,
                                         "launch_gaps_ms": idle.launch_gaps_ms, "other_ms": idle.other_ms})
        dominant = idle.dominant
        if dominant is None:
            return text + " (the recorded rows have no timestamps to tell a launch gap from the rest)"
        return text + f"; {IDLE_WORDS[dominant]} dominates"

    @property
    def kernel_difference_ms(self) -> float:
        """The device change less the copies': what the precision changed in the kernels (two runs that copied the
        same float32 batch differ in their copies by the link's noise, not by the precision)."""
        return (self.busy_ms - self.copies_ms) - (self.fp32_busy_ms - self.fp32_copies_ms)

    @property
    def copy_difference_ms(self) -> float:
        return self.copies_ms - self.fp32_copies_ms

    @property
    def device_share(self) -> float | None:
        """f: the share of float32's step the device was busy."""
        return min(self.fp32_busy_ms / self.fp32_step_ms, 1.0) if self.fp32_step_ms else None

    @property
    def device_ratio(self) -> float | None:
        """r: float32's device time over the 16-bit run's."""
        return self.fp32_busy_ms / self.busy_ms if self.busy_ms > 0 else None

    @property
    def max_speedup(self) -> float | None:
        """What the precision changes through the device's work alone."""
        f, r = self.device_share, self.device_ratio
        return amdahl(f, r) if f is not None and r else None

    @property
    def device_difference_ms(self) -> float:
        """The 16-bit run's device time less float32's, per step (negative: the device did less)."""
        return self.busy_ms - self.fp32_busy_ms

    def accounted(self, difference_ms: float) -> Accounted:
        """The timed difference over the step's parts as the trace alone places them, each counted once: the
        kernels, the copies, the host's batch (the idle time a trace's timestamps put on the host's data spans; else
        its `"time": "host"` rows), the launch and dispatch gaps (where timestamps split the idle time), and the host
        time no op accounts for (what is left; the trace cannot place it, so it is a size, never a cause). Where the
        pair has ledgers, `accounting` takes theirs instead."""
        host, gaps = self.host_rows_difference_ms, 0.0
        mine, theirs = self.idle, self.fp32_idle
        if mine is not None and theirs is not None and mine.launch_gaps_ms is not None \
                and theirs.launch_gaps_ms is not None and mine.waiting_on_data_ms is not None \
                and theirs.waiting_on_data_ms is not None:  # both from timestamps
            host = mine.waiting_on_data_ms - theirs.waiting_on_data_ms
            gaps = mine.launch_gaps_ms - theirs.launch_gaps_ms
        placed = self.kernel_difference_ms + self.copy_difference_ms + host + gaps
        return Accounted(self.kernel_difference_ms, self.copy_difference_ms, host, gaps, difference_ms - placed,
                         "device_split")

    def change_words(self) -> str:
        """"−6.0 ms of kernel time per step (5% of the step); its batch's copy +0.0 ms": the kernels' change, the
        precision's own; the copy is said apart (the same float32 batch copied twice differs by the link's noise)."""
        text = f"{fmt_signed_ms(self.kernel_difference_ms)} of kernel time per step"
        if self.step_ms:
            text += f" ({abs(self.kernel_difference_ms) / self.step_ms:.0%} of the step)"
        if self.copies_ms or self.fp32_copies_ms:
            text += (f"; the batch's copy took {fmt_ms(self.copies_ms)} against float32's "
                     f"{fmt_ms(self.fp32_copies_ms)}")
        return text

    def words(self, accounted: Accounted | None = None, timed_step_ms: float | None = None) -> str:
        """"the GPU was busy 22 ms of the 547 ms profiled step (4%; float32 36 ms of 295 ms): the host sets the
        pace; of the timed difference, host batch +477 ms, unplaced −100 ms, copies −8.5 ms and kernels −6.2 ms;
        through the device's own work this precision can be at most 1.05x faster": the timed difference as
        `accounted` places it (`accounting`), where it is given."""
        share = self.busy_ms / self.step_ms if self.step_ms else None
        text = f"the GPU was busy {fmt_ms(self.busy_ms)}"
        if self.step_ms and share is not None:
            text += f" of the {fmt_ms(self.step_ms)} profiled step ({share:.0%}"
            text += f"; float32 {fmt_ms(self.fp32_busy_ms)} of {fmt_ms(self.fp32_step_ms)}" \
                if self.fp32_step_ms else ""
            # The shares are the profiler's window's; where its step is not the timed one, it says so.
            text += (f"; the profiler's window, not the {fmt_ms(timed_step_ms)} timed step)"
                     if timed_step_ms and abs(self.step_ms - timed_step_ms) > WINDOW_APART * timed_step_ms else ")")
        if self.bound_by == "host":
            text += ": the host sets the pace"
        elif self.bound_by == "device":
            text += ": the device sets the pace"
        said = accounted.words() if accounted is not None else ""
        if said:
            text += f"; {said}"
        idle = self.idle_words()
        if idle:
            text += f"; {idle}"
        bound = self.max_speedup
        if bound is not None:
            text += f"; through the device's own work this precision can be at most {bound:.2f}x faster"
        return text

    def verdict_fields(self) -> dict[str, Any]:
        return {
            "device_busy_ms": round(self.busy_ms, 3),
            "fp32_device_busy_ms": round(self.fp32_busy_ms, 3),
            "device_difference_ms": round(self.device_difference_ms, 3),
            "kernel_difference_ms": round(self.kernel_difference_ms, 3),
            "copy_difference_ms": round(self.copy_difference_ms, 3),
            "bound_by": self.bound_by,
            "precision_bound": precision_bound(self.device_share, self.device_ratio, "measured"),
            **({"device_idle": {**self.idle.to_dict(), "dominant": self.idle.dominant}} if self.idle is not None
               else {}),
        }


def accounting(split: DeviceSplit, difference_ms: float, ledgers: tuple[Ledger, Ledger] | None) -> Accounted:
    """The one accounting of a GPU pair's timed difference that its verdict says and keeps: where the pair has
    ledgers (float32's, then the 16-bit run's: both split a whole step on a device and neither was cut short;
    causes.Accounting.ledgers), their part changes, the figures its parts line and its cause lines quote; else the
    device split's own."""
    if ledgers is not None:
        base, mine = ledgers
        return Accounted.of_ledgers(base, mine)
    return split.accounted(difference_ms)


def device_split(pair: Pair) -> DeviceSplit | None:
    """None unless both runs of the pair carry device time (GPU runs with a trace)."""
    reduced, fp32 = pair.reduced.device_time, pair.fp32.device_time
    if reduced is None or fp32 is None:
        return None
    return DeviceSplit(reduced.busy_ms, fp32.busy_ms, reduced.step_ms, fp32.step_ms, bound_by(pair.reduced),
                       reduced.method, sum(reduced.copies_ms.values()), sum(fp32.copies_ms.values()),
                       _host_batch_ms(pair.reduced) - _host_batch_ms(pair.fp32), reduced.idle, fp32.idle)


def _host_batch_ms(run: RunView) -> float:
    """The host's spans a GPU trace holds as rows (the DataLoader's batch, data conversion), per step."""
    return sum(i.ms_per_step for i in run.ops.items if i.host_time) if run.ops is not None else 0.0


# By the device's peak rates the arithmetic of a step under this share of it: the step is bound elsewhere (the input,
# copies, launches, the host), and a precision can change it little (host_input.SEED_ARITHMETIC_SHARE's reasoning).
ARITHMETIC_BOUND_ELSEWHERE = 0.25


@dataclass(frozen=True)
class EstimatedBound:
    """Amdahl from the roofline where no trace measured the device: float32's best-case step on this device (FLOPs
    and bytes over peak rates) as the device's share of the measured step, and the 16-bit best case's ratio to it."""

    fp32_best_ms: float
    best_ms: float
    fp32_step_ms: float

    @property
    def device_share(self) -> float:
        return min(self.fp32_best_ms / self.fp32_step_ms, 1.0)

    @property
    def device_ratio(self) -> float:
        return self.fp32_best_ms / self.best_ms

    @property
    def max_speedup(self) -> float:
        return amdahl(self.device_share, self.device_ratio)

    @property
    def bound_elsewhere(self) -> bool:
        return self.device_share < ARITHMETIC_BOUND_ELSEWHERE

    def words(self, precision: str) -> str:
        """"by the GPU's peak rates its arithmetic needs at most 2.8 ms of the 303 ms float32 step (1%): the step is
        bound elsewhere (input, copies, launches or the host; not measured), and float16 can make it at most 1.01x
        faster (estimated)"."""
        return (f"by the GPU's peak rates its arithmetic needs at most {fmt_ms(self.fp32_best_ms)} of the "
                f"{fmt_ms(self.fp32_step_ms)} float32 step ({self.device_share:.0%}): the step is bound elsewhere "
                f"(input, copies, launches or the host; not measured), and {precision} can make it at most "
                f"{self.max_speedup:.2f}x faster (estimated)")

    def verdict_fields(self) -> dict[str, Any]:
        return {"precision_bound": precision_bound(self.device_share, self.device_ratio, "estimate")}


def estimated_bound(pair: Pair, fp32_best_ms: float | None, best_ms: float | None) -> EstimatedBound | None:
    fp32_step = pair.fp32_step_ms
    if not (fp32_best_ms and best_ms and fp32_step) or fp32_best_ms <= 0 or best_ms <= 0:
        return None
    return EstimatedBound(fp32_best_ms, best_ms, fp32_step)
