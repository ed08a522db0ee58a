"""Keras 3, a small model whose own callback raises at batch 25 (a monitoring hook that breaks): the steps timed
before it are a measurement all the same. An optional first argument names a file the script writes after each
batch, as a checkpoint callback would."""

import sys

import keras
import numpy as np

CRASH_AT = 25


class BreaksLate(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == CRASH_AT:
            raise RuntimeError("monitoring hook lost its connection")


class Checkpoint(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if len(sys.argv) > 1:
            with open(sys.argv[1], "w") as fh:
                fh.write("written by the script at batch %d\n" % batch)


rng = np.random.default_rng(0)
x = rng.standard_normal((2048, 32)).astype("float32")
model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)])
model.compile(loss="mse", optimizer="adam")
model.fit(x, x[:, :1], batch_size=16, epochs=1, verbose=0, callbacks=[Checkpoint(), BreaksLate()])
