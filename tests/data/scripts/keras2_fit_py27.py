# -*- coding: utf-8 -*-
# ruff: noqa: UP009, UP010, I001  (Python 2.7 and Keras 2.1 style on purpose)
"""A Keras 2.1-2.2 style script on in-memory numpy arrays (standalone `keras`, model.fit, lr=): valid Python 2.7
and 3.5.

It runs in the Python 2.7 twins (tf1.7-cpu: Keras 2.1.5, tf1.13-cpu: Keras 2.2.4) and in the Keras 2 stacks on
Python 3; small on purpose (32x32 images, batch 16, 320 samples, 20 steps an epoch), with 6 epochs: 120 steps,
more than a quick run's stop rule takes (2 warm-up, at most 60 measured, a profiled window), so fp16doctor ends it
after its measured steps on any machine, as it ends a real script's training.
"""
from __future__ import division, print_function

import sys

import numpy as np

import keras
from keras.layers import Conv2D, Dense, Flatten, MaxPooling2D
from keras.models import Sequential

rng = np.random.RandomState(7)
x = rng.rand(320, 32, 32, 3).astype("float32")
y = (x.mean(axis=(1, 2, 3)) > 0.5).astype("float32")
print("python", sys.version.split()[0], "keras", keras.__version__, "floatx", keras.backend.floatx())

model = Sequential()
model.add(Conv2D(16, (3, 3), padding="same", activation="relu", input_shape=(32, 32, 3)))
model.add(MaxPooling2D(pool_size=(2, 2)))
model.add(Conv2D(16, (3, 3), padding="same", activation="relu"))
model.add(Flatten())
model.add(Dense(1, activation="sigmoid"))
model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.SGD(lr=0.01), metrics=["accuracy"])
model.fit(x, y, batch_size=16, epochs=6, verbose=2)
print("trained")
