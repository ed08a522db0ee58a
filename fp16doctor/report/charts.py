"""Charts as inline SVG, drawn here so the report needs no script, font or library from anywhere.

Every chart is a list of horizontal bars with text labels; colours come from CSS classes
(`p-float32`, ...), so the page's light and dark themes and its print style apply to the charts too.
All text goes through markupsafe.escape: labels come from results files, which may be hostile.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from fp16doctor.analysis.values import ShownRatio, fmt_ms
from fp16doctor.workload.protocol import PRECISIONS

WIDTH = 760
LABEL_W = 250
RIGHT_PAD = 86
ROW_H = 26
BAR_H = 16
TOP = 30
BOTTOM = 26
SPEEDUP_VALUES_W = 140  # the speedup chart prints its values in a column at the right


@dataclass(frozen=True)
class StepBar:
    """Median step time of one run, with its p10-p90 spread when measured."""

    label: str
    precision: str
    step_ms: float
    p10_ms: float | None = None
    p90_ms: float | None = None
    group: str = ""  # bars with a group get a heading row when the group changes (machines in a comparison)


@dataclass(frozen=True)
class SplitBar:
    """One run's step split into host input time and the rest (compute, transfers, framework)."""

    label: str
    precision: str
    input_ms: float
    compute_ms: float


@dataclass(frozen=True)
class DeviceBar:
    """One GPU run's profiled step: the device's kernels, its copies, and the rest, when the device was idle (the
    host's input, dispatch and waiting); each counted once (attribution/device_time.py)."""

    label: str
    precision: str
    compute_ms: float
    copies_ms: float
    host_ms: float


@dataclass(frozen=True)
class SpeedupBar:
    """Speedup over float32 as measured, beside the roofline's best case for the same model and GPU."""

    label: str
    precision: str
    measured: float | None
    predicted: float | None
    measured_text: str | None = None  # the measured ratio as every output prints it ("166x slower")


@dataclass(frozen=True)
class LegendEntry:
    """One colour a chart uses and what it stands for."""

    css_class: str  # the swatch's class: "input", "p-float16", "p-other"
    label: str


def split_legend(bars: Sequence[SplitBar]) -> list[LegendEntry]:
    """Every colour the split chart draws, each named: host input, then each precision's compute colour."""
    if not bars:
        return []
    entries = [LegendEntry("input", "host input")]
    by_class: dict[str, list[str]] = {}
    for bar in bars:
        names = by_class.setdefault(_css_class(bar.precision), [])
        if bar.precision not in names:
            names.append(bar.precision)
    for css_class, names in by_class.items():
        entries.append(LegendEntry(css_class, f"{', '.join(names)}: compute and the rest"))
    return entries


def nice_ticks(maximum: float, target: int = 5) -> list[float]:
    """Round tick values 0..>=maximum, about `target` of them."""
    if maximum <= 0 or not math.isfinite(maximum):
        return [0.0, 1.0]
    raw = maximum / target
    magnitude = 10.0 ** math.floor(math.log10(raw))  # a float: an int power of ten past 1e308 cannot be formatted
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    count = math.ceil(maximum / step - 1e-9)
    # Twelve significant digits take the float noise off (0.30000000000000004) at any magnitude: rounding to a
    # fixed number of decimals made every tick of a tiny maximum 0 (a hand-written 1e-293 ms step).
    return [float(f"{i * step:.12g}") for i in range(count + 1)]


def _css_class(precision: str) -> str:
    """Each precision's colour (the page's CSS has one per results.PRECISIONS); anything else shares one."""
    return f"p-{precision}" if precision in PRECISIONS else "p-other"


def _frame(height: int, title: str, body: list[str]) -> Markup:
    svg = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg" '
        'preserveAspectRatio="xMinYMin meet">',
        f"<title>{escape(title)}</title>",
        *body,
        "</svg>",
    ]
    return Markup("\n".join(svg))


def _axis(ticks: list[float], scale: float, height: int, fmt: str) -> list[str]:
    out = []
    plot_bottom = height - BOTTOM
    for tick in ticks:
        x = LABEL_W + tick * scale
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{TOP - 8}" x2="{x:.1f}" y2="{plot_bottom}"/>')
        text = _tick_text(tick, fmt)
        out.append(f'<text class="tick" x="{x:.1f}" y="{plot_bottom + 16}" text-anchor="middle">{escape(text)}</text>')
    return out


def _tick_text(tick: float, fmt: str) -> str:
    if fmt == "ratio":
        return f"{tick:g}×"
    if tick == 0:
        return "0"
    return f"{tick / 1000:g} s" if tick >= 10_000 else f"{tick:g} ms"


def _label(y: float, text: str) -> str:
    # About 7 units per character at 12 px: longer labels are cut, the full text stays in <title>.
    limit = int((LABEL_W - 12) / 7.2)
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return (
        f'<text class="label" x="{LABEL_W - 10}" y="{y:.1f}" text-anchor="end" dominant-baseline="middle">'
        f"<title>{escape(text)}</title>{escape(shown)}</text>"
    )


