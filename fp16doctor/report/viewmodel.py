"""What the report shows, computed before any template runs.

`build_report(docs)` turns one or more results documents into typed, redacted view objects: the
verdict sentence, the run table with derived numbers (images/s, speedup vs float32, input share),
ranked findings with the fix as code for that stack, the environment and the command that reproduces
the measurement. Templates and the markdown renderer only format these objects.

Every optional key of results.json may be missing; a missing number shows as a dash, never a crash.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from markupsafe import Markup

from fp16doctor import __version__
from fp16doctor.analysis import analyse
from fp16doctor.analysis.context import noise_band
from fp16doctor.analysis.roofline import estimate
from fp16doctor.knowledge.cpu import CPU_FP16_REPORT_FLAGS
from fp16doctor.report import charts
from fp16doctor.report.fixes import fix_for
from fp16doctor.report.formatting import format_ms, precision_rank
from fp16doctor.report.redact import redact, redact_text
from fp16doctor.results import group_runs_by_machine
from fp16doctor.stacks import all_stacks

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}


# ---------------------------------------------------------------------------------------- view objects


@dataclass(frozen=True)
class RunRow:
    stack: str
    precision: str
    variant: str
    engine: str
    device: str
    status: str
    error: str | None
    batch_size: int | None
    median_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    samples: int | None
    images_per_s: float | None
    speedup_vs_fp32: float | None
    first_step_ms: float | None
    input_ms: float | None
    input_share: float | None
    gpu_util_pct: float | None
    loss_nan: bool

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.median_ms is not None

    @property
    def label(self) -> str:
        parts = [self.stack, self.precision]
        if self.variant != "original":
            parts.append(self.variant)
        if self.engine:
            parts.append(self.engine)
        return " · ".join(parts)


@dataclass(frozen=True)
class Verdict:
    sentence: str
    ratio: float | None  # reduced-precision step time / float32 step time (>1: slower)
    tone: str  # "slower", "faster", "same" or "unknown"
    cause_id: str | None

    @property
    def figure(self) -> str:
        """The ratio as a reader says it: "1.60× slower", "1.25× faster"."""
        if self.ratio is None:
            return "no ratio"
        if self.tone == "slower":
            return f"{self.ratio:.2f}× slower"
        if self.tone == "faster":
            return f"{1 / self.ratio:.2f}× faster"
        return "same speed"


@dataclass(frozen=True)
class FixView:
    stack_label: str
    code: str


@dataclass(frozen=True)
class TextPart:
    kind: str  # "text" or "code"
    text: str


@dataclass(frozen=True)
class FindingView:
    id: str
    title: str
    severity: str
    confidence: float | None
    evidence: list[str]
    recommendation: str  # prose only, code blocks left out (the markdown summary uses it)
    recommendation_parts: list[TextPart]  # prose and indented code blocks, in order
    fix: FixView | None  # code for the stack, when the recommendation brings none of its own


@dataclass(frozen=True)
class ChartsView:
    step_time: Markup
    split: Markup
    speedup: Markup
    speedup_has_prediction: bool


@dataclass(frozen=True)
class MachineView:
    anchor: str
    name: str
    details: list[str]
    verdict: Verdict
    rows: list[RunRow]
    show_engine: bool
    show_variant: bool
    charts: ChartsView


@dataclass(frozen=True)
class GpuView:
    index: str
    name: str
    compute_capability: str
    memory: str
    driver: str
    cuda_driver: str


@dataclass(frozen=True)
class SoftwareRow:
    stack: str
    engine: str
    values: dict[str, str]


SOFTWARE_KEYS = ("python", "tensorflow", "keras", "keras_backend", "cuda", "cudnn")


@dataclass(frozen=True)
class EnvironmentView:
    host: list[tuple[str, str]]
    gpus: list[GpuView]
    software: list[SoftwareRow]


@dataclass(frozen=True)
class ReproduceView:
    command: str
    notes: list[str]


@dataclass(frozen=True)
class DocumentView:
    anchor: str
    title: str
    created: str | None
    tool_version: str | None
    note: str | None
    machines: list[MachineView]
    findings: list[FindingView]
    findings_source: str  # "results" (as written by diagnose) or "analysis" (computed now) or "none"
    environment: EnvironmentView
    reproduce: ReproduceView
    workload: list[tuple[str, str]]


@dataclass(frozen=True)
class ComparisonRow:
    machine: str
    stack: str
    variant: str
    float32_ms: float | None
    float16_ms: float | None
    mixed_ms: float | None
    float16_speedup: float | None
    mixed_speedup: float | None


@dataclass(frozen=True)
class ReportView:
    title: str
    heading: str
    subtitle: str
    headline: list[Verdict]
    documents: list[DocumentView]
    comparison: list[ComparisonRow]
    comparison_chart: Markup
    results_json: Markup
    generator: str = field(default_factory=lambda: f"fp16doctor {__version__}")

    @property
    def is_comparison(self) -> bool:
        return len(self.documents) > 1 or sum(len(d.machines) for d in self.documents) > 1


# ---------------------------------------------------------------------------------------- helpers


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if number == number and number not in (float("inf"), float("-inf")) else None


def _positive(value: Any) -> float | None:
    number = _num(value)
    return number if number is not None and number > 0 else None


def _text(value: Any) -> str:
    """A redacted display string for any JSON value; empty when missing."""
    if value is None:
        return ""
    return redact_text(str(value))


def _runs(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [r for r in _list(doc.get("runs")) if isinstance(r, dict)]


def _gpus(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [g for g in _list(_dict(doc.get("host")).get("gpus")) if isinstance(g, dict)]


def _engine_label(run: Mapping[str, Any]) -> str:
    engine = _dict(run.get("engine"))
    kind = str(engine.get("kind") or "")
    if kind == "docker":
        label = "docker"
        if engine.get("docker_host"):
            label += f" {engine['docker_host']}"
        gpu = engine.get("gpu_index", engine.get("gpu_name"))
        if gpu is not None:
            label += f" gpu {gpu}"
        return _text(label)
    return _text(kind)


def _gpu_summary(names: Sequence[str]) -> str:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n}× {name}" if n > 1 else name for name, n in counts.items())


def _rank_findings(findings: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The analysis' own `rank` when it gives one (causes first); else severity, then confidence."""

    def key(item: tuple[int, Mapping[str, Any]]) -> tuple[int, float, int, float, int]:
        index, f = item
        rank = _num(f.get("rank"))
        confidence = _num(f.get("confidence"))
        return (
            0 if rank is not None else 1,
            rank if rank is not None else 0.0,
            SEVERITY_RANK.get(str(f.get("severity")), 3),
            -(confidence or 0.0),
            index,
        )

    return [f for _, f in sorted(enumerate(findings), key=key)]


