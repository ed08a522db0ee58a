"""How much does fp16doctor's measurement harness cost against a bare Keras training loop?

Two measurements, both on the seed model with in-memory batches, in one process:

1. A/B: rounds of `model.fit` with the workload's own StepTimer callback (a float() of the loss per
   step, a timestamp, one protocol line) alternate with rounds of bare `model.fit`, so drift on a
   shared machine hits both alike. overhead = harness wall per step / bare wall per step - 1. On a
   2-core machine the round-to-round noise is a few percent, so this bounds the overhead coarsely.
2. Direct: the harness's only addition to a step is its callback; its cost is timed on its own
   (thousands of calls with a real loss tensor from the backend) and divided by the step time.

    python benchmarks/harness_overhead.py [--size quick|full] [--rounds 9] [--epochs 2]

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

import dataset  # noqa: E402
import frameworks  # noqa: E402
import model as seed  # noqa: E402
import timing  # noqa: E402
import window  # noqa: E402

SIZES = {"quick": (112, 168, 32), "full": (224, 336, 128)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="quick")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--epochs", type=int, default=2, help="epochs of 16 batches per timed fit")
    args = ap.parse_args()
    height, width, batch = SIZES[args.size]
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    frameworks.prepare_keras_home("float32", backend)
    api = frameworks.load_keras(backend)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fp16doctor"
    train_dir = dataset.ensure_dataset(str(cache), height, width, max(2 * batch, 64))
    with redirect_stdout(io.StringIO()):  # flow_from_directory announces what it found on stdout
        gen = seed.make_generator(api, train_dir, height, width, batch)
        x, y = seed.in_memory_batches(gen, 16)
    model = seed.build_seed_model(api, height, width, mixed=False)
    steps = 16 * args.epochs
    model.fit(x, y, batch_size=batch, epochs=2, shuffle=False, verbose=0)  # compile + warm caches

    def bare() -> float:
        t0 = time.perf_counter()
        model.fit(x, y, batch_size=batch, epochs=args.epochs, shuffle=False, verbose=0)
        return (time.perf_counter() - t0) * 1000.0 / steps

    def harness() -> tuple[float, float]:
        timer = timing.StepTimer(0, 10**9, 10**9, 1e9, 0.0)
        cb, _ = window.make_callback(api, timer)
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

    # The callback alone, fed the loss as a backend tensor (what fit hands it), not a Python float.
    loss = api.keras.ops.convert_to_tensor(float(model.train_on_batch(x[:batch], y[:batch])[0]))
    timer = timing.StepTimer(0, 10**9, 10**9, 1e9, 0.0)
    cb, _ = window.make_callback(api, timer)
    calls = 5000
    with redirect_stdout(io.StringIO()):
        timer.begin()
        t0 = time.perf_counter()
        for i in range(calls):
            cb.on_train_batch_end(i, {"loss": loss})
        callback_us = (time.perf_counter() - t0) * 1e6 / calls
    print(json.dumps({
        "size": args.size, "image": [height, width], "batch_size": batch, "steps_per_round": steps,
        "rounds": args.rounds, "keras": api.version, "backend": api.backend_name,
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version()},
        "bare_ms_per_step": round(b, 2), "harness_ms_per_step": round(h, 2),
        "harness_overhead_pct": round((h / b - 1.0) * 100.0, 2),
        "callback_us_per_step": round(callback_us, 2),
        "callback_overhead_pct": round(callback_us / 1000.0 / b * 100.0, 4),
        "reported_median_ms": round(r, 2),
        "reported_vs_bare_pct": round((r / b - 1.0) * 100.0, 2),
        "rounds_bare_ms": [round(v, 2) for v in bare_ms], "rounds_harness_ms": [round(v, 2) for v in harness_ms],
    }, indent=2))


if __name__ == "__main__":
    main()
