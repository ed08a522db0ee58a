"""Whether `fp16doctor diagnose` accepts a request: one pure check, used by diagnose on what the user typed and by
the analysis on every command it prints ("untested: this command measures it"), so no printed command is one that
diagnose refuses.

Pure: it reads names (precisions, variants from workload/protocol.py; stack names as the caller passes them, since
the catalogue is read from a file a layer above) and creates, probes and contacts nothing. What needs the machine
(a Docker engine answering, a script compiling, an --out folder being writable) stays with diagnose.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from fp16doctor.workload.protocol import KERAS3_BACKENDS, PRECISIONS, SCRIPT_VARIANTS, SIZES, VARIANTS

# diagnose's options, as its command line declares them (cli.py; a test holds the two together).
VALUE_OPTIONS = frozenset({
    "--out", "--stack", "--precision", "--variant", "--docker-host", "--data", "--ca-bundle", "--wheelhouse",
    "--python", "--script", "--script-arg", "--steps", "--partition", "--gres", "--constraint", "--account", "--qos",
    "--time", "--slurm-arg", "--slurm-workdir", "--runtime", "--registry", "--size", "--backend",
})
FLAG_OPTIONS = frozenset({
    "--quick", "--full", "--no-experiments", "--keep-profiles", "--no-host", "--force", "--resume", "--json",
    "--slurm", "--plan", "--verbose", "--help",
})
SHORT_OPTIONS = {"-o": "--out", "-q": "--quick", "-s": "--stack", "-p": "--precision", "-v": "--verbose"}
SCRIPT_ONLY = ("--steps", "--script-arg")  # they apply to the user's own script
SLURM_ONLY = ("--partition", "--gres", "--constraint", "--account", "--qos", "--time", "--slurm-arg",
              "--slurm-workdir", "--runtime", "--registry")
CONTAINER_ONLY = ("--runtime", "--registry")  # with --slurm they run a stack's container


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
    docker_hosts: tuple[str, ...] = ()
    script: bool = False
    include_host: bool = True
    slurm: bool = False
    given: frozenset[str] = frozenset()  # every option named, e.g. "--steps", "--quick"
    sizes: tuple[str, ...] = ()  # --size's values
    backends: tuple[str, ...] = ()  # --backend's values


def parse_diagnose(argv: Sequence[str]) -> DiagnoseRequest | Refusal:
    """A `fp16doctor diagnose ...` command line (with or without its first two words) as a request; an option
    diagnose does not have, or one missing its value, is refused."""
    args = list(argv)
    if args[:2] == ["fp16doctor", "diagnose"]:
        args = args[2:]
    elif args[:1] == ["diagnose"]:
        args = args[1:]
    values: dict[str, list[str]] = {}
    given: set[str] = set()
    i = 0
    while i < len(args):
        arg = SHORT_OPTIONS.get(args[i], args[i])
        name, eq, inline = arg.partition("=")
        if name in VALUE_OPTIONS:
            if eq:
                value = inline
            elif i + 1 < len(args):
                i += 1
                value = args[i]
            else:
                return Refusal(f"{name} needs a value", hint=f"write {name} VALUE")
            values.setdefault(name, []).append(value)
        elif arg in FLAG_OPTIONS:
            pass
        else:
            return Refusal(f"diagnose has no option {arg!r}", hint="see `fp16doctor diagnose --help`")
        given.add(name)
        i += 1
    return DiagnoseRequest(
        stacks=tuple(values.get("--stack", ())), precisions=tuple(values.get("--precision", ())),
        variants=tuple(values.get("--variant", ())), docker_hosts=tuple(values.get("--docker-host", ())),
        script="--script" in given, include_host="--no-host" not in given, slurm="--slurm" in given,
        given=frozenset(given), sizes=tuple(values.get("--size", ())), backends=tuple(values.get("--backend", ())))


def refusal(request: DiagnoseRequest, known_stacks: Collection[str] | None = None) -> Refusal | None:
    """Why diagnose refuses the request before it probes anything, or None where it accepts it. `known_stacks`:
    the catalogue's names (None: not checked here)."""
    for p in request.precisions:
        if p not in PRECISIONS:
            return Refusal(f"unknown precision {p!r}", hint=f"use one of: {', '.join(PRECISIONS)}")
    for v in request.variants:
        if v not in VARIANTS:
            return Refusal(f"unknown variant {v!r}", hint=f"use one of: {', '.join(VARIANTS)}")
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
    script_only = [o for o in SCRIPT_ONLY if o in request.given]
    if script_only and not request.script:
        return Refusal("--steps and --script-arg apply to your own script", hint="add --script train.py")
    other = next((v for v in request.variants if v not in SCRIPT_VARIANTS), None)
    if request.script and other is not None:
        return Refusal(f"--variant {other} changes the built-in workload's model or data, not a script's",
                       hint=f"with --script use one of: {', '.join(SCRIPT_VARIANTS)}")
    if request.docker_hosts and not request.stacks:
        return Refusal("--docker-host without --stack runs nothing in Docker",
                       hint="add --stack NAME (see `fp16doctor stacks list`), e.g. --stack cpu")
    for b in request.backends:
        if b not in KERAS3_BACKENDS:
            return Refusal(f"--backend {b}: not a Keras backend",
                           hint=f"use one of {', '.join(KERAS3_BACKENDS)} (repeat --backend for several)")
    if request.backends and not request.include_host:
        return Refusal("--backend runs this host's Python on each backend, and --no-host leaves it out",
                       hint="drop --no-host, or drop --backend (a pinned stack has one)")
    if not request.include_host and not request.stacks:
        return Refusal("--no-host without --stack leaves nothing to run", hint="add --stack cpu (or another)")
    if not request.slurm:
        slurm_only = [o for o in SLURM_ONLY if o in request.given]
        if slurm_only:
            return Refusal(f"{slurm_only[0]} applies to Slurm jobs", hint="add --slurm")
        return None
    if request.docker_hosts:
        return Refusal("--slurm runs the matrix on the cluster's nodes; --docker-host does not combine with it",
                       hint="drop --docker-host (the nodes run the stacks' containers with --runtime)")
    container = [o for o in CONTAINER_ONLY if o in request.given]
    if container and not request.stacks:
        return Refusal(f"{container[0]} runs a stack's container, and no --stack was given",
                       hint="add --stack NAME (see `fp16doctor stacks list`), e.g. --stack cpu")
    if request.stacks and request.script:
        return Refusal("--script with --stack does not run on Slurm yet",
                       hint="drop --stack (the nodes' own Python runs your script), or drop --slurm")
    return None


def check_diagnose_argv(argv: Sequence[str], known_stacks: Collection[str] | None = None) -> Refusal | None:
    """None where `fp16doctor diagnose` accepts this command line (as far as it can tell without the machine),
    else why it refuses it."""
    request = parse_diagnose(argv)
    return request if isinstance(request, Refusal) else refusal(request, known_stacks)


__all__ = ["DiagnoseRequest", "Refusal", "check_diagnose_argv", "parse_diagnose", "refusal"]
