"""What timing a change to a model or its input inside the interleaved rounds buys against a process of its own.

    python benchmarks/changes_in_rounds.py [--repeat 1] [--size quick]

Runs `diagnose` (float32 and float16, this machine's host Python) with the experiment planner told to ask for
float32's in-memory input control and float16 on float32 batches, whatever the runs say (the planner's own choices
are tested apart), twice per repeat: as diagnose runs them (in the original's rounds, beside float32 and float16),
and with those experiments sent to processes of their own, as before the rounds could build a changed model. Prints
one JSON object: per mode, the wall time and phases, the original's rounds (how many), and each experiment's
record: its step, how it was timed, and its ratio to the configuration it changes with the analysis' own interval
(paired rounds where one process timed both); the CPU model and the load average beside them. Nothing else should
run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ASKED = [{"stack": "host", "precision": "float32", "variant": "synthetic_input", "control": True,
          "reason": "asked for by the benchmark"},
         {"stack": "host", "precision": "float16", "variant": "float32_batches", "reason": "asked for by the benchmark",
          "experiment": {"changes": {"batch_dtype": "float32"}, "tests": "host_fp16_emulation"}}]


def _one(size: str, in_rounds: bool) -> dict[str, Any]:
    from rich.console import Console

    import fp16doctor.diagnose.rounds as diagnose_rounds
    import fp16doctor.diagnose.run as diagnose_run
    from fp16doctor.analysis.context import build_context
    from fp16doctor.analysis.intervals import ratio_interval
    from fp16doctor.diagnose import DiagnoseOptions, run_diagnose
    from fp16doctor.progress import LiveProgress

    diagnose_run.plan_experiments = lambda doc, progress: ASKED  # type: ignore[assignment]
    diagnose_run.within_budget = lambda units, *rest: units  # type: ignore[assignment]
    diagnose_rounds.MODEL_VARIANTS = diagnose_rounds.MODEL_VARIANTS if in_rounds else ()  # type: ignore[misc]
    with tempfile.TemporaryDirectory() as out, open(os.devnull, "w") as quiet:
        load_before = os.getloadavg()[0]
        began = time.perf_counter()
        run_diagnose(DiagnoseOptions(out_dir=Path(out), size=size, precisions=["float32", "float16"]),
                     LiveProgress(Console(file=quiet, width=200)))
        wall = time.perf_counter() - began
        doc = json.loads((Path(out) / "results.json").read_text())
    # Each change against the configuration it changes, as the analysis compares two runs (paired rounds where one
    # process timed both, else the two processes' medians).
    views = {(r.precision, r.variant): r for r in build_context(doc).ok_runs()}
    timed_by = {(r["precision"], r["variant"]): r.get("timed_by") for r in doc["runs"]}
    changes = {}
    for (precision, variant), view in views.items():
        base = views.get((precision, "original"))
        if variant == "original" or base is None:
            continue
        interval = ratio_interval(base.timing, view.timing)
        changes[f"{precision} {variant}"] = {
            "median_ms": view.step_ms, "original_median_ms": base.step_ms,
            "timed_by": timed_by.get((precision, variant)) or "its own process",
            "original_over_change": {"ratio": round(interval.speedup, 3), "low": round(interval.low, 3),
                                     "high": round(interval.high, 3), "method": interval.method,
                                     "rounds": interval.repeats}}
    return {"wall_s": round(wall, 1), "phases_s": doc["invocation"].get("phases_s"),
            "rounds": [len(t.get("order") or []) for t in doc.get("timing_rounds") or []],
            "changes": changes, "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--size", default="quick")
    ap.add_argument("--mode", choices=["in_rounds", "own_process"], default=None,
                    help="(internal) one mode in this process")
    args = ap.parse_args()
    if args.mode:
        print(json.dumps(_one(args.size, args.mode == "in_rounds")))
        return
    import subprocess

    results: dict[str, list[Any]] = {"in_rounds": [], "own_process": []}
    for _ in range(args.repeat):
        for mode in ("in_rounds", "own_process"):  # each in a fresh interpreter: the patches stay in it
            proc = subprocess.run([sys.executable, __file__, "--mode", mode, "--size", args.size],
                                  capture_output=True, text=True, check=True)
            results[mode].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(json.dumps({"cpu": cpu, "cores": os.cpu_count(), "size": args.size, **results}, indent=1))


if __name__ == "__main__":
    main()
