"""Failed container runs explained from their output (logs in tests/data/container-logs, built from the
messages CUDA, cuDNN, TensorFlow and nvidia-container-cli print verbatim)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fp16doctor.engines.failures import classify, log_tail

LOGS = Path(__file__).resolve().parents[2] / "data" / "container-logs"


@pytest.mark.parametrize(("log", "kind", "words"), [
    ("tf1.7-on-a100.log", "no_kernel_image", "no kernels for this GPU"),
    ("tf1.13-old-driver.log", "driver_too_old", "driver is too old"),
    ("cudnn-mismatch.log", "cudnn_mismatch", "7.0.5 but source was compiled with: 7.1.4"),
    ("require-cuda.log", "nvidia_require_cuda", "cuda>=12.1"),
    ("gpu-oom.log", "gpu_oom", "out of device memory"),
    ("no-gpu-runtime.log", "no_gpu_runtime", "nvidia-container-toolkit"),
    ("tf1-without-driver.log", "no_gpu_driver", "libcuda.so.1"),
])
def test_recorded_logs_are_classified(log: str, kind: str, words: str) -> None:
    failure = classify((LOGS / log).read_text(), exit_code=1)
    assert failure.kind == kind
    assert words in failure.reason


def test_oom_killed_and_exit_137() -> None:
    assert classify("Epoch 1/32", 137, oom_killed=True).kind == "host_oom"
    killed = classify("Epoch 1/32\n", 137)
    assert killed.kind == "killed" and "137" in killed.reason


def test_illegal_instruction_names_avx() -> None:
    assert "AVX" in classify("Illegal instruction (core dumped)", 132).reason


def test_unknown_failure_quotes_the_last_line() -> None:
    failure = classify("starting\nValueError: something odd\n", 1)
    assert failure.kind == "unknown"
    assert "exit 1" in failure.reason and "ValueError: something odd" in failure.reason


def test_log_tail_keeps_the_last_non_empty_lines() -> None:
    text = "\n".join(f"line {i}" for i in range(100)) + "\n\n"
    assert log_tail(text, 3) == ["line 97", "line 98", "line 99"]
