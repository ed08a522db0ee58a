"""The command line: options in, one core call, the result out as text, JSON or an exit code.

Nothing below this module prints; every failure a user can act on arrives here as a DoctorError.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from fp16doctor import __version__
from fp16doctor.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, DoctorError
from fp16doctor.report import FORMATS
from fp16doctor.workload.protocol import PRECISIONS, SIZES, VARIANT_LABEL_SEP, VARIANTS, variant_clash

if TYPE_CHECKING:
    from fp16doctor.engines.options import EngineOption, EngineOptions

# -h as well as --help, as docker, nvidia-smi, pytest and sbatch accept it.
CONTEXT = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(
    name="fp16doctor",
    help="Why is float16 training slower (or faster) than float32 on this GPU and this software stack?",
    no_args_is_help=True,
    context_settings=CONTEXT,
    pretty_exceptions_enable=False,
)
stacks_app = typer.Typer(help="The pinned software stacks (Docker images) diagnose can run in.", no_args_is_help=True,
                         context_settings=CONTEXT)
app.add_typer(stacks_app, name="stacks")

# diagnose --help groups its options in these panels, in this order.
PANEL_WHAT = "What to run"
PANEL_OUTPUT = "Output"
PANEL_SCRIPT = "Your own script"
PANEL_DOCKER = "Docker stacks"
FLAG = ""  # metavar of an on/off option: it takes no value
PRECISION_HELP = (f"{', '.join(PRECISIONS)}; repeatable (default: the first three, plus mixed_bfloat16 where the"
                  " device has bfloat16 arithmetic).")
VARIANT_HELP = (f"{', '.join(VARIANTS)}; repeatable; replaces the default (original, plus synthetic_input at the"
                f" full size): include original to compare. Join changes with {VARIANT_LABEL_SEP} to make both in one"
                f" run, compared with the run that lacks the last (which joins the matrix):"
                f" synthetic_input{VARIANT_LABEL_SEP}xla compiles the step with batches in memory.")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _choice(name: str, choices: Sequence[str]) -> tuple[Callable[..., Any], Callable[..., list[str]]]:
    """A parser-level check and completion for an option whose values are one of `choices` (from the module that
    owns them): a wrong value is Click's usage error (exit 2), as an unknown option is."""

    def check(value: Any) -> Any:
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if item is not None and item not in choices:
                raise typer.BadParameter(f"{item!r} is not one of {', '.join(choices)}", param_hint=name)
        return value

    def complete(incomplete: str) -> list[str]:
        return [c for c in choices if c.startswith(incomplete)]

    return check, complete


def _metavar(choices: Sequence[str]) -> str:
    return "[" + "|".join(choices) + "]"


_check_precision, _complete_precision = _choice("--precision", PRECISIONS)
_, _complete_variant = _choice("--variant", VARIANTS)


def _check_variant(value: Any) -> Any:
    """--variant: one change, or several joined by VARIANT_LABEL_SEP that can be made together (a clash is Click's
    usage error, exit 2, naming it)."""
    for item in value if isinstance(value, (list, tuple)) else [value]:
        clash = variant_clash(item) if item is not None else None
        if clash is not None:
            alone = VARIANT_LABEL_SEP not in item and item not in VARIANTS
            raise typer.BadParameter(f"{item!r} is not one of {', '.join(VARIANTS)}" if alone else clash,
                                     param_hint="--variant")
    return value
_check_size, _complete_size = _choice("--size", tuple(SIZES))
_check_format, _complete_format = _choice("--format", FORMATS)


def _complete_stack(incomplete: str) -> list[str]:
    from fp16doctor.stacks import all_stacks

    return [s.name for s in all_stacks() if s.name.startswith(incomplete)]