def real_analyse(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return analyse(doc)


def real_roofline(doc: dict[str, Any]) -> dict[tuple[str, str], float]:
    """Roofline best-case speedups by (stack, precision), when the analysis can estimate them."""
    predicted: dict[tuple[str, str], float] = {}
    for est in estimate(doc):
        value = _positive(est.predicted_speedup)
        if value is not None:
            predicted[(est.stack, est.precision)] = value
    return predicted


def real_known_stacks() -> set[str] | None:
    return {s.name for s in all_stacks()}


@dataclass(frozen=True)
class Sources:
    """Where the report gets what a results file may lack; tests substitute fixed ones."""

    analyse: Callable[[dict[str, Any]], list[dict[str, Any]]] = real_analyse
    roofline: Callable[[dict[str, Any]], dict[tuple[str, str], float]] = real_roofline
    known_stacks: Callable[[], set[str] | None] = real_known_stacks


def findings_of(doc: Mapping[str, Any], sources: Sources) -> tuple[list[dict[str, Any]], str]:
    """The document's own findings, or the analysis run now when it has none."""
    own = [f for f in _list(doc.get("findings")) if isinstance(f, dict)]
    if own:
        return own, "results"
    computed = [f for f in sources.analyse(dict(doc)) if isinstance(f, dict)]
    return computed, ("analysis" if computed else "none")


# ---------------------------------------------------------------------------------------- runs


def _run_row(run: Mapping[str, Any], engine: str) -> RunRow:
    step = _dict(run.get("step_time_ms"))
    median = _positive(step.get("median"))
    status = str(run.get("status") or "unknown")
    if status != "ok":
        median = None
    batch = _dict(run.get("workload")).get("batch_size")
    batch_size = int(batch) if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0 else None
    input_ms = _positive(_dict(run.get("input_time_ms")).get("median"))
    samples = step.get("n")
    return RunRow(
        stack=_text(run.get("stack")) or "?",
        precision=_text(run.get("precision")) or "?",
        variant=_text(run.get("variant") or "original"),
        engine=engine,
        device=_text(run.get("device")),
        status=_text(status),
        error=_text(run.get("error")) or None,
        batch_size=batch_size,
        median_ms=median,
        p10_ms=_positive(step.get("p10")) if median else None,
        p90_ms=_positive(step.get("p90")) if median else None,
        samples=samples if isinstance(samples, int) and not isinstance(samples, bool) else None,
        images_per_s=(batch_size * 1000.0 / median) if (batch_size and median) else None,
        speedup_vs_fp32=None,
        first_step_ms=_positive(run.get("first_step_ms")),
        input_ms=input_ms,
        input_share=(min(input_ms / median, 1.0) if (input_ms and median) else None),
        gpu_util_pct=_num(_dict(run.get("gpu_utilization_pct")).get("median")),
        loss_nan=bool(_dict(run.get("loss")).get("nan_or_inf")),
    )


def _with_speedups(rows: list[RunRow]) -> list[RunRow]:
    baselines = {(r.engine, r.stack, r.variant): r.median_ms for r in rows if r.precision == "float32" and r.ok}
    out = []
    for r in rows:
        base = baselines.get((r.engine, r.stack, r.variant))
        speedup = base / r.median_ms if (base and r.median_ms) else None
        out.append(replace(r, speedup_vs_fp32=speedup))
    return out


def _ordered(rows: list[RunRow]) -> list[RunRow]:
    stacks: dict[str, int] = {}
    variants: dict[str, int] = {"original": -1}
    for r in rows:
        stacks.setdefault(r.stack, len(stacks))
        variants.setdefault(r.variant, len(variants))
    return sorted(rows, key=lambda r: (stacks[r.stack], r.engine, variants[r.variant], precision_rank(r.precision)))


# ---------------------------------------------------------------------------------------- verdict


def _headline_pair(rows: Sequence[RunRow]) -> tuple[RunRow, RunRow] | None:
    """float32 against float16 (the user's question) or else mixed_float16, preferring the original script."""
    for variant_first in (True, False):
        for precision in ("float16", "mixed_float16"):
            for r in rows:
                if r.precision != precision or not r.ok or (variant_first and r.variant != "original"):
                    continue
                base = next(
                    (
                        b
                        for b in rows
                        if b.precision == "float32"
                        and b.ok
                        and (b.engine, b.stack, b.variant) == (r.engine, r.stack, r.variant)
                    ),
                    None,
                )
                if base is not None:
                    return base, r
    return None


def _cause_phrase(title: str) -> str:
    title = title.strip().rstrip(".")
    # "Pure float16 ..." -> "pure float16 ...", but keep acronyms such as "GPU ..." or "TF 1.7 ...".
    if len(title) > 1 and title[0].isupper() and title[1].islower():
        title = title[0].lower() + title[1:]
    return title


# Findings that cannot explain the ratio of two median steps: fp16_faster restates it, and
# measurement_warmup is about the first steps, which the medians leave out.
NOT_A_CAUSE = ("fp16_faster", "measurement_warmup")


def build_verdict(name: str, rows: Sequence[RunRow], findings: Sequence[Mapping[str, Any]]) -> Verdict:
    pair = _headline_pair(rows)
    ranked = _rank_findings(findings)
    if pair is None:
        failed = [r for r in rows if r.status != "ok"]
        why = f" ({len(failed)} of {len(rows)} runs did not complete)" if failed else ""
        return Verdict(
            f"On {name}, no float32 run and reduced-precision run both completed, so there is no ratio to report{why}.",
            None,
            "unknown",
            None,
        )
    base, other = pair
    assert base.median_ms is not None and other.median_ms is not None
    ratio = other.median_ms / base.median_ms
    times = f"{format_ms(other.median_ms)} vs {format_ms(base.median_ms)} per step"
    stack = f" with stack {base.stack}" if base.stack not in ("", "host") else ""
    # The same noise band as the findings, so the verdict never claims a difference they call noise.
    band = noise_band((base.median_ms, base.p10_ms, base.p90_ms), (other.median_ms, other.p10_ms, other.p90_ms))
    if ratio > 1 + band:
        tone, comparison = "slower", f"{ratio:.2f}× slower than"
    elif 1 / ratio > 1 + band:
        tone, comparison = "faster", f"{1 / ratio:.2f}× faster than"
    else:
        tone, comparison = "same", "about as fast as"
    causes = [f for f in ranked if f.get("id") not in NOT_A_CAUSE and _text(f.get("title"))]
    cause = causes[0] if causes else None
    sentence = f"On {name}, {other.precision} is {comparison} float32 ({times}{stack})"
    if cause is None:
        sentence += "." if tone == "faster" else "; no finding explains it yet."
    elif tone == "faster":
        # A finding beside a speedup is what limits it further, not why it is fast.
        sentence += f"; what holds it back: {_cause_phrase(_text(cause.get('title')))}."
    else:
        sentence += f", mostly because {_cause_phrase(_text(cause.get('title')))}."
    return Verdict(sentence, ratio, tone, str(cause.get("id")) if cause else None)


# ---------------------------------------------------------------------------------------- sections


def _finding_stack(finding: Mapping[str, Any]) -> str | None:
    stack = finding.get("stack")
    if isinstance(stack, str) and stack:
        return stack
    stacks = finding.get("stacks")
    if isinstance(stacks, list) and stacks and isinstance(stacks[0], str):
        return stacks[0]
    return None


def split_recommendation(text: str) -> list[TextPart]:
    """Prose and code apart: lines indented by four spaces (or a tab) are code, as in markdown."""
    parts: list[TextPart] = []
    for line in text.splitlines():
        is_code = line.startswith(("    ", "\t")) and line.strip() != ""
        kind = "code" if is_code else "text"
        content = line[4:] if line.startswith("    ") else line.strip()
        if kind == "text" and not content:
            continue
        if parts and parts[-1].kind == kind:
            joiner = "\n" if kind == "code" else " "
            parts[-1] = TextPart(kind, parts[-1].text + joiner + content)
        else:
            parts.append(TextPart(kind, content))
    return parts


def _finding_views(
    findings: Sequence[Mapping[str, Any]],
    software_by_stack: Mapping[str, Mapping[str, Any]],
    default_stack: str | None,
) -> list[FindingView]:
    views = []
    for f in _rank_findings(findings):
        stack = _finding_stack(f) or default_stack
        software = software_by_stack.get(stack or "", {})
        parts = split_recommendation(_text(f.get("recommendation")))
        own_code = [p.text for p in parts if p.kind == "code"]
        fix = fix_for(f, software)
        if own_code:
            fix = None  # the analysis already wrote the code for this stack
        evidence = f.get("evidence")
        views.append(
            FindingView(
                id=_text(f.get("id")) or "finding",
                title=_text(f.get("title")) or _text(f.get("id")) or "Finding",
                severity=str(f.get("severity")) if str(f.get("severity")) in SEVERITY_RANK else "info",
                confidence=_num(f.get("confidence")),
                evidence=[_text(e) for e in evidence] if isinstance(evidence, list) else [],
                recommendation=" ".join(p.text for p in parts if p.kind == "text"),
                recommendation_parts=parts,
                fix=FixView(_text(fix.flavour_label), redact_text(fix.code)) if fix else None,
            )
        )
    return views


def _environment(doc: Mapping[str, Any]) -> EnvironmentView:
    host = _dict(doc.get("host"))
    cpu = _dict(host.get("cpu"))
    rows: list[tuple[str, str]] = []
    if host.get("os"):
        rows.append(("OS", _text(host["os"])))
    if cpu.get("model"):
        cores = f" ({cpu['cores']} cores)" if isinstance(cpu.get("cores"), int) else ""
        rows.append(("CPU", _text(cpu["model"]) + cores))
    flags = cpu.get("flags")
    if isinstance(flags, list):
        # Only the flags that decide how a CPU handles float16 (F16C converts, AVX512-FP16/AMX compute).
        relevant = [f for f in flags if isinstance(f, str) and f.lower() in CPU_FP16_REPORT_FLAGS]
        rows.append(("CPU fp16-related flags", _text(", ".join(relevant)) or "none of f16c, avx512_fp16, amx"))
    gpus = [
        GpuView(
            index=_text(g.get("index")),
            name=_text(g.get("name")) or "?",
            compute_capability=_text(g.get("compute_capability")),
            memory=f"{g['memory_total_mib'] / 1024:.0f} GiB" if _positive(g.get("memory_total_mib")) else "",
            driver=_text(g.get("driver_version")),
            cuda_driver=_text(g.get("cuda_driver_version")),
        )
        for g in _gpus(doc)
    ]
    software: list[SoftwareRow] = []
    seen: set[tuple[str, str, str]] = set()
    for run in _runs(doc):
        sw = _dict(run.get("software"))
        values = {k: _text(sw.get(k)) for k in SOFTWARE_KEYS}
        engine = _dict(run.get("engine"))
        values["image"] = _text(engine.get("image"))
        values["os"] = _text(sw.get("os"))
        if not any(values.values()):
            continue  # a run that failed before reporting its software
        key = (_text(run.get("stack")), _engine_label(run), json.dumps(values, sort_keys=True))
        if key in seen:
            continue
        seen.add(key)
        software.append(SoftwareRow(stack=key[0], engine=key[1], values=values))
    return EnvironmentView(host=rows, gpus=gpus, software=software)


def _str_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _reproduce(doc: Mapping[str, Any], rows: Sequence[RunRow], known: set[str] | None) -> ReproduceView:
    """The recorded command line when there is one; else the command that measures the same matrix."""
    invocation = _dict(doc.get("invocation"))
    argv = _str_list(invocation.get("argv"))
    notes: list[str] = []
    if argv and len(argv) >= 2 and argv[1] == "diagnose":
        return ReproduceView(shlex.join(["fp16doctor", *(redact_text(a) for a in argv[1:])]), notes)
    words = ["fp16doctor", "diagnose"]
    size = invocation.get("size") or _size_from_workload(doc)
    if size in ("quick", "full"):
        words.append(f"--{size}")
    run_stacks = list(dict.fromkeys(r.stack for r in rows))
    stacks = _str_list(invocation.get("stacks")) or run_stacks
    for stack in dict.fromkeys(stacks):
        if stack == "host":
            continue
        if known is not None and stack not in known:
            notes.append(
                f"Stack '{stack}' is not one of fp16doctor's pinned stacks (it was described by hand); "
                "pick the closest with `fp16doctor stacks list` and add it with --stack."
            )
            continue
        words += ["--stack", stack]
    if run_stacks and "host" not in run_stacks and "--stack" in words:
        words.append("--no-host")
    precisions = _str_list(invocation.get("precisions")) or sorted({r.precision for r in rows}, key=precision_rank)
    if precisions and set(precisions) != {"float32", "float16", "mixed_float16"}:
        for precision in precisions:
            words += ["--precision", precision]
    for docker_host in _str_list(invocation.get("docker_hosts")) or []:
        words += ["--docker-host", redact_text(docker_host)]
    if not argv:
        notes.append(
            "This results file did not record its command line; this is the command that measures the same matrix."
        )
    return ReproduceView(shlex.join(words), notes)


def _size_from_workload(doc: Mapping[str, Any]) -> str | None:
    from fp16doctor.engines.base import SIZES

    for run in _runs(doc):
        wl = _dict(run.get("workload"))
        for size in SIZES.values():
            if (wl.get("image_height"), wl.get("image_width"), wl.get("batch_size")) == (
                size.image_height,
                size.image_width,
                size.batch_size,
            ):
                return size.name
    return None


def _workload(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    for run in _runs(doc):
        wl = _dict(run.get("workload"))
        if not wl:
            continue
        out = []
        if wl.get("name"):
            out.append(("workload", _text(wl["name"])))
        if wl.get("script_sha256"):  # the user's own script: named and hashed, its content never stored
            out.append(("script", _text(wl.get("script"))))
            out.append(("script digest", _text(f"sha256:{wl['script_sha256']}")))
        if wl.get("image_height") and wl.get("image_width"):
            channels = f"×{wl['channels']}" if wl.get("channels") else ""
            out.append(("image", _text(f"{wl['image_height']}×{wl['image_width']}{channels}")))
        for key, label in (
            ("batch_size", "batch size"),
            ("steps_measured", "steps measured"),
            ("warmup_steps", "warm-up steps"),
        ):
            if wl.get(key) is not None:
                out.append((label, _text(wl[key])))
        return out
    return []


# ---------------------------------------------------------------------------------------- machines


def _machine_name(doc: Mapping[str, Any], key: str, runs: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]]:
    details: list[str] = []
    if key:
        gpu_names = [_text(_dict(r.get("engine")).get("gpu_name")) for r in runs]
        gpu_names = [g for g in dict.fromkeys(gpu_names) if g]
        name = _gpu_summary(gpu_names) if gpu_names else "remote Docker engine"
        details.append(f"Docker engine {_text(key)}")
        return name, details
    host = _dict(doc.get("host"))
    gpus = _gpus(doc)
    cpu_model = _text(_dict(host.get("cpu")).get("model"))
    if gpus:
        name = _gpu_summary([_text(g.get("name")) or "?" for g in gpus])
        for g in gpus:
            cc = _text(g.get("compute_capability"))
            bits = [f"compute capability {cc}" if cc else ""]
            if g.get("driver_version"):
                bits.append(f"driver {_text(g['driver_version'])}")
            if g.get("cuda_driver_version"):
                bits.append(f"CUDA {_text(g['cuda_driver_version'])}")
            detail = ", ".join(b for b in bits if b)
            if detail:
                details.append(f"{_text(g.get('name'))}: {detail}" if len(gpus) > 1 else detail)
        if cpu_model:
            details.append(cpu_model)
    else:
        name = f"{cpu_model} (CPU only)" if cpu_model else "CPU only (no GPU)"
    if host.get("os"):
        details.append(_text(host["os"]))
    return name, details


def _machine_charts(rows: Sequence[RunRow], predicted: Mapping[tuple[str, str], float]) -> ChartsView:
    ok = [r for r in rows if r.ok]
    step_bars = [charts.StepBar(r.label, r.precision, r.median_ms or 0.0, r.p10_ms, r.p90_ms) for r in ok]
    split_bars = [
        charts.SplitBar(
            r.label,
            r.precision,
            min(r.input_ms or 0.0, r.median_ms or 0.0),
            max((r.median_ms or 0.0) - (r.input_ms or 0.0), 0.0),
        )
        for r in ok
        if r.input_ms is not None
    ]
    speed_bars = [
        charts.SpeedupBar(r.label, r.precision, r.speedup_vs_fp32, predicted.get((r.stack, r.precision)))
        for r in ok
        if r.precision != "float32"
    ]
    return ChartsView(
        step_time=charts.step_time_chart(step_bars),
        split=charts.split_chart(split_bars),
        speedup=charts.speedup_chart(speed_bars),
        speedup_has_prediction=any(b.predicted is not None for b in speed_bars),
    )


def _document_view(index: int, doc: Mapping[str, Any], used_names: dict[str, int], sources: Sources) -> DocumentView:
    findings, source = findings_of(doc, sources)
    predicted = sources.roofline(dict(doc))
    groups = group_runs_by_machine(_runs(doc))
    if not groups:
        groups[""] = []
    machines: list[MachineView] = []
    all_rows: list[RunRow] = []
    for m_index, (key, runs) in enumerate(groups.items()):
        name, details = _machine_name(doc, key, runs)
        used_names[name] = used_names.get(name, 0) + 1
        if used_names[name] > 1:
            name = f"{name} (#{used_names[name]})"
        rows = [_run_row(r, _engine_label(r)) for r in runs]
        # The engine column only matters when one machine ran the same cell on several engines.
        engines = {r.engine for r in rows if r.engine}
        if len(engines) <= 1:
            rows = [replace(r, engine="") for r in rows]
        rows = _ordered(_with_speedups(rows))
        all_rows += rows
        machines.append(
            MachineView(
                anchor=f"machine-{index + 1}-{m_index + 1}",
                name=name,
                details=details,
                verdict=build_verdict(name, rows, findings),
                rows=rows,
                show_engine=len(engines) > 1,
                show_variant=any(r.variant != "original" for r in rows),
                charts=_machine_charts(rows, predicted),
            )
        )
    software_by_stack: dict[str, dict[str, Any]] = {}
    for run in _runs(doc):
        software_by_stack.setdefault(str(run.get("stack")), _dict(run.get("software")))
    pair = _headline_pair(all_rows)
    default_stack = pair[0].stack if pair else (all_rows[0].stack if all_rows else None)
    tool = _dict(doc.get("tool"))
    return DocumentView(
        anchor=f"results-{index + 1}",
        title=" + ".join(m.name for m in machines),
        created=_text(doc.get("created")) or None,
        tool_version=_text(tool.get("version")) or None,
        note=_text(doc.get("note")) or None,
        machines=machines,
        findings=_finding_views(findings, software_by_stack, default_stack),
        findings_source=source,
        environment=_environment(doc),
        reproduce=_reproduce(doc, all_rows, sources.known_stacks()),
        workload=_workload(doc),
    )


def _comparison(documents: Sequence[DocumentView]) -> list[ComparisonRow]:
    out = []
    for d in documents:
        for m in d.machines:
            cells: dict[tuple[str, str, str], dict[str, float]] = {}
            for r in m.rows:
                if r.ok and r.median_ms is not None:
                    cells.setdefault((r.stack, r.variant, r.engine), {})[r.precision] = r.median_ms
            for (stack, variant, engine), times in cells.items():
                f32 = times.get("float32")
                f16 = times.get("float16")
                mixed = times.get("mixed_float16")
                out.append(
                    ComparisonRow(
                        machine=m.name,
                        stack=f"{stack} · {engine}" if engine else stack,
                        variant=variant,
                        float32_ms=f32,
                        float16_ms=f16,
                        mixed_ms=mixed,
                        float16_speedup=(f32 / f16) if (f32 and f16) else None,
                        mixed_speedup=(f32 / mixed) if (f32 and mixed) else None,
                    )
                )
    return out


def embed_json(docs: Sequence[Mapping[str, Any]]) -> Markup:
    """The redacted results as JSON that cannot end its <script> element early.

    `<`, `>` and `&` become \\u escapes (still the same JSON), so `</script>` or `<!--` in any string
    stays inert text inside <script type="application/json">.
    """
    text = json.dumps([redact(dict(d)) for d in docs], indent=1, sort_keys=False, default=str, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


def build_report(docs: Sequence[Mapping[str, Any]], sources: Sources | None = None) -> ReportView:
    """The whole report's content, computed and redacted; templates only format it."""
    used_names: dict[str, int] = {}
    sources = sources or Sources()
    documents = [_document_view(i, doc, used_names, sources) for i, doc in enumerate(docs)]
    machines = [m for d in documents for m in d.machines]
    names = [m.name for m in machines]
    comparison = _comparison(documents) if len(machines) > 1 else []
    comparison_bars = (
        [
            charts.StepBar(r.label, r.precision, r.median_ms or 0.0, r.p10_ms, r.p90_ms, group=m.name)
            for m in machines
            for r in m.rows
            if r.ok
        ]
        if len(machines) > 1
        else []
    )
    if len(machines) > 1:
        heading = "float16 vs float32 on " + ", ".join(names[:-1]) + " and " + names[-1]
    else:
        heading = f"float16 vs float32 on {names[0]}" if names else "float16 vs float32"
    subtitle = (
        f"{len(docs)} results file{'s' if len(docs) != 1 else ''}, {len(machines)} machine"
        f"{'s' if len(machines) != 1 else ''}"
    )
    return ReportView(
        title=f"fp16doctor: {heading}",
        heading=heading,
        subtitle=subtitle,
        headline=[m.verdict for m in machines],
        documents=documents,
        comparison=comparison,
        comparison_chart=charts.step_time_chart(comparison_bars, "Median step time on every machine"),
        results_json=embed_json(docs),
    )
