"""Everything diagnose does before its first run, in order: the user's input checked (creating nothing), this
host probed, the engines chosen and checked, and only then --out made and the matrix planned. `--plan` stops
before --out is made."""

from __future__ import annotations

import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fp16doctor import logs
from fp16doctor.diagnose.checks import (
    check_backends,
    check_data,
    check_out_dir,
    check_precisions,
    check_script_compiles,
    check_script_reads_as_python2,
    check_variants,
    check_variants_on_stacks,
    check_workload_imports,
    host_keras,
    refuse,
    request_of,
)
from fp16doctor.diagnose.plan import BASE_PRECISIONS, backend_trials, default_precisions, plan_runs, same_host_setup
from fp16doctor.engines.base import EngineSetup
from fp16doctor.engines.option_table import ENGINE_OPTIONS
from fp16doctor.engines.registry import Router, engine_class
from fp16doctor.engines.spec import HOST_STACK, RunSpec, ScriptSpec, WorkloadSize, on_gpu, stack_backend
from fp16doctor.engines.spec import WORKLOAD_SIZES as SIZES
from fp16doctor.errors import EXIT_USAGE, DoctorError
from fp16doctor.options import DiagnoseOptions, Progress
from fp16doctor.results import SIZE_CAVEATS, Document, Run, load, new_document, run_key
from fp16doctor.workload.protocol import DEFAULT_WHERE_BFLOAT16

# What diagnose says, in one line, on a host that is not Linux (where it is built and tested).
OFF_LINUX = ("{system} is not Linux: diagnose runs on this host's Python, untested here; --slurm needs a Linux login"
             " node, and the Docker stacks' GPUs need Linux (on Windows: Docker inside WSL2)")


@dataclass
class Prepared:
    """What every check passed and the matrix came to, before anything runs."""

    started: float
    host: dict[str, Any]
    size: WorkloadSize
    stacks: list[str]
    data_dir: str | None
    script: ScriptSpec | None
    backend: str | None
    doc: Document
    results_path: Path
    specs: list[RunSpec]
    todo: list[RunSpec]
    router: Router  # the engines, made once, that run the cells
    progress: Progress  # the caller's, logged to --out/diagnose.log once the checks passed
    backend_trials: list[str] = field(default_factory=list)  # other Keras backends tried after the rest (host-jax)

    @property
    def deadline(self) -> float | None:
        """When the size's wall budget ends (the monotonic clock), None for a size without one."""
        return None if self.size.budget_s is None else self.started + self.size.budget_s


@dataclass(frozen=True)
class _Typed:
    """What the user typed, checked: nothing probed, contacted or created yet."""

    precisions: list[str]
    variants: list[str] | None
    data_dir: str | None
    script: ScriptSpec | None
    runs_here: bool  # the host's cells run on this machine (with --slurm: on the nodes' Python)


