"""How sure a ratio is: the interval a comparison's repeats support, and the outcome that follows from it.

Every ratio is float32's step over the configuration's step, float32 timed on its own model. Four designs,
strongest first, each recomputable from the results document alone:
- paired rounds (`step_time_ms.rounds` on both runs, `design: "interleaved"`): round i of a precision ran next to
  round i of float32 in one process, so drift hits both alike; the interval is a Student t interval on the
  per-round log ratios;
- unpaired rounds (`design: "sequential"`, or rounds on only one side paired with none): Welch's t interval on the
  difference of the two runs' mean log round times, wider because drift between the runs lands in it;
- one median each, each from its own process (a run timed in rounds brings the median its own process measured,
  `single_process`, so rounds are never set against one process): the two runs' p10-p90 step spread (half of it,
  relative, from the wider run) as a band either side, at least DEFAULT_BAND; a document with a median and no
  spread is judged with DEFAULT_BAND alone, and says so;
- a run cut short by the slow-step bound: one step, so no interval at all, only a one-sided bound (`lower_bound`),
  its first step against float32's first step (tracing included on both sides); so is a run whose step was cut
  inside at the bound (`cut_in_step`, `step_time_ms.censored`: the step lasted at least its recorded time).
The outcome follows the interval: it excludes 1.0, or it is no difference.

Two timings of one configuration in two processes differ by more than either process's spread shows (a document's
`rounds_vs_single_process`: 0.72-1.16 on one machine in one invocation). A comparison between two processes pays
that price where the document measured it: its interval is widened by it, and an effect that does not exceed it by
DESIGN_MARGIN is refused, in words. Where the document measured none, none is applied.

The A/A control (float32's second model in the same rounds) decides what is measurable: an effect no larger than
the control's interval allows two identical models to differ is not measurable on this machine now, unless it is
ALWAYS_MEASURABLE or more.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from fp16doctor.analysis.values import fmt_interval, fmt_ms
from fp16doctor.workload.paired import (
    ALWAYS_MEASURABLE,
    CONFIDENCE_LEVEL,
    MIN_ROUNDS,
    Components,
    between_processes,
    pooled_between,
    processes_of_rounds,
    t_quantile,
)

# The band a median with no spread of its own is judged by: 5 % either side (a 2-core machine's own step-to-step
# drift between processes, docs/benchmarks.md) and at most 50 %, so a wild spread still allows a verdict.
DEFAULT_BAND = 0.05
MAX_BAND = 0.5
# A comparison between two processes stands only where its effect (log ratio) exceeds this many times the
# variation the document measured between two timings of one configuration: one such variation either way could
# otherwise make the whole effect.
DESIGN_MARGIN = 2.0
# No effect of ALWAYS_MEASURABLE or more is ever "not measurable" (workload/paired.py, where the rounds' stop rule
# reads it too): on a Xeon the A/A control's 3-round interval allowed 1.24x between identical models
# (recordings/cpu-xeon-quick-diagnose); a factor of 2 is beyond any control seen.
# What a verdict says for a cut run's bound, and how the bound compares the two runs.
FIRST_STEP = "first step, tracing included"
CUT_STEP = ("its fastest recorded step against float32's steady step (float32's first step not recorded: not like "
            "for like, a warm-up step may still carry tracing)")
CUT_IN_STEP = ("its step, cut inside at the bound so it lasted at least that long, against float32's steady step "
               "(float32's first step not recorded: not like for like, a warm-up step may still carry tracing)")


@dataclass(frozen=True)
class Timing:
    """What one run's record says of its step time: the median, its spread, and its rounds if any."""

    median_ms: float
    p10_ms: float | None = None
    p90_ms: float | None = None
    rounds: tuple[float, ...] = ()
    design: str | None = None  # "interleaved" | "sequential" | None
    aa_rounds: tuple[float, ...] = ()  # float32's A/A control: a second float32 model in the same rounds
    single: Timing | None = None  # what the run's own process measured, where rounds replaced its statistics
    first_step_ms: float | None = None
    bound: bool = False  # cut short by the slow-step bound: one step measured
    censored: bool = False  # that step was cut inside, at the bound: median_ms is only how long it lasted at least
    # Which rounds process timed its rounds (`step_time_ms.group`): rounds pair only within one; None: not said
    # (a document that predates it had one rounds process per stack and setting).
    group: int | None = None
    # Where its rounds came from two or more processes, each round's process (`step_time_ms.round_groups`, in the
    # order of `rounds`; float32's `aa_rounds` follow its own); empty: every round is `group`'s.
    round_groups: tuple[int, ...] = ()

    def groups_of_rounds(self) -> list[int | None]:
        """Each round's process: its `round_groups` where they cover its rounds, else its `group` for all."""
        return processes_of_rounds(len(self.rounds), self.round_groups, self.group)

    @property
    def own_process(self) -> Timing:
        """The timing its own process made (the median one process compares with another's)."""
        return self.single or self


