"""A prescription as the analysis hands it to every output: frozen, typed, and the same data results.json keeps.

prescribe.py decides (one draft per machine and stack, which hold.py and the rules then hold the findings to);
`Prescription.of` turns a draft, or a prescription a saved document kept, into this; `to_dict` writes it back in
the shape docs/results-schema.md documents (`of(p.to_dict()) == p`). The answer and the renderers read these
fields; none of them reads a prescription's dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.intervals import AACheck
from fp16doctor.analysis.record import frozen, text, thawed
from fp16doctor.analysis.values import NOT_COMPARED, ShownRatio, UntestedIdea, as_list, as_mapping, as_number
from fp16doctor.analysis.words import config_notes


def _interval(value: Any) -> tuple[float, float] | None:
    """`[low, high]` as saved; None where absent or not two numbers."""
    pair = [as_number(v) for v in as_list(value)]
    return (pair[0], pair[1]) if len(pair) == 2 and pair[0] is not None and pair[1] is not None else None


def _aa_dict(aa: AACheck) -> dict[str, Any]:
    """The check as it was saved: `noise` as kept (AACheck.to_dict rounds a fresh one)."""
    return {"passed": aa.passed, "noise": aa.noise, "reason": aa.reason, **({"control": aa.control} if aa.control
                                                                            else {})}




@dataclass(frozen=True)
class Against:
    """A change against the run it changes as written (`measured[].against`), float32's A/A control judging it."""

    precision: str  # the run it is against: the same precision as written (float32 for a float32 change)
    step_ms: float | None
    base_step_ms: float | None
    speedup: float | None
    speedup_interval: tuple[float, float] | None
    outcome: str
    interval_method: str | None
    bound: bool
    notes: tuple[str, ...]
    aa_check: AACheck | None = None
    comparison_refused: str | None = None

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Against:
        return cls(str(entry.get("precision") or ""), as_number(entry.get("step_ms")),
                   as_number(entry.get("base_step_ms")), as_number(entry.get("speedup")),
                   _interval(entry.get("speedup_interval")), str(entry.get("outcome") or ""),
                   text(entry.get("interval_method")), entry.get("bound") is True,
                   tuple(str(n) for n in as_list(entry.get("notes"))), AACheck.of(entry.get("aa_check")),
                   text(entry.get("comparison_refused")))

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "step_ms": self.step_ms, "base_step_ms": self.base_step_ms,
                "speedup": self.speedup,
                "speedup_interval": list(self.speedup_interval) if self.speedup_interval else None,
                "outcome": self.outcome, "interval_method": self.interval_method,
                **({"aa_check": _aa_dict(self.aa_check)} if self.aa_check is not None else {}),
                **({"comparison_refused": self.comparison_refused} if self.comparison_refused else {}),
                "bound": self.bound, "notes": list(self.notes)}


@dataclass(frozen=True)
class MeasuredRow:
    """One configuration measured on the prescription's machine and stack, against its baseline (`measured[]`)."""

    precision: str
    variant: str
    setting: str | None
    step_ms: float | None
    speedup: float | None  # baseline step / this step; 1.0 for the baseline
    speedup_interval: tuple[float, float] | None  # None for the baseline, which is no comparison
    outcome: str  # "baseline" | "faster" | "slower" | "no_significant_difference"
    bound: bool  # cut short by the slow-step bound: its ratio is a one-sided bound
    caveat: str | None
    unsafe: str | None  # why it may not be recommended
    notes: tuple[str, ...]  # every output's words beside its time
    interval_method: str | None = None
    aa_check: AACheck | None = None
    comparison_refused: str | None = None  # why it was not compared (timed apart): no figure at all
    against: Against | None = None

    @property
    def config(self) -> str:
        """'float16', 'float16 with TF_ENABLE_ONEDNN_OPTS=0': the configuration as every output names it."""
        return self.precision + (f" with {self.setting}" if self.setting else "")

    @property
    def is_baseline(self) -> bool:
        return self.outcome == "baseline"

    def versus(self) -> str:
        """Against the baseline as every output says it: "2.19x faster (2.08-2.30x)", "the baseline", "not
        compared"."""
        if self.is_baseline or not self.speedup or self.speedup <= 0:
            return "the baseline"
        if self.comparison_refused:
            return NOT_COMPARED
        shown = ShownRatio.of(self.speedup, self.speedup_interval, self.outcome, method=self.interval_method,
                              aa={"passed": self.aa_check.passed} if self.aa_check is not None else None)
        return shown.versus() if shown is not None else "the baseline"

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> MeasuredRow:
        # A file saved before `notes` was kept gets the same words from the fields.
        saved = entry.get("notes")
        notes = ([str(n) for n in saved] if isinstance(saved, list)
                 else config_notes(entry.get("unsafe"), entry.get("caveat"), entry.get("bound") is True))
        against = entry.get("against")
        return cls(str(entry.get("precision") or ""), str(entry.get("variant") or "original"),
                   text(entry.get("setting")), as_number(entry.get("step_ms")), as_number(entry.get("speedup")),
                   _interval(entry.get("speedup_interval")), str(entry.get("outcome") or ""),
                   entry.get("bound") is True, text(entry.get("caveat")), text(entry.get("unsafe")),
                   tuple(notes), text(entry.get("interval_method")), AACheck.of(entry.get("aa_check")),
                   text(entry.get("comparison_refused")),
                   Against.of(against) if isinstance(against, Mapping) else None)

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "variant": self.variant, "setting": self.setting,
                "step_ms": self.step_ms, "speedup": self.speedup,
                "speedup_interval": list(self.speedup_interval) if self.speedup_interval else None,
                "outcome": self.outcome,
                **({"interval_method": self.interval_method} if self.interval_method else {}),
                **({"aa_check": _aa_dict(self.aa_check)} if self.aa_check is not None else {}),
                **({"comparison_refused": self.comparison_refused} if self.comparison_refused else {}),
                "bound": self.bound, "caveat": self.caveat, "unsafe": self.unsafe, "notes": list(self.notes),
                **({"against": self.against.to_dict()} if self.against is not None else {})}


