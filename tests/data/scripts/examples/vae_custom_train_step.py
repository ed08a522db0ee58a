"""A convolutional variational autoencoder with its own `train_step` and a sampling layer, after the structure of
the public Keras example https://keras.io/examples/generative/vae/ (written afresh for fp16doctor's tests).

The sampling layer draws its noise as the example does, `keras.random.normal(shape=...)` in the default float
type, and adds it as `z_mean + ops.exp(0.5 * z_log_var) * epsilon`. MNIST digits are replaced by seeded random
28x28 grey images in [0, 1]."""

import keras
import numpy as np
import tensorflow as tf
from keras import layers, ops

LATENT_DIM = 2


class Sampling(layers.Layer):
    """Draws z from the Gaussian that (z_mean, z_log_var) describe."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = keras.random.SeedGenerator(1337)

    def call(self, inputs):
        z_mean, z_log_var = inputs
        batch = ops.shape(z_mean)[0]
        dim = ops.shape(z_mean)[1]
        epsilon = keras.random.normal(shape=(batch, dim), seed=self.seed_generator)
        return z_mean + ops.exp(0.5 * z_log_var) * epsilon


encoder_inputs = keras.Input(shape=(28, 28, 1))
h = layers.Conv2D(32, 3, activation="relu", strides=2, padding="same")(encoder_inputs)
h = layers.Conv2D(64, 3, activation="relu", strides=2, padding="same")(h)
h = layers.Flatten()(h)
h = layers.Dense(16, activation="relu")(h)
z_mean = layers.Dense(LATENT_DIM, name="z_mean")(h)
z_log_var = layers.Dense(LATENT_DIM, name="z_log_var")(h)
z = Sampling()([z_mean, z_log_var])
encoder = keras.Model(encoder_inputs, [z_mean, z_log_var, z], name="encoder")

latent_inputs = keras.Input(shape=(LATENT_DIM,))
d = layers.Dense(7 * 7 * 64, activation="relu")(latent_inputs)
d = layers.Reshape((7, 7, 64))(d)
d = layers.Conv2DTranspose(64, 3, activation="relu", strides=2, padding="same")(d)
d = layers.Conv2DTranspose(32, 3, activation="relu", strides=2, padding="same")(d)
decoder_outputs = layers.Conv2DTranspose(1, 3, activation="sigmoid", padding="same")(d)
decoder = keras.Model(latent_inputs, decoder_outputs, name="decoder")


class VAE(keras.Model):
    def __init__(self, encoder, decoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.decoder = decoder
        self.total_loss_tracker = keras.metrics.Mean(name="total_loss")
        self.reconstruction_loss_tracker = keras.metrics.Mean(name="reconstruction_loss")
        self.kl_loss_tracker = keras.metrics.Mean(name="kl_loss")

    @property
    def metrics(self):
        return [self.total_loss_tracker, self.reconstruction_loss_tracker, self.kl_loss_tracker]

    def train_step(self, data):
        with tf.GradientTape() as tape:
            z_mean, z_log_var, z = self.encoder(data)
            reconstruction = self.decoder(z)
            reconstruction_loss = ops.mean(
                ops.sum(keras.losses.binary_crossentropy(data, reconstruction), axis=(1, 2)))
            kl_loss = -0.5 * (1 + z_log_var - ops.square(z_mean) - ops.exp(z_log_var))
            kl_loss = ops.mean(ops.sum(kl_loss, axis=1))
            total_loss = reconstruction_loss + kl_loss
        grads = tape.gradient(total_loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights, strict=True))
        self.total_loss_tracker.update_state(total_loss)
        self.reconstruction_loss_tracker.update_state(reconstruction_loss)
        self.kl_loss_tracker.update_state(kl_loss)
        return {m.name: m.result() for m in self.metrics}


rng = np.random.default_rng(0)
digits = rng.random((1024, 28, 28, 1), dtype=np.float32)

vae = VAE(encoder, decoder)
vae.compile(optimizer=keras.optimizers.Adam())
vae.fit(digits, epochs=2, batch_size=64, verbose=2)
