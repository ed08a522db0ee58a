"""Why a container run failed, from its output and exit status: a short reason a user can act on.

Pure text matching on what CUDA, cuDNN, TensorFlow, the NVIDIA container runtime and the kernel print;
the patterns are the messages those components emit verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class Failure:
    kind: str  # a stable id, e.g. "no_kernel_image"
    reason: str  # one sentence for the user


# (kind, pattern, reason). First match wins, so the specific causes come before generic ones.
_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE | re.MULTILINE), reason)
    for kind, pattern, reason in (
        ("nvidia_require_cuda",
         r"requirement error: unsatisfied condition: (cuda|brand|driver)[^\n]*",
         "the NVIDIA container runtime refused the image: its NVIDIA_REQUIRE_CUDA condition is not met "
         "by this driver ({match})"),
        ("no_gpu_runtime",
         r"could not select device driver \"[^\"]*\" with capabilities: \[\[gpu",
         "the Docker engine has no NVIDIA runtime for the GPU request (install nvidia-container-toolkit)"),
        ("no_kernel_image",
         r"no kernel image is available for execution on the device|CUDA_ERROR_NO_BINARY_FOR_GPU"
         r"|cudaErrorNoKernelImageForDevice",
         "the stack's CUDA build has no kernels for this GPU's architecture (compute capability too new)"),
        ("driver_too_old",
         r"CUDA driver version is insufficient for CUDA runtime version|cudaErrorInsufficientDriver"
         r"|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH|forward compatibility was attempted on non supported HW",
         "the host's NVIDIA driver is too old for the stack's CUDA runtime"),
        ("cudnn_mismatch",
         r"Loaded runtime CuDNN library: [^\n]*but source was compiled with[^\n]*"
         r"|cuDNN version (is )?(incompatible|mismatch)[^\n]*",
         "cuDNN version mismatch: {match}"),
        ("cudnn_init_failed",
         r"Could not create cudnn handle[^\n]*|CUDNN_STATUS_(NOT_INITIALIZED|ARCH_MISMATCH|INTERNAL_ERROR)",
         "cuDNN could not start on this GPU ({match})"),
        ("no_gpu_driver",
         r"libcuda\.so\.1: cannot open shared object file",
         "TensorFlow in this stack needs the NVIDIA driver (libcuda.so.1); the container has none"),
        ("gpu_oom",
         r"ResourceExhaustedError|OOM when allocating|CUDA_ERROR_OUT_OF_MEMORY|failed to allocate [^\n]* "
         r"from device|CUDA out of memory",
         "out of device memory at this batch size (a smaller batch or --quick fits)"),
        ("illegal_instruction",
         r"Illegal instruction",
         "the CPU lacks an instruction set the stack's TensorFlow was built for (AVX since TF 1.6)"),
        ("python_syntax",
         r"^\s*SyntaxError: [^\n]*",
         "the workload is not valid for this stack's Python ({match})"),
        ("import_error",
         r"(ModuleNotFoundError|ImportError): [^\n]*",
         "a package is missing or broken in the image ({match})"),
        ("pull_failed",
         r"(pull access denied|manifest (for [^\n]* )?not found|manifest unknown|"
         r"failed to resolve reference|dial tcp: lookup [^\n]*)",
         "the base image could not be pulled ({match})"),
        ("pip_failed",
         r"(No matching distribution found for [^\n]*|Could not find a version that satisfies [^\n]*)",
         "pip could not install a pinned package ({match})"),
        ("tls_failed",
         r"(CERTIFICATE_VERIFY_FAILED|SSLError)[^\n]*",
         "TLS to the package index failed: pass the proxy's CA with --ca-bundle ({match})"),
    )
)


def _clip(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def classify(output: str, exit_code: int | None = None, oom_killed: bool = False) -> Failure:
    """Name the cause of a failed run from its combined output, exit code and the engine's OOMKilled."""
    if oom_killed:
        return Failure("host_oom", "the container ran out of host memory and was killed (OOMKilled)")
    for kind, pattern, reason in _RULES:
        found = pattern.search(output or "")
        if found:
            return Failure(kind, reason.format(match=_clip(found.group(0))))
    if exit_code == 137:
        return Failure("killed", "the container was killed (exit 137: SIGKILL, often the host's OOM killer "
                                 "or a timeout)")
    if exit_code == 139:
        return Failure("segfault", "the workload crashed with a segmentation fault (exit 139)")
    if exit_code == 132:
        return Failure("illegal_instruction", "the CPU lacks an instruction set the stack's TensorFlow "
                                              "was built for (exit 132, SIGILL)")
    last = [line for line in (output or "").splitlines() if line.strip()]
    tail = _clip(last[-1]) if last else "no output"
    code = f"exit {exit_code}" if exit_code is not None else "no exit status"
    return Failure("unknown", f"the workload failed ({code}): {tail}")


def log_tail(output: str, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last `lines` non-empty lines, for the run record and the report."""
    kept = [line.rstrip() for line in (output or "").splitlines() if line.strip()]
    return kept[-lines:]


def last_line(output: str) -> str:
    """A tool's last non-empty line (where it says why it failed), for a one-line error."""
    tail = log_tail(output, 1)
    return tail[0].strip() if tail else "no output"
