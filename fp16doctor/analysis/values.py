"""Tolerant readers for JSON values: a results file may be hand-written, so every optional value may be
missing or of the wrong type, and the analysis must then know less rather than crash."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from fp16doctor.results import HOST_MACHINE
from fp16doctor.workload import paired
from fp16doctor.workload.protocol import variant_parts

_EMPTY: Mapping[str, Any] = {}


def as_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # a JSON integer beyond float range
        return None
    return number if math.isfinite(number) else None


def as_positive(value: Any) -> float | None:
    number = as_number(value)
    return number if number is not None and number > 0 else None


def as_int(value: Any) -> int | None:
    number = as_number(value)
    if number is None or number != int(number):
        return None
    return int(number)


def as_str(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)  # "cuda": 9.0 typed as a number by hand
    return None


def as_mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def median_of(value: Any) -> float | None:
    """`{"median": 512.0}` -> 512.0; a bare positive number is accepted too."""
    if isinstance(value, Mapping):
        return as_positive(value.get("median"))
    return as_positive(value)


def fmt_ms(value: float | None) -> str:
    """Milliseconds for people, everywhere fp16doctor prints a time (analysis evidence, report, terminal):
    '812 ms', '51 ms', '3.3 ms', '0.042 ms', seconds from 10 s ('22.0 s', '125 s'); a dash when unknown.
    A negative value (time saved) keeps its sign."""
    if value is None:
        return "\u2014"
    sign, value = ("-", -value) if value < 0 else ("", value)
    if value >= 100_000:
        text = f"{value / 1000:.0f} s"
    elif value >= 10_000:
        text = f"{value / 1000:.1f} s"
    elif value >= 10:
        text = f"{value:.0f} ms"
    elif value >= 1:
        text = f"{value:.1f} ms"
    else:
        text = f"{value:.2g} ms"
    return sign + text


def fmt_pct(fraction: float | None) -> str:
    """A fraction (a share of the step, a confidence) as a whole percentage: '42 %'; a dash when unknown."""
    return "\u2014" if fraction is None else f"{fraction * 100:.0f} %"


def fmt_rate(value: float | None) -> str:
    """A throughput (images/s): '1,234', '56.7'; a dash when unknown."""
    if value is None:
        return "\u2014"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def fmt_flops(value: float) -> str:
    for unit, scale in (("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} FLOP"


def ratio_digits(value: float, relative_width: float | None) -> int:
    """Decimals a ratio earns from its interval's relative width: none from 10x (a 190x slowdown is not known
    to a tenth), two under 10 % wide, else one; two where no width is known."""
    if value >= 10:
        return 0
    if relative_width is None:
        return 2
    return 2 if relative_width < 0.10 else 1


def fmt_times(value: float | None, relative_width: float | None = None) -> str:
    """A ratio as printed everywhere: '2.24x', '2.2x' (a wider interval), '166x'; a dash when unknown."""
    if value is None:
        return "\u2014"
    return f"{value:.{ratio_digits(value, relative_width)}f}x"


def fmt_interval(low: float, high: float) -> str:
    """An interval of ratios, with the digits its width earns: '2.1-2.4x', '0.97-1.03x'."""
    mid = math.sqrt(low * high) if low > 0 and high > 0 else max(low, high)
    digits = ratio_digits(mid, (high - low) / mid if mid else None)
    return f"{low:.{digits}f}-{high:.{digits}f}x"


def fmt_signed_ms(value: float | None) -> str:
    """A signed time difference: '+12.5 s' (took longer), '\u22123.1 ms' (saved), '\u00b10 ms'."""
    if value is None:
        return "\u2014"
    if value == 0:
        return "\u00b10 ms"
    return ("+" if value > 0 else "\u2212") + fmt_ms(abs(value))


def round_ratio(value: float, significant: int = 5) -> float:
    """A ratio as a document stores it: to `significant` figures, so 1/2400 keeps its digits (four decimals made it
    0.0004, read back as 2500x)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, significant - 1 - math.floor(math.log10(abs(value))))


