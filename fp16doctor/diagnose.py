"""`fp16doctor diagnose`: probe -> plan -> run each cell on its engine -> results -> analysis -> report.

Every finished run is written to results.json at once, so an interrupted diagnose keeps what it measured.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from fp16doctor.engines.base import SIZES, RunSpec, WorkloadSize
from fp16doctor.errors import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, DoctorError
from fp16doctor.results import PRECISIONS, Document, ResultsWriter, load, new_document, run_key
from fp16doctor.workload.dataset import class_folders

HOST_STACK = "host"


class Progress(Protocol):
    """What diagnose tells the user while it works (the CLI draws it; tests record it)."""

    def note(self, message: str) -> None: ...
    def start_run(self, spec: RunSpec, total: int, index: int) -> None: ...
    def event(self, event: dict[str, Any]) -> None: ...
    def finish_run(self, record: dict[str, Any]) -> None: ...


@dataclass
class DiagnoseOptions:
    out_dir: Path
    size: str | None = None  # "quick" | "full"; None: full with a GPU, quick without
    stacks: list[str] = field(default_factory=list)
    precisions: list[str] = field(default_factory=list)
    docker_hosts: list[str] = field(default_factory=list)
    data_dir: Path | None = None
    include_host: bool = True
    force: bool = False
    resume: bool = False
    python: str | None = None  # the host Python that runs the workload (default: this one)
    ca_bundle: Path | None = None  # for stack builds behind a TLS proxy (default: build.default_ca_bundle())
    wheelhouse: Path | None = None  # stack builds install from these wheels only
    variants: list[str] | None = None  # default: original everywhere + synthetic_input per size
    script: Path | None = None  # the user's own training script, run instead of the seed workload
    script_args: list[str] = field(default_factory=list)
    steps: int | None = None  # --script: exactly this many measured steps (default: the size decides)
    argv: list[str] = field(default_factory=lambda: list(sys.argv))


@dataclass
class DiagnoseOutcome:
    document: Document
    results_path: Path
    report_path: Path | None
    exit_code: int
    failed: list[dict[str, Any]]


def _check_out_dir(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".fp16doctor-write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise DoctorError(
            f"cannot write to --out {out_dir} ({exc.strerror or exc.__class__.__name__})",
            hint="pass a directory you can write to, e.g. --out ./fp16doctor-out",
        ) from None


def _check_precisions(precisions: list[str]) -> list[str]:
    for p in precisions:
        if p not in PRECISIONS:
            raise DoctorError(f"unknown precision {p!r}", hint=f"use one of: {', '.join(PRECISIONS)}")
    return list(dict.fromkeys(precisions)) or list(PRECISIONS)


def _check_data(data_dir: Path | None) -> str | None:
    if data_dir is None:
        return None
    if not data_dir.is_dir():
        raise DoctorError(f"--data {data_dir} is not a directory",
                          hint="pass the train directory that holds one folder per class")
    classes = class_folders(str(data_dir))
    if len(classes) < 2:
        raise DoctorError(
            f"--data {data_dir} has {len(classes)} class folder(s) with images; the script needs at least 2",
            hint="lay it out as DIR/<class name>/<image files>, as flow_from_directory expects",
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


def plan_runs(
    stacks: list[str], precisions: list[str], size: WorkloadSize, variants: list[str] | None,
    data_dir: str | None,
) -> list[RunSpec]:
    specs: list[RunSpec] = []
    for stack in stacks:
        for precision in precisions:
            cell_variants = variants or ["original"]
            specs += [RunSpec(stack, precision, v, size, data_dir=data_dir if stack == HOST_STACK else None)
                      for v in cell_variants]
        if variants is None:
            # synthetic_input (batches already in memory) isolates device compute from the input
            # pipeline; the quick size keeps only float32's to stay within its time budget.
            synth = ["float32"] if size.name == "quick" else precisions
            specs += [RunSpec(stack, p, "synthetic_input", size) for p in precisions if p in synth]
    return specs


def run_diagnose(options: DiagnoseOptions, progress: Progress) -> DiagnoseOutcome:
    from fp16doctor.analysis import analyse
    from fp16doctor.probe import probe_host

    started = time.monotonic()
    precisions = _check_precisions(options.precisions)
    if options.python and not shutil.which(options.python):
        raise DoctorError(f"--python {options.python} is not an executable",
                          hint="pass the path of a Python interpreter, e.g. ~/venvs/tf/bin/python")
    if options.script is None and (options.steps is not None or options.script_args):
        raise DoctorError("--steps and --script-arg apply to your own script", hint="add --script train.py",
                          exit_code=EXIT_USAGE)
    if options.script is not None and options.data_dir is not None and not options.data_dir.is_dir():
        raise DoctorError(f"--data {options.data_dir} is not a directory",
                          hint="with --script, --data names the folder your script reads (mounted in stacks)")
    # A script reads its data its own way: --data only has to be a folder.
    data_dir = _check_data(options.data_dir) if options.script is None else (
        str(options.data_dir.resolve()) if options.data_dir else None)
    _check_out_dir(options.out_dir)
    script = None
    if options.script is not None:
        from fp16doctor.user_script import prepare_script

        script = prepare_script(options.script, options.script_args, options.steps, options.out_dir, data_dir)
    if options.docker_hosts and not options.stacks:
        raise DoctorError("--docker-host without --stack runs nothing in Docker",
                          hint="add --stack NAME (see `fp16doctor stacks list`), e.g. --stack cpu")
    if options.stacks:
        from fp16doctor.stack_runs import parse_docker_host
        from fp16doctor.stacks import get_stack

        for name in options.stacks:
            get_stack(name)  # an unknown name fails here, before minutes of host runs
        for url in options.docker_hosts:
            parse_docker_host(url)
    if not options.include_host and not options.stacks:
        raise DoctorError("--no-host without --stack leaves nothing to run", hint="add --stack cpu (or another)")

    progress.note("probing this host")
    host = probe_host(options.python)
    gpus = host.get("gpus") or []
    size = SIZES[options.size or ("full" if gpus else "quick")]
    if gpus:
        progress.note(f"GPU: {', '.join(str(g.get('name')) for g in gpus)}; size {size.name}")
    else:
        reason = (host.get("nvml") or {}).get("error") or "NVML found no device"
        progress.note(f"no NVIDIA GPU ({reason}): diagnosing the CPU, size {size.name}")
    stacks = ([HOST_STACK] if options.include_host else []) + list(dict.fromkeys(options.stacks))

    backend: str | None = None
    if options.include_host:
        usable, backend = _host_keras(host)
        if not usable:
            raise DoctorError(
                f"no Keras or TensorFlow in {host.get('python', {}).get('executable', 'this Python')}",
                hint="pip install 'fp16doctor[tensorflow]' (CPU-only: [tensorflow-cpu]; or [jax] / [torch]),"
                " or use --stack cpu --no-host to run in Docker",
            )

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
        if script is not None:  # a run of another version of the script is no baseline either
            doc["runs"] = [r for r in doc["runs"] if (r.get("workload") or {}).get("script_sha256") == script.sha256]
        doc["created"] = previous.get("created", doc["created"])
    doc["invocation"] = {
        "argv": ["fp16doctor", *options.argv[1:]],
        "size": size.name,
        "stacks": stacks,
        "precisions": precisions,
        "docker_hosts": options.docker_hosts,
        "data": "user" if data_dir else "synthetic",
    }
    if script is not None:
        from fp16doctor.user_script import invocation_entry

        doc["invocation"]["script"] = invocation_entry(script)
        doc["invocation"]["data"] = "script"  # the script reads its own data
    writer = ResultsWriter(results_path, doc)

    specs = plan_runs(stacks, precisions, size, ["original"] if script else options.variants, data_dir)
    if script is not None:
        specs = [replace(s, script=script, data_dir=None) for s in specs]
    done = {run_key(r) for r in doc["runs"]}
    todo = [s for s in specs if (s.stack, s.precision, s.variant) not in done]
    if done and options.resume:
        progress.note(f"resuming: {len(specs) - len(todo)} of {len(specs)} runs already in {results_path}")

    extra_findings: list[dict[str, Any]] = []
    interrupted = False
    try:
        host_specs = [s for s in todo if s.stack == HOST_STACK]
        stack_specs = [s for s in todo if s.stack != HOST_STACK]
        if host_specs:
            _run_on_host(host_specs, host, backend, options, writer, progress, len(todo))
        if stack_specs:
            from fp16doctor.stack_runs import run_stack_specs

            extra_findings += run_stack_specs(stack_specs, host, options, writer, progress,
                                              offset=len(host_specs), total=len(todo))
    except KeyboardInterrupt:
        interrupted = True

    doc["invocation"]["elapsed_s"] = round(time.monotonic() - started, 1)
    findings = analyse(doc)
    known = {f["id"] for f in findings}
    findings += [f for f in extra_findings if f["id"] not in known]
    writer.set_findings(findings)
    from fp16doctor.report import write_report

    report_path: Path | None = options.out_dir / "report.html"
    try:
        write_report([doc], options.out_dir / "report.html", "html")
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
    return DiagnoseOutcome(doc, results_path, report_path, exit_code, failed)


def _run_on_host(
    specs: list[RunSpec], host: dict[str, Any], backend: str | None, options: DiagnoseOptions,
    writer: ResultsWriter, progress: Progress, total: int,
) -> None:
    from fp16doctor.engines.host import HostEngine

    gpus = host.get("gpus") or []
    sampler = None
    if gpus:
        from fp16doctor.probe.nvml import UtilizationSampler

        sampler = UtilizationSampler
    engine = HostEngine(python=options.python, backend=backend, sampler=sampler)
    for index, spec in enumerate(specs):
        progress.start_run(spec, total, index)
        record = engine.run(spec, progress.event, gpu_index=0 if gpus else None)
        if gpus and record.get("device", "").startswith("gpu"):
            record.setdefault("engine", {})["gpu_uuid"] = gpus[0].get("uuid")
        writer.add_run(record)
        progress.finish_run(record)