# What an interval covers (RatioInterval.scope, a verdict's `interval_scope`).
BETWEEN_PROCESSES = "between_processes"
WITHIN_PROCESS = "within_process"

# Where a failed A/A check places the noise (AACheck.scope).
MACHINE_NOISE = "on this machine now"
INPUT_NOISE = "with this input pipeline"


@dataclass(frozen=True)
class AACheck:
    """The A/A control's word on one effect: whether it exceeds what two identical models differed by."""

    passed: bool
    noise: float  # the largest ratio between float32's two identical models the control's interval allows, less 1
    reason: str
    # Where the noise comes from, as a failed check says it: "on this machine now" (its load, its clock), or "with
    # this input pipeline" where float32's own batches are most of its step.
    scope: str = MACHINE_NOISE
    # The control's own words, the same for every effect it is held against (the answer's one shared note).
    control: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"passed": self.passed, "noise": round(self.noise, 4), "reason": self.reason,
                **({"control": self.control} if self.control else {})}

    @classmethod
    def of(cls, saved: object) -> AACheck | None:
        """A check as a document saved it (`aa_check`); None where there is none."""
        if not isinstance(saved, Mapping) or not saved:
            return None
        noise = saved.get("noise")
        return cls(saved.get("passed") is True,
                   float(noise) if isinstance(noise, (int, float)) and not isinstance(noise, bool) else 0.0,
                   str(saved.get("reason") or ""), control=str(saved.get("control") or ""))


@dataclass(frozen=True)
class RatioInterval:
    """float32's step over a configuration's step (above 1: the configuration is faster), with its interval."""

    speedup: float
    low: float
    high: float
    method: str  # "paired_rounds" | "unpaired_rounds" | "spread" | "default_band" | "lower_bound"
    repeats: int  # rounds behind it (0 where it rests on one median each, or on one step)
    confidence_level: float | None  # None for the bands and the bound, which are no confidence interval
    difference_ms: float  # this step minus float32's
    difference_low_ms: float
    difference_high_ms: float | None  # None: no upper end (a one-sided bound)
    widened_by: float = 0.0  # the variation between two processes (log) added to the interval, 0: none
    fp32_ms: float | None = None  # the float32 step the ratio and the difference come from
    other_ms: float | None = None  # the configuration's step they come from
    compared: str | None = None  # how a bound compared the two runs ("first step, tracing included")
    refused: str | None = None  # why a comparison across two processes was refused: then no difference is claimed
    aa: AACheck | None = None  # the A/A control's check of this effect
    # Paired rounds from two or more processes: how many, and the between-process variance (log ratio squared)
    # their interval carries (workload/paired.py between_processes); 1 and 0 for rounds from one process.
    processes: int = 1
    between_variance: float = 0.0

    @property
    def outcome(self) -> str:
        if self.refused or (self.aa is not None and not self.aa.passed):
            return "no_significant_difference"
        if self.low > 1:
            return "faster"
        if self.high < 1:
            return "slower"
        return "no_significant_difference"

    @property
    def is_rounds(self) -> bool:
        return self.method in ("paired_rounds", "unpaired_rounds")

    @property
    def is_bound(self) -> bool:
        return self.method == "lower_bound"

    @property
    def scope(self) -> str | None:
        """What the interval covers: "between_processes" where it carries a measured variation between processes
        (paired rounds from two or more of them, or a two-process comparison widened by the variation the document
        measured), "within_process" where it describes only the variation inside the process(es) it came from;
        None for a one-sided bound, which has no interval."""
        if self.is_bound:
            return None
        return BETWEEN_PROCESSES if self.processes > 1 or self.widened_by else WITHIN_PROCESS

    def rounds_words(self) -> str:
        """'5 paired rounds', and what widened the interval where something did: '12 paired rounds in 2 processes
        (the ratio moved by 3 % between processes)'."""
        kind = "paired" if self.method == "paired_rounds" else "unpaired"
        return f"{self.repeats} {kind} rounds{self.widened_words()}"

    def widened_words(self) -> str:
        if self.processes > 1:
            return (f" in {self.processes} processes (the ratio moved by "
                    f"{math.expm1(math.sqrt(self.between_variance)):.0%} between processes)")
        if not self.widened_by:
            return ""
        return (f", widened by the {math.expm1(self.widened_by):.0%} one configuration varied between two "
                "processes in this document")

    @property
    def relative_width(self) -> float:
        """The interval's width as a share of its ratio (what the printed digits follow)."""
        return (self.high - self.low) / self.speedup if self.speedup else math.inf

    def describe(self) -> str:
        """'95 % interval 2.1-2.4x, 5 paired rounds', 'judged by the runs' spread (±5 %)' or a bound's words."""
        if self.is_bound:
            return (f"cut short by the slow-step bound: at least {1 / self.high:.0f}x slower, one-sided "
                    f"({self.compared}), no interval from one step")
        if self.is_rounds:
            text = (f"{self.confidence_level or CONFIDENCE_LEVEL:.0%} interval {fmt_interval(self.low, self.high)}"
                    f", {self.rounds_words()}")
        else:
            half = (math.sqrt(self.high / self.low) - 1) if self.low > 0 else 0.0
            text = (f"no spread recorded, so judged with the default band of ±{half:.0%}"
                    if self.method == "default_band" else f"judged by the runs' step spread, ±{half:.0%}")
            text += self.widened_words()
        if self.refused:
            text += f"; not compared: {self.refused}"
        if self.aa is not None and not self.aa.passed:
            text += f"; not measurable {self.aa.scope}: {self.aa.reason}"
        return text


