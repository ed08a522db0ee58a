"""A small convnet that classifies 28x28 digits, after the structure of the public Keras example
https://keras.io/examples/vision/mnist_convnet/ (written afresh for fp16doctor's tests), compiled with
`jit_compile=True` so that XLA compiles its training step.

As there: two Conv2D + MaxPooling2D blocks, dropout and a ten-class softmax, categorical cross-entropy, Adam.
MNIST is replaced by seeded random grey images in [0, 1] with random labels, one-hot encoded."""

import keras
import numpy as np
from keras import layers

NUM_CLASSES = 10
INPUT_SHAPE = (28, 28, 1)

rng = np.random.default_rng(0)
x_train = rng.random((1024,) + INPUT_SHAPE, dtype=np.float32)
y_train = keras.utils.to_categorical(rng.integers(0, NUM_CLASSES, size=len(x_train)), NUM_CLASSES)

model = keras.Sequential([
    keras.Input(shape=INPUT_SHAPE),
    layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
    layers.MaxPooling2D(pool_size=(2, 2)),
    layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
    layers.MaxPooling2D(pool_size=(2, 2)),
    layers.Flatten(),
    layers.Dropout(0.5),
    layers.Dense(NUM_CLASSES, activation="softmax"),
])
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"], jit_compile=True)
model.fit(x_train, y_train, batch_size=64, epochs=2, validation_split=0.1, verbose=2)
