"""tf_keras (Keras 2's API on TF 2.x) with fit_generator, fed by a plain Python generator.

tf_keras 2.21 still has Model.fit_generator (deprecated: it calls fit).
"""

import numpy as np
import tf_keras
from hand_timer import callbacks


def batches(batch_size=32):
    rng = np.random.default_rng(2)
    pool = rng.random((8, batch_size, 32, 32, 3), dtype=np.float32)
    labels = (pool.mean(axis=(2, 3, 4)) > 0.5).astype("float32")
    i = 0
    while True:
        yield pool[i % 8], labels[i % 8]
        i += 1


model = tf_keras.Sequential([
    tf_keras.layers.Conv2D(32, (3, 3), padding="same", activation="relu", input_shape=(32, 32, 3)),
    tf_keras.layers.MaxPooling2D((2, 2)),
    tf_keras.layers.Conv2D(32, (3, 3), padding="same", activation="relu"),
    tf_keras.layers.Flatten(),
    tf_keras.layers.Dense(1, activation="sigmoid"),
])
model.compile(loss="binary_crossentropy", optimizer=tf_keras.optimizers.RMSprop(learning_rate=1e-3))
model.fit_generator(batches(), steps_per_epoch=16, epochs=3, verbose=2,
                    callbacks=callbacks(tf_keras.callbacks.Callback))
