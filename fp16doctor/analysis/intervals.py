"""How sure a ratio is: the interval a comparison's repeats support, and the outcome that follows from it.

Three designs, strongest first, each recomputable from the results document alone:
- paired rounds (`step_time_ms.rounds` on both runs, `design: "interleaved"`): round i of a precision ran next to
  round i of float32, so drift hits both alike; the interval is a Student t interval on the per-round log ratios;
- unpaired rounds (`design: "sequential"`, or rounds on only one side paired with none): Welch's t interval on the
  difference of the two runs' mean log round times, wider because drift between the runs lands in it;
- one median each: the two runs' p10-p90 step spread (half of it, relative, from the wider run) as a band either
  side, at least DEFAULT_BAND; a document with a median and no spread is judged with DEFAULT_BAND alone, and says so.
The outcome follows the interval: it excludes 1.0, or it is no difference.

Where whole invocations on one machine vary more than one invocation's rounds can see (a backend whose ratio
moved between diagnoses by more than their intervals allowed, benchmarks/repeatability.py), a rounds interval is
widened by that measured variation, and says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from fp16doctor.analysis.values import fmt_interval

CONFIDENCE_LEVEL = 0.95
# The band a median with no spread of its own is judged by: 5 % either side (a 2-core machine's own step-to-step
# drift between processes, docs/benchmarks.md) and at most 50 %, so a wild spread still allows a verdict.
DEFAULT_BAND = 0.05
MAX_BAND = 0.5
MIN_ROUNDS = 3  # fewer rounds than this support no t interval; the spread band is used instead
# How much a ratio moves between whole invocations beyond what one invocation's rounds show, by Keras 3 backend:
# the log standard deviation of the ratios of repeated quick diagnoses on one idle machine (docs/benchmarks.md,
# benchmarks/repeatability.py on a 2-core AMD EPYC, 2026-12-01). Keras 3 on PyTorch: 0.4-5.1 % in three
# invocations, 3.0-15.4 % in three more (one invocation's float16 ratio 20 % off the other two, outside their
# intervals), 9 % pooled over the six. TensorFlow (0.6-3.4 %) and JAX (0.4-7.7 %) moved within their intervals:
# not widened.
BETWEEN_INVOCATIONS = {"torch": 0.09}

# Two-sided 95 % Student t quantiles (t_{0.975, df}), from any statistics table; beyond 30 the normal's 1.96.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_quantile(df: float) -> float:
    """t_{0.975} for df degrees of freedom (fractional df, from Welch, rounds down: the wider interval)."""
    whole = int(df)
    if whole < 1:
        return math.inf
    return _T975[whole - 1] if whole <= len(_T975) else 1.96


@dataclass(frozen=True)
class Timing:
    """What one run's record says of its step time: the median, its spread, and its rounds if any."""

    median_ms: float
    p10_ms: float | None = None
    p90_ms: float | None = None
    rounds: tuple[float, ...] = ()
    design: str | None = None  # "interleaved" | "sequential" | None
    aa_rounds: tuple[float, ...] = ()  # float32's A/A control: a second float32 model in the same rounds

    @property
    def baseline_rounds(self) -> tuple[float, ...]:
        """Each round's float32 step as a baseline: the geometric mean of float32's two models where the A/A
        control ran in every round (float32 timed twice a round: its short blocks are the noisiest), else its
        own rounds."""
        if len(self.aa_rounds) != len(self.rounds):
            return self.rounds
        return tuple(math.sqrt(a * b) for a, b in zip(self.rounds, self.aa_rounds, strict=True))


@dataclass(frozen=True)
class RatioInterval:
    """float32's step over a configuration's step (above 1: the configuration is faster), with its interval."""

    speedup: float
    low: float
    high: float
    method: str  # "paired_rounds" | "unpaired_rounds" | "spread" | "default_band"
    repeats: int  # rounds behind it (0 where it rests on one median each)
    confidence_level: float | None  # None for the bands, which are no confidence interval
    difference_ms: float  # this step minus float32's
    difference_low_ms: float
    difference_high_ms: float
    widened_by: float = 0.0  # the between-invocation variation (log sd) added to a rounds interval, 0: none

    @property
    def outcome(self) -> str:
        if self.low > 1:
            return "faster"
        if self.high < 1:
            return "slower"
        return "no_significant_difference"

    def rounds_words(self) -> str:
        """'5 paired rounds', and what widened the interval where something did."""
        kind = "paired" if self.method == "paired_rounds" else "unpaired"
        widened = (f", widened by the {self.widened_by:.0%} this backend's diagnoses vary between invocations"
                   if self.widened_by else "")
        return f"{self.repeats} {kind} rounds{widened}"

    @property
    def relative_width(self) -> float:
        """The interval's width as a share of its ratio (what the printed digits follow)."""
        return (self.high - self.low) / self.speedup if self.speedup else math.inf

    def describe(self) -> str:
        """'95 % interval 2.1-2.4x, 5 paired rounds' or 'judged by the runs' spread (±5 %)'."""
        if self.method in ("paired_rounds", "unpaired_rounds"):
            return (f"{self.confidence_level or CONFIDENCE_LEVEL:.0%} interval {fmt_interval(self.low, self.high)}"
                    f", {self.rounds_words()}")
        half = (math.sqrt(self.high / self.low) - 1) if self.low > 0 else 0.0
        if self.method == "default_band":
            return f"no spread recorded, so judged with the default band of ±{half:.0%}"
        return f"judged by the runs' step spread, ±{half:.0%}"


