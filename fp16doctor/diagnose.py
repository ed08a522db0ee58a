"""`fp16doctor diagnose`: probe -> plan -> run each cell on its engine -> results -> analysis -> report.

Every finished run is written to results.json at once, so an interrupted diagnose keeps what it measured.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fp16doctor import logs
from fp16doctor.engines.base import (
    MIN_ROUNDS,
    SIZES,
    EngineSetup,
    RunSpec,
    ScriptSpec,
    WorkloadSize,
    comparison_groups,
)
from fp16doctor.errors import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, DoctorError
from fp16doctor.invocation import DiagnoseRequest, refusal
from fp16doctor.knowledge.cpu import CPU_BF16_FLAGS
from fp16doctor.knowledge.gpus import gpu_has_bfloat16
from fp16doctor.options import HOST_STACK, DiagnoseOptions, Progress
from fp16doctor.results import (
    VARIANT_CHANGES,
    Document,
    ResultsWriter,
    load,
    new_document,
    run_key,
)
from fp16doctor.runplan import QUICK_BUDGET_S
from fp16doctor.workload.dataset import class_folders
from fp16doctor.workload.protocol import PRECISIONS, SCRIPT_VARIANTS, VARIANTS

if TYPE_CHECKING:
    from fp16doctor.analysis import Diagnosis
    from fp16doctor.runplan import DiagnosePlan

# The matrix every diagnose runs; mixed_bfloat16 joins it where the device computes in bfloat16.
BASE_PRECISIONS = ("float32", "float16", "mixed_float16")


@dataclass
class DiagnoseOutcome:
    document: Document
    results_path: Path
    report_path: Path | None
    exit_code: int
    failed: list[dict[str, Any]]
    diagnosis: Diagnosis  # made once, written to results.json and rendered by the report and the summary


# What diagnose says, in one line, on a host that is not Linux (where it is built and tested).
OFF_LINUX = ("{system} is not Linux: diagnose runs on this host's Python, untested here; --slurm needs a Linux login"
             " node, and the Docker stacks' GPUs need Linux (on Windows: Docker inside WSL2)")


def _check_out_dir(out_dir: Path, create: bool = True) -> None:
    """--out can be written to; made here unless `create` is off (--plan creates nothing: then the folder, or
    the nearest one above it that exists, must be a folder this user may write in)."""
    # mkdir says only "File exists" when a folder on the way is a file: name it.
    blocker = next((p for p in (out_dir, *out_dir.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise DoctorError(f"--out {out_dir}: {blocker} is a file, not a folder",
                          hint="pass a folder for --out, e.g. --out ./fp16doctor-out", exit_code=EXIT_USAGE)
    try:
        if not create:
            existing = next(p for p in (out_dir, *out_dir.absolute().parents) if p.exists())
            if not existing.is_dir():
                raise NotADirectoryError(20, "Not a directory")
            if not os.access(existing, os.W_OK | os.X_OK):
                raise PermissionError(13, "Permission denied")
            return
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".fp16doctor-write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise DoctorError(
            f"cannot write to --out {out_dir} ({exc.strerror or exc.__class__.__name__})",
            hint="pass a directory you can write to, e.g. --out ./fp16doctor-out",
        ) from None


def _refuse(request: DiagnoseRequest) -> None:
    """What the user typed, checked by the one validator every printed command passes too (invocation.py)."""
    refused = refusal(request)
    if refused is not None:
        raise DoctorError(refused.message, hint=refused.hint, exit_code=EXIT_USAGE)


def _request(options: DiagnoseOptions) -> DiagnoseRequest:
    slurm = options.slurm
    given = {name for name, value in (("--steps", options.steps is not None), ("--script-arg", options.script_args),
                                      ("--runtime", slurm and slurm.runtime), ("--registry", slurm and slurm.registry))
             if value}
    return DiagnoseRequest(tuple(options.stacks), tuple(options.precisions), tuple(options.variants or ()),
                           tuple(options.docker_hosts), options.script is not None, options.include_host,
                           slurm is not None, frozenset(given))


def _check_precisions(precisions: list[str]) -> list[str]:
    """The precisions asked for, checked, float32 first (its step sets the others' slow-step bound)."""
    _refuse(DiagnoseRequest(precisions=tuple(precisions)))
    return _float32_first(dict.fromkeys(precisions))


def _check_variants(variants: list[str] | None) -> list[str] | None:
    if not variants:
        return None
    _refuse(DiagnoseRequest(variants=tuple(variants)))
    return list(dict.fromkeys(variants))


def _float32_first(precisions: Iterable[str]) -> list[str]:
    return sorted(precisions, key=lambda p: p != "float32")


def device_has_bfloat16(host: Mapping[str, Any]) -> bool:
    """Whether the device the host runs use computes in bfloat16: with NVIDIA GPUs, any of compute
    capability 8.0 or newer; without, a CPU with BF16 instructions (knowledge/cpu.py CPU_BF16_FLAGS:
    AVX512-BF16, AMX-BF16, Arm BF16)."""
    gpus = [g for g in host.get("gpus") or [] if isinstance(g, Mapping)]
    if gpus:
        return any(gpu_has_bfloat16(g.get("compute_capability")) for g in gpus)
    cpu = host.get("cpu")
    if not isinstance(cpu, Mapping):
        return False
    flags = cpu.get("flags")
    return bool(set(flags if isinstance(flags, list) else []) & set(CPU_BF16_FLAGS)) or cpu.get("bf16_native") is True


def default_precisions(host: Mapping[str, Any]) -> list[str]:
    """The matrix when --precision is not given: float32, float16 and mixed_float16 everywhere, and
    mixed_bfloat16 where the device has bfloat16 arithmetic (elsewhere it would only be emulated)."""
    return [*BASE_PRECISIONS, *(["mixed_bfloat16"] if device_has_bfloat16(host) else [])]


def _check_data(data_dir: Path | None) -> str | None:
    if data_dir is None:
        return None
    if not data_dir.is_dir():
        raise DoctorError(f"--data {data_dir} is not a directory",
                          hint="pass the train directory that holds one folder per class", exit_code=EXIT_USAGE)
    classes = class_folders(str(data_dir))
    if len(classes) < 2:
        raise DoctorError(
            f"--data {data_dir} has {len(classes)} class folder(s) with images; the script needs at least 2",
            hint="lay it out as DIR/<class name>/<image files>, as flow_from_directory expects", exit_code=EXIT_USAGE,
        )
    return str(data_dir.resolve())


def _major(version: Any) -> int:
    try:
        return int(str(version).split(".")[0])
    except ValueError:
        return 0


def _host_keras(host: dict[str, Any]) -> tuple[bool, str | None]:
    """Whether the host Python can run the workload, and the Keras backend it would use."""
    frameworks = host.get("frameworks") or {}
    keras = frameworks.get("keras") or {}

    def works(name: str) -> bool:
        # A broken or hung install comes back from the probe as {"version": ..., "error": ...}.
        entry = frameworks.get(name) or {}
        return bool(entry.get("version")) and not entry.get("error")

    usable = works("keras") or works("tf_keras") or works("tensorflow")
    backend = os.environ.get("KERAS_BACKEND") or keras.get("backend")
    if _major(keras.get("version")) >= 3:
        installed = [name for name in ("tensorflow", "jax", "torch") if works(name)]
        if backend not in installed and installed:
            # Keras 3 defaults to TensorFlow; fall back to whichever backend is really installed.
            backend = installed[0]
    return usable, backend


# What fp16doctor's code in the target Python imports besides the framework: (probe key, name, what to pip
# install). NumPy: the built-in workload and the script runner both (run_workload's batches and versions).
WORKLOAD_MODULES = (("numpy", "NumPy", "numpy"),)
# Only the built-in workload's: a script brings its own imports (and its own error names what it lacks).
# Pillow loads the images (workload/dataset.py, flow_from_directory).
BUILTIN_WORKLOAD_MODULES = (("pillow", "Pillow", "pillow"),)
# SciPy only under the Keras 2 API (keras 2.x, tf_keras): its ImageDataGenerator.apply_transform always
# calls apply_affine_transform, which raises "Image transformations require SciPy" without it, even for
# the built-in workload's flips (tf_keras/src/preprocessing/image.py); Keras 3's legacy copy needs SciPy
# only for rotations, shifts and zooms (keras/src/legacy/preprocessing/image.py).
KERAS2_MODULES = (("scipy", "SciPy", "scipy"),)
KERAS3_BACKENDS = ("tensorflow", "jax", "torch")


def check_workload_imports(host: dict[str, Any], backend: str | None, *, script: bool = False) -> None:
    """Stop before any run when the target Python lacks what the workload imports, naming the package.

    script: the user's script runs instead of the built-in workload, so only what the script runner
    itself needs is asked (not Pillow, not SciPy). Reads the probe's answers (a child process of the
    target Python imported each one); a module the probe did not ask about (an older results file, a
    probe without it) is not held against the host.
    """
    frameworks = host.get("frameworks") or {}
    python = (host.get("python") or {}).get("executable") or "the target Python"
    keras = frameworks.get("keras") or {}
    keras3 = _major(keras.get("version")) >= 3 and not keras.get("error")
    needed: tuple[tuple[str, str, str], ...] = WORKLOAD_MODULES
    if not script:
        needed += BUILTIN_WORKLOAD_MODULES + (() if keras3 else KERAS2_MODULES)
    user = "fp16doctor's script runner" if script else "the workload"
    for key, name, package in needed:
        if key not in frameworks:
            continue
        entry = frameworks[key]
        if entry is None or entry.get("error"):
            why = "cannot import" if entry is None else f"has a broken {name} ({entry['error']}) and cannot use"
            raise DoctorError(f"{python} {why} {name}, which {user} needs",
                              hint=f"{python} -m pip install {package}")
    if keras3 and backend in KERAS3_BACKENDS and backend in frameworks:
        entry = frameworks.get(backend)
        if entry is None or entry.get("error"):
            raise DoctorError(f"{python} has Keras {keras.get('version')} but no working backend for it "
                              f"(KERAS_BACKEND={backend})",
                              hint=f"{python} -m pip install "
                                   + ("tensorflow-cpu" if backend == "tensorflow" else backend)
                                   + " (or set KERAS_BACKEND to an installed one: tensorflow, jax, torch)")


def _same_host_setup(run: Mapping[str, Any], python: str, backend: str | None) -> bool:
    """A finished host run still compares with new ones: same interpreter, same Keras backend (where
    both are known). Container runs are judged by their stack and size alone."""
    if run.get("stack") != HOST_STACK:
        return True
    engine = run.get("engine") if isinstance(run.get("engine"), Mapping) else {}
    recorded = engine.get("python") if isinstance(engine, Mapping) else None
    if recorded and os.path.abspath(str(recorded)) != os.path.abspath(python):
        return False
    software = run.get("software") if isinstance(run.get("software"), Mapping) else {}
    ran_on = software.get("keras_backend") if isinstance(software, Mapping) else None
    return not (backend and ran_on and ran_on != backend)


def _uses_gpu(stack: str) -> bool:
    from fp16doctor.stacks import get_stack

    return get_stack(stack).gpu


def plan_runs(
    stacks: list[str], precisions: list[str], size: WorkloadSize, variants: list[str] | None,
    data_dir: str | None, where_native: Iterable[str] = (),
) -> list[RunSpec]:
    """The matrix; `where_native`: precisions for the GPU stacks of engines whose devices are not known yet, run
    only where a GPU computes them natively (RunSpec.native_only), whatever this machine's own device would say."""
    specs: list[RunSpec] = []
    for stack in stacks:
        extra = [p for p in where_native if stack != HOST_STACK and _uses_gpu(stack)]
        ordered = _float32_first(dict.fromkeys([*precisions, *extra]))
        for v in variants or ["original"]:
            experiment = {"changes": VARIANT_CHANGES[v], "tests": None} if v in VARIANT_CHANGES else None
            specs += [RunSpec(stack, precision, v, size, data_dir=data_dir if stack == HOST_STACK else None,
                              experiment=experiment, native_only=precision in extra)
                      for precision in ordered]
        if variants is None:
            # synthetic_input (batches already in memory) isolates device compute from the input
            # pipeline; the quick size keeps only float32's to stay within its time budget.
            synth = ["float32"] if size.name == "quick" else ordered
            specs += [RunSpec(stack, p, "synthetic_input", size, native_only=p in extra)
                      for p in ordered if p in synth]
    return specs


@dataclass
class _Prepared:
    """What every check passed and the matrix came to, before anything runs or is created."""

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
    progress: Progress  # the caller's, logged to --out/diagnose.log once the checks passed


def _prepare(options: DiagnoseOptions, progress: Progress) -> _Prepared:
    """Every check diagnose makes before its first run (the user's input, the out folder, the script, the stacks,
    Slurm's tools, this host's Keras), the probe, and the matrix; with options.plan nothing is created."""
    from fp16doctor.probe import probe_host

    started = time.monotonic()
    _refuse(_request(options))
    precisions = _check_precisions(options.precisions)
    variants = _check_variants(options.variants)
    if options.python and not shutil.which(options.python):
        raise DoctorError(f"--python {options.python} is not an executable",
                          hint="pass the path of a Python interpreter, e.g. ~/venvs/tf/bin/python",
                          exit_code=EXIT_USAGE)
    if options.script is not None and options.data_dir is not None and not options.data_dir.is_dir():
        raise DoctorError(f"--data {options.data_dir} is not a directory",
                          hint="with --script, --data names the folder your script reads (mounted in stacks)",
                          exit_code=EXIT_USAGE)
    # A script reads its data its own way: --data only has to be a folder.
    data_dir = _check_data(options.data_dir) if options.script is None else (
        str(options.data_dir.resolve()) if options.data_dir else None)
    _check_out_dir(options.out_dir, create=not options.plan)
    script = None
    if options.script is not None:
        from fp16doctor.user_script import prepare_script

        script = prepare_script(options.script, options.script_args, options.steps, options.out_dir, data_dir,
                                make_log_dir=not options.plan)
    if options.stacks:
        from fp16doctor.scheduler import parse_docker_host
        from fp16doctor.stacks import get_stack

        for name in options.stacks:
            get_stack(name)  # an unknown name fails here, before minutes of host runs
        for url in options.docker_hosts:
            parse_docker_host(url)
    if options.slurm is not None:
        _check_slurm(options)

    if not options.plan:  # the checks passed: from here on a failure leaves its log in --out
        logs.log_to(options.out_dir)
        progress = logs.LoggedProgress(progress)
    if platform.system() != "Linux":
        progress.note(OFF_LINUX.format(system=platform.system() or sys.platform))
    progress.note("probing this host")
    # On Slurm the nodes run --python; a path only the nodes have cannot be probed here.
    local_python = options.slurm is None or options.python is None or os.path.exists(options.python)
    host = probe_host(options.python if local_python else None)
    gpus = host.get("gpus") or []
    size = SIZES[options.size or ("full" if (options.slurm.gpu if options.slurm else gpus) else "quick")]
    if gpus:
        progress.note(f"GPU: {', '.join(str(g.get('name')) for g in gpus)}; size {size.name}")
    else:
        reason = (host.get("nvml") or {}).get("error") or "NVML found no device"
        progress.note(f"no NVIDIA GPU ({reason}): diagnosing the CPU, size {size.name}")
    stacks = ([HOST_STACK] if options.include_host else []) + list(dict.fromkeys(options.stacks))
    # On Slurm this machine is not where the runs go: the default matrix needs no device of its own.
    precisions = precisions or (list(BASE_PRECISIONS) if options.slurm else default_precisions(host))
    if "float32" not in precisions:
        progress.note("no float32 in --precision: the 16-bit runs have no baseline here, so no slow-step bound "
                      "and no verdict (add --precision float32)")

    backend: str | None = None
    if not local_python:
        backend = os.environ.get("KERAS_BACKEND")
        progress.note(f"--python {options.python} is not on this machine: the Slurm nodes check it themselves")
    elif options.include_host:
        usable, backend = _host_keras(host)
        if not usable:
            raise DoctorError(
                f"no Keras or TensorFlow in {host.get('python', {}).get('executable', 'this Python')}",
                hint="pip install 'fp16doctor[tensorflow]' (CPU-only: [tensorflow-cpu]; or [jax] / [torch]),"
                " or use --stack cpu --no-host to run in Docker",
            )
        check_workload_imports(host, backend, script=script is not None)

    results_path = options.out_dir / "results.json"
    doc = new_document(host)
    if options.resume and results_path.exists():
        previous = load(results_path)
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
        python = options.python or sys.executable
        kept = [r for r in doc["runs"] if _same_host_setup(r, python, backend)]
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
    # scheduler keeps it where a GPU computes in bfloat16 (it says why where none does).
    where_native = ["mixed_bfloat16"] if not options.precisions and options.docker_hosts else []
    specs = plan_runs(stacks, precisions, size, (variants or ["original"]) if script else variants, data_dir,
                      where_native)
    if script is not None:
        specs = [replace(s, script=script, data_dir=None) for s in specs]
    done = {run_key(r) for r in doc["runs"]}
    todo = [s for s in specs if (s.stack, s.precision, s.variant) not in done]
    if done and options.resume:
        progress.note(f"resuming: {len(specs) - len(todo)} of {len(specs)} runs already in {results_path}")
    return _Prepared(started, host, size, stacks, data_dir, script, backend, doc, results_path, specs, todo,
                     progress)


def plan_diagnose(options: DiagnoseOptions, progress: Progress) -> DiagnosePlan:
    """`diagnose --plan`: every check of a real diagnose, then what it would run, where, and about how long;
    nothing runs and nothing is created (no --out folder, no results, no container, no job)."""
    from fp16doctor.runplan import describe_plan

    prepared = _prepare(replace(options, plan=True), progress)
    return describe_plan(prepared.todo, len(prepared.specs) - len(prepared.todo), prepared.size, options,
                         prepared.results_path)


def run_diagnose(options: DiagnoseOptions, progress: Progress) -> DiagnoseOutcome:
    from fp16doctor.analysis import diagnose_document

    prepared = _prepare(options, progress)
    started, host, size, stacks = prepared.started, prepared.host, prepared.size, prepared.stacks
    data_dir, script, backend, doc = prepared.data_dir, prepared.script, prepared.backend, prepared.doc
    results_path, todo, progress = prepared.results_path, prepared.todo, prepared.progress
    writer = ResultsWriter(results_path, doc)

    extra_findings: list[dict[str, Any]] = []
    interrupted = False
    try:
        extra_findings += _run_specs(todo, host, backend, options, writer, progress)
        if options.include_host:
            _time_in_rounds(writer, size, started, host, backend, options, progress, script)
        if options.experiments:
            planned = experiment_specs(plan_experiments(doc, progress), stacks, size, data_dir,
                                       {run_key(r) for r in doc["runs"]})
            if script is not None:
                planned = _script_experiments(planned, script, progress)
            if size.name == "quick":
                planned = _within_budget(planned, doc["runs"], started + QUICK_BUDGET_S, progress)
            if planned:
                progress.note(f"{len(planned)} experiment run(s), each changing one thing: "
                              + ", ".join(f"{s.precision} {s.variant}" for s in planned))
                extra_findings += _run_specs(planned, host, backend, options, writer, progress)
    except KeyboardInterrupt:
        interrupted = True

    doc["invocation"]["elapsed_s"] = round(time.monotonic() - started, 1)
    # What only the pre-flight knows is stored as data a rule reads, so every re-analysis says it again.
    doc["preflight"] = [{"stack": f.get("stack"), "ok": False, "reasons": f.get("evidence", []),
                         "alternatives": f.get("alternatives", []), "forced": options.force} for f in extra_findings]
    diagnosis = diagnose_document(doc)
    writer.set_findings(diagnosis.findings, diagnosis.verdicts, diagnosis.prescriptions,
                        [c.to_dict() for c in diagnosis.stack_comparisons])
    diagnosis = replace(diagnosis, findings_source="results")  # written to results.json with the runs
    from fp16doctor.report import write_report

    report_path: Path | None = options.out_dir / "report.html"
    try:
        write_report([doc], options.out_dir / "report.html", "html", [diagnosis])
    except DoctorError as exc:
        progress.note(f"report not written: {exc.message}")
        report_path = None
    if interrupted:
        raise KeyboardInterrupt
    if script is not None:
        from fp16doctor.user_script import run_notes, script_failure

        for note in run_notes(doc["runs"]):
            progress.note(note)
        error = script_failure(doc["runs"], script)
        if error is not None:
            raise error  # results.json and the report keep what did run
    failed = [r for r in doc["runs"] if r.get("status") == "failed"]
    exit_code = EXIT_PARTIAL if failed else EXIT_OK
    return DiagnoseOutcome(doc, results_path, report_path, exit_code, failed, diagnosis)


def _run_specs(
    todo: list[RunSpec], host: dict[str, Any], backend: str | None, options: DiagnoseOptions,
    writer: ResultsWriter, progress: Progress,
) -> list[dict[str, Any]]:
    """Run specs on the host, then in their stacks; every record is written as it finishes. On Slurm,
    every cell goes to the cluster: the host's on the nodes' Python, a stack's in its container there."""
    if options.slurm is not None:
        todo = _skip_unsupported(todo, writer, progress)
        if todo:
            _run_on_host(todo, host, backend, options, writer, progress, len(todo))
        return []
    host_specs = [s for s in todo if s.stack == HOST_STACK]
    stack_specs = [s for s in todo if s.stack != HOST_STACK]
    if host_specs:
        _run_on_host(host_specs, host, backend, options, writer, progress, len(todo))
    if not stack_specs:
        return []
    from fp16doctor.scheduler import run_stack_specs

    return run_stack_specs(stack_specs, host, options, writer, progress, offset=len(host_specs), total=len(todo))


def _skip_unsupported(todo: list[RunSpec], writer: ResultsWriter, progress: Progress) -> list[RunSpec]:
    """The cells a stack can run; the others (mixed_float16 on Keras 2.1.5, ...) are recorded skipped with the
    reason, as the Docker engines' scheduler does, instead of costing a job."""
    from fp16doctor.engines.base import base_run_record
    from fp16doctor.scheduler import precision_skip_reason
    from fp16doctor.stacks import get_stack

    kept = []
    for spec in todo:
        reason = None if spec.stack == HOST_STACK else precision_skip_reason(get_stack(spec.stack), spec.precision)
        if reason is None:
            kept.append(spec)
            continue
        record = base_run_record(spec, "cpu")
        record.update(status="skipped", error=reason, engine={"kind": "slurm"})
        writer.add_run(record)
        progress.finish_run(record)
    return kept


def _script_experiments(planned: list[RunSpec], script: ScriptSpec, progress: Progress) -> list[RunSpec]:
    """The planned experiments a script can take unchanged (an environment variable or a compile argument);
    the others would rewrite its model or its data, and are said, not run."""
    kept = [replace(s, script=script, data_dir=None) for s in planned if s.variant in SCRIPT_VARIANTS]
    for spec in planned:
        if spec.variant not in SCRIPT_VARIANTS:
            progress.note(f"experiment {spec.precision} {spec.variant} not run: it changes the built-in "
                          "workload's model or data, and your script runs unchanged")
    return kept


def plan_experiments(doc: Document, progress: Progress) -> list[dict[str, Any]]:
    """The experiments the analysis asks for after the main matrix; the ones not worth a run are said.
    A planner that breaks costs the experiments, never the measured runs, the analysis or the report."""
    from fp16doctor.analysis.experiments import plan

    try:
        items = plan(doc)
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError) as exc:
        progress.note(f"no experiments: planning them failed ({exc.__class__.__name__}: {exc})")
        return []
    for item in items:
        if "skip_reason" in item:
            progress.note(f"experiment {item['precision']} {item['variant']} skipped: {item['skip_reason']}")
    return [item for item in items if "skip_reason" not in item]


