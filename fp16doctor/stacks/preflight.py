"""Compatibility pre-flight: can this stack run on this host's GPUs, driver and Docker engine?

Answered before minutes are spent pulling and building. The limits are table data: the stack's CUDA
toolkit (fp16doctor/knowledge/cuda.py) fixes the newest compute capability it has kernels for and the
oldest driver that runs its runtime. Pure: host dict in, Verdict out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fp16doctor.knowledge import cuda
from fp16doctor.stacks import StackSpec, all_stacks

FINDING_ID = "stack_incompatible_gpu"


@dataclass(frozen=True)
class Verdict:
    """The pre-flight answer for one stack on one host."""

    stack: str
    ok: bool  # the stack can run here as the tables say
    reason: str  # one sentence a user can act on
    use_gpu: bool = False  # request a GPU for the container
    gpu_indices: tuple[int, ...] = ()  # host GPUs the stack can use
    notes: tuple[str, ...] = ()  # caveats that do not stop the run
    forced: bool = False  # --force: run although ok is False
    finding: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def proceed(self) -> bool:
        return self.ok or self.forced


def _gpu_label(gpu: dict[str, Any]) -> str:
    return str(gpu.get("name") or f"GPU {gpu.get('index', '?')}")


def _gpu_problems(stack: StackSpec, gpu: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(problems that stop the stack on this GPU, caveats that do not)."""
    problems: list[str] = []
    notes: list[str] = []
    label = _gpu_label(gpu)
    toolkit = cuda.toolkit(stack.cuda)
    cc = gpu.get("compute_capability")
    cc_t = cuda.version_tuple(str(cc)) if cc is not None else None
    if toolkit is None:
        notes.append(f"CUDA {stack.cuda} is not in the knowledge tables: its GPU limits were not checked")
    elif cc_t is None:
        notes.append(f"{label}: compute capability unknown, architecture support not checked")
    else:
        top = cuda.version_tuple(toolkit.max_compute_capability) or (0,)
        bottom = cuda.version_tuple(toolkit.min_compute_capability) or (0,)
        if cc_t[0] > top[0]:
            # A newer major architecture needs SASS or PTX the toolkit's libraries (cuDNN, cuBLAS)
            # never had; NVIDIA's compatibility guides: cubins run only within one major version.
            problems.append(f"CUDA {stack.cuda} has no kernels for compute capability {cc} ({label}): "
                            f"TF {stack.tensorflow} cannot run here")
        elif cc_t > top:
            # Same major version: sm_X.y cubins run on X.z, z >= y (CUDA C Programming Guide,
            # "Binary Compatibility"), so it runs, with libraries never tuned for this GPU.
            notes.append(f"CUDA {stack.cuda} predates compute capability {cc} ({label}); it runs through "
                         f"binary compatibility with {toolkit.max_compute_capability} code, untuned")
        elif cc_t < bottom:
            problems.append(f"CUDA {stack.cuda} dropped compute capability {cc} ({label}): its oldest "
                            f"target is {toolkit.min_compute_capability}")
    min_driver = cuda.min_driver_for(stack.cuda)
    driver = gpu.get("driver_version")
    if min_driver is not None:
        enough = cuda.version_at_least(str(driver) if driver else None, min_driver)
        if enough is None:
            notes.append(f"{label}: driver version unknown, CUDA {stack.cuda} needs {min_driver} or newer")
        elif not enough:
            problems.append(f"driver {driver} on {label} is older than CUDA {stack.cuda} needs "
                            f"({min_driver} or newer): TF {stack.tensorflow} cannot start its CUDA runtime")
        elif toolkit is not None and cuda.version_at_least(str(driver), toolkit.min_linux_driver) is False:
            notes.append(f"driver {driver} runs CUDA {stack.cuda} through minor-version compatibility "
                         f"(toolkit driver {toolkit.min_linux_driver}); PTX JIT kernels may fail")
    return problems, notes


def _join_names(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]


def alternatives(stack: StackSpec, host: dict[str, Any]) -> list[str]:
    """Other GPU stacks that pass here, the same TensorFlow major version first."""
    major = stack.tensorflow.split(".")[0]
    good = [s for s in all_stacks()
            if s.name != stack.name and s.gpu and _evaluate(s, host).use_gpu]
    good.sort(key=lambda s: (s.tensorflow.split(".")[0] != major,))
    return [s.name for s in good]


