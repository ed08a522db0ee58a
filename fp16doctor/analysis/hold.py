"""Every finding's advice held to the measured table of its machine and stack: a finding that recommends a
configuration says what was measured of it there, or lists it untested with the command that measures it, so no
advice contradicts the prescription (prescribe.py decides that; this module holds the findings to it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fp16doctor.analysis.advice import (
    CONFIGURATION_KINDS,
    OWN,
    PRESCRIBED,
    Unmeasurable,
    advice_of,
    measured_entry,
    phrase_remedy,
    precision_applies,
    variant_applies,
)
from fp16doctor.analysis.configs import ADOPTABLE, Finding, adopted_variant, setting_of
from fp16doctor.analysis.context import Context, RunView, Software
from fp16doctor.analysis.prescribe import Prescription
from fp16doctor.analysis.untested import diagnose_command, no_command_why
from fp16doctor.analysis.values import as_list, as_mapping, as_str


def _prescription_for(machine: str, stack: str, prescriptions: Sequence[Prescription]) -> Prescription | None:
    """The one prescription of this machine and stack (never another machine's of the same stack name)."""
    return next((p for p in prescriptions if p["machine"] == machine and p["stack"] == stack), None)


def _wheres(ctx: Context, finding: Finding) -> list[tuple[str, str]]:
    """The machines and stacks a finding speaks of: its own pair's, the rule's `where`, else every machine that
    ran one of its stacks."""
    machine, stack = finding.get("machine"), finding.get("stack")
    if isinstance(machine, str) and isinstance(stack, str):
        return [(machine, stack)]
    listed = [(str(w.get("machine")), str(w.get("stack"))) for w in as_list(finding.get("where"))
              if isinstance(w, Mapping) and w.get("machine") and w.get("stack")]
    if listed:
        return list(dict.fromkeys(listed))
    stacks = [str(s) for s in as_list(finding.get("stacks"))] or ([stack] if isinstance(stack, str) else [])
    return list(dict.fromkeys((r.machine, r.stack) for r in ctx.runs if not stacks or r.stack in stacks))


def _fp32_of(ctx: Context, prescription: Prescription) -> RunView:
    """The run the prescription is against (float32 as written, or its 16-bit baseline)."""
    base = prescription.get("baseline") or "float32"
    return next(r for r in ctx.ok_runs() if r.machine == prescription["machine"] and r.stack == prescription["stack"]
                and r.precision == base and r.variant == "original" and not r.experiment)


def _list_untested(prescription: Prescription, idea: dict[str, Any]) -> dict[str, Any]:
    """The machine's untested entry for an idea (added once): every remedy named and not measured is listed."""
    key = (idea.get("precision"), idea.get("variant") or "original", idea.get("setting"))
    for known in prescription["untested"]:
        if (known.get("precision"), known.get("variant") or "original", known.get("setting")) == key:
            return dict(known)
    prescription["untested"].append(idea)
    return idea


def _precision_cannot(prescription: Prescription, precision: str, sw: Software) -> str | None:
    """Why a precision cannot be measured on this stack, by the tables; never where this machine and stack measured
    it (a document that states no version is no stack without mixed precision: unknown is unknown)."""
    if any(m.get("precision") == precision for m in prescription.get("measured") or []):
        return None
    return precision_applies(precision, sw)


def _ideas_for(ctx: Context, finding: Finding, prescription: Prescription, target: tuple[str, str] | None,
               ) -> tuple[tuple[str, str] | None, list[dict[str, Any]]]:
    """The finding's target where it can be measured on this stack, and every idea it names that nobody measured
    there, each entered in the machine's untested list (with the command that measures it, or why none can)."""
    fp32 = _fp32_of(ctx, prescription)
    sw, script = fp32.software, fp32.workload_name == "script"
    why = str(finding.get("title") or finding.get("id"))
    ideas: list[dict[str, Any]] = []
    wanted: list[tuple[str, str, str, str | None]] = []  # precision, variant, why, why no variant measures it
    if (target is not None and measured_entry(prescription, *target) is None
            and not all(fp32.advice_applies(a) for a in advice_of(*target))):
        target = None  # unmeasured advice this run's mode or library has no use for (knowledge/modes.py)
    if target is not None:
        precision, variant = target
        if variant not in ADOPTABLE:
            # A control (batches in memory) is no configuration to adopt: what it measured speaks for the precision
            # as the user runs it, which the table holds.
            variant = "original"
            target = (precision, variant)
        if variant != "original" and _precision_cannot(prescription, precision, sw) is not None:
            # A stack without mixed precision measures the switch in its pure 16-bit type (floatx).
            precision = precision.removeprefix("mixed_")
            target = (precision, variant)
        cannot = _precision_cannot(prescription, precision, sw) or (variant_applies(variant, sw, script)
                                                      if variant != "original" else None)
        if cannot is not None:
            ideas.append(_list_untested(prescription, Unmeasurable(
                precision, setting_of(variant), why, cannot, variant).to_dict()))
            target = None
        elif measured_entry(prescription, precision, variant) is None:
            wanted.append((precision, variant, why, None))
    for raw in as_list(finding.get("remedy_ideas")):
        idea = as_mapping(raw)
        if idea.get("machine") not in (None, prescription["machine"]):
            continue  # an idea of another machine's hardware
        if not all(fp32.advice_applies(a) for a in advice_of(as_str(idea.get("precision")),
                                                             as_str(idea.get("variant")), as_str(idea.get("advice")))):
            continue  # training-only advice for inference, a framework's switch for an inference-only library
        if idea.get("no_command"):
            ideas.append(_list_untested(prescription, Unmeasurable(
                as_str(idea.get("precision")) or str(finding.get("precision") or "float16"),
                as_str(idea.get("setting")), str(idea.get("why")), str(idea["no_command"])).to_dict()))
            continue
        precision = as_str(idea.get("precision")) or str(finding.get("precision") or "float32")
        variant = as_str(idea.get("variant")) or "original"
        if measured_entry(prescription, precision, variant) is not None:
            continue  # measured: the table speaks for it
        cannot = (variant_applies(variant, sw, script) if variant != "original"
                  else _precision_cannot(prescription, precision, sw))
        wanted.append((precision, variant, str(idea.get("why") or why), cannot))
    for precision, variant, reason, cannot in wanted:
        if cannot is not None:
            entry = Unmeasurable(precision, setting_of(variant), reason, cannot, variant).to_dict()
        else:
            switch = None if variant == "original" else variant
            command = diagnose_command(ctx, fp32, precision, switch)
            entry = {"precision": precision, "variant": variant, "setting": setting_of(variant), "why": reason,
                     "command": command,
                     **({} if command else {"no_command": no_command_why(ctx, fp32, precision, switch)})}
        listed = _list_untested(prescription, entry)
        if (precision, variant) != (target or ("", "")):
            ideas.append(listed)
    return target, ideas


def hold_advice(ctx: Context, findings: list[Finding], prescriptions: Sequence[Prescription],
                recommends: Mapping[str, tuple[str, str]], remedies: Mapping[str, str]) -> None:
    """Every finding's what-to-do, phrased once (advice.phrase_remedy) for each machine and stack it speaks of,
    from that machine's measured table: a configuration's remedy carries `recommends` (what it recommends there,
    measured or not), and one whose configuration measured slower than the prescription says so and recommends
    the prescription instead (`instead_of` keeps what it set aside); an idea nobody measured is listed in the
    machine's untested entries."""
    for finding in findings:
        fid = str(finding.get("id"))
        kind = remedies.get(fid, "none")
        spec_target = recommends.get(fid)
        target: tuple[str, str] | None = spec_target
        if spec_target == PRESCRIBED:
            target = None
        elif spec_target == OWN:
            own = finding.get("precision")
            target = (str(own), adopted_variant(str(finding.get("variant") or "original"))) if own else None
        # A finding that names its own configuration is the prescription's evidence where that one was chosen.
        explicit = target is not None and (spec_target != OWN or kind == "setting")
        context = str(finding.get("recommendation") or "").strip()
        code = str(finding.pop("remedy_code", "") or "")
        wheres = _wheres(ctx, finding)
        lines: list[str] = []
        per_machine: list[dict[str, Any]] = []
        show_code = True
        for machine, stack in wheres:
            prescription = _prescription_for(machine, stack, prescriptions)
            there: tuple[str, str] | None = target
            ideas: list[dict[str, Any]] = []
            if prescription is not None:
                there, ideas = _ideas_for(ctx, finding, prescription, target)
            if kind in CONFIGURATION_KINDS:
                phrased = phrase_remedy(kind, there, ctx.place(machine, stack), prescription, ideas)
            else:
                phrased = phrase_remedy(kind, None, ctx.place(machine, stack), None, ideas)
            if kind in CONFIGURATION_KINDS:  # a configuration's code only where it is not beaten nor replaced there
                show_code = show_code and phrased.show_code and (target is None or there is not None)
            if phrased.text:
                lines.append(phrased.text)
            per_machine.append({"machine": machine, "stack": stack, "recommends": phrased.recommends,
                                "instead_of": phrased.instead_of})
            if (kind in CONFIGURATION_KINDS and explicit and prescription is not None and phrased.instead_of is None
                    and phrased.recommends is not None and phrased.recommends["measured_speedup"] is not None):
                _mark_prescribed(finding, prescription, phrased.recommends)
        finding.pop("remedy_ideas", None)
        finding["remedy"] = {"kind": kind, "machines": per_machine, "show_code": show_code}
        first = next((m for m in per_machine if m["recommends"] is not None), None)
        if kind in CONFIGURATION_KINDS and first is not None:
            finding["recommends"] = {k: v for k, v in first["recommends"].items()
                                     if k != "speedup_interval" or v is not None}
            if first["instead_of"] is not None:
                finding["instead_of"] = first["instead_of"]
                if fid == "framework_setting":  # the switch is all it recommends: measured end to end, it loses
                    finding["severity"] = "info"
                    context = ""  # its own words set the switch
        if kind not in CONFIGURATION_KINDS and context:
            named = [ctx.place(m, s) for m, s in wheres]
            if any(named) or not wheres:
                context = f"On {', '.join(n for n in named if n) or 'every machine'}: {context}"
        parts = [*lines, context] if kind in CONFIGURATION_KINDS else [context, *lines]
        text = "\n".join(p for p in parts if p)
        if code and show_code:
            text += "\n" + code
        finding["recommendation"] = text


def _mark_prescribed(finding: Finding, prescription: Prescription, recommends: Mapping[str, Any]) -> None:
    chosen = prescription["recommended"]
    entry = measured_entry(prescription, str(recommends["precision"]), str(recommends["variant"]))
    baseline = next((m for m in prescription["measured"] if m["outcome"] == "baseline"), None)
    if entry is not None and entry["outcome"] == "faster" and baseline is not None and entry["step_ms"]:
        finding["saves_ms"] = round(baseline["step_ms"] - entry["step_ms"], 3)
    if (chosen["precision"], chosen["variant"]) == (recommends["precision"], recommends["variant"]):
        finding["prescribed"] = True