def prepare(options: DiagnoseOptions, progress: Progress) -> Prepared:
    """Every check diagnose makes before its first run, the probe, the engines and the matrix, in that order; with
    options.plan nothing is created."""
    started = time.monotonic() if options.started is None else options.started
    typed = _check_typed(options)
    if platform.system() != "Linux":
        progress.note(OFF_LINUX.format(system=platform.system() or sys.platform))
    progress.note("probing this host")
    host, local_python, backend = _probe(options, typed)
    # The host's stacks: `host` on the configured Keras backend, or one per backend asked for (`host-jax`, ...).
    asked = [stack for e in options.engines for stack in e.host_stacks(backend)]
    backends = [stack_backend(stack) or str(backend) for stack in asked]
    stacks = ((asked or [HOST_STACK]) if options.include_host else []) + list(
        dict.fromkeys(options.stacks))
    router = Router(EngineSetup(out_dir=options.out_dir, python=options.python, backend=backend,
                                keep_profiles=options.keep_profiles, host=host, ca_bundle=options.ca_bundle,
                                wheelhouse=options.wheelhouse, force=options.force, engines=options.engines))
    # The default size: full where the host's cells get GPUs (this host's, or a Slurm job's --gres), else quick.
    host_engine = router.engine(router.engine_class(RunSpec(HOST_STACK, "float32", "original", SIZES["quick"])))
    size = SIZES[options.size or ("full" if host_engine.has_gpus() else "quick")]
    if options.include_host and typed.runs_here and host.get("gpus") and not options.stacks:
        # The host's runs go to this machine's GPU: the full size's GPU budget binds them. One size serves every
        # stack of an invocation, and a pinned stack's containers keep the full size's own measuring and rounds.
        size = on_gpu(size)
    size = _users_budget(size, options)
    # The engines these stacks need, checked before anything is created: an unreachable --docker-host stops
    # diagnose here, not after the host's runs.
    router.check(RunSpec(stack, "float32", "original", size) for stack in stacks)
    if options.include_host and local_python:
        _check_host_python(host, backend, typed.script, backends)

    if not options.plan:  # every check passed: from here on a failure leaves its log in --out
        check_out_dir(options.out_dir, create=True)
        if typed.script is not None and typed.script.log_dir:
            Path(typed.script.log_dir).mkdir(parents=True, exist_ok=True)
        logs.log_to(options.out_dir)
        progress = logs.LoggedProgress(progress)
    gpus = host.get("gpus") or []
    if gpus:
        progress.note(f"GPU: {', '.join(str(g.get('name')) for g in gpus)}; size {size.name}")
    else:
        reason = (host.get("nvml") or {}).get("error") or "NVML found no device"
        progress.note(f"no NVIDIA GPU ({reason}): diagnosing the CPU, size {size.name}")
    if size.name in SIZE_CAVEATS:
        progress.note(SIZE_CAVEATS[size.name])
    if not local_python:
        progress.note(f"--python {options.python} is not on this machine: the Slurm nodes check it themselves")
    # Where the runs go elsewhere, this machine's device says nothing of theirs: the default matrix needs none.
    precisions = typed.precisions or (default_precisions(host) if typed.runs_here else list(BASE_PRECISIONS))
    if "float32" not in precisions:
        progress.note("no float32 in --precision: the 16-bit runs have no baseline here, so no slow-step bound "
                      "and no verdict (add --precision float32)")

    results_path = options.out_dir / "results.json"
    doc = _document(options, host, size, stacks, precisions, typed)
    if options.resume and results_path.exists():
        _resume(doc, load(results_path), results_path, size, typed.data_dir, options.python or sys.executable,
                backend, typed.script, progress)
    # An engine whose GPUs are known only once it runs (a remote Docker engine's): bfloat16 is planned for its
    # stacks, and the engine keeps it where a GPU computes in bfloat16 (it says why where none does).
    unknown = any(engine.has_gpus() is None
                  for engine, _ in router.route(RunSpec(stack, "float32", "original", size) for stack in stacks))
    where_native = list(DEFAULT_WHERE_BFLOAT16) if not options.precisions and unknown else []
    specs = plan_runs(stacks, precisions, size, (typed.variants or ["original"]) if typed.script else typed.variants,
                      typed.data_dir, where_native)
    if typed.script is not None:
        specs = [replace(s, script=typed.script, data_dir=None) for s in specs]
    done = {run_key(r) for r in doc["runs"]}
    todo = [s for s in specs if (s.stack, s.precision, s.variant) not in done]
    if done and options.resume:
        progress.note(f"resuming: {len(specs) - len(todo)} of {len(specs)} runs already in {results_path}")
    trials = (backend_trials(host, backend, backends) if options.include_host and typed.runs_here
              and options.experiments else [])
    if trials:
        doc["invocation"]["backend_trials"] = trials
    return Prepared(started, host, size, stacks, typed.data_dir, typed.script, backend, doc, results_path, specs,
                    todo, router, progress, trials)


def _check_typed(options: DiagnoseOptions) -> _Typed:
    """What the user typed, every check that needs nothing probed: a usage error (exit 2) before anything else."""
    refuse(request_of(options))
    said = next((s for s in (e.usage_error(include_host=options.include_host) for e in options.engines) if s), None)
    if said is not None:
        raise DoctorError(said[0], hint=said[1], exit_code=EXIT_USAGE)
    precisions = check_precisions(options.precisions)
    variants = check_variants(options.variants)
    # Whether the host's cells run on this machine (or, with --slurm, on the nodes' Python): what is probed here,
    # and what the default matrix is, follow from it.
    runs_here = engine_class(RunSpec(HOST_STACK, "float32", "original", SIZES["quick"]),
                             EngineSetup(out_dir=options.out_dir, engines=options.engines)).runs_here
    # Where the host's cells run elsewhere, that engine checks --python (Slurm: an absolute path); here it must run.
    if options.python and runs_here and not shutil.which(options.python):
        raise DoctorError(f"--python {options.python} is not an executable",
                          hint="pass the path of a Python interpreter, e.g. ~/venvs/tf/bin/python",
                          exit_code=EXIT_USAGE)
    if options.script is not None and options.data_dir is not None and not options.data_dir.is_dir():
        raise DoctorError(f"--data {options.data_dir} is not a directory",
                          hint="with --script, --data names the folder your script reads (mounted in stacks)",
                          exit_code=EXIT_USAGE)
    # A script reads its data its own way: --data only has to be a folder.
    data_dir = check_data(options.data_dir) if options.script is None else (
        str(options.data_dir.resolve()) if options.data_dir else None)
    check_out_dir(options.out_dir, create=False)
    script = None
    if options.script is not None:
        from fp16doctor.user_script import prepare_script

        script = prepare_script(options.script, options.script_args, options.steps, options.out_dir, data_dir,
                                make_log_dir=False)
        if options.include_host and runs_here:
            check_script_compiles(Path(script.path), options.python or sys.executable)
    if options.stacks:
        from fp16doctor.stacks import get_stack

        stack_specs = [get_stack(name) for name in options.stacks]  # an unknown name fails here, before any run
        check_variants_on_stacks(variants, stack_specs)
        for stack in stack_specs:
            if script is not None and stack.python.startswith("2."):
                check_script_reads_as_python2(Path(script.path), stack.name, stack.python)
        if not options.include_host:
            # A precision asked for that no stack can run is what was typed wrong; one that some stack runs is
            # recorded skipped, with the reason, on the stacks that cannot.
            for precision in precisions:
                refusals = [r for r in (stack.precision_refusal(precision) for stack in stack_specs) if r]
                if refusals and len(refusals) == len(stack_specs):
                    raise DoctorError(f"--precision {precision}: {refusals[0]}", exit_code=EXIT_USAGE,
                                      hint="drop it, or add a stack that runs it (fp16doctor stacks list)")
    return _Typed(precisions, variants, data_dir, script, runs_here)


