"""A fully convolutional 1-D classifier of time series, after the structure of the public Keras example
https://keras.io/examples/timeseries/timeseries_classification_from_scratch/ (written afresh for fp16doctor's
tests).

As there: univariate series of 500 readings, three Conv1D + BatchNormalization + ReLU blocks, global average
pooling and a two-class softmax. The FordA engine recordings are replaced by seeded random series: noise, with a
faint periodic component in one class."""

import keras
import numpy as np

LENGTH = 500
NUM_CLASSES = 2

rng = np.random.default_rng(0)
n_series = 1024
y_train = rng.integers(0, NUM_CLASSES, size=n_series)
t = np.arange(LENGTH) / LENGTH
x_train = rng.standard_normal((n_series, LENGTH)) + 0.5 * y_train[:, None] * np.sin(2 * np.pi * 25 * t)[None, :]
x_train = ((x_train - x_train.mean(axis=1, keepdims=True)) / x_train.std(axis=1, keepdims=True))
x_train = x_train.reshape((n_series, LENGTH, 1)).astype("float32")


def make_model(input_shape):
    input_layer = keras.layers.Input(input_shape)
    x = input_layer
    for _ in range(3):
        x = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(x)
        x = keras.layers.BatchNormalization()(x)
        x = keras.layers.ReLU()(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    output_layer = keras.layers.Dense(NUM_CLASSES, activation="softmax")(x)
    return keras.models.Model(inputs=input_layer, outputs=output_layer)


model = make_model(input_shape=x_train.shape[1:])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["sparse_categorical_accuracy"])
model.fit(x_train, y_train, batch_size=32, epochs=2, validation_split=0.2, verbose=2)
