"""A plain Keras 3 fit of the seed model on in-memory float32 data, timed with a wall clock only.

Written independently of fp16doctor's workload, so the harness's synthetic_input number can be
checked against it. Prints {"ms_per_step": ...}: the median of five marginal per-step times.
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
args = ap.parse_args()

steps = 16  # batches per epoch: Keras' per-epoch set-up is spread thin
rng = np.random.default_rng(0)
x = rng.random((steps * args.batch_size, args.height, args.width, 3), dtype=np.float32)
y = rng.integers(0, 2, size=(steps * args.batch_size,)).astype(np.float32)

model = keras.Sequential([keras.Input((args.height, args.width, 3))])
for filters in (32, 32, 64, 64):
    model.add(keras.layers.Conv2D(filters, (3, 3), padding="same"))
    model.add(keras.layers.Activation("relu"))
    model.add(keras.layers.MaxPooling2D((2, 2)))
model.add(keras.layers.AveragePooling2D((2, 2)))
model.add(keras.layers.Flatten())
model.add(keras.layers.Dense(1, activation="sigmoid"))
model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.RMSprop(1e-4, rho=0.9, epsilon=1e-4))
model.fit(x, y, batch_size=args.batch_size, epochs=1, verbose=0)  # build, compile, warm up

# Marginal cost of a step: a fit of 4 epochs minus a fit of 1, so fit()'s own set-up (data adapter,
# callbacks) cancels out and only steps (and epoch boundaries) remain.
per_step = []
for _ in range(5):
    t0 = time.perf_counter()
    model.fit(x, y, batch_size=args.batch_size, epochs=1, shuffle=False, verbose=0)
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    model.fit(x, y, batch_size=args.batch_size, epochs=4, shuffle=False, verbose=0)
    four = time.perf_counter() - t0
    per_step.append((four - one) * 1000.0 / (3 * steps))
print(json.dumps({"ms_per_step": statistics.median(per_step), "rounds_ms_per_step": per_step}))
