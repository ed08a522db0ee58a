"""Keras 3 functional API trained from a tf.data pipeline (batched, prefetched, repeated)."""

import keras
import numpy as np
import tensorflow as tf
from hand_timer import callbacks

rng = np.random.default_rng(1)
x = rng.random((512, 32, 32, 3), dtype=np.float32)
y = (x[:, :, :, 0].mean(axis=(1, 2)) > 0.5).astype("float32")
train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512).batch(32).repeat().prefetch(2)

inputs = keras.Input((32, 32, 3))
h = keras.layers.Conv2D(32, (3, 3), padding="same", activation="relu")(inputs)
h = keras.layers.MaxPooling2D((2, 2))(h)
h = keras.layers.Conv2D(32, (3, 3), padding="same", activation="relu")(h)
h = keras.layers.GlobalAveragePooling2D()(h)
outputs = keras.layers.Dense(1, activation="sigmoid")(h)
model = keras.Model(inputs, outputs)
model.compile(loss="binary_crossentropy", optimizer="adam")
model.fit(train, steps_per_epoch=16, epochs=3, verbose=2, callbacks=callbacks(keras.callbacks.Callback))
