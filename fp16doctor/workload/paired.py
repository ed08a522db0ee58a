# -*- coding: utf-8 -*-
"""The paired ratio interval of interleaved rounds, once for both sides of the process boundary: the workload's
rounds (rounds.py, as `paired`) stop on it, and the analysis (fp16doctor/analysis/intervals.py, as
fp16doctor.workload.paired) draws every verdict's interval with it, so the two cannot disagree.

Round i of a configuration ran next to round i of float32 in one process, so the interval is a Student t interval
on the per-round log ratios. Where the rounds of one comparison ran in two or more processes, the ratio also moves
between processes (a process's memory layout, its threads' placement, the machine's state when it ran), more than
inside one: the between-process part is estimated from the processes' means and added (`between_processes`).

Valid Python 2.7 and 3.5, stdlib only, and it imports no sibling: the host side imports it as a package module.
"""
from __future__ import division

import math

CONFIDENCE_LEVEL = 0.95
# Interleaved rounds: never fewer than this in a process (a t interval needs them); a comparison with fewer paired
# rounds is judged by its runs' spread instead (analysis/intervals.py).
MIN_ROUNDS = 3
# And never more than this in a process, unless asked for more (diagnose --rounds).
MAX_ROUNDS = 30
# A budgeted size's rounds may stop early once every ratio against float32 (the A/A control's included) is known to
# within its target (rounds.py), never before this many rounds: a t interval from fewer rests on a spread guessed
# from two or three numbers, and stopping where it happens to look narrow would make intervals too short.
PRECISION_MIN_ROUNDS = 5
# A speed-up inside this band either way (1/1.1-1.1x) changes no prescription (the analysis' equivalence band,
# analysis/values.py); one beyond it whose interval still reaches 1 is unsettled (`unsettled`).
EQUIVALENCE_BAND = 0.10
# An effect this large is always measurable, whatever the A/A control allows (analysis/intervals.py aa_check): on a
# Xeon the A/A control's 3-round interval allowed 1.24x between identical models; a factor of 2 is beyond any seen.
ALWAYS_MEASURABLE = 2.0


def _betacf(a, b, x):
    """The continued fraction of the regularized incomplete beta function (modified Lentz; Press et al.,
    Numerical Recipes, 6.4), converging for x < (a + 1) / (a + b + 2)."""
    tiny, eps = 1e-300, 1e-16
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10000):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)),
                    -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def _betainc(a, b, x):
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _normal_quantile(p):
    """The standard normal's p quantile (0.5 < p < 1), by bisection on its upper tail erfc(z / sqrt 2) / 2."""
    low, high = 0.0, 40.0
    for _ in range(200):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        if math.erfc(mid / math.sqrt(2.0)) / 2 > 1.0 - p:
            low = mid
        else:
            high = mid
    return (low + high) / 2


_T_QUANTILES = {}  # (df, level): the quantile, as computed once


def t_quantile(df, level=CONFIDENCE_LEVEL):
    """The two-sided Student t quantile t_{(1+level)/2, df} for any df > 0, fractional (Welch, Satterthwaite)
    included: the t distribution's tail 2 P(T > t) = I_{df/(df+t^2)}(df/2, 1/2) solved for t by bisection, to
    double precision (within 1e-6 of scipy.stats.t.ppf for df 0.3-1e7; tests/unit/workload/test_workload_paired.py).
    """
    if df != df or df <= 0:
        return float("inf")
    key = (df, level)
    if key in _T_QUANTILES:
        return _T_QUANTILES[key]
    tail = 1.0 - level  # both tails together
    if df > 1e8:  # beyond this the t and the normal quantile agree to 1e-8
        value = _normal_quantile(1.0 - tail / 2)
    else:
        # x = df / (df + t^2) falls from 1 to 0 as t grows, and the tail I_x(df/2, 1/2) with it: bisect on x.
        low, high = 0.0, 1.0
        for _ in range(200):
            mid = (low + high) / 2
            if mid in (low, high):
                break
            if _betainc(df / 2.0, 0.5, mid) > tail:
                high = mid
            else:
                low = mid
        x = (low + high) / 2
        value = math.sqrt(df * (1.0 - x) / x)
    if len(_T_QUANTILES) < 4096:
        _T_QUANTILES[key] = value
    return value


def processes_of_rounds(n_rounds, round_groups, group):
    """Each round's rounds process: `round_groups` (step_time_ms.round_groups) where it names one for every round,
    else `group` (step_time_ms.group) for all of them."""
    groups = list(round_groups or [])
    return groups if len(groups) == n_rounds else [group] * n_rounds


def log_ratios(reference, other):
    """The per-round log ratios log(reference / other) of two configurations' rounds, round by round, where both
    timed a step."""
    return [math.log(a / b) for a, b in zip(reference, other) if a > 0 and b > 0]


def _mean(values):
    return sum(values) / len(values)


