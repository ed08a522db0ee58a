"""A custom training loop: Keras 3 layers, tf.GradientTape, no fit and no train_on_batch."""

import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(4)
x = rng.random((256, 32, 32, 3), dtype=np.float32)
y = (x.mean(axis=(1, 2, 3)) > 0.5).astype("float32")[:, None]

model = keras.Sequential([
    keras.Input((32, 32, 3)),
    keras.layers.Conv2D(16, (3, 3), padding="same", activation="relu"),
    keras.layers.GlobalAveragePooling2D(),
    keras.layers.Dense(1, activation="sigmoid"),
])
optimizer = keras.optimizers.SGD(0.01)
loss_fn = keras.losses.BinaryCrossentropy()


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


for step in range(24):
    i = (step % 8) * 32
    loss = train_step(tf.constant(x[i:i + 32]), tf.constant(y[i:i + 32]))
print("last loss", float(loss))
