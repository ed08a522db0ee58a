"""Keras 3, a VAE's sampling layer as the Keras example writes it with TensorFlow ops: its noise is drawn in
float32 and multiplied with the layer's 16-bit inputs. It trains in float32; under a mixed policy TensorFlow refuses
to multiply a float32 tensor with a bfloat16 (or float16) one, at the line marked below."""

import keras
import numpy as np
import tensorflow as tf


class Sampling(keras.layers.Layer):
    def call(self, inputs):
        z_mean, z_log_var = inputs
        epsilon = tf.random.normal(shape=tf.shape(z_mean))
        return z_mean + tf.exp(0.5 * z_log_var) * epsilon  # fails here under a mixed policy


inputs = keras.Input((16,))
hidden = keras.layers.Dense(32, activation="relu")(inputs)
z = Sampling()([keras.layers.Dense(4)(hidden), keras.layers.Dense(4)(hidden)])
model = keras.Model(inputs, keras.layers.Dense(16)(z))
model.compile(loss="mse", optimizer="adam")
x = np.random.default_rng(0).standard_normal((512, 16)).astype("float32")
model.fit(x, x, batch_size=32, epochs=2, verbose=0)
