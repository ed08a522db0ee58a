"""Everything diagnose does before its first run, in order: the user's input checked (creating nothing), this
host probed, the engines chosen and checked, and only then --out made and the matrix planned. `--plan` stops
before --out is made."""

from __future__ import annotations

import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fp16doctor import logs
from fp16doctor.diagnose.checks import (
    check_data,
    check_out_dir,
    check_precisions,
    check_variants,
    check_workload_imports,
    host_keras,
    refuse,
    request_of,
)
from fp16doctor.diagnose.plan import BASE_PRECISIONS, default_precisions, plan_runs, same_host_setup
from fp16doctor.engines.base import EngineSetup
from fp16doctor.engines.registry import Router
from fp16doctor.engines.spec import HOST_STACK, RunSpec, ScriptSpec, WorkloadSize
from fp16doctor.engines.spec import WORKLOAD_SIZES as SIZES
from fp16doctor.errors import EXIT_USAGE, DoctorError
from fp16doctor.options import DiagnoseOptions, Progress
from fp16doctor.results import Document, load, new_document, run_key

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


def prepare(options: DiagnoseOptions, progress: Progress) -> Prepared:
    """Every check diagnose makes before its first run, the probe, the engines and the matrix; with options.plan
    nothing is created."""
    from fp16doctor.probe import probe_host

    started = time.monotonic()
    refuse(request_of(options))
    precisions = check_precisions(options.precisions)
    variants = check_variants(options.variants)
    # On Slurm the nodes run --python (SlurmEngine.check: an absolute path); here it must run.
    if options.python and options.slurm is None and not shutil.which(options.python):
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
    if options.stacks:
        from fp16doctor.stacks import get_stack

        for name in options.stacks:
            spec = get_stack(name)  # an unknown name fails here, before minutes of host runs
            if script is not None and not spec.runs_scripts:
                raise DoctorError(f"--script cannot run in {name}: its Python {spec.python} cannot run fp16doctor's "
                                  "script runner (Python 3 only)",
                                  hint="run the built-in seed workload there (drop --script), or the script in a "
                                       "Python 3 stack such as tf2.10-cpu", exit_code=EXIT_USAGE)

    if platform.system() != "Linux":
        progress.note(OFF_LINUX.format(system=platform.system() or sys.platform))
    progress.note("probing this host")
    # On Slurm the nodes run --python; a path only the nodes have cannot be probed here.
    local_python = options.slurm is None or options.python is None or os.path.exists(options.python)
    host = probe_host(options.python if local_python else None)
    gpus = host.get("gpus") or []
    size = SIZES[options.size or ("full" if (options.slurm.gpu if options.slurm else gpus) else "quick")]
    stacks = ([HOST_STACK] if options.include_host else []) + list(dict.fromkeys(options.stacks))
    backend: str | None = None
    if not local_python:
        backend = os.environ.get("KERAS_BACKEND")
    elif options.include_host:
        _, backend = host_keras(host)
    setup = EngineSetup(out_dir=options.out_dir, python=options.python, backend=backend,
                        keep_profiles=options.keep_profiles, host=host, docker_hosts=tuple(options.docker_hosts),
                        ca_bundle=options.ca_bundle, wheelhouse=options.wheelhouse, force=options.force,
                        slurm=options.slurm)
    router = Router(setup)
    # The engines these stacks need, checked before anything is created: an unreachable --docker-host stops
    # diagnose here, not after the host's runs.
    router.check(RunSpec(stack, "float32", "original", size) for stack in stacks)
    if options.include_host and local_python:
        usable, _ = host_keras(host)
        if not usable:
            raise DoctorError(
                f"no Keras or TensorFlow in {host.get('python', {}).get('executable', 'this Python')}",
                hint="pip install 'fp16doctor[tensorflow]' (CPU-only: [tensorflow-cpu]; or [jax] / [torch]),"
                " or use --stack cpu --no-host to run in Docker",
            )
        check_workload_imports(host, backend, script=script is not None)

    if not options.plan:  # every check passed: from here on a failure leaves its log in --out
        check_out_dir(options.out_dir, create=True)
        if script is not None and script.log_dir:
            Path(script.log_dir).mkdir(parents=True, exist_ok=True)
        logs.log_to(options.out_dir)
        progress = logs.LoggedProgress(progress)
    if gpus:
        progress.note(f"GPU: {', '.join(str(g.get('name')) for g in gpus)}; size {size.name}")
    else:
        reason = (host.get("nvml") or {}).get("error") or "NVML found no device"
        progress.note(f"no NVIDIA GPU ({reason}): diagnosing the CPU, size {size.name}")
    if not local_python:
        progress.note(f"--python {options.python} is not on this machine: the Slurm nodes check it themselves")
    # On Slurm this machine is not where the runs go: the default matrix needs no device of its own.
    precisions = precisions or (list(BASE_PRECISIONS) if options.slurm else default_precisions(host))
    if "float32" not in precisions:
        progress.note("no float32 in --precision: the 16-bit runs have no baseline here, so no slow-step bound "
                      "and no verdict (add --precision float32)")

    results_path = options.out_dir / "results.json"
    doc = new_document(host)
    if options.resume and results_path.exists():
        _resume(doc, load(results_path), results_path, size, data_dir, options.python or sys.executable, backend,
                script, progress)
    doc["invocation"] = {
        "argv": ["fp16doctor", *options.argv[1:]],
        "size": size.name,
        "stacks": stacks,
        "precisions": precisions,
        "variants": variants,
        "experiments": options.experiments,
        "docker_hosts": options.docker_hosts,
        "data": "user" if data_dir else "synthetic",
    }
    if options.slurm is not None:
        doc["invocation"]["slurm"] = options.slurm.sbatch_args()
    if script is not None:
        from fp16doctor.user_script import invocation_entry

        doc["invocation"]["script"] = invocation_entry(script)
        doc["invocation"]["data"] = "script"  # the script reads its own data

    # Remote engines' GPUs are known only once connected: bfloat16 is planned for their stacks, and the
    # Docker engine keeps it where a GPU computes in bfloat16 (it says why where none does).
    where_native = ["mixed_bfloat16"] if not options.precisions and options.docker_hosts else []
    specs = plan_runs(stacks, precisions, size, (variants or ["original"]) if script else variants, data_dir,
                      where_native)
    if script is not None:
        specs = [replace(s, script=script, data_dir=None) for s in specs]
    done = {run_key(r) for r in doc["runs"]}
    todo = [s for s in specs if (s.stack, s.precision, s.variant) not in done]
    if done and options.resume:
        progress.note(f"resuming: {len(specs) - len(todo)} of {len(specs)} runs already in {results_path}")
    return Prepared(started, host, size, stacks, data_dir, script, backend, doc, results_path, specs, todo, router,
                    progress)


