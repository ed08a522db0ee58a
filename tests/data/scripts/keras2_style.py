# -*- coding: utf-8 -*-
# ruff: noqa: UP009, UP010, I001  (Python 3.5 and Keras 2.1 style on purpose)
"""A Keras 2.1-2.3 style script (standalone `keras`, fit_generator, lr=): valid Python 3.5.

It runs in the Keras 2 stacks (tf1.7-cuda9.0, tf1.13-cuda10.0, ...); Keras 3 rejects its lr= and has no
fit_generator, which fp16doctor reports by name.
"""
from __future__ import division, print_function

import numpy as np

import keras
from keras.layers import Conv2D, Dense, Flatten, MaxPooling2D
from keras.models import Sequential


def batches(batch_size=32):
    rng = np.random.RandomState(3)
    pool = rng.rand(8, batch_size, 32, 32, 3).astype("float32")
    labels = (pool.mean(axis=(2, 3, 4)) > 0.5).astype("float32")
    i = 0
    while True:
        yield pool[i % 8], labels[i % 8]
        i += 1


model = Sequential()
model.add(Conv2D(16, (3, 3), padding="same", activation="relu", input_shape=(32, 32, 3)))
model.add(MaxPooling2D(pool_size=(2, 2)))
model.add(Flatten())
model.add(Dense(1, activation="sigmoid"))
model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.SGD(lr=0.01), metrics=["accuracy"])
model.fit_generator(batches(), steps_per_epoch=16, epochs=3, verbose=2)
