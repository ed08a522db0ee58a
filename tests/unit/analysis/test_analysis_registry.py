"""The finding registry: one entry per id, read by ranking, the verdict, the report and pre-flight's check."""

from __future__ import annotations

from fp16doctor.analysis.registry import FAMILIES, REGISTRY, SPECS, SPEED_CAUSES
from fp16doctor.stacks import preflight

# The contract's vocabulary (docs/results-schema.md): these ids may not change meaning, so they must all be registered.
CONTRACT_IDS = {
    "no_fast_fp16_hardware", "no_tensor_cores", "tensor_cores_not_eligible", "input_pipeline_bound",
    "host_fp16_emulation", "cast_overhead", "small_model_overhead", "old_stack", "pure_float16_floatx",
    "numerics_unstable", "measurement_warmup", "tf32_baseline", "stack_incompatible_gpu", "fp16_faster",
    "slow_fp16_kernels", "bf16_preferred", "bf16_unsupported", "framework_setting",
}


def test_every_contract_id_is_registered_once() -> None:
    assert CONTRACT_IDS <= set(REGISTRY)
    assert len(SPECS) == len(REGISTRY)
    assert all(spec.family in FAMILIES for spec in SPECS)


def test_advice_and_outcomes_can_never_be_a_cause_of_speed() -> None:
    for fid in ("pure_float16_floatx", "numerics_unstable", "measurement_warmup", "fp16_faster", "tf32_baseline",
                "bf16_preferred"):
        assert fid not in SPEED_CAUSES


def test_preflight_speaks_a_registered_id_with_the_registry_title() -> None:
    spec = REGISTRY[preflight.FINDING_ID]
    assert spec.causes_speed and spec.family == "stack"
    assert "cannot run on this GPU or driver" in spec.title


def test_every_registered_id_is_documented_in_the_contract() -> None:
    from pathlib import Path

    schema = (Path(__file__).resolve().parents[3] / "docs" / "results-schema.md").read_text()
    assert [fid for fid in REGISTRY if f"| `{fid}` |" not in schema] == []

