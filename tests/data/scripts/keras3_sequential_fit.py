"""Keras 3, Sequential, fit on in-memory numpy arrays with a validation split (a small CNN on 32x32)."""

import keras
import numpy as np
from hand_timer import callbacks

rng = np.random.default_rng(0)
x = rng.random((512, 32, 32, 3), dtype=np.float32)
y = (x.mean(axis=(1, 2, 3)) > 0.5).astype("float32")

model = keras.Sequential([
    keras.Input((32, 32, 3)),
    keras.layers.Conv2D(32, (3, 3), padding="same", activation="relu"),
    keras.layers.MaxPooling2D((2, 2)),
    keras.layers.Conv2D(32, (3, 3), padding="same", activation="relu"),
    keras.layers.Flatten(),
    keras.layers.Dense(1, activation="sigmoid"),
])
model.compile(loss="binary_crossentropy", optimizer="rmsprop", metrics=["accuracy"])
model.fit(x, y, batch_size=32, epochs=4, validation_split=0.125, verbose=2,
          callbacks=callbacks(keras.callbacks.Callback))
print("evaluation:", model.evaluate(x[:64], y[:64], verbose=0))