def _logs(values: Sequence[float]) -> list[float]:
    return [math.log(v) for v in values if v > 0]


def _geomean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(_logs(values)))


def rounds_step_ms(rounds: Sequence[float]) -> float | None:
    """A configuration's step as every output quotes it where rounds timed it: their geometric mean, the figure its
    comparisons weigh (a paired ratio is the ratio of two such means); None with fewer than MIN_ROUNDS rounds."""
    return round(_geomean(rounds), 3) if len(rounds) >= MIN_ROUNDS else None


def paired_rounds(fp32: Timing, other: Timing) -> list[list[tuple[float, float]]]:
    """The two timings' rounds paired round by round inside each process that timed both (a process's rounds in
    order, as far as the shorter side goes), one list per process in the order float32's rounds name them; none
    where either was not timed in interleaved rounds."""
    if fp32.design != "interleaved" or other.design != "interleaved":
        return []
    by_group: dict[int | None, tuple[list[float], list[float]]] = {}
    for side, timing in enumerate((fp32, other)):
        for group, value in zip(timing.groups_of_rounds(), timing.rounds, strict=True):
            by_group.setdefault(group, ([], []))[side].append(value)
    return [[(a, b) for a, b in zip(mine, theirs, strict=False) if a > 0 and b > 0]
            for mine, theirs in by_group.values() if mine and theirs]


def process_components(fp32: Timing, other: Timing) -> Components:
    """One ratio's per-round log ratios split by process (workload/paired.py Components)."""
    return Components([[math.log(a / b) for a, b in pairs] for pairs in paired_rounds(fp32, other)])


def _paired(fp32: Timing, other: Timing, pooled: tuple[float, int] = (0.0, 0)) -> RatioInterval | None:
    per_process = [pairs for pairs in paired_rounds(fp32, other) if pairs]
    pairs = [pair for one in per_process for pair in one]
    if len(pairs) < MIN_ROUNDS:
        return None
    logs = [[math.log(a / b) for a, b in one] for one in per_process]
    drawn = between_processes(logs, pooled)
    assert drawn is not None  # MIN_ROUNDS pairs at least
    mean, half, _, tau2 = drawn
    # The steps quoted are the rounds' geometric means: their ratio is the paired ratio exactly.
    fp32_ms, other_ms = _geomean([a for a, _ in pairs]), _geomean([b for _, b in pairs])
    interval = _with_difference(math.exp(mean), math.exp(mean - half), math.exp(mean + half), "paired_rounds",
                                len(pairs), CONFIDENCE_LEVEL, fp32_ms, other_ms)
    return replace(interval, processes=len(per_process), between_variance=tau2)


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
    return _with_difference(math.exp(mean), math.exp(mean - half), math.exp(mean + half), "unpaired_rounds",
                            min(len(a), len(b)), CONFIDENCE_LEVEL, math.exp(statistics.fmean(a)),
                            math.exp(statistics.fmean(b)))


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
                            "spread" if spreads else "default_band", 0, None, fp32.median_ms, other.median_ms)