def step_time_chart(bars: Sequence[StepBar], title: str = "Median step time with p10–p90 spread") -> Markup:
    """Median as a bar, p10-p90 as a whisker over it; shorter is faster."""
    if not bars:
        return Markup("")
    maximum = max(max(b.step_ms, b.p90_ms or 0.0) for b in bars)
    ticks = nice_ticks(maximum)
    plot_w = WIDTH - LABEL_W - RIGHT_PAD
    scale = plot_w / ticks[-1]
    # Lay out rows first: a heading row wherever the group changes, then one row per bar.
    layout: list[tuple[str, StepBar | str]] = []
    current: str | None = None
    for bar in bars:
        if bar.group and bar.group != current:
            layout.append(("group", bar.group))
        current = bar.group
        layout.append(("bar", bar))
    height = TOP + ROW_H * len(layout) + BOTTOM
    body = _axis(ticks, scale, height, "ms")
    for i, (_kind, item) in enumerate(layout):
        y = TOP + i * ROW_H
        mid = y + ROW_H / 2
        if not isinstance(item, StepBar):
            body.append(f'<text class="group" x="0" y="{mid + 4:.1f}" dominant-baseline="middle">{escape(item)}</text>')
            continue
        bar = item
        w = max(bar.step_ms * scale, 1.0)
        body.append(_label(mid, bar.label))
        body.append(
            f'<rect class="bar {_css_class(bar.precision)}" x="{LABEL_W}" y="{mid - BAR_H / 2:.1f}" '
            f'width="{w:.1f}" height="{BAR_H}" rx="2"><title>{escape(bar.label)}: '
            f"{escape(fmt_ms(bar.step_ms))}</title></rect>"
        )
        if bar.p10_ms is not None and bar.p90_ms is not None:
            x1, x2 = LABEL_W + bar.p10_ms * scale, LABEL_W + bar.p90_ms * scale
            body.append(f'<line class="whisker" x1="{x1:.1f}" y1="{mid:.1f}" x2="{x2:.1f}" y2="{mid:.1f}"/>')
            for x in (x1, x2):
                body.append(f'<line class="whisker" x1="{x:.1f}" y1="{mid - 5:.1f}" x2="{x:.1f}" y2="{mid + 5:.1f}"/>')
        end = LABEL_W + max(w, (bar.p90_ms or 0.0) * scale)
        body.append(
            f'<text class="value" x="{end + 6:.1f}" y="{mid:.1f}" dominant-baseline="middle">'
            f"{escape(fmt_ms(bar.step_ms))}</text>"
        )
    return _frame(height, title, body)


def split_chart(bars: Sequence[SplitBar], title: str = "Where a step goes: host input vs the rest") -> Markup:
    """Stacked bars: input time (hatched tone) then compute; input share printed at the end."""
    if not bars:
        return Markup("")
    maximum = max(b.input_ms + b.compute_ms for b in bars)
    ticks = nice_ticks(maximum)
    plot_w = WIDTH - LABEL_W - RIGHT_PAD
    scale = plot_w / ticks[-1]
    height = TOP + ROW_H * len(bars) + BOTTOM
    body = _axis(ticks, scale, height, "ms")
    for i, bar in enumerate(bars):
        y = TOP + i * ROW_H
        mid = y + ROW_H / 2
        total = bar.input_ms + bar.compute_ms
        w_in = bar.input_ms * scale
        w_cp = bar.compute_ms * scale
        body.append(_label(mid, bar.label))
        body.append(
            f'<rect class="bar input" x="{LABEL_W}" y="{mid - BAR_H / 2:.1f}" width="{w_in:.1f}" '
            f'height="{BAR_H}"><title>input {escape(fmt_ms(bar.input_ms))}</title></rect>'
        )
        body.append(
            f'<rect class="bar {_css_class(bar.precision)}" x="{LABEL_W + w_in:.1f}" '
            f'y="{mid - BAR_H / 2:.1f}" '
            f'width="{w_cp:.1f}" height="{BAR_H}"><title>compute and the rest '
            f"{escape(fmt_ms(bar.compute_ms))}</title></rect>"
        )
        share = bar.input_ms / total if total > 0 else 0.0
        body.append(
            f'<text class="value" x="{LABEL_W + w_in + w_cp + 6:.1f}" y="{mid:.1f}" '
            'dominant-baseline="middle">'
            f"{share * 100:.0f} % input</text>"
        )
    return _frame(height, title, body)


DEVICE_LEGEND = (LegendEntry("copies", "copies"), LegendEntry("input", "device idle: the host's time"))


def device_legend(bars: Sequence[DeviceBar]) -> list[LegendEntry]:
    """Every colour the device chart draws: each precision's kernels, the copies, the host's time."""
    if not bars:
        return []
    names: dict[str, list[str]] = {}
    for bar in bars:
        listed = names.setdefault(_css_class(bar.precision), [])
        if bar.precision not in listed:
            listed.append(bar.precision)
    return [*(LegendEntry(c, f"{', '.join(n)}: GPU kernels") for c, n in names.items()), *DEVICE_LEGEND]


