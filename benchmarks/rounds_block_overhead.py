"""What one block of interleaved rounds costs beyond the steps it times, with each input the rounds can feed fit().

One process, Keras 3 on TensorFlow, the seed model at the quick size in float32 and float16, as the rounds build
them (workload/rounds.py). Blocks of each alternate: the generator handed to fit() as the user's script does
(Keras makes a new autotuned tf.data pipeline every call) and the rounds' own pipeline (workload/rounds.py
_tf_input: one per model, endless, autotuning off), so drift of a shared machine falls on both. A block is
`--steps` steps of one fit() call; its overhead is its wall time minus its steps (the first included, end to
end). Reports, per model and input, the median overhead and the median step, which must not differ between the
inputs (the same batches, prefetched alike).

    python benchmarks/rounds_block_overhead.py [--blocks 8] [--steps 3]

Prints one JSON object with what was measured and on what.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORKLOAD = Path(__file__).resolve().parents[1] / "fp16doctor" / "workload"
sys.path.insert(0, str(WORKLOAD))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import dataset  # noqa: E402
import rounds  # noqa: E402
from frameworks import load_keras  # noqa: E402
from model import build_seed_model, make_generator  # noqa: E402

from fp16doctor.probe.cpu import probe_cpu  # noqa: E402


def per_input(values: dict[str, dict[str, list[float]]], summary: Any) -> dict[str, dict[str, float]]:
    return {p: {name: round(summary(v), 1) for name, v in by_input.items()} for p, by_input in values.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=8, help="blocks per model and input")
    parser.add_argument("--steps", type=int, default=3, help="steps per block (one fit() call)")
    args = parser.parse_args()
    api = load_keras("tensorflow")
    if api.name != "keras3-legacy":
        sys.exit("this benchmark needs Keras 3 on TensorFlow")
    defaults = (api.floatx(), "float32")
    with tempfile.TemporaryDirectory() as cache:
        train_dir = dataset.ensure_dataset(cache, 112, 168, 128)
        models = {}
        for precision in ("float32", "float16"):
            rounds._set_precision(api, precision, defaults)
            generator = make_generator(api, train_dir, 112, 168, 32)
            model = build_seed_model(api, 112, 168, False)
            models[precision] = (model, {"generator": generator, "rounds_pipeline": rounds._tf_input(api, generator)})
            rounds._set_precision(api, "float32", defaults)
        overhead: dict[str, dict[str, list[float]]] = {p: {"generator": [], "rounds_pipeline": []} for p in models}
        steps: dict[str, dict[str, list[float]]] = {p: {"generator": [], "rounds_pipeline": []} for p in models}
        for index in range(args.blocks + 1):  # the first block of each traces and is left out
            for precision, (model, inputs) in models.items():
                rounds._set_precision(api, precision, defaults)
                for name, data in inputs.items():
                    block = rounds._BlockTimer()
                    start = time.perf_counter()
                    api.fit_stream(model, data, args.steps, 1, [rounds.timing_callback(api.keras, block)])
                    wall_ms = (time.perf_counter() - start) * 1000.0
                    timed = block.steps_ms()
                    if index == 0 or not timed:
                        continue
                    step = statistics.median(timed)
                    steps[precision][name].append(step)
                    overhead[precision][name].append(wall_ms - step * args.steps)
        rounds._set_precision(api, "float32", defaults)
    cpu = probe_cpu()
    print(json.dumps({
        "machine": {"cpu": cpu.get("model"), "cores": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "keras": api.version},
        "blocks": args.blocks, "steps_per_block": args.steps,
        "overhead_ms_median": per_input(overhead, statistics.median),
        "overhead_ms_max": per_input(overhead, max),
        "step_ms_median": per_input(steps, statistics.median),
    }, indent=1))


if __name__ == "__main__":
    main()
