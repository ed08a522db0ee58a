"""What the report shows, computed before any template runs.

`build_report(docs)` turns one or more results documents into typed, redacted view objects: the
analysis' verdicts in words (the report phrases them, never picks a cause), where the time went per layer
and pass (measured ops, float32 beside each 16-bit run), the run table with derived numbers (images/s,
speedup vs float32, input share), ranked findings with the time they explain and the fix as code for that
stack, the environment and the command that reproduces the measurement. Templates and the markdown
renderer only format these objects.

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
from fp16doctor.analysis import Diagnosis, diagnose_document
from fp16doctor.analysis.causes import HALF
from fp16doctor.analysis.fixes import fix_for
from fp16doctor.analysis.op_compare import LOW_COVERAGE, OpComparison, OpDiff, OpsSide, op_comparisons
from fp16doctor.analysis.registry import REGISTRY
from fp16doctor.analysis.roofline import estimate
from fp16doctor.analysis.values import fmt_ms
from fp16doctor.knowledge.cpu import CPU_FP16_REPORT_FLAGS
from fp16doctor.report import charts
from fp16doctor.report.formatting import precision_rank
from fp16doctor.report.prescription import PrescriptionView, prescription_views
from fp16doctor.report.redact import redact, redact_text
from fp16doctor.results import HOST_MACHINE, group_runs_by_machine
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
class VerdictView:
    """One verdict of the analysis (a 16-bit run against float32 on one machine), as a reader sees it."""

    machine: str  # the machine's display name
    stack: str
    variant: str
    precision: str | None  # None: no verdict could be made on this machine (sentence says why)
    tone: str  # "slower", "faster", "same" (inside the runs' spread) or "unknown"
    speedup: float | None  # float32 step / this step, the verdict's `ratio` (below 1: slower)
    bound: bool  # the 16-bit run was cut short: it is at least this much slower
    cause_id: str | None
    basis: str | None
    sentence: str

    @property
    def figure(self) -> str:
        """The ratio as a reader says it: "1.60× slower", "≥ 166× slower", "1.25× faster"."""
        if self.speedup is None or self.speedup <= 0:
            return "no ratio"
        if self.tone == "slower":
            return f"{'≥ ' if self.bound else ''}{times(1 / self.speedup)} slower"
        if self.tone == "faster":
            return f"{times(self.speedup)} faster"
        if self.tone == "same":
            return "same speed"
        return "no ratio"


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
    explains_ms: float | None = None  # the time this cause accounts for (speed findings only)
    basis: str | None = None  # "measured", "confirmed by experiment" or "estimated"
    scope: str = ""  # the run it speaks of: "float16 vs float32, stack host"
    ops: tuple[FindingOpView, ...] = ()


@dataclass(frozen=True)
class FindingOpView:
    """A measured op a speed finding names: which layer and pass, what ran and how long."""

    where: str  # "conv2d backward weights"
    impl: str
    dtype: str
    ms_per_step: float | None
    fp32_ms_per_step: float | None


@dataclass(frozen=True)
class ChartsView:
    step_time: Markup
    split: Markup
    speedup: Markup
    speedup_has_prediction: bool
    precisions: list[str] = field(default_factory=list)  # those drawn, for the legends


@dataclass(frozen=True)
class OpRowView:
    """One row of "Where the time went": a layer and pass, float32 beside the 16-bit run."""

    layer: str
    pass_label: str  # "backward weights"; empty on the summed rest
    fp32_ms: float | None  # None: that run listed no op here
    reduced_ms: float | None
    difference_ms: float | None
    impl: str  # the 16-bit run's implementations (kernels), biggest first
    fp32_impl: str
    tensor_cores: str  # "yes", "no" or "" (not knowable from the kernel's name)
    dtype: str
    ops: int
    rows: int  # 1, or how many rows the summed rest holds
    is_rest: bool  # the rows past the top ones, summed
    fp32_bar_pct: float  # bar lengths, as a share of the table's biggest time
    reduced_bar_pct: float


@dataclass(frozen=True)
class TimeTableView:
    """One 16-bit run's measured ops against its float32 partner's (same machine, stack and variant)."""

    anchor: str
    precision: str
    stack: str
    variant: str
    step_ms: float
    fp32_step_ms: float
    bound: bool
    source: str
    fp32_source: str
    coverage: float | None
    fp32_coverage: float | None
    low_coverage: bool
    window: str  # what the profiled window was, in words
    notes: list[str]
    rows: list[OpRowView]
    reduced_total_ms: float
    fp32_total_ms: float | None

    @property
    def show_tensor_cores(self) -> bool:
        """Only where some kernel's name said whether it used Tensor Cores (never on a CPU)."""
        return any(r.tensor_cores for r in self.rows)

    @property
    def total_difference_ms(self) -> float | None:
        return None if self.fp32_total_ms is None else self.reduced_total_ms - self.fp32_total_ms

    @property
    def title(self) -> str:
        parts = [f"{self.precision} vs float32"]
        if self.stack not in ("", "host"):
            parts.append(f"stack {self.stack}")
        if self.variant != "original":
            parts.append(self.variant)
        return ", ".join(parts)