def _variance(values):
    mean = _mean(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def paired_interval(logs):
    """(mean, half-width) of the 95 % Student t interval on the per-round log ratios of one process; None with
    fewer than two."""
    n = len(logs)
    if n < 2:
        return None
    return _mean(logs), t_quantile(n - 1) * math.sqrt(_variance(logs) / n)


def ratio_half_width(reference, other):
    """The relative half-width of the 95 % interval on the paired ratio of two configurations' rounds in one process
    (as the analysis draws it): 0.05 is the ratio to within 5 % either way; None with fewer than two rounds."""
    interval = paired_interval(log_ratios(reference, other))
    return None if interval is None else math.exp(interval[1]) - 1.0


def aa_noise(reference, control):
    """The largest ratio, either way, between float32 and its A/A control (an identical model timed beside it) that
    their paired 95 % interval allows, less 1: what the analysis calls the control's noise (analysis/intervals.py
    noise_of). None with fewer than two paired rounds."""
    interval = paired_interval(log_ratios(reference, control))
    if interval is None:
        return None
    mean, half = interval
    return max(math.exp(-(mean - half)), math.exp(mean + half)) - 1.0


def unsettled(reference, other, control=None):
    """Whether a configuration's paired speed-up over `reference` (round by round, one process) would change the
    prescription if it held and is not yet told from noise: its point estimate at least EQUIVALENCE_BAND faster, and
    its 95 % interval still reaching 1 or, with the A/A control's rounds (`control`), an effect no larger than the
    control's noise (aa_noise), which the analysis would call not measurable (under ALWAYS_MEASURABLE, which it
    always measures). False with fewer than two paired rounds."""
    interval = paired_interval(log_ratios(reference, other))
    if interval is None:
        return False
    mean, half = interval
    speedup = math.exp(mean)
    if speedup < 1.0 + EQUIVALENCE_BAND:
        return False
    if math.exp(mean - half) <= 1.0:
        return True
    noise = aa_noise(reference, control) if control is not None else None
    return noise is not None and speedup - 1.0 <= noise and speedup < ALWAYS_MEASURABLE


class Components(object):
    """One ratio's paired log ratios split by the process that timed them: the variance inside a process and the
    part that moves between processes, estimated from the processes' means.

    The model is the one-way random-effects model y_jr = mu + b_j + e_jr (process j, round r), b_j ~ (0, tau^2),
    e_jr ~ (0, sigma^2). sigma^2 is the pooled within-process variance MSW (df N - k); tau^2 the ANOVA
    (method of moments) estimate max(0, (MSB - MSW) / n0), MSB = sum n_j (mean_j - mean)^2 / (k - 1),
    n0 = (N - sum n_j^2 / N) / (k - 1) (Searle, Casella and McCulloch, Variance Components, Wiley 1992, 3.5-3.6;
    for equal n_j it is the DerSimonian-Laird estimator, Controlled Clinical Trials 7, 1986)."""

    def __init__(self, groups):
        groups = [list(g) for g in groups if len(g)]
        self.k = len(groups)
        self.n = sum(len(g) for g in groups)
        self.sizes = [len(g) for g in groups]
        self.mean = sum(sum(g) for g in groups) / self.n if self.n else 0.0
        self.df_within = self.n - self.k
        squares = sum(sum((v - _mean(g)) ** 2 for v in g) for g in groups)
        self.within = squares / self.df_within if self.df_within > 0 else 0.0
        self.between = 0.0
        if self.k >= 2:
            msb = sum(len(g) * (_mean(g) - self.mean) ** 2 for g in groups) / (self.k - 1)
            n0 = (self.n - sum(s * s for s in self.sizes) / self.n) / (self.k - 1)
            self.between = max(0.0, (msb - self.within) / n0) if n0 > 0 else 0.0


def pooled_between(components):
    """(tau^2, df) pooled over the ratios of one comparison timed in two or more processes (each weighs by its
    processes less one): the between-process variance one ratio's two or three process means estimate alone is too
    uncertain to build on (one degree of freedom from two processes). The ratios share float32's side, so their
    estimates are not independent and the pooled degrees of freedom are an upper bound: the interval takes the larger
    of the pooled and a ratio's own estimate (between_processes)."""
    weights = [(c.k - 1, c.between) for c in components if c.k >= 2]
    df = sum(w for w, _ in weights)
    return (sum(w * b for w, b in weights) / df, df) if df else (0.0, 0)


def between_processes(groups, pooled=(0.0, 0)):
    """(mean, half-width, degrees of freedom, tau^2) of the 95 % interval on one ratio's mean log ratio over rounds
    run in several processes (`groups`: the per-round log ratios of each process); None with fewer than two rounds.

    The mean is over every round (each process weighed by its rounds); its variance under the random-effects model
    (Components) is V = sigma^2 / N + tau^2 * sum n_j^2 / N^2 (Searle et al. 1992, 3.6), tau^2 the larger of this
    ratio's own estimate and the comparison's pooled one (`pooled`: pooled_between's (tau^2, df)), and its degrees
    of freedom Satterthwaite's (Biometrics Bulletin 2, 1946) over the two parts: V^2 / ((sigma^2 / N)^2 / (N - k)
    + (tau^2 sum n_j^2 / N^2)^2 / df_tau), df_tau the pooled estimate's (k - 1 where nothing was pooled). From one
    process, the within-process t interval (paired_interval), with tau^2 0."""
    parts = Components(groups)
    if parts.n < 2:
        return None
    if parts.k < 2:
        mean, half = paired_interval([v for g in groups for v in g])
        return mean, half, parts.n - 1, 0.0
    # The comparison's pooled estimate and its degrees of freedom, never below this ratio's own estimate (one
    # degree of freedom from two processes alone would make a t quantile of 12.7).
    tau2, df_tau = max(parts.between, pooled[0]), pooled[1] if pooled[1] else parts.k - 1
    within_v = parts.within / parts.n
    between_v = tau2 * sum(s * s for s in parts.sizes) / (parts.n * parts.n)
    variance = within_v + between_v
    if variance <= 0:
        return parts.mean, 0.0, parts.n - 1, tau2
    terms = (within_v ** 2 / parts.df_within if parts.df_within > 0 and within_v else 0.0) + \
        (between_v ** 2 / df_tau if between_v else 0.0)
    df = variance ** 2 / terms if terms else parts.n - 1
    return parts.mean, t_quantile(df) * math.sqrt(variance), df, tau2
