"""Does `diagnose --script` measure what a bare loop measures? A small Keras MLP (tests/data/scripts/small_mlp.py,
steps of about 10 ms on a 2-core CPU) diagnosed with `--quick --script`, against the same model in a bare loop
of its own, alternating: bare loop, diagnose, bare loop, diagnose, ...

    python benchmarks/script_vs_bare_loop.py [--repeat 3] [--precision float16 --precision mixed_float16]

The bare loop shares no code with fp16doctor's workload: one process builds one model per precision exactly as
the script does (the precision set by Keras' own floatx and dtype policy), feeds it the batches fit() would
(floats cast to floatx), and times blocks of `train_on_batch` calls with a wall clock, each block's precisions
in a new random order, reading every loss as a float so an asynchronous backend is waited for. Its ratio's
95 % interval is a t interval on the blocks' paired log ratios (the statistics only are fp16doctor's). For
every precision the script prints both ratios and intervals and whether they overlap. Prints one JSON object.
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
from fp16doctor.workload.paired import t_quantile

SCRIPT = Path(__file__).resolve().parents[1] / "tests" / "data" / "scripts" / "small_mlp.py"

BARE_LOOP = r'''
import json, random, statistics, sys, time
import keras
import numpy as np

precisions, blocks, steps = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
x = rng.standard_normal((8192, 256)).astype("float32")
y = (x[:, :8].sum(axis=1) > 0).astype("float32")
# What fit() feeds each model: Keras 3's array adapter casts float arrays to floatx (float16 for pure float16,
# keras/src/trainers/data_adapters/array_slicing.py), where train_on_batch would pass them on as they are.
batches = {p: [(x[i:i + 256].astype(f), y[i:i + 256].astype(f)) for i in range(0, 8192, 256)]
           for p, f in ((p, "float16" if p == "float16" else "float32") for p in precisions)}

def build(precision):
    keras.config.set_floatx("float16" if precision == "float16" else "float32")
    keras.mixed_precision.set_dtype_policy(precision)
    model = keras.Sequential([keras.Input((256,)), keras.layers.Dense(1024, activation="relu"),
                              keras.layers.Dense(1024, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.compile(loss="binary_crossentropy", optimizer="adam")
    return model

models = {}
for precision in precisions:
    models[precision] = build(precision)
    for bx, by in batches[precision][:5]:  # trace and warm up
        float(models[precision].train_on_batch(bx, by))
keras.config.set_floatx("float32")
keras.mixed_precision.set_dtype_policy("float32")
medians = {p: [] for p in precisions}
order = list(precisions)
for block in range(blocks):
    random.shuffle(order)
    for precision in order:
        keras.config.set_floatx("float16" if precision == "float16" else "float32")
        keras.mixed_precision.set_dtype_policy(precision)
        times = []
        for i in range(steps):
            bx, by = batches[precision][(block * steps + i) % len(batches[precision])]
            t0 = time.perf_counter()
            float(models[precision].train_on_batch(bx, by))
            times.append((time.perf_counter() - t0) * 1000.0)
        medians[precision].append(statistics.median(times))
print(json.dumps(medians))
'''


def paired_interval(fp32: list[float], other: list[float]) -> dict[str, Any]:
    """float32's time over the other's (the speed-up, as fp16doctor's `ratio`), with a 95 % t interval."""
    logs = [math.log(a / b) for a, b in zip(fp32, other, strict=True)]
    mean = statistics.fmean(logs)
    half = t_quantile(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return {"ratio": round(math.exp(mean), 4),
            "interval": [round(math.exp(mean - half), 4), round(math.exp(mean + half), 4)], "blocks": len(logs)}


def bare_loop(precisions: list[str], blocks: int, steps: int, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", BARE_LOOP, ",".join(["float32", *precisions]), str(blocks),
                           str(steps)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"bare loop failed: {proc.stderr[-2000:]}")
    medians = json.loads(proc.stdout.strip().splitlines()[-1])
    return {p: {**paired_interval(medians["float32"], medians[p]),
                "ms": round(statistics.median(medians[p]), 3),
                "float32_ms": round(statistics.median(medians["float32"]), 3)} for p in precisions}


def diagnose(precisions: list[str], env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "fp16doctor", "diagnose", "--quick", "--script", str(SCRIPT),
               "--no-experiments", "--out", out, "--precision", "float32"]
        for precision in precisions:
            cmd += ["--precision", precision]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.exit(f"diagnose failed ({proc.returncode}): {proc.stderr[-2000:]}")
        doc = json.loads((Path(out) / "results.json").read_text())
    found: dict[str, Any] = {"wall_s": round(wall, 1)}
    for v in doc.get("verdicts") or []:
        found[v["precision"]] = {"ratio": v["ratio"], "interval": v["ratio_interval"],
                                 "method": v["interval_method"], "repeats": v["repeats"], "outcome": v["outcome"],
                                 "noise_floor": v.get("noise_floor_interval")}
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--precision", action="append", default=None, help="compared with float32 (default: float16)")
    ap.add_argument("--blocks", type=int, default=15, help="the bare loop's blocks per precision")
    ap.add_argument("--steps", type=int, default=20, help="train_on_batch calls per block")
    args = ap.parse_args()
    precisions = args.precision or ["float16"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    pairs = []
    for _ in range(args.repeat):
        bare = bare_loop(precisions, args.blocks, args.steps, env)
        pairs.append({"bare_loop": bare, "diagnose": diagnose(precisions, env)})
    summary = {}
    for precision in precisions:
        rows = []
        for pair in pairs:
            ours, theirs = pair["diagnose"].get(precision), pair["bare_loop"][precision]
            overlap = ours is not None and max(ours["interval"][0], theirs["interval"][0]) <= min(
                ours["interval"][1], theirs["interval"][1])
            rows.append({"diagnose": ours, "bare_loop": theirs, "overlap": overlap})
        summary[precision] = {"rows": rows, "all_overlap": all(r["overlap"] for r in rows)}
    cpu = probe_cpu()
    print(json.dumps({
        "machine": {"cpu": cpu.get("model"), "flags": cpu.get("flags"), "cores": os.cpu_count(),
                    "python": platform.python_version()},
        "script": SCRIPT.name, "diagnose_wall_s": [p["diagnose"]["wall_s"] for p in pairs], "precisions": summary,
    }, indent=1))


if __name__ == "__main__":
    main()
