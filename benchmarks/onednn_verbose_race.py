"""Does a TensorFlow run with oneDNN's verbose filter on survive its first steps, with and without priming?

oneDNN 3.x parses ONEDNN_VERBOSE on its first call into shared state without a lock; with a `filter=`
the parse appends to a shared string, so two threads making their first oneDNN call together can corrupt
the heap (SIGSEGV, or SIGABRT "malloc(): unaligned tcache chunk detected"). The workload primes oneDNN
with one small eager convolution on the main thread (frameworks.prime_onednn_verbose). This runs a
small branchy CNN's first training step in fresh processes, alternating unprimed and primed, and counts
the processes that die.

    python benchmarks/onednn_verbose_race.py [--runs 30]

Prints one JSON object: runs and crashes per mode, the exit statuses seen, and the machine. A crash in a
primed run is a failure of the fix (exit status 1).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import os, sys
sys.path.insert(0, sys.argv[2])
import frameworks
os.environ["ONEDNN_VERBOSE"] = frameworks.ONEDNN_VERBOSE_SETTING
os.environ["ONEDNN_VERBOSE_TIMESTAMP"] = "1"
import numpy as np
import tensorflow as tf
import keras
if sys.argv[1] == "primed":
    frameworks.prime_onednn_verbose()
inp = keras.Input((32, 32, 3))
branches = []
for _ in range(6):  # parallel branches: several threads make their first oneDNN call at once
    b = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    branches.append(keras.layers.Conv2D(8, 3, padding="same", activation="relu")(b))
x = keras.layers.GlobalAveragePooling2D()(keras.layers.Concatenate()(branches))
model = keras.Model(inp, keras.layers.Dense(2, activation="softmax")(x))
model.compile("rmsprop", "sparse_categorical_crossentropy")
model.fit(np.ones((8, 32, 32, 3), "float32"), np.zeros(8), batch_size=4, epochs=1, verbose=0)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30, help="processes per mode")
    args = parser.parse_args()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("ONEDNN_VERBOSE", None)
    workload_dir = str(ROOT / "fp16doctor" / "workload")
    counts = {mode: {"runs": 0, "crashes": 0, "statuses": {}} for mode in ("unprimed", "primed")}
    for _ in range(args.runs):
        for mode, count in counts.items():
            proc = subprocess.run([sys.executable, "-c", CHILD, mode, workload_dir], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
            count["runs"] += 1
            if proc.returncode != 0:
                count["crashes"] += 1
                count["statuses"][str(proc.returncode)] = count["statuses"].get(str(proc.returncode), 0) + 1
    print(json.dumps({"machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "python": platform.python_version()},
                      "setting": "ONEDNN_VERBOSE=profile_exec,filter=^(?!gemm_api)", **counts}, indent=1))
    return 1 if counts["primed"]["crashes"] else 0


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    sys.exit(main())