def _from_environment(ctx: typer.Context, name: str) -> bool:
    """Whether an option's value came from its FP16DOCTOR_* variable rather than the command line."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "ENVIRONMENT"


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _version(value: bool) -> None:
    if value:
        out.print(f"fp16doctor {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.",
                                 metavar=FLAG),
) -> None:
    """fp16doctor: measure float32, float16 and mixed_float16 training here, and explain the difference."""


@app.command()
def probe(
    as_json: bool = typer.Option(False, "--json", help="Print the probe as JSON.", metavar=FLAG),
    markdown: bool = typer.Option(False, "--markdown", help="Print it as markdown to paste into an issue (home"
                                  " directories as ~, secrets redacted).", metavar=FLAG),
) -> None:
    """Describe this host: CPU, GPUs, driver, installed frameworks and the Keras configuration."""
    from fp16doctor.probe import probe_host
    from fp16doctor.textout.probe import probe_markdown, probe_text

    if as_json and markdown:
        raise DoctorError("--json and --markdown contradict each other", hint="pass one of them",
                          exit_code=EXIT_USAGE)
    host = probe_host()
    if as_json:
        _print_json(host)
    elif markdown:
        from fp16doctor.redaction import redact

        sys.stdout.write(probe_markdown(redact(host), __version__))
    else:
        out.print(probe_text(host))


SIZE_HELP = ("quick or full (--quick and --full by name), or smoke: the whole diagnose at a sixteenth of quick's "
             "steps, to check that a stack, engine or cluster runs; its timings do not diagnose a real size.")


class _WithEngineOptions:
    """diagnose's callback as Typer sees it: its own parameters, then one per engine option, made from the option's
    declaration (engines/options.py) each time the command is built, so an engine's option is one field there."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        functools.update_wrapper(self, func)

    @property
    def __signature__(self) -> inspect.Signature:
        own = [p for p in inspect.signature(self.func, eval_str=True).parameters.values()
               if p.kind is not p.VAR_KEYWORD]
        for cls in _engine_table():
            params = [_engine_parameter(cls, o) for o in cls.declared()]
            panels = [_panel_of(p) for p in own]
            # An engine's options open their panel (Docker's --docker-host before --no-host), or a panel of their own.
            at = panels.index(cls.panel) if cls.panel in panels else len(own)
            own[at:at] = params
        return inspect.Signature(own)

    def __call__(self, **values: Any) -> Any:
        return self.func(**values)


def _engine_table() -> tuple[type[EngineOptions], ...]:
    from fp16doctor.engines import option_table

    return option_table.ENGINE_OPTIONS


def _panel_of(parameter: inspect.Parameter) -> str | None:
    return getattr(parameter.default, "rich_help_panel", None)


def _engine_param(cls: type[EngineOptions], o: EngineOption) -> str:
    return f"{cls.__name__.lower()}_{o.name}"


def _engine_parameter(cls: type[EngineOptions], o: EngineOption) -> inspect.Parameter:
    """The Typer option of one engine option: its flag, variable, help and panel from the declaration."""
    # A repeatable option is a tuple field and a list to Typer, of the same items.
    annotation = types.GenericAlias(list, o.type.__args__[:1]) if o.repeatable else o.type
    check, complete = _choice(o.flag, o.choices) if o.choices else (None, None)
    default = typer.Option(list(o.default) if o.repeatable else o.default, o.flag, envvar=o.env,
                           help=o.help, metavar=FLAG if o.type is bool else o.metavar, callback=check,
                           autocompletion=complete, rich_help_panel=o.panel or cls.panel)
    return inspect.Parameter(_engine_param(cls, o), inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                             annotation=annotation)


