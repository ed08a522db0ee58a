"""Collaborative filtering of movie ratings with user and movie embeddings and biases, after the structure of the
public Keras example https://keras.io/examples/structured_data/collaborative_filtering_movielens/ (written afresh
for fp16doctor's tests).

Here the user and movie ids enter through `keras.Input(..., dtype="int32")`, which Keras never casts to a float
type: a 16-bit precision leaves them whole. MovieLens is replaced by seeded random ratings over as many users
(610) and movies (9,724) as the small MovieLens set has, normalised to [0, 1] as the example does."""

import keras
import numpy as np
from keras import layers, ops

NUM_USERS = 610
NUM_MOVIES = 9724
EMBEDDING_SIZE = 50


class RecommenderNet(layers.Layer):
    """The dot product of a user's and a movie's embeddings plus both biases, through a sigmoid."""

    def __init__(self, num_users, num_movies, embedding_size, **kwargs):
        super().__init__(**kwargs)
        self.user_embedding = layers.Embedding(num_users, embedding_size, embeddings_initializer="he_normal",
                                               embeddings_regularizer=keras.regularizers.l2(1e-6))
        self.user_bias = layers.Embedding(num_users, 1)
        self.movie_embedding = layers.Embedding(num_movies, embedding_size, embeddings_initializer="he_normal",
                                                embeddings_regularizer=keras.regularizers.l2(1e-6))
        self.movie_bias = layers.Embedding(num_movies, 1)

    def call(self, inputs):
        user_ids, movie_ids = inputs
        user_vector = self.user_embedding(user_ids)
        movie_vector = self.movie_embedding(movie_ids)
        dot_user_movie = ops.sum(user_vector * movie_vector, axis=-1, keepdims=True)
        x = dot_user_movie + self.user_bias(user_ids) + self.movie_bias(movie_ids)
        return ops.sigmoid(x)


rng = np.random.default_rng(0)
n_ratings = 400_000
users = rng.integers(0, NUM_USERS, size=n_ratings).astype("int32")
movies = np.minimum(rng.zipf(1.2, size=n_ratings) - 1, NUM_MOVIES - 1).astype("int32")
movies[::7] = rng.integers(0, NUM_MOVIES, size=len(movies[::7]))  # the long tail of rarely rated films
ratings = rng.integers(1, 11, size=n_ratings) / 2.0  # 0.5 to 5 stars
y = ((ratings - ratings.min()) / (ratings.max() - ratings.min())).astype("float32")[:, None]

user_input = keras.Input(shape=(), dtype="int32", name="user")
movie_input = keras.Input(shape=(), dtype="int32", name="movie")
rating = RecommenderNet(NUM_USERS, NUM_MOVIES, EMBEDDING_SIZE)([user_input, movie_input])
model = keras.Model([user_input, movie_input], rating)
model.compile(loss=keras.losses.BinaryCrossentropy(), optimizer=keras.optimizers.Adam(learning_rate=0.001))
model.fit([users, movies], y, batch_size=16384, epochs=2, validation_split=0.1, verbose=2)