@dataclass(frozen=True)
class MachineView:
    anchor: str
    name: str
    details: list[str]
    verdicts: list[VerdictView]
    rows: list[RunRow]
    show_engine: bool
    show_variant: bool
    charts: ChartsView
    time_tables: list[TimeTableView] = field(default_factory=list)


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
    prescriptions: list[PrescriptionView]
    environment: EnvironmentView
    reproduce: ReproduceView
    workload: list[tuple[str, str]]


@dataclass(frozen=True)
class ComparisonRow:
    machine: str
    stack: str
    variant: str
    times_ms: dict[str, float]  # median step per precision that completed

    def ms(self, precision: str) -> float | None:
        return self.times_ms.get(precision)

    def speedup(self, precision: str) -> float | None:
        """float32 median / this precision's (above 1: faster)."""
        base, other = self.times_ms.get("float32"), self.times_ms.get(precision)
        return base / other if (base and other) else None

    @property
    def float32_ms(self) -> float | None:
        return self.ms("float32")


# The 16-bit columns of the comparison: the float16 ones always (the question), bfloat16 where measured.
COMPARISON_ALWAYS = ("float16", "mixed_float16")


@dataclass(frozen=True)
class ReportView:
    title: str
    heading: str
    subtitle: str
    headline: list[VerdictView]
    documents: list[DocumentView]
    prescriptions: list[PrescriptionView]
    comparison: list[ComparisonRow]
    comparison_chart: Markup
    comparison_precisions: list[str]
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


def real_diagnose(doc: dict[str, Any]) -> Diagnosis:
    return diagnose_document(doc)


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

    diagnose: Callable[[dict[str, Any]], Diagnosis] = real_diagnose
    roofline: Callable[[dict[str, Any]], dict[tuple[str, str], float]] = real_roofline
    known_stacks: Callable[[], set[str] | None] = real_known_stacks


@dataclass(frozen=True)
class Decided:
    """What the report shows of the analysis for one document: findings and verdicts, and where from."""

    findings: list[dict[str, Any]]
    findings_source: str  # "results" (as written by diagnose), "analysis" (computed now) or "none"
    verdicts: list[dict[str, Any]]
    prescriptions: list[dict[str, Any]] = field(default_factory=list)


def decided(doc: Mapping[str, Any], sources: Sources) -> Decided:
    """The document's own findings, else the analysis' of its runs; the verdicts the analysis makes of its runs
    now, else (a file with no runs to recompute from) the verdicts it saved."""
    own = [f for f in _list(doc.get("findings")) if isinstance(f, dict)]
    saved_verdicts = [v for v in _list(doc.get("verdicts")) if isinstance(v, dict)]
    saved_prescriptions = [p for p in _list(doc.get("prescriptions")) if isinstance(p, dict)]
    if not _runs(doc) and (own or saved_verdicts or saved_prescriptions):
        return Decided(own, "results" if own else "none", saved_verdicts, saved_prescriptions)
    diagnosis = sources.diagnose(dict(doc))
    verdicts = [v for v in diagnosis.verdicts if isinstance(v, dict)]
    prescriptions = [p for p in diagnosis.prescriptions if isinstance(p, dict)]
    if own:
        return Decided(own, "results", verdicts, prescriptions)
    computed = [f for f in diagnosis.findings if isinstance(f, dict)]
    return Decided(computed, "analysis" if computed else "none", verdicts, prescriptions)


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