def _field_value(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value  # a repeatable option's field is a tuple


def _engine_options(ctx: typer.Context, values: dict[str, Any], stacks: bool) -> tuple[EngineOptions, ...]:
    """Each engine's options from diagnose's parameters; a value from a variable is dropped where its option would
    be refused (a cluster's FP16DOCTOR_PARTITION on a run without --slurm)."""
    from fp16doctor.invocation import applying

    made = tuple(cls(**{o.name: _field_value(values[_engine_param(cls, o)]) for o in cls.declared()})
                 for cls in _engine_table())
    from_env = {o.flag for cls in _engine_table() for o in cls.declared()
                if _from_environment(ctx, _engine_param(cls, o))}
    return applying(made, from_env, stacks)


@app.command()
@_WithEngineOptions
def diagnose(
    ctx: typer.Context,
    out_dir: Path = typer.Option(Path("fp16doctor-out"), "--out", "-o", envvar="FP16DOCTOR_OUT",
                                 help="Where results.json and report.html go.", rich_help_panel=PANEL_OUTPUT),
    quick: bool = typer.Option(False, "--quick", "-q", help="Small size (the default when no GPU is present).",
                               metavar=FLAG, rich_help_panel=PANEL_WHAT),
    full: bool = typer.Option(False, "--full", help="The script's own size (336x224, batch 128), even on a CPU.",
                              metavar=FLAG, rich_help_panel=PANEL_WHAT),
    size: str | None = typer.Option(None, "--size", help=SIZE_HELP,
                                    callback=_check_size, autocompletion=_complete_size,
                                    metavar=_metavar(tuple(SIZES)), rich_help_panel=PANEL_WHAT),
    stack: list[str] = typer.Option([], "--stack", "-s", help="Run in this pinned stack (Docker); repeatable.",
                                    autocompletion=_complete_stack, metavar="NAME", rich_help_panel=PANEL_WHAT),
    precision: list[str] = typer.Option([], "--precision", "-p", callback=_check_precision, help=PRECISION_HELP,
                                        autocompletion=_complete_precision, metavar="PRECISION",
                                        rich_help_panel=PANEL_WHAT),
    variant: list[str] = typer.Option([], "--variant", callback=_check_variant, autocompletion=_complete_variant,
                                      metavar="VARIANT", rich_help_panel=PANEL_WHAT, help=VARIANT_HELP),
    budget: float | None = typer.Option(
        None, "--budget", min=10.0, max=86400.0, metavar="SECONDS", rich_help_panel=PANEL_WHAT,
        help="The wall budget in seconds, in place of the size's (quick: 90 s): more time for the interleaved "
             "rounds and the experiments, where an answer was not settled."),
    rounds: int | None = typer.Option(
        None, "--rounds", min=3, max=500, metavar="N", rich_help_panel=PANEL_WHAT,
        help="Time at least N interleaved rounds (default 3, more where the budget has room)."),
    no_experiments: bool = typer.Option(
        False, "--no-experiments", help="Do not run the experiments the analysis plans to confirm a cause.",
        metavar=FLAG, rich_help_panel=PANEL_WHAT),
    keep_profiles: bool = typer.Option(
        False, "--keep-profiles", help="Keep each run's raw profile (traces, oneDNN lines) in --out/profiles.",
        metavar=FLAG, rich_help_panel=PANEL_OUTPUT),
    data: Path | None = typer.Option(None, "--data", help="Your own train directory (one folder per class).",
                                     rich_help_panel=PANEL_WHAT),
    no_host: bool = typer.Option(False, "--no-host", help="With --stack, skip the run on this host's Python.",
                                 metavar=FLAG, rich_help_panel=PANEL_DOCKER),
    force: bool = typer.Option(False, "--force", help="Run stacks the pre-flight check says cannot work here.",
                               metavar=FLAG, rich_help_panel=PANEL_DOCKER),
    resume: bool = typer.Option(False, "--resume", help="Keep finished runs in --out and run only what is missing.",
                                metavar=FLAG, rich_help_panel=PANEL_OUTPUT),
    plan: bool = typer.Option(False, "--plan", help="Run every check, print what would run, where and about how"
                              " long, and exit: nothing runs and nothing is created.", metavar=FLAG,
                              rich_help_panel=PANEL_OUTPUT),
    ca_bundle: Path | None = typer.Option(
        None, "--ca-bundle", rich_help_panel=PANEL_DOCKER,
        help="CA bundle for pip inside stack builds (default: $FP16DOCTOR_CA_BUNDLE or $PIP_CERT)."),
    wheelhouse: Path | None = typer.Option(None, "--wheelhouse", envvar="FP16DOCTOR_WHEELHOUSE",
                                           help="Stack builds install from this folder.", rich_help_panel=PANEL_DOCKER),
    python: str | None = typer.Option(None, "--python", envvar="FP16DOCTOR_PYTHON", metavar="PATH",
                                      help="Run the host workload with this Python (e.g. a venv with TensorFlow).",
                                      rich_help_panel=PANEL_WHAT),
    as_json: bool = typer.Option(False, "--json", help="Print results.json to stdout when done.", metavar=FLAG,
                                 rich_help_panel=PANEL_OUTPUT),
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, rich_help_panel=PANEL_OUTPUT, metavar=FLAG,
                                show_default=False, help="Log engine events, builds and submissions to stderr (-vv:"
                                " debug); --out/diagnose.log keeps them either way."),
    script: Path | None = typer.Option(
        None, "--script", rich_help_panel=PANEL_SCRIPT,
        help="Diagnose your own Keras training script (run unchanged) instead of the built-in one."),
    script_arg: list[str] = typer.Option(
        [], "--script-arg", metavar="ARG", rich_help_panel=PANEL_SCRIPT,
        help="An argument for --script; repeatable, in order (write --script-arg=--flag)."),
    steps: int | None = typer.Option(None, "--steps", help="With --script: measure exactly N training steps.",
                                     rich_help_panel=PANEL_SCRIPT),
    **engine_values: Any,
) -> None:
    """Probe, run the workload per stack x precision, analyse, and write results.json and report.html."""
    from fp16doctor import logs
    from fp16doctor.diagnose import DiagnoseOptions, plan_diagnose, run_diagnose
    from fp16doctor.diagnose.budget import command_started
    from fp16doctor.progress import LiveProgress

    sizes = {name for name, given in (("quick", quick), ("full", full), (size or "", size is not None)) if given}
    if len(sizes) > 1:
        raise DoctorError(f"--{' and --'.join(sorted(sizes))} contradict each other", hint="pass one size",
                          exit_code=EXIT_USAGE)
    options = DiagnoseOptions(
        out_dir=out_dir, size=next(iter(sizes), None), stacks=list(stack), precisions=list(precision),
        variants=list(variant) or None, experiments=not no_experiments, keep_profiles=keep_profiles, data_dir=data,
        include_host=not no_host, force=force, resume=resume, python=python, ca_bundle=ca_bundle,
        wheelhouse=wheelhouse, script=script, script_args=list(script_arg), steps=steps, budget_s=budget,
        rounds=rounds, engines=_engine_options(ctx, engine_values, stacks=bool(stack)), started=command_started())
    logs.configure(verbose)
    progress = LiveProgress(err, enabled=not as_json or sys.stderr.isatty())
    if plan:
        from fp16doctor.textout.plan import plan_text

        with progress:
            planned = plan_diagnose(options, progress)
        _print_json(planned.to_dict()) if as_json else out.print(plan_text(planned))
        raise typer.Exit(EXIT_OK)
    try:
        with progress:
            outcome = run_diagnose(options, progress)
    except KeyboardInterrupt:
        raise _interrupted(out_dir / "results.json") from None
    finally:
        logs.close_log()
    from fp16doctor.textout.diagnose import diagnose_summary_text, failed_runs_message

    _print_json(outcome.document) if as_json else out.print(diagnose_summary_text(outcome))
    failure = failed_runs_message(outcome)
    if failure is not None:
        _print_error(*failure)
    raise typer.Exit(outcome.exit_code)