def experiment_specs(
    items: Iterable[Mapping[str, Any]], stacks: list[str], size: WorkloadSize, data_dir: str | None,
    done: set[tuple[str, str, str]],
) -> list[RunSpec]:
    """Planned experiments as run specs: only for stacks this diagnose runs, each cell once, not the
    cells already measured (so --resume picks up where it stopped), float32 first in each group."""
    specs: dict[tuple[str, str, str], RunSpec] = {}
    for item in items:
        stack, precision, variant = (str(item.get(k)) for k in ("stack", "precision", "variant"))
        key = (stack, precision, variant)
        if stack not in stacks or precision not in PRECISIONS or variant not in VARIANTS or key in done:
            continue
        experiment = item.get("experiment")
        if not isinstance(experiment, Mapping):
            experiment = {"changes": VARIANT_CHANGES.get(variant, {}), "tests": None}
        experiment = dict(experiment)
        if item.get("reason"):
            experiment.setdefault("reason", str(item["reason"]))
        specs.setdefault(key, RunSpec(stack, precision, variant, size,
                                      data_dir=data_dir if stack == HOST_STACK else None,
                                      experiment=experiment))
    order = {group: i for i, group in enumerate(dict.fromkeys((s.stack, s.variant) for s in specs.values()))}
    return sorted(specs.values(), key=lambda s: (order[(s.stack, s.variant)], s.precision != "float32"))




