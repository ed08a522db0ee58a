"""diagnose's checks of what the user asked, before anything is created or run: pure, apart from reading the
files named (the script, --data) and asking the filesystem whether --out can be written."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fp16doctor.errors import EXIT_USAGE, DoctorError
from fp16doctor.invocation import DiagnoseRequest, refusal
from fp16doctor.options import DiagnoseOptions
from fp16doctor.probe.frameworks import framework_works
from fp16doctor.workload.dataset import class_folders
from fp16doctor.workload.protocol import KERAS3_BACKENDS, compose_variant, variant_base, variant_parts


def check_out_dir(out_dir: Path, create: bool = True) -> None:
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


def refuse(request: DiagnoseRequest) -> None:
    """What the user typed, checked by the one validator every printed command passes too (invocation.py)."""
    refused = refusal(request)
    if refused is not None:
        raise DoctorError(refused.message, hint=refused.hint, exit_code=EXIT_USAGE)


def request_of(options: DiagnoseOptions) -> DiagnoseRequest:
    given = {name for name, value in (("--steps", options.steps is not None), ("--script-arg", options.script_args))
             if value} | {o.flag for engine in options.engines for o in engine.given()}
    return DiagnoseRequest(tuple(options.stacks), tuple(options.precisions), tuple(options.variants or ()),
                           options.script is not None, options.include_host, frozenset(given))


def check_precisions(precisions: list[str]) -> list[str]:
    """The precisions asked for, checked, float32 first (its step sets the others' slow-step bound)."""
    refuse(DiagnoseRequest(precisions=tuple(precisions)))
    return float32_first(dict.fromkeys(precisions))


def check_variants(variants: list[str] | None) -> list[str] | None:
    """The variants asked for, checked, each combined one spelled in VARIANTS' order (xla+synthetic_input is
    synthetic_input+xla) and preceded by the configuration it is compared with (synthetic_input), each once."""
    if not variants:
        return None
    refuse(DiagnoseRequest(variants=tuple(variants)))
    chosen: list[str] = []
    for variant in (compose_variant(variant_parts(v)) for v in variants):
        bases = [variant]
        while len(variant_parts(bases[0])) > 1:
            bases.insert(0, variant_base(bases[0]))
        chosen += bases
    return list(dict.fromkeys(chosen))


def check_variants_on_stacks(variants: list[str] | None, stacks: Iterable[Any]) -> None:
    """A variant that switches oneDNN off (the CPU's kernels) beside a stack that runs on a GPU: a usage error
    naming both (`stacks`: the catalogue's StackSpecs named with --stack)."""
    off = next((v for v in variants or () if "onednn_off" in variant_parts(v)), None)
    gpu = next((s for s in stacks if s.gpu), None)
    if off is not None and gpu is not None:
        raise DoctorError(f"--variant {off} on --stack {gpu.name}: onednn_off switches the CPU's kernels, and "
                          f"{gpu.name} trains on a GPU", hint="run onednn_off on a CPU stack (--stack cpu) or "
                          "this host's CPU", exit_code=EXIT_USAGE)


def float32_first(precisions: Iterable[str]) -> list[str]:
    return sorted(precisions, key=lambda p: p != "float32")


def check_data(data_dir: Path | None) -> str | None:
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


def host_keras(host: dict[str, Any]) -> tuple[bool, str | None]:
    """Whether the host Python can run the workload, and the Keras backend it would use."""
    frameworks = host.get("frameworks") or {}
    keras = frameworks.get("keras") or {}

    def works(name: str) -> bool:
        return framework_works(frameworks.get(name))

    usable = works("keras") or works("tf_keras") or works("tensorflow")
    backend = os.environ.get("KERAS_BACKEND") or keras.get("backend")
    if _major(keras.get("version")) >= 3:
        installed = [name for name in KERAS3_BACKENDS if works(name)]
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


def check_backends(host: dict[str, Any], backends: list[str]) -> None:
    """Each --backend asked for is a Keras 3 backend this Python has working (the probe's `keras_backends`; Keras 2
    and tf_keras run on TensorFlow only): what the machine lacks, exit 1, before anything runs."""
    keras = (host.get("frameworks") or {}).get("keras") or {}
    python = (host.get("python") or {}).get("executable") or "the target Python"
    if _major(keras.get("version")) < 3 or keras.get("error"):
        raise DoctorError(f"--backend needs Keras 3, and {python} has "
                          + (f"Keras {keras.get('version')}" if keras.get("version") else "none"),
                          hint=f"{python} -m pip install 'keras>=3', or drop --backend")
    probed = {str(b.get("name")): b for b in host.get("keras_backends") or [] if isinstance(b, dict)}
    frameworks = host.get("frameworks") or {}
    for name in backends:
        entry = probed.get(name) if "keras_backends" in host else (
            {"works": True} if frameworks.get(name) else None)
        if entry is None or not entry.get("works"):
            why = f"does not have {name}" if entry is None else f"has a broken {name} ({entry.get('error')})"
            raise DoctorError(f"--backend {name}: {python} {why}",
                              hint=f"{python} -m pip install {'tensorflow-cpu' if name == 'tensorflow' else name}, "
                                   f"or drop --backend {name}")


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




# Compiling a script takes well under a second; an interpreter that hangs is no reason to wait for it.
COMPILE_TIMEOUT_S = 30.0
_COMPILE = ("import sys\n"
            "path = sys.argv[1]\n"
            "try:\n"
            "    compile(open(path, 'rb').read(), path, 'exec', dont_inherit=True)\n"
            "except SyntaxError as exc:\n"
            "    sys.stdout.write('%s (line %s)' % (exc.msg, exc.lineno))\n"
            "    sys.exit(3)\n")


def check_script_compiles(script: Path, python: str) -> None:
    """A --script that its interpreter cannot compile is what the user typed wrong: said before anything runs (the
    interpreter that runs it compiles it, so a script for an older or newer Python is judged by its own)."""
    import subprocess

    try:
        done = subprocess.run([python, "-c", _COMPILE, str(script)], capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return  # the run itself will say what is wrong with the interpreter
    if done.returncode == 3:
        raise DoctorError(f"--script {script} does not compile on {python}: {done.stdout.strip()}",
                          hint="fix the script, or run it on a stack whose Python reads it (--stack NAME --no-host)",
                          exit_code=EXIT_USAGE)


def check_script_reads_as_python2(script: Path, stack: str, python: str) -> None:
    """A --script for a Python 2 stack that uses Python 3-only syntax is what the user typed wrong: said before
    anything is built or run. This machine has no Python 2.7 to compile it with, so it is read for Python 3-only
    syntax (py2_syntax.py); what that reading cannot tell, the stack's Python compiles when the script runs."""
    from fp16doctor.diagnose.py2_syntax import python2_problem

    try:
        source = script.read_bytes()
    except OSError:
        return  # prepare_script has read it already; the run will say
    problem = python2_problem(source)
    if problem is not None:
        what, line = problem
        raise DoctorError(f"--script {script} is not Python 2.7, which the {stack} stack runs (Python {python}): "
                          f"{what} (line {line})",
                          hint="make the script valid Python 2.7, or run it in a Python 3 stack such as tf2.10-cpu "
                               "(--stack tf2.10-cpu --no-host)", exit_code=EXIT_USAGE)
