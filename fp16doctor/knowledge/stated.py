"""What a document states about a run's workload in its own words, as data: the structured fields it may carry
(docs/results-schema.md, `runs[].workload`) and the phrases of a run's notes that say the same more weakly.

Each kind of fact is one thing a maintainer reads as a cause: casts the 16-bit type adds (cast_overhead), ops that
fall back to the CPU in that type (framework_16bit_path), a copy between host and device every step
(input_pipeline_bound). The rules read them through `stated_facts`, never the words themselves.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The structured fields of `runs[].workload`, each a fact kind.
CAST_OPS_FIELD = "cast_ops_per_step"  # int: cast ops (dtype conversions) per step, as a profiler or AMP lists them
CPU_FALLBACK_FIELD = "cpu_fallback_ops"  # list of op names (or their count) that ran on the CPU in this run
TRANSFERS_FIELD = "transfers_per_step"  # int: copies between host and device the user's code makes per step
# number: the size of the model as built for this run (an inference engine, the saved weights), in MiB. A 16-bit build
# holds its weights in half the bytes of a float32 one; one of float32's size kept its layers in float32.
MODEL_SIZE_FIELD = "model_mib"
# A 16-bit build whose stated size is at least this share of float32's kept most of its weights in 32 bits: a build
# that applied the 16-bit type holds them in half the bytes (an fp16 TensorRT engine of ViT-B/32: 173 against 336 MiB,
# NVIDIA/TensorRT#3160).
NOT_APPLIED_SIZE_SHARE = 0.9
NOTES_FIELDS = ("notes",)  # `runs[].notes` and `runs[].workload.notes`: a string or a list of strings

# A run's notes, in the words people write (GitHub issues, forum threads); a match is a weaker fact than a field.
NOTE_PATTERNS: dict[str, re.Pattern[str]] = {
    "casts": re.compile(
        r"\b(cast|casts|casting|_to_copy|aten::to|type ?conversions?|dtype conversions?|converts? (the )?"
        r"(weights|inputs|activations|tensors))\b|\bconver(ts?|sions?|ting)\b[^.;]{0,40}\b(fp16|float16|half|bf16|"
        r"bfloat16|fp32|float32)\b", re.I),
    "cpu_fallback": re.compile(
        r"\b(falls?|falling|fell) ?back to (the )?cpu\b|\bcpu fallback\b|\b(runs?|ran|running|executed|placed) on "
        r"(the )?cpu\b|\bnot implemented for '?(half|bfloat16)'?|\bpytorch_enable_mps_fallback\b", re.I),
    "transfer": re.compile(
        r"\b(host[- ]to[- ]device|device[- ]to[- ]host|h2d|d2h|memcpy|cudamemcpy|\.cpu\(\)|\.numpy\(\)|\.item\(\)|"
        r"(copies|copied|copying|transfers?|transferred|moves?|moved) [^.;]{0,30}\b(to|from) (the )?(gpu|device|"
        r"host|cpu)\b)", re.I),
}


@dataclass(frozen=True)
class StatedFacts:
    """What one run's document states of its workload: counts where a field gives them, and which kinds its notes
    speak of."""

    cast_ops: int | None = None
    cpu_fallback: tuple[str, ...] | int | None = None
    transfers: int | None = None
    noted: frozenset[str] = frozenset()  # the NOTE_PATTERNS kinds its notes match
    notes: tuple[str, ...] = ()
    model_mib: float | None = None  # MODEL_SIZE_FIELD

    def says(self, kind: str) -> bool:
        """Whether the document states a fact of this kind for the run, by a field or by its notes' words."""
        if kind == "casts":
            return bool(self.cast_ops) or kind in self.noted
        if kind == "cpu_fallback":
            return bool(self.cpu_fallback) or kind in self.noted
        if kind == "transfer":
            return bool(self.transfers) or kind in self.noted
        return False

    def structured(self, kind: str) -> bool:
        """Whether a field (not only a note's words) states it."""
        return bool({"casts": self.cast_ops, "cpu_fallback": self.cpu_fallback, "transfer": self.transfers}.get(kind))

    def note_for(self, kind: str) -> str | None:
        """The note that speaks of a kind, to quote."""
        pattern = NOTE_PATTERNS.get(kind)
        return next((n for n in self.notes if pattern is not None and pattern.search(n)), None)


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value >= 0 and value.is_integer():
        return int(value)
    return None


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str) and v.strip()]
    return []


def _listed_casts(run: Mapping[str, Any]) -> int | None:
    """Cast ops an `ops` list names without timing them (`pass` "cast", no `ms_per_step`): a count the document
    states (e.g. AMP's op list), not a measurement; their `calls_per_step`, else one each."""
    ops = run.get("ops")
    items = ops.get("items") if isinstance(ops, Mapping) else None
    if not isinstance(items, list):
        return None
    listed = [i for i in items if isinstance(i, Mapping) and i.get("pass") == "cast" and i.get("ms_per_step") is None]
    return sum(_count(i.get("calls_per_step")) or 1 for i in listed) or None


def stated_facts(run: Mapping[str, Any]) -> StatedFacts:
    """The facts a run record states of its workload (never the document's own top-level `note`, which describes
    where the document came from)."""
    workload = run.get("workload") if isinstance(run.get("workload"), Mapping) else {}
    assert isinstance(workload, Mapping)
    fallback = workload.get(CPU_FALLBACK_FIELD)
    ops: tuple[str, ...] | int | None = (
        tuple(str(o) for o in fallback if isinstance(o, str)) or None if isinstance(fallback, list)
        else _count(fallback) or None)
    notes = tuple(t for field in NOTES_FIELDS for source in (run, workload) for t in _texts(source.get(field)))
    noted = frozenset(kind for kind, pattern in NOTE_PATTERNS.items() if any(pattern.search(n) for n in notes))
    casts = _count(workload.get(CAST_OPS_FIELD))
    size = workload.get(MODEL_SIZE_FIELD)
    model_mib = float(size) if isinstance(size, int | float) and not isinstance(size, bool) and size > 0 else None
    return StatedFacts(casts if casts is not None else _listed_casts(run), ops, _count(workload.get(TRANSFERS_FIELD)),
                       noted, notes, model_mib)
