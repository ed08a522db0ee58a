"""A bare Keras 3 training loop of the seed model on in-memory float32 data, timed with a wall clock only.

Written independently of fp16doctor's workload (no callback, no fit machinery), so the harness's
synthetic_input number can be checked against it. Each step is one `train_on_batch` call, whose
result is read as a float so an asynchronous backend is waited for. Prints {"ms_per_step": median}.
"""

import argparse
import json
import statistics
import time

import keras
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--height", type=int, required=True)
ap.add_argument("--width", type=int, required=True)
ap.add_argument("--batch-size", type=int, required=True)
ap.add_argument("--steps", type=int, default=30)
args = ap.parse_args()

rng = np.random.default_rng(0)
batches = [(rng.random((args.batch_size, args.height, args.width, 3), dtype=np.float32),
            rng.integers(0, 2, size=(args.batch_size,)).astype(np.float32)) for _ in range(4)]

model = keras.Sequential([keras.Input((args.height, args.width, 3))])
for filters in (32, 32, 64, 64):
    model.add(keras.layers.Conv2D(filters, (3, 3), padding="same"))
    model.add(keras.layers.Activation("relu"))
    model.add(keras.layers.MaxPooling2D((2, 2)))
model.add(keras.layers.AveragePooling2D((2, 2)))
model.add(keras.layers.Flatten())
model.add(keras.layers.Dense(1, activation="sigmoid"))
model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.RMSprop(1e-4, rho=0.9, epsilon=1e-4))

for i in range(5):  # build, compile, warm up
    model.train_on_batch(*batches[i % 4])

step_ms = []
for i in range(args.steps):
    t0 = time.perf_counter()
    float(model.train_on_batch(*batches[i % 4]))
    step_ms.append((time.perf_counter() - t0) * 1000.0)
print(json.dumps({"ms_per_step": statistics.median(step_ms), "steps_ms": step_ms}))