BASIS_LABEL = {"measured_ops": "measured", "experiment": "confirmed by experiment", "estimate": "estimated"}
OUTCOME_TONE = {"slower": "slower", "faster": "faster", "no_significant_difference": "same"}


def times(factor: float) -> str:
    """1.6 -> "1.60×", 9.57 -> "9.57×", 166.4 -> "166×"."""
    return f"{factor:.0f}×" if factor >= 100 else f"{factor:.2f}×"


def _cause_phrase(title: str) -> str:
    title = title.strip().rstrip(".")
    # "Pure float16 ..." -> "pure float16 ...", "A slow kernel ..." -> "a slow kernel ...", but keep acronyms
    # such as "GPU ..." or "TF 1.7 ...".
    if len(title) > 1 and title[0].isupper() and (title[1].islower() or title[1] == " "):
        title = title[0].lower() + title[1:]
    return title


def _matches(finding: Mapping[str, Any], verdict: Mapping[str, Any]) -> int:
    """How closely a finding speaks of a verdict's run (-1: not at all): same id, then machine, stack, precision."""
    if finding.get("id") != verdict.get("cause"):
        return -1
    score = 0
    for key in ("machine", "stack", "precision", "variant"):
        value = finding.get(key)
        if value is None:
            continue
        if value != verdict.get(key, "original" if key == "variant" else None):
            return -1
        score += 1
    return score


