"""A script whose training steps take about 3 s each, as a large model's would on a small CPU: a layer waits in
each step (a stand-in for work the CPU does not share with the rest). Keras 3, fit()."""

import time

import keras
import numpy as np
import tensorflow as tf

STEP_PAUSE_S = 3.0


def _pause():
    time.sleep(STEP_PAUSE_S)
    return np.float32(0.0)


class Pause(keras.layers.Layer):
    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, x):
        waited = tf.py_function(_pause, [], tf.float32)
        waited.set_shape(())
        return x + tf.cast(waited, x.dtype)


rng = np.random.default_rng(5)
x = rng.random((128, 16), dtype=np.float32)
y = (x.sum(axis=1) > 8.0).astype("float32")[:, None]

model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(16, activation="relu"), Pause(),
                          keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer="sgd", loss="binary_crossentropy", jit_compile=False)
model.fit(x, y, batch_size=8, epochs=2, verbose=0)