# "same speed" is said only of an interval inside this band either way (1/1.1-1.1x): a claim of equivalence, as an
# equivalence test makes it; an interval reaching past it is "not resolved". The rounds' own (workload/paired.py),
# which go on past their budget while a speed-up beyond it is not yet told from noise.
EQUIVALENCE_BAND = paired.EQUIVALENCE_BAND
SAME_SPEED = "same speed"
NOT_RESOLVED = "not resolved"


@dataclass(frozen=True)
class ShownRatio:
    """One ratio as every output shows it (terminal, explain, HTML, markdown, charts): float32's step over a
    configuration's (`speedup`, above 1 faster), its interval, and one rule for its words and digits:
    - its direction: "2.24x faster", "166x slower" (a speed-up under 1 is never printed as "0.01x");
    - its digits from its interval's width in that direction (ratio_digits);
    - its interval in the same direction ("166x slower (159-174x)", never the speed-up's 0.0057-0.0063x);
    - a one-sided bound (a run cut by the slow-step bound: `lower_bound`) as ">= 166x slower", with no interval;
    - "same speed" only where the interval says no difference and lies inside EQUIVALENCE_BAND, with an A/A control
      (where there is one) that can see an effect that size; "not resolved" with its point estimate otherwise: an
      interval that cannot tell is no claim of equality."""

    speedup: float
    low: float | None = None
    high: float | None = None
    outcome: str | None = None  # "faster" | "slower" | "no_significant_difference"; None: the ratio's own side
    lower_bound: bool = False  # only "at least this much slower" is known
    control_failed: bool = False  # the A/A control could not tell this effect from two identical models

    @classmethod
    def of(cls, speedup: Any, interval: Any = None, outcome: Any = None, *, method: Any = None,
           bound: Any = False, aa: Any = None) -> ShownRatio | None:
        """From a document's fields (a verdict's `ratio`, `ratio_interval`, `outcome`, `interval_method`, `bound`,
        `aa_check`, or a prescription entry's `speedup`, `speedup_interval`, `outcome`, `aa_check`); None without a
        positive ratio. An interval from 0 is a one-sided bound (`interval_method: "lower_bound"`)."""
        value = as_positive(speedup)
        if value is None:
            return None
        pair = [as_number(v) for v in as_list(interval)]
        low, high = (pair[0], pair[1]) if len(pair) == 2 and None not in pair else (None, None)
        one_sided = method == "lower_bound" or (low is not None and low <= 0)
        if one_sided or bound is True:
            # A bound says "at least this much slower" (a cut 16-bit run), or, against a cut run, "faster".
            return cls(value, None, None, "faster" if value > 1 and outcome == "faster" else "slower",
                       lower_bound=True)
        if low is not None and high is not None and not 0 < low <= high:
            low, high = None, None
        said = outcome if outcome in ("faster", "slower", "no_significant_difference") else None
        return cls(value, low, high, said, control_failed=as_mapping(aa).get("passed") is False)

    @property
    def slower(self) -> bool:
        if self.lower_bound:
            return self.outcome != "faster"
        if self.outcome == "slower":
            return True
        return self.outcome is None and self.speedup < 1

    @property
    def same(self) -> bool:
        return self.outcome == "no_significant_difference" and not self.lower_bound

    @property
    def unmeasurable(self) -> bool:
        """No difference said of an interval wholly on one side of 1: the A/A control (or the price of two
        processes) judged the effect unmeasurable here, which is not the same speed."""
        return self.same and self.low is not None and self.high is not None and (self.high < 1 or self.low > 1)

    @property
    def equivalent(self) -> bool:
        """No difference, and the interval says so: it lies inside EQUIVALENCE_BAND either way, and the A/A control
        (where there is one) did not judge the effect unmeasurable."""
        if not self.same or self.control_failed or self.low is None or self.high is None:
            return False
        return self.low >= 1 / (1 + EQUIVALENCE_BAND) and self.high <= 1 + EQUIVALENCE_BAND

    @property
    def unresolved(self) -> bool:
        """No difference claimed, and none ruled out: the interval reaches past the band, or the control cannot see."""
        return self.same and not self.unmeasurable and not self.equivalent

    @property
    def magnitude(self) -> float:
        """The number printed: how many times faster, or how many times slower."""
        return 1 / self.speedup if self.slower else self.speedup

    @property
    def directed_interval(self) -> tuple[float, float] | None:
        """The interval in the printed direction: a slower ratio's (1/high, 1/low)."""
        if self.low is None or self.high is None or self.lower_bound:
            return None
        return (1 / self.high, 1 / self.low) if self.slower else (self.low, self.high)

    @property
    def digits(self) -> int:
        interval = self.directed_interval
        if self.lower_bound:  # a bound is no finer than a tenth
            return ratio_digits(self.magnitude, 1.0)
        width = (interval[1] - interval[0]) / self.magnitude if interval else None
        return ratio_digits(self.magnitude, width)

    def times(self) -> str:
        """'166x', '2.24x': the number alone, in the printed direction."""
        return f"{self.magnitude:.{self.digits}f}x"

    def figure(self, than: str = "") -> str:
        """'2.24x faster', '166x slower', '>= 166x slower', 'same speed', 'not resolved', 'not measurable' (`than`:
        ' than float32' after it)."""
        after = f" {than}" if than else ""
        if self.same:
            return "not measurable" if self.unmeasurable else SAME_SPEED if self.equivalent else NOT_RESOLVED
        if self.lower_bound:
            return f">= {self.times()} {'slower' if self.slower else 'faster'}{after}"
        return f"{self.times()} {'slower' if self.slower else 'faster'}{after}"

    def interval_text(self) -> str | None:
        """'159-174x': the interval in the figure's direction, with the figure's digits; None for a bound."""
        interval = self.directed_interval
        if interval is None:
            return None
        digits = self.digits
        if self.same:  # an interval across 1 reads as speed-ups
            low, high = self.low or 0.0, self.high or 0.0
            if 0 < high < 1:  # wholly below 1 (unmeasurable): said as slowdowns
                low, high = 1 / high, 1 / low
                digits = max(digits, ratio_digits(1.0, (high - low)))
                return f"{low:.{digits}f}-{high:.{digits}f}x slower"
            # Against the band, a tenth hides the answer (1.0-1.1x may reach 1.12x): an unresolved one gets two.
            digits = 2 if self.unresolved else max(digits, ratio_digits(1.0, (high - low)))
            spread = f"{low:.{digits}f}-{high:.{digits}f}x"
            # An interval that cannot tell gives its point estimate too: where the measurement stands, not a claim.
            if not self.unresolved:
                return spread
            point = f"{self.speedup:.2f}x faster" if self.speedup >= 1 else f"{1 / self.speedup:.2f}x slower"
            return f"{spread}, point {point}"
        low, high = interval
        while f"{low:.{digits}f}" == f"{high:.{digits}f}" and digits < 3 and low < high:
            digits += 1  # an interval is printed wide enough to see that it is one
        return f"{low:.{digits}f}-{high:.{digits}f}x"

    def versus(self, than: str = "") -> str:
        """'2.19x faster (2.08-2.30x)', '196x slower than float32 (187-206x)', '>= 166x slower', 'no significant
        difference (0.95-1.05x)': the figure and its interval, in one direction."""
        spread = self.interval_text()
        if self.same:
            said = ("not measurable here now" if self.unmeasurable else "no significant difference" if self.equivalent
                    else NOT_RESOLVED)
            return said + (f" ({spread})" if spread else "")
        return self.figure(than) + (f" ({spread})" if spread else "")


