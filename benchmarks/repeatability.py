"""Does a diagnose repeat? N full `fp16doctor diagnose --quick` on this machine, one after another, compared.

    python benchmarks/repeatability.py [--repeat 3] [--backend tensorflow|torch|jax] [extra diagnose arguments]
    python benchmarks/repeatability.py --suite [--repeat 3] [--script S]

`--suite`: N `diagnose --quick --script S` in a row (S: tests/data/scripts/small_mlp.py, a Keras MLP of about
10 ms a step, by default), then N of the quick built-in diagnose, each set compared on its own; for each 16-bit
precision it prints every invocation's ratio and interval (and what the interval covers, `interval_scope`) and
whether each two of them overlap.

For every 16-bit verdict it reports the outcome and cause of each invocation (do they agree?), the ratio
intervals (do they all overlap, how wide are they?), the A/A control's interval (float32 against a second
float32 model in the same rounds: the noise floor), the prescription, and each invocation's wall time. If the
ratios move between invocations by more than their intervals allow, that is the variance the intervals miss:
the script prints it as `between_invocations`, so it can be compared with the intervals' widths.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fp16doctor.probe.cpu import probe_cpu


def one_diagnose(extra: list[str], env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "fp16doctor", "diagnose", "--quick", "--out", out, *extra],
                              capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.exit(f"diagnose failed ({proc.returncode}): {proc.stderr[-2000:]}")
        doc = json.loads((Path(out) / "results.json").read_text())
    return {"wall_s": round(wall, 1), "verdicts": doc.get("verdicts") or [],
            "prescriptions": doc.get("prescriptions") or []}


SMALL_MLP = Path(__file__).resolve().parents[1] / "tests" / "data" / "scripts" / "small_mlp.py"


def _overlap(intervals: list[list[float]]) -> bool:
    return max(i[0] for i in intervals) <= min(i[1] for i in intervals)


def pairwise(intervals: list[list[float]]) -> list[dict[str, Any]]:
    """Each two invocations' intervals (1-based), and whether they overlap."""
    return [{"runs": [i + 1, j + 1], "overlap": _overlap([intervals[i], intervals[j]])}
            for i in range(len(intervals)) for j in range(i + 1, len(intervals))]


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    by_key: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        for v in result["verdicts"]:
            by_key.setdefault(f"{v['precision']}/{v.get('variant', 'original')}", []).append(v)
    verdicts = {}
    for key, seen in by_key.items():
        intervals = [v["ratio_interval"] for v in seen if v.get("ratio_interval")]
        ratios = [v["ratio"] for v in seen]
        logs = [math.log(r) for r in ratios if r > 0]
        verdicts[key] = {
            "outcomes": [v["outcome"] for v in seen],
            "causes": [v.get("cause") for v in seen],
            "ratios": [round(r, 4) for r in ratios],
            "intervals": intervals,
            "interval_methods": [v.get("interval_method") for v in seen],
            "repeats": [v.get("repeats") for v in seen],
            "relative_widths": [round((i[1] - i[0]) / r, 3) for i, r in zip(intervals, ratios, strict=False) if r],
            "noise_floor_intervals": [v.get("noise_floor_interval") for v in seen],
            "outcome_agrees": len({v["outcome"] for v in seen}) == 1,
            "cause_agrees": len({v.get("cause") for v in seen}) == 1,
            "intervals_overlap": _overlap(intervals) if intervals else None,
            "pairwise_overlap": pairwise(intervals),
            "interval_scopes": [v.get("interval_scope") for v in seen],
            "interval_processes": [v.get("interval_processes", 1) for v in seen],
            # The spread of the ratio between invocations (log sd as a share): what drift between runs adds.
            "between_invocations": round(math.exp(statistics.stdev(logs)) - 1, 4) if len(logs) > 1 else None,
        }
    prescribed = [[(p["machine"], p["stack"], p["recommended"]["precision"], p["recommended"].get("setting"))
                   for p in r["prescriptions"]] for r in results]
    return {"verdicts": verdicts, "prescriptions": prescribed,
            "prescription_agrees": len({json.dumps(p) for p in prescribed}) == 1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", default=None, help="KERAS_BACKEND for the runs (default: Keras' own setting)")
    ap.add_argument("--suite", action="store_true",
                    help="N script diagnoses (--script, default the 10 ms-step MLP), then N built-in ones")
    ap.add_argument("--script", default=str(SMALL_MLP), help="the script of --suite")
    args, extra = ap.parse_known_args()
    env = dict(os.environ)
    if args.backend:
        env["KERAS_BACKEND"] = args.backend
    commands = [[*extra, "--script", args.script], extra] if args.suite else [extra]
    sets = []
    for command in commands:
        results = [one_diagnose(command, env) for _ in range(args.repeat)]
        sets.append({"command": " ".join(["fp16doctor", "diagnose", "--quick", *command]),
                     "wall_s": [r["wall_s"] for r in results], **summarize(results)})
    cpu = probe_cpu()  # the probe's own reading: model and the flags that decide 16-bit speed
    machine = {"cpu": cpu.get("model"), "flags": cpu.get("flags"), "cores": os.cpu_count(),
               "python": platform.python_version()}
    backend = args.backend or env.get("KERAS_BACKEND") or "keras default"
    if not args.suite:
        print(json.dumps({"machine": machine, "backend": backend, **sets[0]}, indent=1))
        return
    print(json.dumps({"machine": machine, "backend": backend, "sets": sets}, indent=1))


if __name__ == "__main__":
    main()