def _evaluate(stack: StackSpec, host: dict[str, Any]) -> Verdict:
    gpus = [g for g in (host.get("gpus") or []) if isinstance(g, dict)]
    nvidia_runtime = (host.get("docker") or {}).get("nvidia_runtime")
    if not stack.gpu:
        return Verdict(stack.name, True, f"{stack.name} is CPU-only: it runs on any host")
    if not gpus:
        if stack.needs_gpu:
            return Verdict(stack.name, False, f"{stack.name} needs an NVIDIA GPU and driver (TF "
                           f"{stack.tensorflow} GPU builds load libcuda.so.1 at import); this host has none")
        return Verdict(stack.name, True, f"no NVIDIA GPU here: {stack.name} runs TF {stack.tensorflow} "
                       "on the CPU inside the container")
    if nvidia_runtime is False:
        if stack.needs_gpu:
            return Verdict(stack.name, False, "the Docker engine has no NVIDIA runtime, so containers "
                           f"cannot reach the GPU and TF {stack.tensorflow} cannot start "
                           "(install nvidia-container-toolkit)")
        return Verdict(stack.name, True, "the Docker engine has no NVIDIA runtime: "
                       f"{stack.name} runs on the CPU inside the container",
                       notes=("install nvidia-container-toolkit to give containers the GPU",))
    usable: list[int] = []
    usable_labels: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    for position, gpu in enumerate(gpus):
        gpu_problems, gpu_notes = _gpu_problems(stack, gpu)
        notes += [n for n in gpu_notes if n not in notes]
        if gpu_problems:
            problems += gpu_problems
        else:
            index = gpu.get("index", position)
            usable.append(int(index) if isinstance(index, int) or str(index).isdigit() else position)
            usable_labels.append(_gpu_label(gpu))
    if nvidia_runtime is None:
        notes.append("the Docker engine's NVIDIA runtime was not confirmed; the GPU request may fail")
    if usable:
        reason = f"{stack.name} (CUDA {stack.cuda}) can use {_join_names(usable_labels)}"
        if problems:
            notes = problems + notes
        return Verdict(stack.name, True, reason, use_gpu=True, gpu_indices=tuple(usable), notes=tuple(notes))
    return Verdict(stack.name, False, problems[0], notes=tuple(problems[1:] + notes))


def _finding(stack: StackSpec, verdict: Verdict, alts: list[str], forced: bool) -> dict[str, Any]:
    if alts:
        recommendation = f"Run the {_join_names(alts)} stack{'s' if len(alts) > 1 else ''} on this host"
    else:
        recommendation = "Run this stack on an older GPU or driver, or use the cpu stack here"
    recommendation += "; --force tries anyway" if not forced else " (forced: the run was attempted anyway)"
    return {
        "id": FINDING_ID,
        "title": f"The {stack.name} stack cannot run on this GPU or driver",
        "severity": "warning",
        "confidence": 0.9,
        "evidence": [verdict.reason, *verdict.notes],
        "recommendation": recommendation + ".",
        "stack": stack.name,
        "alternatives": alts,
    }


def check(stack: StackSpec, host: dict[str, Any], force: bool = False) -> Verdict:
    """The pre-flight verdict for `stack` on `host` (a probe dict: host["gpus"][i] with name,
    compute_capability, driver_version; host["docker"]["nvidia_runtime"] when the engine was asked).

    A failed check carries the precise reason, the stacks that would run instead, and a
    stack_incompatible_gpu finding; force=True marks it forced so the caller runs it anyway.
    """
    verdict = _evaluate(stack, host)
    if verdict.ok:
        return verdict
    alts = alternatives(stack, host)
    reason = verdict.reason
    if alts:
        reason += f"; the {_join_names(alts)} stack{'s' if len(alts) > 1 else ''} can"
    failed = Verdict(stack.name, False, reason, notes=verdict.notes, forced=force)
    finding = _finding(stack, failed, alts, force)
    return Verdict(stack.name, False, reason, notes=verdict.notes, forced=force, finding=finding,
                   use_gpu=force and bool(host.get("gpus")) and stack.gpu,
                   gpu_indices=tuple(int(g.get("index", i)) for i, g in enumerate(host.get("gpus") or []))
                   if force and stack.gpu else ())