def _resume(doc: Document, previous: Document, results_path: Path, size: WorkloadSize, data_dir: str | None,
            python: str, backend: str | None, script: ScriptSpec | None, progress: Progress) -> None:
    """--resume: the finished runs of `previous` that still compare with new ones go into `doc`."""
    finished = [r for r in previous.get("runs", []) if r.get("status") == "ok"]
    # A run measured at another size or on other data is no baseline for the new runs: run it again.
    data = "user" if data_dir else "synthetic"
    doc["runs"] = [r for r in finished if r.get("size") in (None, size.name)
                   and (r.get("workload") or {}).get("data") in (None, data)]
    if len(doc["runs"]) < len(finished):
        progress.note(f"--resume: {len(finished) - len(doc['runs'])} finished run(s) in {results_path} "
                      f"were measured at another size or on other data; running them again "
                      f"(size {size.name}, {data} data)")
    # Nor is a host run made by another Python or on another Keras backend.
    kept = [r for r in doc["runs"] if same_host_setup(r, python, backend)]
    if len(kept) < len(doc["runs"]):
        progress.note(f"--resume: {len(doc['runs']) - len(kept)} finished host run(s) were measured with "
                      f"another Python or Keras backend; running them again ({python}, "
                      f"{backend or 'its default backend'})")
        doc["runs"] = kept
    if script is not None:  # a run of another version of the script is no baseline either
        doc["runs"] = [r for r in doc["runs"] if (r.get("workload") or {}).get("script_sha256") == script.sha256]
    else:  # nor is a run of the user's script for the built-in workload
        doc["runs"] = [r for r in doc["runs"] if (r.get("workload") or {}).get("name") != "script"]
    doc["created"] = previous.get("created", doc["created"])