def _interrupted(results: Path) -> DoctorError:
    """Ctrl-C during diagnose: Typer would make it a bare exit 130; say what was kept and how to go on."""
    if not results.exists():  # stopped while probing: nothing was measured yet
        return DoctorError("interrupted before any run", hint="run the command again", exit_code=EXIT_INTERRUPTED)
    return DoctorError(f"interrupted: the runs that finished are in {results}",
                       hint="run the same command with --resume to complete only what is missing",
                       exit_code=EXIT_INTERRUPTED)


@app.command()
def explain(
    results: Path = typer.Argument(
        ..., help="A results.json, ours or hand-written, or the report.html of one diagnosis.", metavar="FILE"),
    as_json: bool = typer.Option(
        False, "--json", help='Print {"findings": [...], "verdicts": [...], "prescriptions": [...], "ledgers": '
        '[...], "answer": {...}} as JSON.',
        metavar=FLAG),
    full: bool = typer.Option(
        False, "--full", help="After the answer, print the detail: every finding's evidence and fix, the verdicts, "
        "the measured runs and the roofline.", metavar=FLAG),
) -> None:
    """Re-run the analysis on a saved or hand-written results file and print the answer: what bounds the step, what
    to do, each precision against float32, then the findings."""
    from fp16doctor.analysis import diagnose_document
    from fp16doctor.results import load
    from fp16doctor.textout.findings import findings_text

    doc = load(results)
    diagnosis = diagnose_document(doc)
    if as_json:
        _print_json(diagnosis.to_dict())
    else:
        out.print(findings_text(diagnosis, full=full))