def lower_bound(fp32: Timing, cut: Timing) -> RatioInterval:
    """A run cut short after one or two steps has no steady step: only its first step, against float32's first
    step, tracing and autotuning included on both sides. That ratio understates the steady slowdown whenever the
    cut run's first-step overhead is at most as many times float32's as its step is (a fixed tracing cost dilutes
    the slower step more), so it is a one-sided bound: float32 / this is at most r, with no confidence level."""
    if cut.first_step_ms and fp32.first_step_ms:
        fp32_ms, other_ms, compared = fp32.first_step_ms, cut.first_step_ms, FIRST_STEP
    else:
        fp32_ms, other_ms = fp32.median_ms, min(cut.first_step_ms or cut.median_ms, cut.median_ms)
        compared = CUT_IN_STEP if cut.censored and other_ms == cut.median_ms else CUT_STEP
    r = fp32_ms / other_ms
    return RatioInterval(r, 0.0, r, "lower_bound", 0, None, other_ms - fp32_ms, other_ms - fp32_ms, None,
                         fp32_ms=fp32_ms, other_ms=other_ms, compared=compared)


def _with_difference(speedup: float, low: float, high: float, method: str, repeats: int,
                     level: float | None, fp32_ms: float, other_ms: float | None = None) -> RatioInterval:
    """The difference in ms that a speedup interval implies, at float32's step: d = f32 * (1/s - 1)."""
    return RatioInterval(speedup, low, high, method, repeats, level, fp32_ms * (1 / speedup - 1),
                         fp32_ms * (1 / high - 1), fp32_ms * (1 / low - 1), fp32_ms=fp32_ms,
                         other_ms=other_ms if other_ms is not None else fp32_ms / speedup)


def widened(interval: RatioInterval, between: float) -> RatioInterval:
    """An interval with the variation `between` (log) measured between two processes of one configuration added
    either side, and refused where its effect does not exceed DESIGN_MARGIN times that variation; the difference
    interval follows from the ratio's."""
    if between <= 0 or interval.is_bound or interval.fp32_ms is None:
        return interval
    wide = _with_difference(interval.speedup, interval.low * math.exp(-between), interval.high * math.exp(between),
                            interval.method, interval.repeats, interval.confidence_level, interval.fp32_ms,
                            interval.other_ms)
    effect = abs(math.log(interval.speedup))
    refused = None
    if effect <= DESIGN_MARGIN * between:
        refused = (f"{fmt_ms(interval.other_ms)} against {fmt_ms(interval.fp32_ms)} were timed in two processes, and "
                   f"one configuration's two timings in this document differ by {math.expm1(between):.0%}: an effect "
                   f"of {math.expm1(effect):.0%} does not exceed {DESIGN_MARGIN:g} times that")
    return replace(wide, widened_by=between, refused=refused)


def ratio_interval(fp32: Timing, other: Timing, between: float = 0.0,
                   pooled: tuple[float, int] = (0.0, 0)) -> RatioInterval:
    """The best interval the two records support: a cut run's one-sided bound; paired rounds (inside one process,
    or from several with the between-process part they show, at least `pooled`: the comparison's pooled
    between-process variance and its degrees of freedom, pooled_between); else two processes, unpaired rounds or
    each run's own-process median with its spread band, widened by `between`, the variation (log) the document
    measured between two timings of one configuration."""
    if (other.bound or other.censored) and not fp32.bound:
        return lower_bound(fp32, other)  # a censored step, cut inside, is never read as a measured one
    if (fp32.bound or fp32.censored) and not other.bound:
        # The reference was cut (a change against a 16-bit run the bound cut short): the same bound, seen from the
        # other side, says how much faster the change is at least.
        cut = lower_bound(other, fp32)
        r = 1 / cut.speedup
        assert cut.fp32_ms is not None and cut.other_ms is not None
        saved = cut.fp32_ms - cut.other_ms  # at least this much faster: the difference has no lower end
        return RatioInterval(r, r, math.inf, "lower_bound", 0, None, saved, -math.inf, saved,
                             fp32_ms=cut.other_ms, other_ms=cut.fp32_ms, compared=cut.compared)
    paired = _paired(fp32, other, pooled)
    if paired is not None:
        return paired
    unpaired = _unpaired(fp32, other)
    return widened(unpaired or _banded(fp32.own_process, other.own_process), between)


