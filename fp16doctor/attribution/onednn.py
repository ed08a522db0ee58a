"""ONEDNN_VERBOSE (DNNL_VERBOSE, MKLDNN_VERBOSE) execution lines -> primitive records.

Formats read (oneDNN developer guide, "Verbose Mode", v1.x to v3.x):
- v3.x "v1" lines:  onednn_verbose,v1,primitive,exec,cpu,convolution,ref:any,backward_weights,<mds>,<attrs>,
                    <aux>,<desc>,<ms>
- v3.0-3.3:         onednn_verbose,primitive,exec,cpu,convolution,jit:avx2,forward_training,<mds>,<attrs>,
                    <aux>,<desc>,<ms>
- v2.x:             onednn_verbose,exec,cpu,convolution,...  (same fields, no "primitive" word)
- DNNL v1.x:        dnnl_verbose,exec,cpu,convolution,...
- MKL-DNN v0.x:     mkldnn_verbose,exec,convolution,<impl>,<prop>,<mds>,<aux>,<desc>,<ms>  (no engine, no attrs)
With ONEDNN_VERBOSE_TIMESTAMP=1 a timestamp (ms since the epoch, taken as the primitive's start) follows the
marker (and "v1"); times then give intervals, otherwise only durations.

Creation lines (ONEDNN_VERBOSE's profile_create) have the same fields with "create:cache_miss" or
"create:cache_hit" for "exec", their time the creation's, and are printed before the primitive runs:
    onednn_verbose,v1,1796194955640.045898,primitive,create:cache_hit,cpu,convolution,jit:avx2,backward_weights,
    <mds>,<attrs>,<aux>,mb32_ic3oc16_ih56oh56kh3...,0.00805664
They count only in a window cut inside a step (`in_flight`): a primitive created there and never executed before
the cut is the one that was still running.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

# The line prefixes of oneDNN's verbose mode, and the workload's window markers around a profiled window.
from fp16doctor.workload.protocol import ONEDNN_PREFIXES, WINDOW_END, WINDOW_START

# oneDNN data type names -> the names the results use.
ONEDNN_DTYPES = {
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "f64": "float64",
    "s8": "int8",
    "u8": "uint8",
    "s32": "int32",
    "f8_e5m2": "float8_e5m2",
    "f8_e4m3": "float8_e4m3",
}
# "src:f16::blocked..." (v3.1+), "src_f32:p:blocked..." (v1.x to v3.0), "diff_weights:bf16..."
_MD = re.compile(r"^(diff_)?(src|wei|weights|dst|bia|bias|data|ws)[_:]([a-z0-9_]+?)(?::|$)")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
_LEADING_STAMP = re.compile(r"^(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?):")

PROP_TO_PASS = {
    "forward_training": "forward",
    "forward_inference": "forward",
    "forward_scoring": "forward",
    "forward": "forward",
    "backward_data": "backward_data",
    "backward": "backward_data",  # pooling / eltwise / batch-norm backward: the gradient w.r.t. the input
    "backward_weights": "backward_weights",
    "backward_bias": "backward_weights",
}


@dataclass(frozen=True)
class OnednnExec:
    """One executed primitive."""

    primitive: str  # convolution, reorder, pooling, inner_product, matmul, eltwise, gemm_api ...
    impl: str  # ref:any, brg_conv_bwd_w:avx10_1_512_amx, jit:avx2 ... ("" when oneDNN prints none)
    prop_kind: str  # forward_training, backward_weights, undef ...
    dtypes: tuple[tuple[str, str], ...]  # (argument, framework dtype name), e.g. (("src", "float16"), ...)
    desc: str  # the problem in benchdnn notation: mb32_ic3oc32_ih112oh112kh3...
    ms: float
    start_ms: float | None  # ONEDNN_VERBOSE_TIMESTAMP=1 only
    index: int  # order within the parsed lines
    operation: str = "exec"  # "exec"; "create" (a creation line); "in_flight" (created, still running at a cut)

    @property
    def src_dtype(self) -> str | None:
        for arg, dtype in self.dtypes:
            if arg in ("src", "data"):
                return dtype
        return self.dtypes[0][1] if self.dtypes else None

    @property
    def dst_dtype(self) -> str | None:
        for arg, dtype in self.dtypes:
            if arg == "dst":
                return dtype
        return None

    @property
    def pass_hint(self) -> str | None:
        """The pass the primitive's own propagation kind says; None when it says none (reorder, matmul)."""
        if self.primitive == "reorder":
            src, dst = self.src_dtype, self.dst_dtype
            return "cast" if src and dst and src != dst else "layout"
        return PROP_TO_PASS.get(self.prop_kind)


def _dtypes(mds: str) -> tuple[tuple[str, str], ...]:
    found: list[tuple[str, str]] = []
    for token in mds.split():
        match = _MD.match(token)
        if not match:
            continue
        arg = {"weights": "wei", "bias": "bia"}.get(match.group(2), match.group(2))
        dtype = ONEDNN_DTYPES.get(match.group(3))
        if dtype and not any(a == arg for a, _ in found):
            found.append((arg, dtype))
    return tuple(found)


