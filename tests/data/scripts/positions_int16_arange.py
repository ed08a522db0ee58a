"""Keras 3, a positional embedding as text models write it: `ops.arange` with no dtype. Keras picks the range's
integer type to follow floatx, so under floatx float16 it is int16, and TensorFlow has no CPU kernel for an int16
Range: the run fails inside fit(), at the script's fit line. It trains in float32 and under mixed policies."""

import keras
import numpy as np
from keras import ops


class AddPositions(keras.layers.Layer):
    def call(self, x):
        positions = ops.arange(0, ops.shape(x)[-1])
        return x + ops.cast(positions, x.dtype)


inputs = keras.Input((8,))
outputs = keras.layers.Dense(1)(AddPositions()(inputs))
model = keras.Model(inputs, outputs)
model.compile(loss="mse", optimizer="adam")
x = np.ones((256, 8), dtype="float32")
model.fit(x, np.ones((256, 1), dtype="float32"), batch_size=16, epochs=2, verbose=0)
