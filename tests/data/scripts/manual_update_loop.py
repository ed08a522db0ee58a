"""A custom training loop that updates its weights by hand (no optimizer, no fit): nothing marks its steps, so
its run is timed as the whole script."""

import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(7)
x = rng.random((256, 16), dtype=np.float32)
y = (x.sum(axis=1) > 8.0).astype("float32")[:, None]

model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(1, activation="sigmoid")])
loss_fn = keras.losses.BinaryCrossentropy()

for step in range(40):
    i = (step % 8) * 32
    with tf.GradientTape() as tape:
        loss = loss_fn(y[i:i + 32], model(x[i:i + 32], training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    for weight, grad in zip(model.trainable_variables, grads):
        weight.assign_sub(0.01 * tf.cast(grad, weight.dtype))
print("last loss", float(loss))
