"""Text classification with a small Transformer block, after the structure of the public Keras example
https://keras.io/examples/nlp/text_classification_with_transformer/ (written afresh for fp16doctor's tests).

As there, `keras.Input` is given no dtype: the word ids (up to 20,000 distinct ones) arrive as floats and go
through a custom layer that adds a token embedding and a position embedding. The IMDB reviews are replaced by
seeded random ids with the same shape (200 ids a review, id 0 as padding) and random binary labels. With this
seed no id rounds past the vocabulary's end in float16 (the largest is 19,991, which becomes 19,984); with the
argument --rare-words some do."""

import sys

import keras
import numpy as np
from keras import layers, ops

VOCAB_SIZE = 20000  # only the 20,000 most frequent words
MAXLEN = 200  # the first 200 words of each review
EMBED_DIM = 32
NUM_HEADS = 2
FF_DIM = 32


class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.feed_forward = keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)])
        self.norm_after_attention = layers.LayerNormalization(epsilon=1e-6)
        self.norm_after_feed_forward = layers.LayerNormalization(epsilon=1e-6)
        self.dropout_attention = layers.Dropout(rate)
        self.dropout_feed_forward = layers.Dropout(rate)

    def call(self, inputs, training=None):
        attended = self.dropout_attention(self.attention(inputs, inputs), training=training)
        hidden = self.norm_after_attention(inputs + attended)
        fed = self.dropout_feed_forward(self.feed_forward(hidden), training=training)
        return self.norm_after_feed_forward(hidden + fed)


class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.token_embedding = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.position_embedding = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, ids):
        length = ops.shape(ids)[-1]
        positions = self.position_embedding(ops.arange(0, length, 1))
        return self.token_embedding(ids) + positions


rng = np.random.default_rng(1)
# Word ids as keras.datasets.imdb gives them: 0 pads, 1 starts a review, 2 stands for a word outside the 20,000
# most frequent, and a word of frequency rank r is id r + 2 (Zipf's law: most ids are small, a few reach the top
# of the vocabulary). Shorter reviews are padded with 0 at the front, as pad_sequences does.
n_reviews = 1024
ids = rng.zipf(1.3, size=(n_reviews, MAXLEN)) + 2
ids[ids >= VOCAB_SIZE] = 2
lengths = rng.integers(40, MAXLEN + 1, size=n_reviews)
ids[np.arange(MAXLEN)[None, :] < (MAXLEN - lengths)[:, None]] = 0
ids[np.arange(n_reviews), MAXLEN - lengths] = 1
if "--rare-words" in sys.argv[1:]:
    # Every review ends with one of the ten rarest words: seven of them (ids 19,993 to 19,999) float16 rounds to
    # 20,000, past the end of the embedding table, so every batch holds one.
    ids[:, -1] = rng.integers(VOCAB_SIZE - 10, VOCAB_SIZE, size=n_reviews)
x_train = ids.astype("float32")
y_train = rng.integers(0, 2, size=n_reviews)

inputs = keras.Input(shape=(MAXLEN,))
x = TokenAndPositionEmbedding(MAXLEN, VOCAB_SIZE, EMBED_DIM)(inputs)
x = TransformerBlock(EMBED_DIM, NUM_HEADS, FF_DIM)(x)
x = layers.GlobalAveragePooling1D()(x)
x = layers.Dropout(0.1)(x)
x = layers.Dense(20, activation="relu")(x)
x = layers.Dropout(0.1)(x)
outputs = layers.Dense(2, activation="softmax")(x)
model = keras.Model(inputs=inputs, outputs=outputs)

model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=32, epochs=2, verbose=2)