def fmt_versus(speedup: float, interval: tuple[float, float] | list[float] | None, outcome: str | None,
               than: str = "") -> str:
    """A configuration against float32 in one phrase, its interval in the same direction: '2.19x faster
    (2.08-2.30x)', '196x slower than float32 (187-206x)', 'no significant difference (0.95-1.05x)'."""
    shown = ShownRatio.of(speedup, interval, outcome)
    return shown.versus(than) if shown is not None else "\u2014"


# A configuration whose comparison with float32 was refused (timed apart, beyond what one configuration's timings vary
# in the document): it gets no figure, and its note says why.
NOT_COMPARED = "not compared"
VARIANT_WORDS = {"original": "", "synthetic_input": "batches in memory"}


def variant_words(variant: str) -> str:
    """A run's variant as sentences name it: "" as written, "batches in memory", "channels padded", each change of a
    combined one ("batches in memory, xla")."""
    return ", ".join(VARIANT_WORDS.get(part, part.replace("_", " ")) for part in variant_parts(variant))


def pair_words(precision: str, stack: str = "host", variant: str = "original", machine: str = "host") -> str:
    """"float16 vs float32, stack tf2.21, synthetic_input, on gpu-node": a 16-bit run against float32, with the stack
    where it is not this host's, the variant where it is not as written and the machine where it is not this one:
    the one rule a table's title and a finding's scope name a pair by."""
    parts = [f"{precision} vs float32"]
    if stack not in ("", "host"):
        parts.append(f"stack {stack}")
    if variant not in ("", "original"):
        parts.append(variant)
    if machine not in ("", "host"):
        parts.append(f"on {machine}")
    return ", ".join(parts)


