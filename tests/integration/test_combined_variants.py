"""`diagnose --variant synthetic_input --variant synthetic_input+xla` on this machine's own Python, with real
TensorFlow on the CPU: one run makes both changes, records each, and is compared with float32 with batches in memory;
a combination that makes no configuration is refused in one line before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FP16DOCTOR = [sys.executable, "-m", "fp16doctor"]


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FP16DOCTOR, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_a_combined_variant_is_measured_against_float32_in_memory(tmp_path: Path) -> None:
    out = tmp_path / "combined"
    proc = _run("diagnose", "--quick", "--precision", "float32", "--variant", "synthetic_input",
                "--variant", "synthetic_input+xla", "-o", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    runs = {r["variant"]: r for r in doc["runs"]}
    assert set(runs) == {"synthetic_input", "synthetic_input+xla"}
    combined = runs["synthetic_input+xla"]
    assert combined["status"] == "ok", combined.get("error")
    assert combined["step_time_ms"]["median"] > 0
    # Every change it made, and the one it is an experiment of against the in-memory configuration.
    assert combined["variant_applied"] == {"batches_in_memory": True, "jit_compile": True}
    assert combined["workload"]["jit_compile"] is True and "input_time_ms" not in combined
    assert combined["experiment"]["changes"] == {"jit_compile": True}
    # Its comparison is with float32 with batches in memory, in the analysis and in what every output lists.
    from fp16doctor.analysis import diagnose_document
    from fp16doctor.analysis.causes import experiment_results
    from fp16doctor.analysis.context import build_context

    (result,) = experiment_results(build_context(doc))
    assert result.base.variant == "synthetic_input" and result.run.variant == "synthetic_input+xla"
    (row,) = [r for r in diagnose_document(doc).runs if r.variant == "synthetic_input+xla"]
    assert row.base_variant == "synthetic_input" and row.versus_fp32 not in ("baseline", "\u2014")
    explained = _run("explain", str(out / "results.json"), "--full")
    assert explained.returncode == 0, explained.stderr[-2000:]
    assert f"({row.versus_fp32} vs float32 with batches in memory)" in explained.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("variant", "clash"), [
    ("synthetic_input+float32_batches", "synthetic_input and float32_batches both change the batches"),
    ("xla+xla", "xla+xla names xla twice"),
])
def test_a_combination_that_makes_no_configuration_exits_2_naming_the_clash(tmp_path: Path, variant: str,
                                                                            clash: str) -> None:
    out = tmp_path / "refused"
    proc = _run("diagnose", "--quick", "--precision", "float32", "--variant", variant, "-o", str(out), timeout=120)
    assert proc.returncode == 2
    error = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and clash in error[0]
    assert not out.exists()  # refused before anything ran or was created


@pytest.mark.slow
def test_onednn_off_beside_a_gpu_stack_exits_2_naming_both(tmp_path: Path) -> None:
    proc = _run("diagnose", "--plan", "--stack", "tf2.20-keras3", "--variant", "synthetic_input+onednn_off",
                "-o", str(tmp_path / "plan"), timeout=120)
    assert proc.returncode == 2
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert "onednn_off" in error and "tf2.20-keras3" in error and "GPU" in error