def parse_line(line: str, index: int = 0, creates: bool = False) -> OnednnExec | None:
    """One verbose line -> OnednnExec, or None for info lines, anything unreadable and, unless `creates`, creation
    lines (then operation "create", ms the creation's time)."""
    text = line.strip()
    leading = _LEADING_STAMP.match(text)  # "1.60704e+12:dnnl_verbose,exec,..." (oneDNN verbose RFC, 2020)
    start_ms = float(leading.group(1)) if leading else None
    fields = text[leading.end():].split(",") if leading else text.split(",")
    if len(fields) < 8 or fields[0] not in ONEDNN_PREFIXES:
        return None
    rest = fields[1:]
    if rest and rest[0] == "v1":
        rest = rest[1:]
    if rest and _NUMBER.match(rest[0]):
        start_ms = float(rest[0])
        rest = rest[1:]
    if rest and rest[0] == "primitive":
        rest = rest[1:]
    if not rest or not (rest[0] == "exec" or (creates and rest[0].startswith("create"))):
        return None
    operation = "exec" if rest[0] == "exec" else "create"
    rest = rest[1:]
    has_engine = rest[0] in ("cpu", "gpu")
    if has_engine:
        rest = rest[1:]
    # primitive, impl, prop_kind, mds, [attrs,] aux, desc, time
    if len(rest) < (8 if has_engine else 7):
        return None
    try:
        ms = float(rest[-1])
    except ValueError:
        return None
    return OnednnExec(
        primitive=rest[0],
        impl=rest[1],
        prop_kind=rest[2],
        dtypes=_dtypes(rest[3]),
        desc=rest[-2],
        ms=ms,
        start_ms=start_ms,
        index=index,
        operation=operation,
    )


def window_lines(lines: Iterable[str]) -> tuple[list[str], float | None]:
    """The lines between the window markers (all lines when there are none) and the end marker's ms per step."""
    collected: list[str] = []
    inside = False
    saw_marker = False
    wall_ms = None
    everything: list[str] = []
    for line in lines:
        everything.append(line)
        if line.startswith(WINDOW_START):
            inside, saw_marker = True, True
            collected = []
            continue
        if line.startswith(WINDOW_END):
            inside = False
            match = re.search(r"ms_per_step\s+([0-9.]+)", line)
            wall_ms = float(match.group(1)) if match else None
            continue
        if inside:
            collected.append(line)
    return (collected if saw_marker else everything), wall_ms


def parse_lines(lines: Iterable[str]) -> list[OnednnExec]:
    """Every exec line, in order; other lines (info, create, the program's own output) are skipped."""
    execs: list[OnednnExec] = []
    for line in lines:
        record = parse_line(line, len(execs))
        if record is not None:
            execs.append(record)
    return execs


def in_flight(lines: Iterable[str], cut_at_ms: float, first_index: int = 0) -> list[OnednnExec]:
    """The primitives created among `lines` (a window cut inside a step) and never executed before the cut at
    `cut_at_ms` (ms since the epoch, oneDNN's clock): each with the interval from its creation's end to the cut,
    the most it can have run (operation "in_flight"). A creation is matched to the first later execution of the
    same primitive, problem and implementation. Lines without timestamps bound nothing: none is returned."""
    pending: dict[tuple[object, ...], list[OnednnExec]] = {}
    for line in lines:
        record = parse_line(line, creates=True)
        if record is None:
            continue
        key = (record.primitive, record.impl, record.prop_kind, record.dtypes, record.desc)
        if record.operation == "create":
            pending.setdefault(key, []).append(record)
        elif pending.get(key):
            pending[key].pop(0)
    running = sorted((r for created in pending.values() for r in created if r.start_ms is not None),
                     key=lambda r: r.start_ms or 0.0)
    out: list[OnednnExec] = []
    for record in running:
        assert record.start_ms is not None
        began = record.start_ms + record.ms
        if cut_at_ms > began:
            out.append(replace(record, ms=cut_at_ms - began, start_ms=began, index=first_index + len(out),
                               operation="in_flight"))
    return out


def isa_line(lines: Iterable[str]) -> str | None:
    """The ``info,cpu,isa:...`` line's text, e.g. "Intel AVX2" (for evidence)."""
    for line in lines:
        if any(line.startswith(m) for m in ONEDNN_PREFIXES) and ",isa:" in line:
            return line.split(",isa:", 1)[1].strip()
    return None


# ---------------------------------------------------------------- problem descriptors

_DESC_FIELD = re.compile(r"(mb|g|ic|oc|id|ih|iw|od|oh|ow|kd|kh|kw|sd|sh|sw|dd|dh|dw|pd|ph|pw)(\d+)")


def desc_fields(desc: str) -> dict[str, int]:
    """``mb32_ic3oc32_ih112oh112kh3...`` -> {"mb": 32, "ic": 3, "oc": 32, "ih": 112, ...} (first value wins)."""
    fields: dict[str, int] = {}
    for key, value in _DESC_FIELD.findall(desc.replace("_", "")):
        fields.setdefault(key, int(value))
    return fields


def matmul_dims(desc: str) -> tuple[int, int, int] | None:
    """``960x32:32x1`` -> (M, K, N); None when the descriptor is not a plain 2-D matmul."""
    match = re.fullmatch(r"(\d+)x(\d+):(\d+)x(\d+)(?::.*)?", desc)
    if not match or match.group(2) != match.group(3):
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(4))


def reorder_dims(desc: str) -> tuple[int, ...] | None:
    """``64x32x3x3`` -> (64, 32, 3, 3)."""
    if not re.fullmatch(r"\d+(x\d+)*", desc):
        return None
    return tuple(int(d) for d in desc.split("x"))