@dataclass(frozen=True)
class Recommended:
    """What to use there (`recommended`): the fastest measured safe configuration, with how to turn it on."""

    precision: str
    variant: str
    setting: str | None
    step_ms: float | None
    speedup: float | None
    speedup_interval: tuple[float, float] | None
    how: str
    caveat: str | None

    @property
    def changes_something(self) -> bool:
        """A 16-bit precision or a switched setting: not float32 as written (the headline's tone)."""
        return self.precision != "float32" or bool(self.setting)

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Recommended:
        return cls(str(entry.get("precision") or ""), str(entry.get("variant") or "original"),
                   text(entry.get("setting")), as_number(entry.get("step_ms")), as_number(entry.get("speedup")),
                   _interval(entry.get("speedup_interval")), str(entry.get("how") or ""), text(entry.get("caveat")))

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "variant": self.variant, "setting": self.setting,
                "step_ms": self.step_ms, "speedup": self.speedup,
                "speedup_interval": list(self.speedup_interval) if self.speedup_interval else None,
                "how": self.how, "caveat": self.caveat}


@dataclass(frozen=True)
class Untested:
    """A configuration nobody measured there (`untested[]`), with the command that measures it or why diagnose
    cannot; `idea` is how every output says it."""

    precision: str
    variant: str | None
    setting: str | None
    why: str
    command: str | None
    no_command: str | None = None
    source: str | None = None  # `from`: the finding that named it

    @property
    def idea(self) -> UntestedIdea:
        return UntestedIdea(self.precision + (f" with {self.setting}" if self.setting else ""), self.why,
                            self.command or "", self.no_command or "")

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Untested:
        return cls(str(entry.get("precision") or ""), text(entry.get("variant")), text(entry.get("setting")),
                   str(entry.get("why") or ""), text(entry.get("command")),
                   text(entry.get("no_command")), text(entry.get("from")))

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "variant": self.variant, "setting": self.setting, "why": self.why,
                "command": self.command, **({"no_command": self.no_command} if self.no_command is not None else {}),
                **({"from": self.source} if self.source is not None else {})}


@dataclass(frozen=True)
class UserChange:
    """A change to the user's code beyond a precision (`user_changes[]`): the input pipeline, a backend, compiled
    execution, the batch's bytes. `facts` keeps the kind's own fields as saved; words.change_words says it."""

    kind: str
    how: str
    cost: str
    basis: str | None  # "untested" where nobody measured it (its command is then an untested configuration too)
    in_memory: tuple[Mapping[str, Any], ...]  # each precision's ratio with batches in memory
    facts: Mapping[str, Any]

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> UserChange:
        facts = frozen(entry)
        return cls(str(entry.get("kind") or ""), str(entry.get("how") or ""), str(entry.get("cost") or ""),
                   text(entry.get("basis")), tuple(m for m in as_list(facts.get("in_memory"))
                                                     if isinstance(m, Mapping)), facts)

    def to_dict(self) -> dict[str, Any]:
        return dict(thawed(self.facts))


@dataclass(frozen=True)
class Prescription:
    """What to run on one machine and stack, and the measured table it was chosen from."""

    machine: str
    stack: str
    device: str | None
    baseline: str  # what the table's ratios are against: float32, or the fastest 16-bit type where none ran
    recommended: Recommended
    measured: tuple[MeasuredRow, ...]  # fastest first
    untested: tuple[Untested, ...]
    user_changes: tuple[UserChange, ...]
    headline: str
    # The decision that it is not settled (a busy machine left the comparison that would change it unsettled) and
    # the busiest contention its configurations were timed under: data the headline says.
    unsettled: Mapping[str, Any] | None = None
    contention: Mapping[str, Any] | None = None

    def measured_of(self, precision: str, variant: str) -> MeasuredRow | None:
        return next((m for m in self.measured if (m.precision, m.variant) == (precision, variant)), None)

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Prescription:
        unsettled, contention = entry.get("unsettled"), entry.get("contention")
        return cls(str(entry.get("machine") or ""), str(entry.get("stack") or ""), text(entry.get("device")),
                   str(entry.get("baseline") or "float32"), Recommended.of(as_mapping(entry.get("recommended"))),
                   tuple(MeasuredRow.of(m) for m in as_list(entry.get("measured")) if isinstance(m, Mapping)),
                   tuple(Untested.of(u) for u in as_list(entry.get("untested")) if isinstance(u, Mapping)),
                   tuple(UserChange.of(c) for c in as_list(entry.get("user_changes")) if isinstance(c, Mapping)),
                   str(entry.get("headline") or ""),
                   frozen(unsettled) if isinstance(unsettled, Mapping) else None,
                   frozen(contention) if isinstance(contention, Mapping) else None)

    def to_dict(self) -> dict[str, Any]:
        return {"machine": self.machine, "stack": self.stack, "device": self.device, "baseline": self.baseline,
                "recommended": self.recommended.to_dict(), "measured": [m.to_dict() for m in self.measured],
                "untested": [u.to_dict() for u in self.untested],
                "user_changes": [c.to_dict() for c in self.user_changes], "headline": self.headline,
                **({"unsettled": thawed(self.unsettled)} if self.unsettled is not None else {}),
                **({"contention": thawed(self.contention)} if self.contention is not None else {})}


__all__ = ["Against", "MeasuredRow", "Prescription", "Recommended", "Untested", "UserChange"]
