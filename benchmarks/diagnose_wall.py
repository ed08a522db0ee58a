"""Wall time of a whole `fp16doctor diagnose --quick` on this machine (target: at most 90 s on 2 cores).

    python benchmarks/diagnose_wall.py [--repeat 2] [extra diagnose arguments, e.g. --no-experiments]

Runs the real CLI end to end (probe, the runs, the experiments the analysis plans, analysis, report) and
prints one JSON object.
Set FP16DOCTOR_SLOW_STEP_MULTIPLE to force the slow-step bound on a CPU where float16 is not pathological.
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
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    args, extra = ap.parse_known_args()
    cli = [sys.executable, "-m", "fp16doctor"]
    walls, runs = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            proc = subprocess.run([*cli, "diagnose", "--quick", "--out", out, *extra],
                                  capture_output=True, text=True)
            walls.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                sys.exit(f"diagnose failed ({proc.returncode}): {proc.stderr[-2000:]}")
            doc = json.loads((Path(out) / "results.json").read_text())
            runs.append({f"{r['precision']}/{r['variant']}": {
                "wall_s": r.get("wall_s"), "status": r.get("status"), "bound": r.get("bound", False),
                "step_ms": (r.get("step_time_ms") or {}).get("median"), "n": (r.get("step_time_ms") or {}).get("n"),
                "ops": "ops" in r, "experiment": (r.get("experiment") or {}).get("tests")} for r in doc["runs"]})
    print(json.dumps({
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version()},
        "command": " ".join(["fp16doctor", "diagnose", "--quick", *extra]),
        "slow_step_multiple": os.environ.get("FP16DOCTOR_SLOW_STEP_MULTIPLE"),
        "wall_s": [round(w, 1) for w in walls], "median_wall_s": round(statistics.median(walls), 1),
        "per_run_wall_s": runs,
    }, indent=2))


if __name__ == "__main__":
    main()
