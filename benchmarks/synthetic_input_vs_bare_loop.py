"""Does the workload's compute-only number (variant synthetic_input) match a bare Keras loop of the same model?

The harness (one `synthetic_input` run of the built-in workload through the host engine) and a bare
`train_on_batch` loop of the seed model on in-memory batches (tests/integration/bare_keras_steps.py, written
independently of the workload) alternate N times: bare, harness, bare, harness, ..., bare, so drift of a shared
machine falls on both. Reports each side's medians, the ratio harness / bare of each harness run against the
mean of the bare loops either side of it, and their spread.

    python benchmarks/synthetic_input_vs_bare_loop.py [--repeat 3]

Target: the median ratio within 15 % of 1. Prints one JSON object with what was measured and on what.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from fp16doctor.engines.host import HostEngine
from fp16doctor.engines.spec import RunSpec, WorkloadSize
from fp16doctor.probe.cpu import probe_cpu

BARE = Path(__file__).resolve().parents[1] / "tests" / "integration" / "bare_keras_steps.py"
SIZE = WorkloadSize("agreement", 112, 168, 32, warmup_steps=3, min_steps=30, max_steps=30, max_measure_s=600.0,
                    input_batches=1)


def bare_ms(home: str) -> float:
    proc = subprocess.run([sys.executable, str(BARE), "--height", "112", "--width", "168", "--batch-size", "32",
                           "--steps", "30"], capture_output=True, text=True,
                          env={**os.environ, "KERAS_HOME": home, "KERAS_BACKEND": "tensorflow"})
    if proc.returncode != 0:
        sys.exit(f"bare loop failed: {proc.stderr[-2000:]}")
    return statistics.median(json.loads(proc.stdout.strip().splitlines()[-1])["steps_ms"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bare = [bare_ms(tmp)]
        harness = []
        for _ in range(args.repeat):
            record = HostEngine(cache_dir=Path(tmp), backend="tensorflow").run(
                RunSpec("host", "float32", "synthetic_input", SIZE), lambda e: None)
            if record.get("status") != "ok":
                sys.exit(f"harness run failed: {record.get('error')}")
            harness.append(float(record["step_time_ms"]["median"]))
            bare.append(bare_ms(tmp))
    ratios = [h / ((a + b) / 2) for h, a, b in zip(harness, bare, bare[1:], strict=False)]
    cpu = probe_cpu()
    print(json.dumps({
        "machine": {"cpu": cpu.get("model"), "flags": cpu.get("flags"), "cores": os.cpu_count(),
                    "python": platform.python_version()},
        "bare_ms": [round(v, 2) for v in bare], "harness_ms": [round(v, 2) for v in harness],
        "ratios": [round(r, 4) for r in ratios], "median_ratio": round(statistics.median(ratios), 4),
        "within_target": abs(statistics.median(ratios) - 1) <= 0.15,
    }, indent=1))


if __name__ == "__main__":
    main()
