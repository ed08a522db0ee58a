"""`fp16doctor diagnose --stack cpu` on a real Docker engine: container runs beside the host's, nothing left."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from docker_env import ca_bundle, require_engine
from slow_path import assert_cut_and_said, forced_cut_env

from fp16doctor.engines.docker import sdk

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_stack_runs_land_beside_host_runs_and_leave_no_container(tmp_path: Path) -> None:
    require_engine()
    # No experiments: on a CPU whose oneDNN runs float16's reference kernels they would add runs to both stacks.
    command = [sys.executable, "-m", "fp16doctor", "diagnose", "--size", "smoke", "--stack", "cpu", "--precision",
               "float16", "--no-experiments", "--out", str(tmp_path)]
    ca = ca_bundle()
    if ca is not None:  # pip inside the build goes through this machine's TLS proxy
        command += ["--ca-bundle", str(ca)]
    proc = subprocess.run(
        command,
        capture_output=True, text=True, timeout=3600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "results.json").read_text())
    by_stack = {r["stack"]: r for r in doc["runs"]}
    assert set(by_stack) == {"host", "cpu"}
    host, container = by_stack["host"], by_stack["cpu"]
    assert host["status"] == "ok" and container["status"] == "ok", container.get("error")
    assert host["engine"]["kind"] == "host"
    assert container["engine"]["kind"] == "docker" and container["engine"]["image"].startswith("fp16doctor/cpu:")
    # Inside the image: the stack's own pins, and floatx=float16 as the user set it.
    assert container["software"]["tensorflow"] == "2.21.0" and container["batch_dtype"] == "float16"
    assert container["step_time_ms"]["median"] > 0
    html = (tmp_path / "report.html").read_text()
    assert "cpu" in html and "host" in html
    assert sdk.leftover_containers(None) == []


@pytest.mark.parametrize("cut", [False, True], ids=["as-measured", "float16-cut"])
def test_a_stacks_precisions_are_timed_again_together_in_one_container(tmp_path: Path, cut: bool) -> None:
    """After each precision's own container, one more container times them in interleaved rounds: the verdict's
    interval rests on paired rounds there too, and no container is left. A float16 run cut by the slow-step bound
    (as on a CPU running oneDNN's reference kernels; forced with `cut`) is left out of the rounds, and says so."""
    require_engine()
    command = [sys.executable, "-m", "fp16doctor", "diagnose", "--size", "smoke", "--stack", "cpu", "--no-host",
               "--precision", "float32", "--precision", "float16", "--no-experiments", "--out", str(tmp_path)]
    ca = ca_bundle()
    if ca is not None:
        command += ["--ca-bundle", str(ca)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=3600,
                          env=forced_cut_env() if cut else None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "results.json").read_text())
    originals = {r["precision"]: r for r in doc["runs"] if r["variant"] == "original"}
    assert sorted(originals) == ["float16", "float32"]  # the rounds are no run
    (verdict,) = doc["verdicts"]
    if cut:
        assert_cut_and_said(originals["float16"])
    left_out = originals["float16"].get("rounds_left_out")
    if left_out:
        # Cut by the bound, or its steps too slow for three rounds on this machine now: nothing is left to pair
        # with float32, so no rounds container, and the run and the terminal say why.
        assert f"cpu: float16 left out of the interleaved rounds: {left_out}" in proc.stderr
        assert "timing_rounds" not in doc and verdict["repeats"] == 0
    else:
        assert "timing_rounds" in doc, proc.stderr[-3000:]
        (rounds,) = doc["timing_rounds"]
        assert rounds["stack"] == "cpu" and rounds["engine"]["kind"] == "docker" and len(rounds["order"]) >= 3
        assert all(r["step_time_ms"]["design"] == "interleaved" for r in originals.values())
        assert verdict["interval_method"] == "paired_rounds" and verdict["repeats"] >= 3
        assert "interleaved rounds" in proc.stderr
    assert sdk.leftover_containers(None) == []
