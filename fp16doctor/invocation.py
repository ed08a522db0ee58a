"""Whether `fp16doctor diagnose` accepts a request: one pure check, used by diagnose on what the user typed and by
the analysis on every command it prints ("untested: this command measures it"), so no printed command is one that
diagnose refuses.

Pure: it reads names (precisions, variants from workload/protocol.py; each engine's options and what it refuses
of them from their declaration, engines/option_table.py; stack names as the caller passes them, since the catalogue
is read from a file a layer above) and creates, probes and contacts nothing. What needs the machine
(a Docker engine answering, a script compiling, an --out folder being writable) stays with diagnose.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from fp16doctor.engines import option_table
from fp16doctor.engines.options import ADD_STACK, EngineOption, EngineOptions, Said
from fp16doctor.workload.protocol import (
    PRECISIONS,
    SCRIPT_VARIANTS,
    SIZES,
    VARIANT_LABEL_SEP,
    VARIANTS,
    variant_clash,
    variant_parts,
)

# diagnose's own options, as its command line declares them (cli.py; a test holds the two together). Each engine's
# come from its declaration (engines/option_table.ENGINE_OPTIONS), read when a command line is checked.
VALUE_OPTIONS = frozenset({
    "--out", "--stack", "--precision", "--variant", "--data", "--ca-bundle", "--wheelhouse", "--python", "--script",
    "--script-arg", "--steps", "--size", "--budget", "--rounds",
})
FLAG_OPTIONS = frozenset({
    "--quick", "--full", "--no-experiments", "--keep-profiles", "--no-host", "--force", "--resume", "--json",
    "--plan", "--verbose", "--help",
})
SHORT_OPTIONS = {"-o": "--out", "-q": "--quick", "-s": "--stack", "-p": "--precision", "-v": "--verbose"}
SCRIPT_ONLY = ("--steps", "--script-arg")  # they apply to the user's own script


def engine_options() -> list[tuple[type[EngineOptions], EngineOption]]:
    """Every engine's options, each with its engine's options class, in the table's order."""
    return [(cls, o) for cls in option_table.ENGINE_OPTIONS for o in cls.declared()]


def diagnose_options() -> tuple[frozenset[str], frozenset[str]]:
    """(the options that take a value, the flags): diagnose's own and every engine's."""
    engines = [o for _, o in engine_options()]
    return (VALUE_OPTIONS | {o.flag for o in engines if o.takes_value},
            FLAG_OPTIONS | {o.flag for o in engines if not o.takes_value})


@dataclass(frozen=True)
class Refusal:
    """Why diagnose refuses a request: one line of message, one of hint (a DoctorError's, exit status 2)."""

    message: str
    hint: str


@dataclass(frozen=True)
class DiagnoseRequest:
    """What a diagnose invocation asks for, as far as its acceptance depends on it."""

    stacks: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    script: bool = False
    include_host: bool = True
    given: frozenset[str] = frozenset()  # every option named, e.g. "--steps", "--quick", "--slurm"
    sizes: tuple[str, ...] = ()  # --size's values


def parse_diagnose(argv: Sequence[str]) -> DiagnoseRequest | Refusal:
    """A `fp16doctor diagnose ...` command line (with or without its first two words) as a request; an option
    diagnose does not have, or one missing its value, is refused."""
    args = list(argv)
    if args[:2] == ["fp16doctor", "diagnose"]:
        args = args[2:]
    elif args[:1] == ["diagnose"]:
        args = args[1:]
    value_options, flag_options = diagnose_options()
    values: dict[str, list[str]] = {}
    given: set[str] = set()
    i = 0
    while i < len(args):
        arg = SHORT_OPTIONS.get(args[i], args[i])
        name, eq, inline = arg.partition("=")
        if name in value_options:
            if eq:
                value = inline
            elif i + 1 < len(args):
                i += 1
                value = args[i]
            else:
                return Refusal(f"{name} needs a value", hint=f"write {name} VALUE")
            values.setdefault(name, []).append(value)
        elif arg in flag_options:
            pass
        else:
            return Refusal(f"diagnose has no option {arg!r}", hint="see `fp16doctor diagnose --help`")
        given.add(name)
        i += 1
    return DiagnoseRequest(
        stacks=tuple(values.get("--stack", ())), precisions=tuple(values.get("--precision", ())),
        variants=tuple(values.get("--variant", ())), script="--script" in given,
        include_host="--no-host" not in given, given=frozenset(given), sizes=tuple(values.get("--size", ())))


