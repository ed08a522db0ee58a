"""Tolerant readers for JSON values: a results file may be hand-written, so every optional value may be
missing or of the wrong type, and the analysis must then know less rather than crash."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

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


def fmt_versus(speedup: float, interval: tuple[float, float] | list[float] | None, outcome: str | None,
               than: str = "") -> str:
    """A configuration against float32 in one phrase, its interval in the same direction: '2.19x faster
    (2.08-2.30x)', '196x slower than float32 (187-206x)', 'no significant difference (0.95-1.05x)'."""
    after = f" {than}" if than else ""
    if outcome == "slower" and speedup > 0:
        if interval and interval[0] > 0:
            low, high = 1 / interval[1], 1 / interval[0]
            return f"{fmt_times(1 / speedup, (high - low) * speedup)} slower{after} ({fmt_interval(low, high)})"
        return f"{fmt_times(1 / speedup)} slower{after}"
    spread = f" ({fmt_interval(interval[0], interval[1])})" if interval else ""
    if outcome == "faster":
        width = (interval[1] - interval[0]) / speedup if interval and speedup else None
        return f"{fmt_times(speedup, width)} faster{after}{spread}"
    return f"no significant difference{spread}"


def fmt_config(entry: Mapping[str, Any]) -> str:
    """A measured or untested configuration as every output names it: 'float16', 'float16 with
    TF_ENABLE_ONEDNN_OPTS=0' (its `precision` and `setting`, as prescriptions list them)."""
    setting = entry.get("setting")
    return f"{entry.get('precision')}" + (f" with {setting}" if setting else "")
