"""A small convnet compiled with jit_compile=True (XLA on TensorFlow): the whole training step is one compiled
cluster, which the profiler sees as one op. Keras 3, fit()."""

import keras
import numpy as np

rng = np.random.default_rng(6)
x = rng.random((512, 28, 28, 1), dtype=np.float32)
y = rng.integers(0, 10, size=(512,))

model = keras.Sequential([
    keras.Input((28, 28, 1)),
    keras.layers.Conv2D(16, (3, 3), activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Conv2D(32, (3, 3), activation="relu"),
    keras.layers.GlobalAveragePooling2D(),
    keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", jit_compile=True)
model.fit(x, y, batch_size=32, epochs=3, verbose=0)