def device_chart(bars: Sequence[DeviceBar],
                 title: str = "Where a profiled step goes: GPU kernels, copies, and the device idle") -> Markup:
    """Stacked bars per run: kernels, copies, then the time the device was idle; its busy share at the end."""
    if not bars:
        return Markup("")
    maximum = max(b.compute_ms + b.copies_ms + b.host_ms for b in bars)
    ticks = nice_ticks(maximum)
    scale = (WIDTH - LABEL_W - RIGHT_PAD) / ticks[-1]
    height = TOP + ROW_H * len(bars) + BOTTOM
    body = _axis(ticks, scale, height, "ms")
    for i, bar in enumerate(bars):
        mid = TOP + i * ROW_H + ROW_H / 2
        body.append(_label(mid, bar.label))
        x = float(LABEL_W)
        for css, ms, what in ((_css_class(bar.precision), bar.compute_ms, "GPU kernels"),
                              ("copies", bar.copies_ms, "copies"), ("input", bar.host_ms, "device idle")):
            width = ms * scale
            body.append(f'<rect class="bar {css}" x="{x:.1f}" y="{mid - BAR_H / 2:.1f}" width="{width:.1f}" '
                        f'height="{BAR_H}"><title>{what} {escape(fmt_ms(ms))}</title></rect>')
            x += width
        total = bar.compute_ms + bar.copies_ms + bar.host_ms
        busy = (bar.compute_ms + bar.copies_ms) / total if total > 0 else 0.0
        body.append(f'<text class="value" x="{x + 6:.1f}" y="{mid:.1f}" dominant-baseline="middle">'
                    f"{busy * 100:.0f} % busy</text>")
    return _frame(height, title, body)


def _ratio_words(speedup: float) -> str:
    """A ratio with no interval of its own (a roofline estimate): '2.60x faster', '1.60x slower', never '0.62x'."""
    shown = ShownRatio.of(speedup)
    return shown.figure() if shown is not None else "\u2014"


def speedup_chart(bars: Sequence[SpeedupBar], title: str | None = None) -> Markup:
    """Two thin bars per run (measured solid, predicted outlined) and a line at 1× (no change)."""
    rows = [b for b in bars if b.measured is not None or b.predicted is not None]
    if not rows:
        return Markup("")
    if title is None:
        with_prediction = any(b.predicted is not None for b in rows)
        title = "Speedup over float32: measured" + (" vs roofline best case" if with_prediction else "")
    maximum = max(max(b.measured or 0.0, b.predicted or 0.0) for b in rows)
    ticks = nice_ticks(max(maximum, 1.0), target=4)
    plot_w = WIDTH - LABEL_W - SPEEDUP_VALUES_W
    scale = plot_w / ticks[-1]
    row_h = ROW_H + 20
    height = TOP + row_h * len(rows) + BOTTOM
    body = _axis(ticks, scale, height, "ratio")
    one = LABEL_W + scale
    body.append(f'<line class="unity" x1="{one:.1f}" y1="{TOP - 10}" x2="{one:.1f}" y2="{height - BOTTOM}"/>')
    body.append(f'<text class="tick" x="{one + 4:.1f}" y="{TOP - 14}">no change</text>')
    half = 10  # bar height; measured above the middle, best case below, 6 units apart
    for i, bar in enumerate(rows):
        y = TOP + i * row_h
        mid = y + row_h / 2
        body.append(_label(mid, bar.label))
        if bar.measured is not None:
            w = max(bar.measured * scale, 1.0)
            measured = bar.measured_text or _ratio_words(bar.measured)
            # A ratio reads "measured 1.6x slower"; a figure in words ("not resolved") stands alone.
            measured = measured if measured[:1].isalpha() else f"measured {measured}"
            body.append(
                f'<rect class="bar {_css_class(bar.precision)}" x="{LABEL_W}" y="{mid - half - 3:.1f}" '
                f'width="{w:.1f}" height="{half}"><title>{escape(measured)}'
                f"</title></rect>"
            )
            body.append(
                f'<text class="value" x="{WIDTH - 4}" y="{mid - half / 2 - 3:.1f}" text-anchor="end" '
                f'dominant-baseline="middle">{escape(measured)}</text>'
            )
        if bar.predicted is not None:
            w = max(bar.predicted * scale, 1.0)
            body.append(
                f'<rect class="bar predicted" x="{LABEL_W}" y="{mid + 3:.1f}" width="{w:.1f}" '
                f'height="{half}"><title>roofline best case {escape(_ratio_words(bar.predicted))}'
                "</title></rect>"
            )
            body.append(
                f'<text class="value muted" x="{WIDTH - 4}" y="{mid + half / 2 + 3:.1f}" text-anchor="end" '
                f'dominant-baseline="middle">best case {escape(_ratio_words(bar.predicted))}</text>'
            )
    return _frame(height, title, body)