def _time_in_rounds(writer: ResultsWriter, size: WorkloadSize, started: float, host: dict[str, Any],
                    backend: str | None, options: DiagnoseOptions, progress: Progress,
                    script: ScriptSpec | None = None) -> None:
    """Time the host's precisions again, together, in interleaved rounds (engines/rounds.py); a script's in
    one process too, each precision's model from its own run of the script (workload/script_rounds.py). On
    Slurm the rounds are one more job, on the node the runs used."""
    from fp16doctor.engines.rounds import (
        FULL_ROUNDS_BUDGET_S,
        ROUNDS_MIN_BUDGET_S,
        mark_left_out,
        rounds_plan,
        stack_rounds_budget_s,
    )

    if options.slurm is not None:
        budget = stack_rounds_budget_s(size)  # a job waits in the queue: the quick budget's clock is not its own
    elif size.name == "quick":
        budget = max(ROUNDS_MIN_BUDGET_S, started + QUICK_BUDGET_S - time.monotonic() - _rounds_startup_s(writer))
    else:
        budget = FULL_ROUNDS_BUDGET_S
    plan = rounds_plan(writer.doc["runs"], HOST_STACK, size, budget)
    for note in plan.messages():
        progress.note(note)
    if mark_left_out(writer.doc["runs"], HOST_STACK, plan):
        writer.save()
    spec = plan.spec
    if spec is None:
        return
    if script is not None:
        spec = replace(spec, script=script)
    progress.note(f"interleaved rounds of {', '.join(spec.rounds_of)} in one process, each round in a new order "
                  f"(about {budget:.0f} s, at least {MIN_ROUNDS} rounds)")
    if options.slurm is not None:
        _run_on_host([spec], host, backend, options, writer, progress, 1, _RoundsSink(writer, progress))
        return
    from fp16doctor.engines.host import HostEngine
    from fp16doctor.probe.load import machine_load, snapshot

    engine = HostEngine.from_setup(_engine_setup(options, backend, host))
    before = snapshot()  # what else ran beside the rounds: the reason a failed A/A control gives
    record = engine.run(spec, progress.event, gpu_index=engine.gpu_index)
    record["machine_load"] = machine_load(before, snapshot())
    _RoundsSink(writer, progress).finish_run(record)


