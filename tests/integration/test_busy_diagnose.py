"""`fp16doctor diagnose --quick` on a machine another process keeps busy: a bounded busy loop holds one core while
it runs (stopped in a finally, and ending on its own after BUSY_S regardless). results.json records what else used
the CPU, and no "Use float32" stands beside a 16-bit point estimate of 1.3x or more without the not-settled sentence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fp16doctor.analysis.busy import BUSY_OTHERS_PCT

FP16DOCTOR = [sys.executable, "-m", "fp16doctor"]
# The busy loop's own bound: longer than two quick diagnoses under load (within 150 s each), shorter than a runaway.
BUSY_S = 480
# One core, busy: Python spinning on a clock it checks, so it ends by itself past BUSY_S.
BUSY_LOOP = f"import time\nend = time.monotonic() + {BUSY_S}\nwhile time.monotonic() < end:\n    pass\n"


def _quick_diagnose_checked(out: Path) -> dict:
    """One `diagnose --quick` into `out` on the busy machine, with every check one such run must pass; its
    prescription."""
    started = time.monotonic()
    proc = subprocess.run([*FP16DOCTOR, "diagnose", "--quick", "--out", str(out)], capture_output=True, text=True,
                          timeout=400)
    wall_s = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    entries = [e for e in doc.get("timing_rounds") or [] if e.get("variant", "original") == "original"]
    assert entries, "no interleaved rounds"
    contention = entries[0]["contention"]
    # The busy loops held half of this machine's cores: a busy machine.
    assert contention["others_cpu_pct"] >= BUSY_OTHERS_PCT, contention
    prescription = next(p for p in doc["prescriptions"] if p["stack"] == "host")
    headline = prescription["headline"]
    fast = [m for m in prescription["measured"] if m.get("outcome") != "baseline" and m.get("speedup", 0) >= 1.3
            and m.get("variant") == "original" and not m.get("bound")]
    if headline.startswith("Use float32") and fast:
        pytest.fail(f"Use float32 beside {[(m['precision'], m['speedup']) for m in fast]}: {headline}")
    if "unsettled" in prescription:
        assert headline.startswith("Not settled") and "% of the CPU" in headline and "rerun on a quiet machine" \
            in headline
    # The busy machine is said in the answer's first lines with its figure.
    summary = proc.stdout[proc.stdout.index("What to do"):]
    assert "% of the CPU" in "\n".join(summary.splitlines()[:4]), summary[:800]
    # A sanity bound, not a speed target (docs/benchmarks.md keeps the measured wall times): a diagnose that went
    # on for minutes past its budget.
    assert wall_s < 200, wall_s
    return prescription


@pytest.mark.slow
def test_two_quick_diagnoses_on_a_busy_machine_record_it_and_never_prescribe_on_noise(tmp_path: Path) -> None:
    """Two in a row, as a user who doubts the first would run them: each records the load and never prescribes on
    noise, and the two never prescribe different configurations unless one says it is not settled."""
    # Half the machine's cores, at least one: other processes then hold about half of the CPU on any machine.
    busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(max(1, (os.cpu_count() or 2) // 2))]
    try:
        first, second = (_quick_diagnose_checked(tmp_path / f"busy-{n}") for n in (1, 2))
    finally:
        for loop in busy:
            loop.kill()
            loop.wait(timeout=10)
    if "unsettled" not in first and "unsettled" not in second:
        picked = [(p.get("recommended") or {}).get("precision") for p in (first, second)]
        assert picked[0] == picked[1], (first["headline"], second["headline"])