def _cause_title(verdict: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> str:
    """The title of the finding the verdict names (the most specific one for its run), else the registry's."""
    cause = str(verdict.get("cause"))
    scored = [(_matches(f, verdict), i) for i, f in enumerate(findings)]
    best = max((s for s in scored if s[0] >= 0), default=None, key=lambda s: (s[0], -s[1]))
    if best is not None:
        title = _text(findings[best[1]].get("title"))
        if title:
            return title
    spec = REGISTRY.get(cause)
    return spec.title if spec is not None else cause


def _speedup(verdict: Mapping[str, Any]) -> float | None:
    """float32 step / this step: from the two step times when the verdict gives them (its `ratio` is rounded),
    else its `ratio`."""
    step, fp32 = _positive(verdict.get("step_ms")), _positive(verdict.get("fp32_step_ms"))
    if step and fp32:
        return fp32 / step
    return _positive(verdict.get("ratio"))


def _tone(verdict: Mapping[str, Any], speedup: float | None) -> str:
    tone = OUTCOME_TONE.get(str(verdict.get("outcome")))
    if tone is not None:
        return tone
    # A saved verdict of the contract's short shape has no outcome: the ratio is all it says.
    if speedup is None:
        return "unknown"
    return "slower" if speedup < 1 else "faster" if speedup > 1 else "same"


def verdict_view(name: str, verdict: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> VerdictView:
    """The analysis' verdict in words: nothing here chooses a cause or judges a difference, it only phrases
    what the verdict says (its outcome, cause, basis, bound and unexplained share)."""
    precision = _text(verdict.get("precision")) or "16-bit"
    stack = _text(verdict.get("stack")) or "host"
    variant = _text(verdict.get("variant")) or "original"
    speedup = _speedup(verdict)
    tone = _tone(verdict, speedup)
    bound = verdict.get("bound") is True
    cause = _text(verdict.get("cause")) or None
    basis = _text(verdict.get("basis")) or None
    step, fp32 = _positive(verdict.get("step_ms")), _positive(verdict.get("fp32_step_ms"))
    context = [f"{fmt_ms(step)} vs {fmt_ms(fp32)} per step"] if (step and fp32) else []
    if stack not in ("", "host"):
        context.append(f"stack {stack}")
    if variant != "original":
        context.append(variant)
    headline = _text(verdict.get("headline"))
    if headline and speedup is not None:
        # The analysis' own words, as the terminal and the markdown print them. The report phrases a verdict
        # itself only for a saved one of the contract's short shape, which has no headline.
        return VerdictView(name, stack, variant, precision, tone, speedup, bound, cause, basis,
                           f"On {name}: {headline.rstrip('.')}.")
    if speedup is None:
        sentence = f"On {name}: {headline}" if headline else f"On {name}, {precision} has no ratio to float32."
        return VerdictView(name, stack, variant, precision, "unknown", None, bound, cause, basis,
                           sentence.rstrip(".") + ".")
    if tone == "slower" and bound:
        context.append(f"cut short: at least {times(1 / speedup)} slower")
        comparison = "slower than"
    elif tone == "slower":
        comparison = f"{times(1 / speedup)} slower than"
    elif tone == "faster":
        comparison = f"{times(speedup)} faster than"
    else:
        comparison = "about as fast as"
        context.append("the difference is inside the runs' spread")
    sentence = f"On {name}, {precision} is {comparison} float32"
    if context:
        sentence += f" ({'; '.join(context)})"
    difference = _num(verdict.get("difference_ms"))
    if cause is not None and tone in ("slower", "faster"):
        shares = [c for c in _list(verdict.get("causes")) if isinstance(c, dict) and c.get("id") == cause]
        cause_ms = _positive(shares[0].get("explains_ms")) if shares else None
        detail = BASIS_LABEL.get(basis or "", "")
        if cause_ms is not None and difference is not None:
            detail += f"{': ' if detail else ''}{fmt_ms(cause_ms)} of the {fmt_ms(abs(difference))} difference"
        share = _num(verdict.get("explained_share"))
        # "mostly" only when the cause accounts for at least half of the difference, as the numbers say.
        own = cause_ms / abs(difference) if (cause_ms is not None and difference) else share
        sentence += f", {'partly' if own is not None and own < HALF else 'mostly'} because "
        sentence += _cause_phrase(_cause_title(verdict, findings))
        sentence += f" ({detail})" if detail else ""
        unexplained = _positive(verdict.get("unexplained_ms"))
        if share is not None and share < HALF:
            amount = f"{fmt_ms(unexplained)} ({1 - share:.0%})" if unexplained is not None else f"{1 - share:.0%}"
            sentence += f"; {amount} of it is unexplained"
    elif tone in ("slower", "faster"):
        amount = f"the {fmt_ms(abs(difference))} difference" if difference is not None else "it"
        sentence += f"; no finding explains {amount}"
    return VerdictView(name, stack, variant, precision, tone, speedup, bound, cause, basis, sentence + ".")


def no_verdict(name: str, rows: Sequence[RunRow]) -> VerdictView:
    """A machine on which the analysis could pair no 16-bit run with a float32 run."""
    failed = [r for r in rows if r.status != "ok"]
    why = f" ({len(failed)} of {len(rows)} runs did not complete)" if failed else ""
    return VerdictView(
        name, "", "original", None, "unknown", None, False, None, None,
        f"On {name}, no float32 run and 16-bit run both completed, so there is no ratio to report{why}.",
    )


def machine_verdicts(
    name: str, key: str, rows: Sequence[RunRow], verdicts: Sequence[Mapping[str, Any]],
    findings: Sequence[Mapping[str, Any]],
) -> list[VerdictView]:
    """The verdicts on one machine (`key` as results.machine_key gives it: "" for the results' own host)."""
    mine = [v for v in verdicts if (_text(v.get("machine")) or HOST_MACHINE) == (key or HOST_MACHINE)]
    if not mine:
        return [no_verdict(name, rows)]
    return [verdict_view(name, v, findings) for v in mine]


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
                explains_ms=_num(f.get("explains_ms")),
                basis=BASIS_LABEL.get(str(f.get("basis"))),
                scope=_finding_scope(f),
                ops=tuple(_finding_ops(f)),
            )
        )
    return views


def pass_label(value: Any) -> str:
    return _text(value).replace("_", " ")