def comparison_between(fp32: Timing, others: Sequence[Timing]) -> tuple[float, int]:
    """The between-process variance (log ratio squared) of one comparison, pooled over float32's ratios to each of
    `others` and to its A/A control, where their rounds came from two or more processes, with its degrees of freedom
    (workload/paired.py pooled_between); (0, 0) where none did."""
    parts = [process_components(fp32, other) for other in others]
    if fp32.aa_rounds:
        parts.append(process_components(replace(fp32, aa_rounds=()), aa_timing(fp32)))
    return pooled_between(parts)


def aa_timing(fp32: Timing) -> Timing:
    """float32's A/A control as a timing of its own: its rounds, from float32's processes round by round."""
    aa = fp32.aa_rounds
    ordered = sorted(aa)
    groups = fp32.groups_of_rounds()
    return Timing(ordered[len(ordered) // 2], rounds=aa, design="interleaved", group=fp32.group,
                  round_groups=tuple(g for g in groups if g is not None) if len(groups) == len(aa) and
                  None not in groups else ())


def noise_of(noise_floor: RatioInterval) -> float:
    """The largest ratio between two identical models that the A/A control's interval allows, less 1."""
    return max(1 / noise_floor.low if noise_floor.low > 0 else math.inf, noise_floor.high) - 1


def aa_check(interval: RatioInterval, noise_floor: RatioInterval, probe: str | None = None,
             scope: str = MACHINE_NOISE) -> AACheck:
    """Whether an effect exceeds what float32's two identical models differed by in the same rounds (the control's
    interval, either way); an effect of ALWAYS_MEASURABLE or more always does. `probe`: what the machine was doing
    (load, other processes, CPU frequency), said with a failure."""
    noise = noise_of(noise_floor)
    factor = max(interval.speedup, 1 / interval.speedup) if interval.speedup > 0 else math.inf
    passed = factor >= ALWAYS_MEASURABLE or factor - 1 > noise
    control = (f"float32's two identical models may differ by up to {noise:.0%} in the same rounds (A/A control "
               f"{fmt_interval(noise_floor.low, noise_floor.high)}, {noise_floor.repeats} rounds)")
    if factor - 1 > noise:
        reason = f"the {factor - 1:.0%} effect is larger than that: {control}"
    elif passed:
        reason = f"an effect of {ALWAYS_MEASURABLE:g}x or more is always measurable, though {control}"
    else:
        reason = f"{control}, more than this {factor - 1:.0%} effect"
        if probe:
            reason += f"; {probe}"
    return AACheck(passed, noise, reason, scope, control + (f"; {probe}" if probe else ""))


@dataclass(frozen=True)
class SwitchEffect:
    """How a process-wide switch (oneDNN off, XLA) moved a 16-bit run against float32: its ratio to float32 with the
    switch over its ratio without it, each ratio taken inside its own setting (above 1: relatively faster with it)."""

    ratio: float
    low: float
    high: float
    refused: str | None  # one of the two comparisons was refused (intervals.widened)

    @property
    def significant(self) -> bool:
        return self.refused is None and (self.low > 1 or self.high < 1)


def switch_effect(without: RatioInterval, with_switch: RatioInterval) -> SwitchEffect:
    """The two settings' log ratios compared: their half-widths add (bands are no confidence intervals, so no
    quadrature), so the effect stands only beyond both comparisons' own uncertainty."""
    centre = math.log(with_switch.speedup) - math.log(without.speedup)
    half = sum(math.log(iv.high / iv.low) / 2 if iv.low > 0 else math.inf for iv in (without, with_switch))
    return SwitchEffect(math.exp(centre), math.exp(centre - half), math.exp(centre + half),
                        without.refused or with_switch.refused)