def refusal(request: DiagnoseRequest, known_stacks: Collection[str] | None = None) -> Refusal | None:
    """Why diagnose refuses the request before it probes anything, or None where it accepts it. `known_stacks`:
    the catalogue's names (None: not checked here)."""
    for p in request.precisions:
        if p not in PRECISIONS:
            return Refusal(f"unknown precision {p!r}", hint=f"use one of: {', '.join(PRECISIONS)}")
    for v in request.variants:
        clash = variant_clash(v)
        if clash is not None:
            return Refusal(clash, hint=f"use one of: {', '.join(VARIANTS)}, or several joined by "
                           f"'{VARIANT_LABEL_SEP}' that change different things "
                           f"(synthetic_input{VARIANT_LABEL_SEP}xla)")
    if known_stacks is not None:
        for name in request.stacks:
            if name not in known_stacks:
                return Refusal(f"unknown stack {name!r}", hint="known stacks: " + ", ".join(known_stacks))
    sizes = {s for s in ("quick", "full") if f"--{s}" in request.given} | set(request.sizes)
    unknown = sorted(s for s in request.sizes if s not in SIZES)
    if unknown:
        return Refusal(f"unknown size {unknown[0]!r}", hint=f"use one of: {', '.join(SIZES)}")
    if len(sizes) > 1:
        return Refusal(f"--{' and --'.join(sorted(sizes))} contradict each other", hint="pass one size")
    # The order is the order diagnose says them in, one refusal at a time.
    refused = _engine_refusal(request, "unselected")
    if refused is not None:
        return refused
    script_only = [o for o in SCRIPT_ONLY if o in request.given]
    if script_only and not request.script:
        return Refusal("--steps and --script-arg apply to your own script", hint="add --script train.py")
    combined = next((v for v in request.variants if len(variant_parts(v)) > 1), None)
    if request.script and combined is not None:
        return Refusal(f"--variant {combined}: a script's run takes one change at a time",
                       hint=f"pass each as a --variant of its own: {', '.join(variant_parts(combined))}")
    other = next((v for v in request.variants if v not in SCRIPT_VARIANTS), None)
    if request.script and other is not None:
        return Refusal(f"--variant {other} changes the built-in workload's model or data, not a script's",
                       hint=f"with --script use one of: {', '.join(SCRIPT_VARIANTS)}")
    refused = _engine_refusal(request, "stacks_only")
    if refused is not None:
        return refused
    if not request.include_host and not request.stacks:
        return Refusal("--no-host without --stack leaves nothing to run", hint="add --stack cpu (or another)")
    for rule in ("exclusive", "needs_stack", "engine"):
        refused = _engine_refusal(request, rule)
        if refused is not None:
            return refused
    return None


def _engine_refusal(request: DiagnoseRequest, rule: str) -> Refusal | None:
    """What one rule refuses of the engines' options, in the engines' words (engines/options.EngineOptions):
    "unselected", an option of an engine whose selector is missing ("--gres applies to Slurm jobs"); "stacks_only",
    an option of an engine that runs only stacks, with none; "exclusive", another engine's option beside a selected
    engine that runs every cell; "needs_stack", an option that needs a stack; "engine", what a selected engine
    cannot run."""
    selected = [cls for cls in option_table.ENGINE_OPTIONS if cls.selector is None or cls.selector in request.given]
    exclusive = next((cls for cls in selected if cls.selector is not None and cls.exclusive is not None), None)
    if rule == "engine":
        said = next((s for s in (cls().refusal(stacks=bool(request.stacks), script=request.script)
                                 for cls in selected) if s is not None), None)
        return None if said is None else Refusal(*said)
    for cls, opt in engine_options():
        if opt.flag in request.given and opt.flag != cls.selector:
            said = _not_applying(cls, opt, rule, cls in selected, exclusive, bool(request.stacks))
            if said is not None:
                return Refusal(said[0].format(flag=opt.flag), hint=said[1].format(flag=opt.flag))
    return None


def _not_applying(cls: type[EngineOptions], opt: EngineOption, rule: str, selected: bool,
                  exclusive: type[EngineOptions] | None, stacks: bool) -> Said | None:
    if rule == "unselected":
        return None if selected else cls.unselected
    if rule == "stacks_only":
        return None if stacks else cls.stacks_only
    if rule == "exclusive":
        return exclusive.exclusive if exclusive is not None and exclusive is not cls else None
    if rule == "needs_stack":
        return (opt.needs_stack, ADD_STACK) if opt.needs_stack and not stacks else None
    raise ValueError(rule)


def per_stack_options() -> tuple[str, ...]:
    """The engines' options whose values each make a stack (engines/options.EngineOptions.per_stack)."""
    return tuple(flag for cls in option_table.ENGINE_OPTIONS for flag in cls.per_stack)


def stack_only_options() -> tuple[str, ...]:
    """The engines' options that apply only with --stack (diagnose refuses them without one)."""
    return tuple(o.flag for cls, o in engine_options() if cls.stacks_only is not None or o.needs_stack)


def applying(engines: Sequence[EngineOptions], flags: Collection[str], stacks: bool) -> tuple[EngineOptions, ...]:
    """The engines' options with those of `flags` that would be refused here back at their defaults: a variable
    set once per cluster or project (FP16DOCTOR_PARTITION) applies where it means something, and is no error
    elsewhere."""
    selected = {type(e) for e in engines if e.selected}
    exclusive = next((cls for cls in selected if cls.selector is not None and cls.exclusive is not None), None)

    def refused(e: EngineOptions, o: EngineOption) -> bool:
        return any(_not_applying(type(e), o, rule, type(e) in selected, exclusive, stacks) is not None
                   for rule in ("unselected", "stacks_only", "exclusive", "needs_stack"))

    return tuple(e.without({o.flag for o in e.given() if o.flag in flags and refused(e, o)}) for e in engines)


def check_diagnose_argv(argv: Sequence[str], known_stacks: Collection[str] | None = None) -> Refusal | None:
    """None where `fp16doctor diagnose` accepts this command line (as far as it can tell without the machine),
    else why it refuses it."""
    request = parse_diagnose(argv)
    return request if isinstance(request, Refusal) else refusal(request, known_stacks)


__all__ = ["DiagnoseRequest", "Refusal", "applying", "check_diagnose_argv", "diagnose_options", "parse_diagnose",
           "refusal", "stack_only_options"]