def _within_budget(planned: list[RunSpec], runs: list[dict[str, Any]], deadline: float,
                   progress: Progress) -> list[RunSpec]:
    """The experiments that fit what is left of the quick budget, each costing what the run it changes took;
    the others are skipped, and said (run them with --variant, outside --quick's budget)."""
    left = deadline - time.monotonic()
    kept = []
    for spec in planned:
        base = next((r for r in runs if r.get("stack") == spec.stack and r.get("precision") == spec.precision
                     and r.get("variant", "original") == "original"), None)
        cost = float((base or {}).get("wall_s") or 0.0)
        if cost > left:
            progress.note(f"experiment {spec.precision} {spec.variant} skipped: it would take about {cost:.0f} s "
                          f"and {max(left, 0):.0f} s of the {QUICK_BUDGET_S:.0f} s quick budget are left (run it "
                          f"with --precision {spec.precision} --variant original --variant {spec.variant})")
            continue
        left -= cost
        kept.append(spec)
    return kept


def _rounds_startup_s(writer: ResultsWriter) -> float:
    """What the rounds process spends besides its budget: importing the framework, each model's first steps
    (tracing) and warm-up, float32's twice (its A/A control), and the round that starts just before the budget
    ends (the loop checks the clock between rounds)."""
    runs = [r for r in writer.doc["runs"] if r.get("stack") == HOST_STACK and r.get("status") == "ok"
            and r.get("variant", "original") == "original" and not r.get("bound")]
    import_s = max((float((r.get("timing") or {}).get("import_s") or 0.0) for r in runs), default=3.0)
    total = import_s
    one_round = 0.0
    for run in runs:
        copies = 2 if run.get("precision") == "float32" else 1
        median_s = float((run.get("step_time_ms") or {}).get("median") or 0.0) / 1000.0
        total += copies * (float(run.get("first_step_ms") or 0.0) / 1000.0 + 2 * median_s + _script_setup_s(run))
        one_round += copies * 3 * median_s
    return total + one_round


