"""Why a run failed, from its output and exit status: a short reason a user can act on.

Pure text matching on what CUDA, cuDNN, TensorFlow, the NVIDIA container runtime and the kernel print;
the patterns are the messages those components emit verbatim. A user's script that raised under a 16-bit precision
is matched first against the known ways a script breaks there (`script_cause`: tensors of two dtypes meeting in one
op, Keras 3's int16 `ops.arange` under floatx float16, an op with no 16-bit kernel), each named with its fix.
Every reason is one line of at most MAX_REASON characters with the terminal's escape codes taken out (`one_line`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from fp16doctor.workload.protocol import is_mixed

LOG_TAIL_LINES = 40
MAX_REASON = 200  # a failure's reason is one line of at most this many characters
# Failures that say nothing of a script, whatever it raised: another try may not meet them.
NOT_THE_SCRIPTS = ("timeout", "host_oom", "killed", "segfault")


@dataclass(frozen=True)
class Failure:
    kind: str  # a stable id, e.g. "no_kernel_image"
    reason: str  # one sentence for the user
    fix: str = ""  # what to change, where the cause is known ("" where it is not)


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


# CSI sequences (colours, bold: Keras wraps its messages in `\x1b[1m`) and OSC ones (titles, links).
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def plain(text: str) -> str:
    """`text` without terminal escape codes."""
    return _ESCAPES.sub("", text or "")


def _clip(text: str, width: int = 160) -> str:
    text = " ".join(plain(text).split())
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    at_word = cut.rsplit(" ", 1)[0] if " " in cut[width // 2:] else cut  # a word is never cut where one can end
    return at_word.rstrip(" ,;:") + "…"


def one_line(text: str, width: int = MAX_REASON) -> str:
    """A message as one line of at most `width` characters: escape codes out, whitespace collapsed, cut at a word."""
    return _clip(text, width)


# ---------------------------------------------------------------------------------------- a script's own fault

# The names frameworks print for a dtype, in Keras' words.
_DTYPE_WORDS = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16",
                "float16": "float16", "float32": "float32", "float64": "float64", "c10::bfloat16": "bfloat16",
                "c10::half": "float16", "dt_half": "float16", "dt_bfloat16": "bfloat16", "dt_float": "float32"}
# How an op joins two tensors, in words ("a float32 tensor times a bfloat16 one").
_OP_WORDS = {"mul": "times", "multiply": "times", "addv2": "plus", "add": "plus", "sub": "minus",
             "realdiv": "divided by", "div": "divided by", "truediv": "divided by", "concatv2": "concatenated with",
             "concat": "concatenated with", "concatenate": "concatenated with", "matmul": "matrix-multiplied by",
             "batchmatmulv2": "matrix-multiplied by", "dot_general": "matrix-multiplied by"}


def _dtype(name: str) -> str:
    return _DTYPE_WORDS.get(name.strip().strip("'\"").lower(), name.strip().strip("'\""))


def under(precision: str) -> str:
    """"under the mixed_bfloat16 policy", "under floatx float16": how the precision was applied, in words."""
    return f"under the {precision} policy" if is_mixed(precision) else f"under floatx {precision}"


def _layer(node: str | None) -> str:
    """The layer a graph node belongs to ("StatefulPartitionedCall/functional_1/pos_1/range" -> "pos_1")."""
    parts = [p for p in (node or "").split("/") if p]
    return parts[-2] if len(parts) >= 2 else ""


Groups = dict[str, str]


def _mixed(groups: Groups, matched: str, precision: str) -> tuple[str, str]:
    op = groups.get("op", "").strip("'")
    first, second = _dtype(groups.get("first", "?")), _dtype(groups.get("second", "?"))
    if groups.get("index") == "0":  # "input #0 was expected to be a X tensor but is a Y": Y comes first
        first, second = second, first
    joined = _OP_WORDS.get(op.lower(), f"meets (in {op})" if op else "meets")
    reason = f"a {first} tensor {joined} a {second} one {under(precision)}"
    if "float32" in (first, second) and first != second:
        fix = ("cast the float32 one to the other's dtype where they meet (`tf.cast(t, other.dtype)`), or create it "
               "in the layer's `compute_dtype`")
    else:
        fix = "cast one to the other's dtype where they meet"
    return reason, fix


def _int16_range(groups: Groups, matched: str, precision: str) -> tuple[str, str]:
    layer = _layer(groups.get("node"))
    where = f" in layer {layer}" if layer else ""
    return (f"Keras 3's `ops.arange` made an int16 range{where} {under(precision)} (its integers follow floatx), "
            "and TensorFlow has no int16 Range kernel on this device",
            'give it an integer dtype, `ops.arange(n, dtype="int32")`, or use the mixed_float16 policy instead of '
            "floatx float16")


def _no_16bit_kernel(groups: Groups, matched: str, precision: str) -> tuple[str, str]:
    layer = _layer(groups.get("node"))
    dtype = "bfloat16" if "BFLOAT16" in matched.upper() else "float16"
    where = f" (layer {layer})" if layer else ""
    return (f"TensorFlow has no {dtype} kernel for {groups.get('op') or 'an op'}{where} on this device "
            f"{under(precision)}: a layer without a 16-bit path",
            'keep that layer in float32 (`dtype="float32"` on the layer, its input cast to float32)')


def _ids_out_of_range(groups: Groups, matched: str, precision: str) -> tuple[str, str]:
    index, size = groups.get("index", "?"), groups.get("size", "?")
    return (f"id {index} looked up a table of {size} rows {under(precision)}: a 16-bit cast rounded it past the end "
            "(float16 is exact for whole numbers only up to 2,048, bfloat16 up to 256)",
            'declare the ids as integers, which Keras never casts: `keras.Input(shape=..., dtype="int32")`; or keep '
            'the layer that takes them in float32 (`dtype="float32"` on it)')


Describe = Callable[[Groups, str, str], tuple[str, str]]

# (kind, pattern, what it says: (reason, fix)). First match wins, the specific before the general. A pattern's
# alternatives number their groups (`op2`, `first2`): each is read under its name without the digits.
_SCRIPT_RULES: tuple[tuple[str, re.Pattern[str], Describe], ...] = tuple(
    (kind, re.compile(pattern), describe) for kind, pattern, describe in (
        ("int16_range",
         r"'Range' used by \{\{node (?P<node>[^}]+)\}\} with these attrs: \[[^\]]*Tidx=DT_INT16"
         r"|'Range'[^\n]*(?:\n[^\n]*){0,3}?Tidx=DT_INT16",
         _int16_range),
        ("dtype_mixing",
         r"Input '\w+' of '(?P<op>\w+)' Op has type (?P<second>\w+) that does not match type (?P<first>\w+) "
         r"of argument"
         r"|cannot compute (?P<op2>\w+) as input #(?P<index>\d+)\(zero-based\) was expected to be a "
         r"(?P<first2>\w+) tensor but is a (?P<second2>\w+) tensor"
         r"|Tensors in list passed to '\w+' of '(?P<op3>\w+)' Op have types \[(?P<first3>\w+), (?P<second3>\w+)"
         r"[^\]]*\] that don't all match"
         r"|lax\.(?P<op4>\w+) requires arguments to have the same dtypes, got (?P<first4>\w+), (?P<second4>\w+)"
         r"|expected m1 and m2 to have the same dtype, but got: (?P<first5>[\w:]+) != (?P<second5>[\w:]+)",
         _mixed),
        ("ids_out_of_range",
         r"indices\[[\d, ]+\] = (?P<index>-?\d+) is not in \[0, (?P<size>\d+)\)",
         _ids_out_of_range),
        ("no_16bit_kernel",
         r"No OpKernel was registered to support Op '(?P<op>\w+)' used by \{\{node (?P<node>[^}]+)\}\} with these "
         r"attrs: \[[^\]]*DT_(?:HALF|BFLOAT16)"
         r"|No registered '(?P<op2>\w+)' OpKernel for '\w+' devices compatible with node \{\{node (?P<node2>[^}]+)"
         r"\}\}[\s\S]{0,400}?DT_(?:HALF|BFLOAT16)"
         r"|Could not find device for node: \{\{node (?P<node3>[^}]+)\}\} = (?P<op3>\w+)\[[^\]]*DT_(?:HALF|BFLOAT16)",
         _no_16bit_kernel),
    )
)


def _groups(found: re.Match[str]) -> Groups:
    """The match's groups under their names without the alternative's number, those that matched."""
    return {name.rstrip("0123456789"): value for name, value in found.groupdict().items() if value is not None}


def script_cause(text: str, precision: str) -> Failure | None:
    """The known way a script breaks under a 16-bit precision that `text` (its exception and traceback) shows, with
    its fix; None where none matches (or the run was float32: a script fault there is no precision's)."""
    if precision == "float32":
        return None
    clean = plain(text)
    for kind, pattern, describe in _SCRIPT_RULES:
        found = pattern.search(clean)
        if found:
            reason, fix = describe(_groups(found), found.group(0), precision)
            return Failure(kind, one_line(reason), one_line(fix))
    return None


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