def _finding_scope(finding: Mapping[str, Any]) -> str:
    """The run a speed finding speaks of, in words: "float16 vs float32, stack tf2.21, on gpu-node"."""
    precision = _text(finding.get("precision"))
    if not precision:
        return ""
    parts = [f"{precision} vs float32"]
    stack = _text(finding.get("stack"))
    if stack and stack != "host":
        parts.append(f"stack {stack}")
    variant = _text(finding.get("variant"))
    if variant and variant != "original":
        parts.append(variant)
    machine = _text(finding.get("machine"))
    if machine and machine != HOST_MACHINE:
        parts.append(f"on {machine}")
    return ", ".join(parts)


FINDING_OPS = 5  # a finding lists its biggest ops; "Where the time went" has the rest


def _finding_ops(finding: Mapping[str, Any]) -> list[FindingOpView]:
    out = []
    for op in _list(finding.get("ops"))[:FINDING_OPS]:
        if not isinstance(op, dict):
            continue
        where = " ".join(p for p in (_text(op.get("layer")) or _text(op.get("name")), pass_label(op.get("pass"))) if p)
        out.append(FindingOpView(where or "?", _text(op.get("impl")), _text(op.get("dtype")),
                                 _num(op.get("ms_per_step")), _num(op.get("float32_ms_per_step"))))
    return out


# ---------------------------------------------------------------------------------------- where the time went

TOP_OPS = 12  # rows per table; the rest are summed into one
WINDOW_WORDS = {
    "after_timing": "a profiled window after the timed steps",
    "first_step": "the first step of a run cut short (its only step, profiled)",
    "bound_step": "the warm-up step that cut the run short (its measured step, profiled)",
}


def _window_words(side: OpsSide) -> str:
    words = WINDOW_WORDS.get(side.window_kind or "", "a profiled window")
    if side.window_steps and side.window_kind not in ("first_step", "bound_step"):
        words += f" ({side.window_steps} step{'s' if side.window_steps != 1 else ''})"
    return words


def _impl_text(impls: Sequence[str], limit: int = 2) -> str:
    shown = [_text(i) for i in impls[:limit]]
    more = f" +{len(impls) - limit}" if len(impls) > limit else ""
    return ", ".join(shown) + more


def _op_row(row: OpDiff, biggest: float, is_rest: bool) -> OpRowView:
    def bar(ms: float | None) -> float:
        return round(100.0 * (ms or 0.0) / biggest, 1) if biggest > 0 else 0.0

    tc = "" if row.tensor_cores is None else ("yes" if row.tensor_cores else "no")
    return OpRowView(
        layer=_text(row.layer),
        pass_label=pass_label(row.pass_),
        fp32_ms=row.fp32_ms,
        reduced_ms=row.reduced_ms,
        difference_ms=row.difference_ms,
        impl=_impl_text(row.impls),
        fp32_impl=_impl_text(row.fp32_impls),
        tensor_cores=tc,
        dtype=_text(", ".join(row.dtypes)),
        ops=row.ops,
        rows=row.rows,
        is_rest=is_rest,
        fp32_bar_pct=bar(row.fp32_ms),
        reduced_bar_pct=bar(row.reduced_ms),
    )


def time_table(anchor: str, comparison: OpComparison) -> TimeTableView:
    head, rest = comparison.top(TOP_OPS)
    shown = [*head, *([rest] if rest else [])]
    biggest = max([max(r.reduced_ms or 0.0, r.fp32_ms or 0.0) for r in shown], default=0.0)
    reduced, fp32 = comparison.reduced, comparison.fp32
    notes = []
    if fp32 is None:
        notes.append("The float32 run has no measured ops, so only the 16-bit side is shown.")
    for label, side in (("16-bit", reduced), ("float32", fp32)):
        if side is not None and side.coverage is not None and side.coverage < LOW_COVERAGE:
            notes.append(
                f"Low coverage: the {label} run's listed ops account for only {side.coverage:.0%} of its window's "
                "wall time; the rest of that step is not attributed to any op."
            )
    window = f"{_text(comparison.precision)}: {_window_words(reduced)}"
    if fp32 is not None:
        window += f"; float32: {_window_words(fp32)}"
    return TimeTableView(
        anchor=anchor,
        precision=_text(comparison.precision),
        stack=_text(comparison.stack),
        variant=_text(comparison.variant),
        step_ms=comparison.step_ms,
        fp32_step_ms=comparison.fp32_step_ms,
        bound=comparison.bound,
        source=_text(reduced.source) or "unknown",
        fp32_source=_text(fp32.source) if fp32 is not None else "",
        coverage=reduced.coverage,
        fp32_coverage=fp32.coverage if fp32 is not None else None,
        low_coverage=comparison.low_coverage,
        window=window,
        notes=notes,
        rows=[_op_row(r, biggest, r is rest) for r in shown],
        reduced_total_ms=reduced.total_ms,
        fp32_total_ms=fp32.total_ms if fp32 is not None else None,
    )


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
        # The list as a whole: a secret flag's value is the next word (`--script-arg=--token`, `--script-arg=X`).
        return ReproduceView(shlex.join(["fp16doctor", *(str(a) for a in redact(argv[1:]))]), notes)
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
        precisions=sorted({r.precision for r in ok}, key=precision_rank),
    )