def _script_setup_s(run: Mapping[str, Any]) -> float:
    """What a script did before its first training step (reading data, building the model): the rounds run it
    again for each model. 0 for the built-in workload."""
    timing = run.get("timing") or {}
    if (run.get("workload") or {}).get("name") != "script" or not isinstance(timing.get("script_s"), (int, float)):
        return 0.0
    warmup = run.get("warmup_step_ms") or [float(run.get("first_step_ms") or 0.0)]  # the first step is in it
    steps_ms = sum(warmup) + sum(run.get("step_ms_all") or [])
    return max(0.0, float(timing["script_s"]) - float(timing.get("import_s") or 0.0) - steps_ms / 1000.0)


class _Sink:
    """An engine's RunSink for diagnose: records go to results.json at once, the rest to the display."""

    def __init__(self, writer: ResultsWriter, progress: Progress, total: int) -> None:
        self.writer = writer
        self.progress = progress
        self.total = total
        self.started = 0

    def runs(self) -> list[dict[str, Any]]:
        return list(self.writer.doc["runs"])

    def note(self, message: str) -> None:
        self.progress.note(message)

    def start_run(self, spec: RunSpec) -> None:
        self.progress.start_run(spec, self.total, self.started)
        self.started += 1

    def event(self, event: dict[str, Any]) -> None:
        self.progress.event(event)

    def finish_run(self, record: dict[str, Any]) -> None:
        self.writer.add_run(record)
        self.progress.finish_run(record)