def _logs(values: Sequence[float]) -> list[float]:
    return [math.log(v) for v in values if v > 0]


def _paired(fp32: Timing, other: Timing) -> RatioInterval | None:
    baseline = fp32.baseline_rounds
    n = min(len(baseline), len(other.rounds))
    if n < MIN_ROUNDS or fp32.design != "interleaved" or other.design != "interleaved":
        return None
    pairs = [(a, b) for a, b in zip(baseline[:n], other.rounds[:n], strict=True) if a > 0 and b > 0]
    if len(pairs) < MIN_ROUNDS:
        return None
    logs = [math.log(a / b) for a, b in pairs]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = t_quantile(len(logs) - 1) * sd / math.sqrt(len(logs))
    diffs = [b - a for a, b in pairs]
    d_mean, d_half = statistics.fmean(diffs), t_quantile(len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(
        len(diffs))
    return RatioInterval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), "paired_rounds", len(logs),
                         CONFIDENCE_LEVEL, d_mean, d_mean - d_half, d_mean + d_half)


def _unpaired(fp32: Timing, other: Timing) -> RatioInterval | None:
    a, b = _logs(fp32.rounds), _logs(other.rounds)
    if len(a) < MIN_ROUNDS or len(b) < MIN_ROUNDS:
        return None
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    # Welch-Satterthwaite degrees of freedom; equal rounds with no spread at all leave it undefined: the smaller n.
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if va + vb > 0 else min(len(a), len(b)) - 1
    mean = statistics.fmean(a) - statistics.fmean(b)
    half = t_quantile(df) * se
    low, high = math.exp(mean - half), math.exp(mean + half)
    return _with_difference(math.exp(mean), low, high, "unpaired_rounds", min(len(a), len(b)), CONFIDENCE_LEVEL,
                            math.exp(statistics.fmean(a)))


def band_of(timing: Timing) -> float | None:
    """Half the relative p10-p90 spread of one run's steps; None where the record has none."""
    if timing.p10_ms and timing.p90_ms and timing.median_ms and timing.p90_ms > timing.p10_ms:
        return (timing.p90_ms - timing.p10_ms) / (2 * timing.median_ms)
    return None


def _banded(fp32: Timing, other: Timing) -> RatioInterval:
    spreads = [b for b in (band_of(fp32), band_of(other)) if b is not None]
    band = min(max([DEFAULT_BAND, *spreads]), MAX_BAND)
    speedup = fp32.median_ms / other.median_ms
    # (1 + band) either side, so "slower" is exactly "the ratio exceeds 1 + band" for a reader checking by hand.
    return _with_difference(speedup, speedup / (1 + band), speedup * (1 + band),
                            "spread" if spreads else "default_band", 0, None, fp32.median_ms)


def _with_difference(speedup: float, low: float, high: float, method: str, repeats: int,
                     level: float | None, fp32_ms: float) -> RatioInterval:
    """The difference in ms that a speedup interval implies, at float32's step: d = f32 * (1/s - 1)."""
    return RatioInterval(speedup, low, high, method, repeats, level, fp32_ms * (1 / speedup - 1),
                         fp32_ms * (1 / high - 1), fp32_ms * (1 / low - 1))


def widened(interval: RatioInterval, between: float, fp32_ms: float) -> RatioInterval:
    """A rounds interval with the between-invocation variation `between` (log sd) added to its half-width in
    quadrature, at the normal's 95 % quantile; the difference interval follows from the ratio's."""
    if between <= 0 or interval.method not in ("paired_rounds", "unpaired_rounds"):
        return interval
    centre, half = math.log(interval.speedup), math.log(interval.high / interval.speedup)
    half = math.hypot(half, 1.96 * between)
    wide = _with_difference(interval.speedup, math.exp(centre - half), math.exp(centre + half), interval.method,
                            interval.repeats, interval.confidence_level, fp32_ms)
    return replace(wide, widened_by=between)


def ratio_interval(fp32: Timing, other: Timing, between: float = 0.0) -> RatioInterval:
    """The best interval the two records support (paired rounds, unpaired rounds, then the spread band), widened by
    `between`, the variation between invocations that the rounds of one cannot see (BETWEEN_INVOCATIONS)."""
    rounds = _paired(fp32, other) or _unpaired(fp32, other)
    if rounds is None:
        return _banded(fp32, other)
    baseline = fp32.baseline_rounds if rounds.method == "paired_rounds" else fp32.rounds
    return widened(rounds, between, math.exp(statistics.fmean(_logs(baseline))))
