"""The finding registry: every finding id, registered once, with what the rest of fp16doctor needs to know of it.

Ranking, the verdict, the report, terminal output and the tests read this table; adding a finding is one
entry here plus its rule function in the family's module under analysis/rules/ (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from fp16doctor.analysis.advice import CONFIGURATION_KINDS, OWN, PRESCRIBED
from fp16doctor.analysis.context import Context
from fp16doctor.analysis.fixes import SNIPPETS
from fp16doctor.analysis.rules import causal, hardware, host_input, numerics, outcome, overhead, stack
from fp16doctor.analysis.rules.common import Finding
from fp16doctor.knowledge.stated import NOT_APPLIED_SIZE_SHARE
from fp16doctor.workload.protocol import BF16, FP16

Rule = Callable[[Context], Finding | None]

FAMILIES = ("stack", "hardware", "kernels", "host_input", "overhead", "numerics", "outcome", "experiment")
# configuration: a precision to train in; setting: a switch or variant beside it (its precision measured with it);
# memory_only: 16 bits here can only save memory, so for speed the measured table decides; numerics_only: a
# precision for stable training, not for speed; upgrade: another stack; measure: how to time or compare fairly;
# code: a change to the user's code that is no configuration (an input pipeline); none: no advice.
REMEDY_KINDS = (*CONFIGURATION_KINDS, "upgrade", "measure", "code", "none")


@dataclass(frozen=True)
class FindingSpec:
    id: str
    family: str
    title: str
    # Whether this finding can be the cause of a step-time difference. Advice about how 16 bits were switched on,
    # numerics and measurement caveats never are: they are shown, never named as the reason for a speed.
    causes_speed: bool
    rule: Rule | None  # None: made by the causal accounting (analysis/causes.py), not by a document rule
    thresholds: Mapping[str, float] = field(default_factory=dict)
    # Keras flavour -> code (analysis/fixes.py): only code that is no configuration (an input pipeline, a timing
    # callback); a configuration's code is the prescription's `how`, written by the phraser (analysis/advice.py).
    fixes: Mapping[str, str] = field(default_factory=dict)
    # What kind of remedy it suggests (REMEDY_KINDS); the words are the phraser's, from the machine's measured table.
    remedy: str = "none"
    # The configuration (precision, variant) a configuration, setting or numerics remedy steers to, held to what was
    # measured of it on the same machine (analysis/prescribe.py). PRESCRIBED: the prescription's own (a slow kernel's
    # remedy is whatever measured fastest there); OWN: the finding's own precision (and variant).
    recommends: tuple[str, str] | None = None

    @property
    def rank(self) -> int:
        return RANK[self.id]


# In rank order: within one severity, a finding earlier here is listed first.
SPECS: tuple[FindingSpec, ...] = (
    FindingSpec("stack_incompatible_gpu", "stack", "The stack cannot run on this GPU or driver", True,
                stack.rule_stack_incompatible_gpu, remedy="upgrade"),
    FindingSpec("slow_fp16_kernels", "kernels", "A slow kernel ran the 16-bit ops", True, None,
                thresholds={"min_share_of_difference": causal.SLOW_KERNEL_MIN_SHARE},
                remedy="configuration", recommends=PRESCRIBED),
    # Measured: regular (not reference) kernels that ran in 16 bits took longer than their float32 ones. The device's
    # facts stay findings of their own; what the ops measured is the framework's kernels.
    FindingSpec("slow_16bit_compute", "kernels", "The framework's 16-bit kernels are slower than its float32 ones here",
                True, None, remedy="configuration", recommends=PRESCRIBED),
    FindingSpec("no_fast_fp16_hardware", "hardware", "This device computes fp16 no faster than fp32", True,
                hardware.rule_no_fast_fp16_hardware, remedy="configuration", recommends=("float32", "original")),
    FindingSpec("bf16_unsupported", "hardware", "bfloat16 has no arithmetic units on this device", True,
                causal.rule_bf16_unsupported, remedy="configuration", recommends=("float32", "original")),
    FindingSpec("kernel_too_old", "hardware", "The OS kernel is too old for AMX", True,
                hardware.rule_kernel_too_old, remedy="upgrade"),
    FindingSpec("numerics_unstable", "numerics", "16-bit training is numerically unstable here", False,
                numerics.rule_numerics_unstable,
                thresholds={"loss_plateau_spread_multiple": numerics.PLATEAU_SPREAD_MULTIPLE},
                remedy="numerics_only", recommends=("mixed_float16", "original")),
    FindingSpec("no_tensor_cores", "hardware", "fast fp16 arithmetic but no Tensor Cores", True,
                hardware.rule_no_tensor_cores, remedy="memory_only", recommends=("float32", "original")),
    # Not measured: step times against the device tables (or another 16-bit type on the same device) point at the
    # framework's path for one 16-bit type; the measured kernels are slow_fp16_kernels / slow_16bit_compute.
    FindingSpec("framework_16bit_path", "kernels", "The framework's path for a 16-bit type is slow here", True,
                hardware.rule_framework_16bit_path,
                thresholds={"min_slowdown": hardware.FRAMEWORK_PATH_MIN_SLOWDOWN,
                            "util_collapse_share": hardware.UTIL_COLLAPSE_SHARE}),
    # Stated, not measured: the 16-bit run's build is float32's size, so the type did not take (a builder flag that
    # allows 16 bits without forcing them).
    FindingSpec("precision_not_applied", "kernels", "The 16-bit type did not apply", False,
                hardware.rule_precision_not_applied,
                thresholds={"min_size_share": NOT_APPLIED_SIZE_SHARE}, remedy="code"),
    FindingSpec("framework_setting", "experiment", "One framework switch changes the result", True, None,
                thresholds={"min_change": causal.SETTING_MIN_CHANGE}, remedy="setting", recommends=OWN),
    FindingSpec("host_fp16_emulation", "host_input", "Host-side preprocessing runs in float16", True,
                host_input.rule_host_fp16_emulation, fixes=SNIPPETS.get("host_fp16_emulation", {}),
                remedy="setting", recommends=("float16", "float32_batches")),
    FindingSpec("input_pipeline_bound", "host_input",
                "Producing batches on the host takes a large share of the step", True,
                host_input.rule_input_pipeline_bound, fixes=SNIPPETS.get("input_pipeline_bound", {}), remedy="code"),
    FindingSpec("pageable_copies", "host_input", "Batches are copied to the GPU from pageable host memory", False,
                host_input.rule_pageable_copies,
                thresholds={"min_ms": host_input.PAGEABLE_MIN_MS, "min_share": host_input.PAGEABLE_MIN_SHARE},
                remedy="code"),
    FindingSpec("cast_overhead", "overhead", "Casts and layout changes eat the 16-bit gain", True,
                overhead.rule_cast_overhead, remedy="setting", recommends=("mixed_float16", "xla")),
    FindingSpec("small_model_overhead", "overhead", "Too little work per step", True,
                overhead.rule_small_model_overhead, remedy="setting", recommends=("mixed_float16", "xla"),
                thresholds={"max_move": overhead.OVERHEAD_MAX_MOVE}),
    # A 16-bit configuration that changes what the model computes (integer ids rounded by a 16-bit cast): never
    # prescribed (analysis/configs.py reads its runs).
    FindingSpec("integer_ids_rounded", "numerics", "A 16-bit configuration rounds the model's integer inputs", False,
                numerics.rule_integer_ids_rounded,
                thresholds={"float16_exact_integers": numerics.EXACT_INTEGERS[FP16],
                            "bfloat16_exact_integers": numerics.EXACT_INTEGERS[BF16]}, remedy="code"),
    FindingSpec("pure_float16_floatx", "numerics", "floatx=float16 is pure fp16, not mixed precision", False,
                numerics.rule_pure_float16_floatx, remedy="numerics_only",
                recommends=("mixed_float16", "original")),
    FindingSpec("old_stack", "stack", "The stack predates fast fp16 paths", True, stack.rule_old_stack,
                remedy="upgrade"),
    FindingSpec("tensor_cores_not_eligible", "hardware", "Layers kept off Tensor Cores by their shapes", True,
                hardware.rule_tensor_cores_not_eligible, remedy="setting",
                recommends=("mixed_float16", "channels_padded")),
    FindingSpec("fast_16bit_kernels", "kernels", "16-bit kernels saved time", True, None, remedy="configuration",
                recommends=OWN),
    # Measured on a GPU trace: the 16-bit run's batch rows (the host's batch, its copy to the device) shrank.
    FindingSpec("smaller_16bit_batches", "host_input", "The 16-bit batch, half the bytes, took less time", True,
                None, remedy="none"),
    FindingSpec("bf16_preferred", "hardware", "bfloat16 is this device's fast 16-bit type", False,
                causal.rule_bf16_preferred, remedy="configuration", recommends=("mixed_bfloat16", "original")),
    FindingSpec("tf32_baseline", "hardware", "float32 already runs on Tensor Cores (TF32)", False,
                hardware.rule_tf32_baseline, fixes=SNIPPETS.get("tf32_baseline", {}), remedy="measure"),
    FindingSpec("measurement_warmup", "overhead", "The first steps are much slower than the rest", False,
                overhead.rule_measurement_warmup, remedy="measure"),
    FindingSpec("fp16_faster", "outcome", "16 bits are faster here", False, outcome.rule_fp16_faster,
                remedy="configuration", recommends=OWN),
    FindingSpec("bf16_faster", "outcome", "bfloat16 is faster here", False, outcome.rule_bf16_faster,
                remedy="configuration", recommends=OWN),
)

REGISTRY: dict[str, FindingSpec] = {s.id: s for s in SPECS}
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}  # most severe first, in every ranking and output
RANK: dict[str, int] = {s.id: i for i, s in enumerate(SPECS)}
SPEED_CAUSES = frozenset(s.id for s in SPECS if s.causes_speed)
RECOMMENDS: dict[str, tuple[str, str]] = {s.id: s.recommends for s in SPECS if s.recommends is not None}
REMEDIES: dict[str, str] = {s.id: s.remedy for s in SPECS}
assert all(s.family in FAMILIES for s in SPECS), "every finding belongs to a known family"
assert all(s.remedy in REMEDY_KINDS for s in SPECS), "every remedy is of a known kind"
assert all((s.recommends is not None) == (s.remedy in CONFIGURATION_KINDS)
           for s in SPECS), "a configuration, setting, memory or numerics remedy names its configuration"


def spec(finding_id: str) -> FindingSpec | None:
    return REGISTRY.get(finding_id)



def rules() -> list[tuple[str, Rule]]:
    return [(s.id, s.rule) for s in SPECS if s.rule is not None]