class _RoundsSink(_Sink):
    """The rounds process's record goes into the runs it timed (engines/rounds.take_rounds), not in as a run of
    its own; its start shows as a note (the runs' progress counts cells)."""

    def __init__(self, writer: ResultsWriter, progress: Progress) -> None:
        super().__init__(writer, progress, 1)

    def start_run(self, spec: RunSpec) -> None:
        pass

    def finish_run(self, record: dict[str, Any]) -> None:
        from fp16doctor.engines.rounds import take_rounds

        kept, notes = take_rounds(self.writer.doc, record, alone="its own process")
        if kept is not None:
            self.writer.save()
        for note in notes:
            self.progress.note(note)


def _engine_setup(options: DiagnoseOptions, backend: str | None, host: dict[str, Any],
                  engine_options: Any = None) -> EngineSetup:
    """What an engine is told of this invocation: the interpreter, backend, profiles kept, this host's GPUs."""
    return EngineSetup(out_dir=options.out_dir, python=options.python, backend=backend,
                       keep_profiles=options.keep_profiles,
                       host_gpus=tuple(g for g in host.get("gpus") or [] if isinstance(g, dict)),
                       options=engine_options)


def _run_on_host(
    specs: list[RunSpec], host: dict[str, Any], backend: str | None, options: DiagnoseOptions,
    writer: ResultsWriter, progress: Progress, total: int, sink: _Sink | None = None,
) -> None:
    """The host cells, on this machine's Python or (--slurm) as Slurm jobs on the nodes' Python; `sink`: where
    their records go (the document's runs unless said)."""
    from fp16doctor.engines import registry

    slurm_options = options.slurm
    if slurm_options is not None and not slurm_options.ca_bundle and options.ca_bundle:
        slurm_options = replace(slurm_options, ca_bundle=options.ca_bundle, wheelhouse=options.wheelhouse)
    engine = registry.create("slurm" if options.slurm is not None else "host",
                             _engine_setup(options, backend, host, slurm_options))
    engine.run_groups(comparison_groups(specs), sink or _Sink(writer, progress, total))
    if options.slurm is not None and sink is None:
        writer.doc["slurm"] = engine.describe()
        writer.save()


def _check_slurm(options: DiagnoseOptions) -> None:
    """What --slurm cannot do, said before anything runs."""
    from fp16doctor.engines import runtimes, slurm

    assert options.slurm is not None  # what the command line cannot combine with --slurm: _refuse
    if options.slurm.runtime is not None:
        runtimes.require(options.slurm.runtime)
    if options.python is not None and not os.path.isabs(options.python):
        raise DoctorError(f"--python {options.python} must be an absolute path with --slurm",
                          hint="the job runs it on the node, e.g. --python /shared/venvs/tf/bin/python")
    slurm.require_tools()
