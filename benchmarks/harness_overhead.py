"""How much does fp16doctor's measurement harness cost against a bare Keras training loop?

Both sides train the seed model on the same in-memory batches in the same process, alternating
rounds so that drift on a shared machine hits both alike. The harness side is the workload's own
StepTimer callback (a float() of the loss per step, a timestamp, one protocol line); the bare side is
`model.fit` with no callback. Overhead = harness wall time per step / bare wall time per step - 1.

    python benchmarks/harness_overhead.py [--size quick|full] [--rounds 5] [--epochs 4]

Target: at most 2 %. Prints one JSON object with what was measured and on what.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fp16doctor" / "workload"))

import run_workload as wl  # noqa: E402

SIZES = {"quick": (112, 168, 32), "full": (224, 336, 128)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="quick")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=4, help="epochs of 4 batches per timed fit")
    args = ap.parse_args()
    height, width, batch = SIZES[args.size]
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    wl.prepare_keras_home("float32", backend)
    api = wl.load_keras(backend)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fp16doctor"
    train_dir = wl.dataset.ensure_dataset(str(cache), height, width, max(2 * batch, 64))
    with redirect_stdout(io.StringIO()):  # flow_from_directory announces what it found on stdout
        gen = wl.make_generator(api, train_dir, height, width, batch)
        x, y = wl.in_memory_batches(gen, 4)
    model = wl.build_seed_model(api, height, width, mixed=False)
    steps = 4 * args.epochs
    model.fit(x, y, batch_size=batch, epochs=2, shuffle=False, verbose=0)  # compile + warm caches

    def bare() -> float:
        t0 = time.perf_counter()
        model.fit(x, y, batch_size=batch, epochs=args.epochs, shuffle=False, verbose=0)
        return (time.perf_counter() - t0) * 1000.0 / steps

    def harness() -> tuple[float, float]:
        timer = wl.StepTimer(0, 10**9, 10**9, 1e9, 0.0)
        cb = wl.make_callback(api, timer)
        sink = io.StringIO()
        t0 = time.perf_counter()
        with redirect_stdout(sink):
            model.fit(x, y, batch_size=batch, epochs=args.epochs, shuffle=False, verbose=0, callbacks=[cb])
        wall = (time.perf_counter() - t0) * 1000.0 / steps
        return wall, statistics.median(timer.step_ms or timer.warmup_ms)

    bare_ms, harness_ms, reported_ms = [], [], []
    for _ in range(args.rounds):
        bare_ms.append(bare())
        wall, reported = harness()
        harness_ms.append(wall)
        reported_ms.append(reported)
    b, h, r = statistics.median(bare_ms), statistics.median(harness_ms), statistics.median(reported_ms)
    print(json.dumps({
        "size": args.size, "image": [height, width], "batch_size": batch, "steps_per_round": steps,
        "rounds": args.rounds, "keras": api.version, "backend": api.backend_name,
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version()},
        "bare_ms_per_step": round(b, 2), "harness_ms_per_step": round(h, 2),
        "harness_overhead_pct": round((h / b - 1.0) * 100.0, 2),
        "reported_median_ms": round(r, 2),
        "reported_vs_bare_pct": round((r / b - 1.0) * 100.0, 2),
        "rounds_bare_ms": [round(v, 2) for v in bare_ms], "rounds_harness_ms": [round(v, 2) for v in harness_ms],
    }, indent=2))


if __name__ == "__main__":
    main()
