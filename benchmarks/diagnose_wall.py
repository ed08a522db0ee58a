"""Wall time of a whole `fp16doctor diagnose --quick` on this machine (target: at most 90 s on 2 cores).

    python benchmarks/diagnose_wall.py [--repeat 2] [extra diagnose arguments, e.g. --no-experiments]

Runs the real CLI end to end (probe, the runs, the experiments the analysis plans, analysis, report) and
prints one JSON object: each diagnose's wall time, its phases (results.json invocation.phases_s), its rounds (how
many, why they stopped), each run's wall time, and beside them the CPU model and the load average before and after,
since a loaded machine is slower. With --repeat 3 it also says whether the diagnoses in a row agree: each verdict's
outcome and cause, each prescription's configuration, and whether each ratio's intervals overlap across the repeats.
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
    walls, runs, phases, loads, conclusions, rounds = [], [], [], [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as out:
            load_before = os.getloadavg()[0]
            t0 = time.perf_counter()
            proc = subprocess.run([*cli, "diagnose", "--quick", "--out", out, *extra],
                                  capture_output=True, text=True)
            walls.append(time.perf_counter() - t0)
            loads.append([round(load_before, 2), round(os.getloadavg()[0], 2)])
            if proc.returncode != 0:
                sys.exit(f"diagnose failed ({proc.returncode}): {proc.stderr[-2000:]}")
            doc = json.loads((Path(out) / "results.json").read_text())
            phases.append(doc.get("invocation", {}).get("phases_s"))
            rounds.append([{"stack": t.get("stack"), "variant": t.get("variant"), "rounds": len(t.get("order") or []),
                            "stop_reason": t.get("stop_reason"), "stop_precision": t.get("stop_precision")}
                           for t in doc.get("timing_rounds") or []])
            conclusions.append(_conclusions(doc))
            runs.append({f"{r['precision']}/{r['variant']}": {
                "wall_s": r.get("wall_s"), "status": r.get("status"), "bound": r.get("bound", False),
                "step_ms": (r.get("step_time_ms") or {}).get("median"), "n": (r.get("step_time_ms") or {}).get("n"),
                "ops": "ops" in r, "experiment": (r.get("experiment") or {}).get("tests")} for r in doc["runs"]})
    print(json.dumps({
        # The cores this process may run on (taskset narrows them; the diagnose's processes inherit it).
        "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "cores_usable": len(os.sched_getaffinity(0)),
                    "python": platform.python_version()},
        "command": " ".join(["fp16doctor", "diagnose", "--quick", *extra]),
        "slow_step_multiple": os.environ.get("FP16DOCTOR_SLOW_STEP_MULTIPLE"),
        "wall_s": [round(w, 1) for w in walls], "median_wall_s": round(statistics.median(walls), 1),
        "phases_s": phases, "load_average_1min_before_after": loads,
        # Each rounds process: how many rounds, why they stopped (the budget, or every ratio precise enough), and
        # the widest ratio's relative half-width then.
        "rounds": rounds,
        "per_run_wall_s": runs,
        "conclusions": conclusions, "agreement": _agreement(conclusions),
    }, indent=2))


def _conclusions(doc: dict) -> dict:
    """What a user acts on: each verdict's outcome, cause and interval; each machine's prescribed configuration."""
    verdicts = {f"{v['stack']}/{v['precision']}/{v['variant']}": {
        "outcome": v.get("outcome"), "cause": v.get("cause"), "figure": v.get("figure"),
        "interval": v.get("ratio_interval")} for v in doc.get("verdicts", [])}
    prescribed = {p["stack"]: (p.get("recommended") or {}).get("precision") for p in doc.get("prescriptions", [])}
    return {"verdicts": verdicts, "prescribed": prescribed}


def _agreement(conclusions: list[dict]) -> dict:
    """Whether the repeats agree on outcome, cause and prescription, and whether each ratio's intervals overlap."""
    if len(conclusions) < 2:
        return {}
    keys = set.intersection(*(set(c["verdicts"]) for c in conclusions))
    overlap = {}
    for key in sorted(keys):
        ranges = [c["verdicts"][key]["interval"] for c in conclusions]
        if all(isinstance(r, list) and len(r) == 2 for r in ranges):
            overlap[key] = max(r[0] for r in ranges) <= min(r[1] for r in ranges)
    return {
        "outcomes": all(len({c["verdicts"][k]["outcome"] for c in conclusions}) == 1 for k in keys),
        "causes": all(len({c["verdicts"][k]["cause"] for c in conclusions}) == 1 for k in keys),
        "prescriptions": len({json.dumps(c["prescribed"], sort_keys=True) for c in conclusions}) == 1,
        "intervals_overlap": overlap,
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    main()