@app.command()
def report(
    results: list[Path] = typer.Argument(
        ..., help="One or more results.json or report.html (several: a side-by-side comparison).", metavar="FILE"),
    out_file: Path = typer.Option(..., "--out", "-o", help="The report file to write; - writes it to stdout."),
    fmt: str = typer.Option("html", "--format", "-f", callback=_check_format, autocompletion=_complete_format,
                            metavar=_metavar(FORMATS)),
) -> None:
    """Render one report from one or more results files or reports (offline)."""
    from fp16doctor.report import render_html, render_markdown, write_report
    from fp16doctor.results import load_all

    docs = [doc for p in results for doc in load_all(p)]
    if str(out_file) == "-":  # a pipe, e.g. into a pull request's comment
        from fp16doctor.redaction import redact_home_paths

        shown = [redact_home_paths(doc) for doc in docs]
        sys.stdout.write(render_markdown(shown) if fmt == "markdown" else render_html(shown))
        return
    write_report(docs, out_file, fmt)
    out.print(f"wrote {out_file}")


@stacks_app.command("list")
def stacks_list(
    as_json: bool = typer.Option(False, "--json", help="Print the catalogue as JSON.", metavar=FLAG),
) -> None:
    """List the pinned stacks."""
    from fp16doctor.stacks import all_stacks
    from fp16doctor.textout.stacks import stacks_table

    stacks = all_stacks()
    if as_json:
        _print_json([s.to_dict() for s in stacks])
    else:
        out.print(stacks_table(stacks))


@stacks_app.command("show")
def stacks_show(
    name: str = typer.Argument(..., help="A stack name from `fp16doctor stacks list`.", autocompletion=_complete_stack),
    as_json: bool = typer.Option(False, "--json", help="Print the stack as JSON.", metavar=FLAG),
) -> None:
    """Show one stack with every pin."""
    from fp16doctor.stacks import get_stack
    from fp16doctor.textout.stacks import stack_text

    spec = get_stack(name)
    if as_json:
        _print_json(spec.to_dict())
    else:
        out.print(stack_text(spec))