def _document_view(index: int, doc: Mapping[str, Any], used_names: dict[str, int], sources: Sources) -> DocumentView:
    analysis = decided(doc, sources)
    findings = analysis.findings
    predicted = sources.roofline(dict(doc))
    comparisons = op_comparisons(doc)
    groups = group_runs_by_machine(_runs(doc))
    if not groups:
        groups[""] = []
    machines: list[MachineView] = []
    all_rows: list[RunRow] = []
    names: dict[str, str] = {}
    for m_index, (key, runs) in enumerate(groups.items()):
        name, details = _machine_name(doc, key, runs)
        used_names[name] = used_names.get(name, 0) + 1
        if used_names[name] > 1:
            name = f"{name} (#{used_names[name]})"
        names[key or HOST_MACHINE] = name
        rows = [_run_row(r, _engine_label(r)) for r in runs]
        # The engine column only matters when one machine ran the same cell on several engines.
        engines = {r.engine for r in rows if r.engine}
        if len(engines) <= 1:
            rows = [replace(r, engine="") for r in rows]
        rows = _ordered(_with_speedups(rows))
        all_rows += rows
        anchor = f"machine-{index + 1}-{m_index + 1}"
        mine = [c for c in comparisons if c.machine == (key or HOST_MACHINE)]
        machines.append(
            MachineView(
                anchor=anchor,
                name=name,
                details=details,
                verdicts=machine_verdicts(name, key, rows, analysis.verdicts, findings),
                rows=rows,
                show_engine=len(engines) > 1,
                show_variant=any(r.variant != "original" for r in rows),
                charts=_machine_charts(rows, predicted),
                time_tables=[time_table(f"{anchor}-time-{i + 1}", c) for i, c in enumerate(mine)],
            )
        )
    software_by_stack: dict[str, dict[str, Any]] = {}
    for run in _runs(doc):
        software_by_stack.setdefault(str(run.get("stack")), _dict(run.get("software")))
    judged = [v.stack for m in machines for v in m.verdicts if v.precision is not None]
    default_stack = judged[0] if judged else (all_rows[0].stack if all_rows else None)
    tool = _dict(doc.get("tool"))
    return DocumentView(
        anchor=f"results-{index + 1}",
        title=" + ".join(m.name for m in machines),
        created=_text(doc.get("created")) or None,
        tool_version=_text(tool.get("version")) or None,
        note=_text(doc.get("note")) or None,
        machines=machines,
        findings=_finding_views(findings, software_by_stack, default_stack),
        findings_source=analysis.findings_source,
        prescriptions=prescription_views(analysis.prescriptions, names),
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
                out.append(ComparisonRow(m.name, f"{stack} · {engine}" if engine else stack, variant, times))
    return out


def comparison_precisions(rows: Sequence[ComparisonRow]) -> list[str]:
    seen = {p for r in rows for p in r.times_ms if p != "float32"}
    return sorted(seen | set(COMPARISON_ALWAYS), key=precision_rank)


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
        headline=[v for m in machines for v in m.verdicts],
        documents=documents,
        prescriptions=[p for d in documents for p in d.prescriptions],
        comparison=comparison,
        comparison_precisions=comparison_precisions(comparison),
        comparison_chart=charts.step_time_chart(comparison_bars, "Median step time on every machine"),
        results_json=embed_json(docs),
    )
