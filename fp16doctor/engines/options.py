"""An engine's options, declared once: one frozen dataclass per engine, each field an option whose metadata names
its command-line flag, its environment variable, the argument the engine's own tool gets and its help (submitit
reads an executor's parameters from its signature; snakemake's executor plugins declare theirs as a settings
dataclass).

Everything else reads the declaration: the CLI makes diagnose's Typer options from the fields, the invocation check
(invocation.py) its table of flags and what it refuses, diagnose hands the instances to the engines
(`EngineSetup.options`) and records them in results.json (`record`). The table of every engine's options is
engines/option_table.py. Stdlib only, and no engine imported: the analysis checks the commands it prints with it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, get_type_hints

# What diagnose says with an option that needs a pinned stack and got none.
ADD_STACK = "add --stack NAME (see `fp16doctor stacks list`), e.g. --stack cpu"


@dataclass(frozen=True)
class EngineOption:
    """One field's option. `name` and `type` are the field's own (filled by `EngineOptions.declared`)."""

    flag: str  # "--partition"
    help: str
    env: str | None = None  # "FP16DOCTOR_PARTITION": a cluster's or project's default, where it has one
    tool: str | None = None  # "--partition": the argument the engine's tool gets (sbatch's); None: none
    metavar: str | None = None
    choices: tuple[str, ...] = ()  # the values it takes: checked while parsing, completed by the shell
    needs_stack: str | None = None  # said where it is given without --stack ("{flag}": the flag)
    panel: str | None = None  # diagnose --help's panel (default: its engine's)
    name: str = ""
    type: Any = None  # bool: a flag; tuple[X, ...]: repeatable; X | None: one value
    default: Any = None

    @property
    def takes_value(self) -> bool:
        return self.type is not bool

    @property
    def repeatable(self) -> bool:
        return getattr(self.type, "__origin__", None) is tuple


def option(flag: str, help: str, *, default: Any = None, env: str | None = None, tool: str | None = None,
           metavar: str | None = None, choices: tuple[str, ...] = (), needs_stack: str | None = None,
           panel: str | None = None) -> Any:
    """A field of an engine's options: `x: str | None = option("--x", "What x is.", env="FP16DOCTOR_X")`. A flag is
    `bool` (default False), a repeatable option `tuple[str, ...]` (default ())."""
    return field(default=default, metadata={"option": EngineOption(flag, help, env, tool, metavar, choices,
                                                                    needs_stack, panel)})


Said = tuple[str, str]  # (message, hint) of a refusal, "{flag}" filled with the option's flag


@dataclass(frozen=True)
class EngineOptions:
    """The base of an engine's options. What the invocation check refuses is class data, so nothing above the
    engines names an engine: an option of an engine that would run nothing is refused, with the engine's words."""

    panel: ClassVar[str] = "Options"  # diagnose --help's panel for its options
    # The flag (a bool field) that sends the cells to this engine ("--slurm"); None: it takes its cells unless an
    # exclusive engine is selected.
    selector: ClassVar[str | None] = None
    unselected: ClassVar[Said | None] = None  # said of its option given without its selector
    exclusive: ClassVar[Said | None] = None  # selected, it runs every cell: said of another engine's option
    stacks_only: ClassVar[Said | None] = None  # it runs only pinned stacks: said of its option without --stack
    # Its options whose values each make a stack of their own (--backend jax: host-jax): a command for one stack
    # keeps none of them, and takes that stack's own from its runs' engine (`engine.rerun`).
    per_stack: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def declared(cls) -> tuple[EngineOption, ...]:
        """Its options, in declaration order."""
        hints = get_type_hints(cls)
        return tuple(dataclasses.replace(f.metadata["option"], name=f.name, type=hints[f.name], default=f.default)
                     for f in dataclasses.fields(cls) if "option" in f.metadata)

    @property
    def selected(self) -> bool:
        """Whether this invocation sends cells to the engine (an engine without a selector: unless another takes
        them all)."""
        return self.selector is None or bool(getattr(self, self._field(self.selector)))

    def given(self) -> list[EngineOption]:
        """The options set to something other than their default, in declaration order."""
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        return [o for o in self.declared() if getattr(self, o.name) != defaults[o.name]]

    def without(self, flags: set[str]) -> EngineOptions:
        """These options back at their defaults."""
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        return dataclasses.replace(self, **{o.name: defaults[o.name] for o in self.declared() if o.flag in flags})

    def tool_args(self, **values: Any) -> list[str]:
        """`--arg=value` for each option that names a tool argument and is set (`values` overrides a field's)."""
        args = []
        for o in self.declared():
            value = values.get(o.name, getattr(self, o.name))
            if o.tool and value:
                args.append(f"{o.tool}={value}")
        return args

    def refusal(self, *, stacks: bool, script: bool) -> Said | None:
        """What the selected engine cannot run of the request (None: all of it)."""
        return None

    def usage_error(self, *, include_host: bool) -> Said | None:
        """What diagnose refuses of these options as set (a usage error, before anything is probed)."""
        return None

    def host_stacks(self, configured_backend: str | None) -> tuple[str, ...]:
        """The host stacks these options ask for instead of `host` alone (the host engine's Keras backends)."""
        return ()

    def record(self) -> dict[str, Any]:
        """What results.json's `invocation` records of these options, by key."""
        return {}

    @classmethod
    def rerun_words(cls, invocation: dict[str, Any]) -> list[str]:
        """The options of a recorded invocation (`record`), as command-line words: the report rebuilds a command
        from them where the document kept no command line."""
        return []

    @classmethod
    def _field(cls, flag: str) -> str:
        return next(o.name for o in cls.declared() if o.flag == flag)


Options = TypeVar("Options", bound=EngineOptions)


def options_of(given: tuple[EngineOptions, ...], cls: type[Options]) -> Options:
    """The instance of `cls` among `given`, else its defaults (an engine nobody set an option of)."""
    return next((o for o in given if isinstance(o, cls)), None) or cls()