@stacks_app.command("build")
def stacks_build(
    name: str = typer.Argument(..., help="A stack name from `fp16doctor stacks list`.", autocompletion=_complete_stack),
    docker_host: str | None = typer.Option(None, "--docker-host", help="Docker engine URL or context."),
    ca_bundle: Path | None = typer.Option(
        None, "--ca-bundle", help="CA bundle for pip inside the build (default: $FP16DOCTOR_CA_BUNDLE or $PIP_CERT)."
    ),
    wheelhouse: Path | None = typer.Option(None, "--wheelhouse", envvar="FP16DOCTOR_WHEELHOUSE",
                                           help="Install pip packages from this folder."),
) -> None:
    """Build (or refresh from cache) one stack's image."""
    from fp16doctor.engines.context import BuildOptions, default_ca_bundle
    from fp16doctor.engines.docker.build import build_stack

    options = BuildOptions(docker_host=docker_host, ca_bundle=ca_bundle or default_ca_bundle(), wheelhouse=wheelhouse)
    result = build_stack(name, options,
                         log=lambda line: err.print(line, markup=False))
    out.print(f"built {result.image} ({result.seconds:.1f} s)")


@app.command()
def compare(
    before: Path = typer.Argument(..., help="The results.json of before (e.g. the old stack)."),
    after: Path = typer.Argument(..., help="The results.json of after, measured on the same machine."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison (stack_comparisons) as JSON.",
                                 metavar=FLAG),
    fail_if_slower: float | None = typer.Option(
        None, "--fail-if-slower", min=0, metavar="PCT",
        help="Exit 4 when a 16-bit configuration's ratio to float32 fell by more than PCT % beyond both intervals."),
) -> None:
    """One machine before and after: each configuration's ratio in both, and what changed in its ops."""
    from fp16doctor.analysis import compare_results
    from fp16doctor.analysis.stack_compare import file_label
    from fp16doctor.errors import EXIT_SLOWER
    from fp16doctor.results import load
    from fp16doctor.textout.stack_compare import compare_text, slower_message

    try:
        docs = [load(path) for path in (before, after)]
    except DoctorError as exc:  # a file the user named that is missing or not a results file
        raise DoctorError(exc.message, exc.hint, exit_code=EXIT_USAGE) from None
    result = compare_results(docs[0], docs[1], (file_label(before), file_label(after)))
    if as_json:
        _print_json(result.to_dict(fail_if_slower))
    else:
        out.print(compare_text(result))
    slower = slower_message(result, fail_if_slower) if fail_if_slower is not None else None
    if slower is not None:
        raise DoctorError(*slower, exit_code=EXIT_SLOWER)


def _print_error(message: str, hint: str) -> None:
    # escape: messages quote the user's own values, which may look like rich markup ("[/]").
    err.print(f"[bold red]error:[/] {escape(message)}", markup=True)
    if hint:
        err.print(f"[dim]hint:[/] {escape(hint)}", markup=True)


def _missing_words(ctx: Any) -> str:
    """What a bare command lacks, in one line: a group's subcommand (naming them), or its arguments."""
    command: Any = getattr(ctx, "command", None)
    if hasattr(command, "list_commands"):  # a group (typer bundles its own click: no isinstance)
        names = [n for n in command.list_commands(ctx) if not getattr(command.get_command(ctx, n), "hidden", False)]
        return f"{ctx.command_path} needs a command: {', '.join(names)}"
    return f"{ctx.command_path if ctx is not None else 'fp16doctor'} needs its arguments"


def main() -> None:
    try:
        # Not standalone: a usage error the parser finds is printed as every other error, one line and a hint.
        code = app(standalone_mode=False)
    except DoctorError as exc:
        _print_error(exc.message, exc.hint)
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # what the parser refuses: an unknown option or value, a missing argument
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "fp16doctor"
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        if not message.strip():  # a group called bare prints its help (no_args_is_help), then says what is missing
            message = _missing_words(ctx)
        _print_error(message, f"`{where} -h` lists the options and the values each takes")
        sys.exit(getattr(exc, "exit_code", EXIT_USAGE))
    except (KeyboardInterrupt, typer.Abort):
        # diagnose says itself what it kept; any other command has nothing to keep.
        err.print("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(code if isinstance(code, int) else EXIT_OK)