def fmt_config(entry: Mapping[str, Any]) -> str:
    """A measured or untested configuration as every output names it: 'float16', 'float16 with
    TF_ENABLE_ONEDNN_OPTS=0' (its `precision` and `setting`, as prescriptions list them)."""
    setting = entry.get("setting")
    return f"{entry.get('precision')}" + (f" with {setting}" if setting else "")


CANNOT_MEASURE = "fp16doctor cannot measure it"


@dataclass(frozen=True)
class UntestedIdea:
    """A configuration nobody measured here, as every output says it (a prescription's `untested[]` entry): what it
    is, why it is worth trying, and the command that measures it or why diagnose cannot."""

    config: str  # "float16 with batch_dtype=float32" (fmt_config)
    why: str
    command: str  # "" where diagnose cannot measure it
    no_command: str = ""  # why not, where it cannot

    @classmethod
    def of(cls, idea: Mapping[str, Any]) -> UntestedIdea:
        return cls(fmt_config(idea), str(idea.get("why") or ""), str(idea.get("command") or ""),
                   str(idea.get("no_command") or ""))

    @property
    def idea(self) -> str:
        """"float16 with batch_dtype=float32 (why)"."""
        return f"{self.config} ({self.why})"

    @property
    def measure(self) -> str:
        """The command that measures it, or "fp16doctor cannot measure it (why)"."""
        return self.command or f"{CANNOT_MEASURE} ({self.no_command})"

    def sentence(self) -> str:
        """"untested: float16 with batch_dtype=float32 (why): <command>": the idea on one line."""
        return f"untested: {self.idea}: {self.measure}"

    def advice(self, where: str = "") -> str:
        """The idea in a finding's fix, `where` it was not measured: "Untested: float16 with batch_dtype=float32
        (why); `<command>` measures it."."""
        if self.command:
            return f"Untested{on(where)}: {self.idea}; `{self.command}` measures it."
        return f"Untested{on(where)}, and {self.measure}: {self.idea}."


# A saved verdict read back (a document of the short shape, or one an older release wrote): its ratio and figure by the
# one rule every output uses.