def _probe(options: DiagnoseOptions, typed: _Typed) -> tuple[dict[str, Any], bool, str | None]:
    """This host as the probe finds it, whether its --python is here to probe, and the Keras backend it uses."""
    from fp16doctor.probe import probe_host

    # A --python only the nodes have cannot be probed here.
    local_python = typed.runs_here or options.python is None or os.path.exists(options.python)
    host = probe_host(options.python if local_python else None)
    backend: str | None = None
    if not local_python:
        backend = os.environ.get("KERAS_BACKEND")
    elif options.include_host:
        _, backend = host_keras(host)
    return host, local_python, backend


def _check_host_python(host: dict[str, Any], backend: str | None, script: ScriptSpec | None,
                       backends: list[str]) -> None:
    """The probed Python can run the workload (or the script runner): Keras or TensorFlow, and what it imports,
    on each Keras backend asked for."""
    usable, _ = host_keras(host)
    if not usable:
        raise DoctorError(
            f"no Keras or TensorFlow in {host.get('python', {}).get('executable', 'this Python')}",
            hint="pip install 'fp16doctor[tensorflow]' (CPU-only: [tensorflow-cpu]; or [jax] / [torch]),"
            " or use --stack cpu --no-host to run in Docker",
        )
    if backends:
        check_backends(host, backends)
    asked: list[str | None] = [*backends] or [backend]
    for each in asked:
        check_workload_imports(host, each, script=script is not None)


def _users_budget(size: WorkloadSize, options: DiagnoseOptions) -> WorkloadSize:
    """The size with the user's --budget and --rounds; --budget is refused for a size that keeps no wall budget
    (the full size on a CPU runs each configuration as long as its stop rule wants)."""
    if options.budget_s is not None and not size.has_budget:
        raise DoctorError(f"--budget applies to a size with a wall budget; the {size.name} size here has none",
                          hint="add --quick, or drop --budget", exit_code=EXIT_USAGE)
    return replace(size, wall_budget_s=options.budget_s, rounds=options.rounds)


def _document(options: DiagnoseOptions, host: dict[str, Any], size: WorkloadSize, stacks: list[str],
              precisions: list[str], typed: _Typed) -> Document:
    """A new results document, with what this invocation was asked."""
    doc = new_document(host)
    doc["invocation"] = {
        "argv": ["fp16doctor", *options.argv[1:]],
        "size": size.name,
        "stacks": stacks,
        "precisions": precisions,
        "variants": typed.variants,
        "experiments": options.experiments,
        **({"budget_s": options.budget_s} if options.budget_s is not None else {}),
        **({"rounds": options.rounds} if options.rounds is not None else {}),
        **{key: value for cls in ENGINE_OPTIONS for key, value in options.engine(cls).record().items()},
        "data": "user" if typed.data_dir else "synthetic",
    }
    if typed.script is not None:
        from fp16doctor.user_script import invocation_entry

        doc["invocation"]["script"] = invocation_entry(typed.script)
        doc["invocation"]["data"] = "script"  # the script reads its own data
    return doc


def _resume(doc: Document, previous: Document, results_path: Path, size: WorkloadSize, data_dir: str | None,
            python: str, backend: str | None, script: ScriptSpec | None, progress: Progress) -> None:
    """--resume: the finished runs of `previous` that still compare with new ones go into `doc`."""
    finished = [run for run in map(Run.of, previous.get("runs", [])) if run.ok]
    # A run measured at another size or on other data is no baseline for the new runs: run it again.
    data = "user" if data_dir else "synthetic"
    kept = [run for run in finished if run.size in (None, size.name) and run.workload.get("data") in (None, data)]
    if len(kept) < len(finished):
        progress.note(f"--resume: {len(finished) - len(kept)} finished run(s) in {results_path} "
                      f"were measured at another size or on other data; running them again "
                      f"(size {size.name}, {data} data)")
    # Nor is a host run made by another Python or on another Keras backend.
    same = [run for run in kept if same_host_setup(run, python, backend)]
    if len(same) < len(kept):
        progress.note(f"--resume: {len(kept) - len(same)} finished host run(s) were measured with "
                      f"another Python or Keras backend; running them again ({python}, "
                      f"{backend or 'its default backend'})")
    if script is not None:  # a run of another version of the script is no baseline either
        same = [run for run in same if run.workload.get("script_sha256") == script.sha256]
    else:  # nor is a run of the user's script for the built-in workload
        same = [run for run in same if run.workload.get("name") != "script"]
    doc["runs"] = [run.record for run in same]
    doc["created"] = previous.get("created", doc["created"])
