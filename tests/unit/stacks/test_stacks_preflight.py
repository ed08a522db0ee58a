"""Pre-flight verdicts for recorded GPUs against every stack, with an old and a new driver."""

from __future__ import annotations

from typing import Any

import pytest

from fp16doctor.stacks import all_stacks, get_stack
from fp16doctor.stacks.preflight import FINDING_ID, check

# (name, compute capability, the oldest driver that supports the card, a current driver)
GPUS = {
    "titan_v": ("NVIDIA TITAN V", "7.0", "390.77", "570.86.15"),
    "rtx_2080_ti": ("NVIDIA GeForce RTX 2080 Ti", "7.5", "410.79", "570.86.15"),
    "a100": ("NVIDIA A100-SXM4-40GB", "8.0", "450.51.06", "570.86.15"),
    "rtx_4090": ("NVIDIA GeForce RTX 4090", "8.9", "520.56.06", "570.86.15"),
    "h200": ("NVIDIA H200", "9.0", "550.54.15", "570.86.15"),
}

# Expected: which stacks run, per GPU and driver ("old" / "new"). The CPU stacks (the TF1 twins too) run everywhere.
CPU_STACKS = {"cpu", "tf2.10-cpu", "tf1.7-cpu", "tf1.13-cpu"}
RUNS = {
    ("titan_v", "old"): {"tf1.7-cuda9.0"} | CPU_STACKS,  # 390 is older than CUDA 10.0's 410.48
    ("titan_v", "new"): {"tf1.7-cuda9.0", "tf1.13-cuda10.0", "tf1.15-ngc23.03", "tf2.15-keras2",
                         "tf2.20-keras3"} | CPU_STACKS,
    ("rtx_2080_ti", "old"): {"tf1.7-cuda9.0", "tf1.13-cuda10.0"} | CPU_STACKS,  # sm_70 code runs on 7.5
    ("rtx_2080_ti", "new"): {"tf1.7-cuda9.0", "tf1.13-cuda10.0", "tf1.15-ngc23.03", "tf2.15-keras2",
                             "tf2.20-keras3"} | CPU_STACKS,
    ("a100", "old"): set(CPU_STACKS),  # CUDA 9/10 lack Ampere; 450 predates CUDA 12's 525.60.13
    ("a100", "new"): {"tf1.15-ngc23.03", "tf2.15-keras2", "tf2.20-keras3"} | CPU_STACKS,
    ("rtx_4090", "old"): set(CPU_STACKS),
    ("rtx_4090", "new"): {"tf1.15-ngc23.03", "tf2.15-keras2", "tf2.20-keras3"} | CPU_STACKS,
    ("h200", "old"): {"tf1.15-ngc23.03", "tf2.15-keras2", "tf2.20-keras3"} | CPU_STACKS,
    ("h200", "new"): {"tf1.15-ngc23.03", "tf2.15-keras2", "tf2.20-keras3"} | CPU_STACKS,
}


def host_with(gpu: str, driver: str, nvidia_runtime: bool | None = True) -> dict[str, Any]:
    name, cc, old, new = GPUS[gpu]
    return {"gpus": [{"index": 0, "name": name, "compute_capability": cc, "uuid": f"GPU-{gpu}",
                      "driver_version": old if driver == "old" else new}],
            "docker": {"nvidia_runtime": nvidia_runtime}}


@pytest.mark.parametrize(("gpu", "driver"), sorted(RUNS))
def test_verdicts_for_every_stack(gpu: str, driver: str) -> None:
    host = host_with(gpu, driver)
    runs = {s.name for s in all_stacks() if check(s, host).ok}
    assert runs == RUNS[(gpu, driver)]
    for stack in all_stacks():
        verdict = check(stack, host)
        if verdict.ok:
            assert verdict.finding is None
            assert verdict.use_gpu == stack.gpu
            assert verdict.gpu_indices == ((0,) if stack.gpu else ())
        else:
            assert verdict.finding is not None and verdict.finding["id"] == FINDING_ID
            assert not verdict.proceed


def test_h200_reason_names_the_cuda_the_architecture_and_the_stack_that_can() -> None:
    verdict = check(get_stack("tf1.7-cuda9.0"), host_with("h200", "new"))
    assert not verdict.ok
    assert verdict.reason.startswith(
        "CUDA 9.0 has no kernels for compute capability 9.0 (NVIDIA H200): TF 1.7.0 cannot run here; "
        "the tf1.15-ngc23.03")
    finding = verdict.finding
    assert finding is not None
    assert set(finding) >= {"id", "title", "severity", "confidence", "evidence", "recommendation"}
    assert finding["severity"] in ("info", "warning", "critical")
    assert 0.0 <= finding["confidence"] <= 1.0
    assert "tf1.15-ngc23.03" in finding["recommendation"]
    assert verdict.reason in finding["evidence"]


def test_old_driver_reason_gives_both_versions() -> None:
    verdict = check(get_stack("tf1.13-cuda10.0"), host_with("titan_v", "old"))
    assert "driver 390.77" in verdict.reason and "410.48" in verdict.reason
    assert "tf1.7-cuda9.0 stack can" in verdict.reason


def test_turing_on_cuda9_runs_with_a_caveat() -> None:
    verdict = check(get_stack("tf1.7-cuda9.0"), host_with("rtx_2080_ti", "new"))
    assert verdict.ok
    assert any("binary compatibility" in note for note in verdict.notes)


def test_force_marks_the_failed_verdict_to_proceed_on_the_gpu() -> None:
    verdict = check(get_stack("tf1.7-cuda9.0"), host_with("a100", "new"), force=True)
    assert not verdict.ok and verdict.forced and verdict.proceed
    assert verdict.use_gpu and verdict.gpu_indices == (0,)
    assert verdict.finding is not None and "forced" in verdict.finding["recommendation"]


def test_no_gpu_host_runs_cpu_fallback_stacks_and_refuses_tf1_gpu_builds() -> None:
    host: dict[str, Any] = {"gpus": []}
    assert check(get_stack("cpu"), host).ok
    tf2 = check(get_stack("tf2.15-keras2"), host)
    assert tf2.ok and not tf2.use_gpu
    tf1 = check(get_stack("tf1.7-cuda9.0"), host)
    assert not tf1.ok and "libcuda.so.1" in tf1.reason


def test_engine_without_nvidia_runtime_stops_gpu_only_stacks() -> None:
    host = host_with("titan_v", "new", nvidia_runtime=False)
    verdict = check(get_stack("tf1.7-cuda9.0"), host)
    assert not verdict.ok and "nvidia-container-toolkit" in verdict.reason
    assert check(get_stack("tf2.15-keras2"), host).ok


def test_mixed_fleet_uses_only_the_gpus_the_stack_supports() -> None:
    host = {"gpus": [
        {"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "driver_version": "570.86.15"},
        {"index": 1, "name": "NVIDIA TITAN V", "compute_capability": "7.0", "driver_version": "570.86.15"},
    ], "docker": {"nvidia_runtime": True}}
    verdict = check(get_stack("tf1.7-cuda9.0"), host)
    assert verdict.ok and verdict.gpu_indices == (1,)
    assert any("NVIDIA H200" in note for note in verdict.notes)


def test_unknown_driver_is_a_note_not_a_refusal() -> None:
    host = {"gpus": [{"index": 0, "name": "NVIDIA TITAN V", "compute_capability": "7.0"}]}
    verdict = check(get_stack("tf1.7-cuda9.0"), host)
    assert verdict.ok
    assert any("driver version unknown" in note for note in verdict.notes)