def saved_speedup(verdict: Mapping[str, Any]) -> float | None:
    """float32 step / this step: from the two step times when the verdict gives them (its `ratio` is rounded),
    else its `ratio`."""
    step, fp32 = as_positive(verdict.get("step_ms")), as_positive(verdict.get("fp32_step_ms"))
    if step and fp32:
        return fp32 / step
    return as_positive(verdict.get("ratio"))


def saved_outcome(verdict: Mapping[str, Any], speedup: float | None) -> str | None:
    outcome = as_str(verdict.get("outcome"))
    if outcome in ("slower", "faster", "no_significant_difference"):
        return outcome
    if speedup is None:  # the short shape has no outcome: the ratio is all it says
        return None
    return "slower" if speedup < 1 else "faster" if speedup > 1 else "no_significant_difference"


def saved_ratio(verdict: Mapping[str, Any]) -> ShownRatio | None:
    """A saved verdict's ratio as every output shows it: its `ratio` (the one its interval was computed around),
    else float32's step over its step."""
    speedup = as_positive(verdict.get("ratio"))
    if speedup is None:
        speedup = saved_speedup(verdict)
    outcome = saved_outcome(verdict, speedup)
    return ShownRatio.of(speedup, verdict.get("ratio_interval"), outcome, method=verdict.get("interval_method"),
                         bound=verdict.get("bound"), aa=verdict.get("aa_check"))


def figure(verdict: Mapping[str, Any]) -> str:
    """The ratio in a few words: "1.60x slower", ">= 175x slower", "1.25x faster", "same speed", "no ratio"."""
    shown = saved_ratio(verdict)
    if shown is None or saved_outcome(verdict, shown.speedup) is None:
        return "no ratio"
    return shown.figure()


def listed_words(items: list[str]) -> str:
    """"a", "a and b", "a, b and c": items in a sentence."""
    return f"{', '.join(items[:-1])} and {items[-1]}" if len(items) > 1 else (items[0] if items else "")


# A pass of the training step (an op's `pass`), as every output names it; the short form where a column is narrow.
SHORT_PASS = {"backward_weights": "bwd weights", "backward_data": "bwd data"}


def pass_words(pass_: object, short: bool = False) -> str:
    """"backward weights" ("bwd weights" `short`), "forward", "optimizer"; "" for none."""
    name = "" if pass_ is None else str(pass_)
    return SHORT_PASS.get(name, name.replace("_", " ")) if short else name.replace("_", " ")


# The kinds of a GPU's idle time (attribution/device_time.py IDLE_KINDS), as a split of it says each.
IDLE_KIND_WORDS = {"waiting_on_data_ms": "waiting on the host's data", "launch_gaps_ms": "in launch and dispatch gaps",
                   "other_ms": "other"}


def idle_split_words(split: Mapping[str, float | None]) -> str:
    """"30 ms waiting on the host's data, 12 ms in launch and dispatch gaps, 4.0 ms other": the kinds it has."""
    return ", ".join(f"{fmt_ms(ms)} {IDLE_KIND_WORDS[kind]}" for kind, ms in split.items()
                     if ms is not None and kind in IDLE_KIND_WORDS)


# How a figure a cause explains was found (a verdict's cause, a finding), as every output says it.
BASIS_WORDS = {"measured_ops": "measured", "experiment": "confirmed by experiment", "estimate": "estimated"}


# A place: the machine and stack a sentence speaks of.


def place_words(machine: str, stack: str) -> str:
    """A machine and stack as sentences name them: the stack alone on the host, else 'stack on machine'."""
    return stack if machine == HOST_MACHINE else f"{stack} on {machine}"


def named_place(places: Collection[tuple[str, str]], machine: str, stack: str) -> str:
    """The place a sentence names among a document's `places`: nothing where it is the only one, else its words."""
    return place_words(machine, stack) if len(set(places)) > 1 or (machine, stack) not in places else ""


def on(place: str) -> str:
    """' on <place>' after a sentence's subject, or nothing where the document has one place."""
    return f" on {place}" if place else ""
