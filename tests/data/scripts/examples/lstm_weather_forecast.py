"""A timeseries forecaster with one LSTM layer, after the structure of the public Keras example
https://keras.io/examples/timeseries/timeseries_weather_forecasting/ (written afresh for fp16doctor's tests).

As there: seven normalised weather features, one sample an hour over the past five days (120 steps), predict the
temperature 72 hours after the window. The Jena climate recording is replaced by a seeded random series with a
daily cycle and noise, normalised the way the example normalises its training split."""

import keras
import numpy as np

PAST = 720  # ten-minute readings: five days
STEP = 6  # one sample an hour
FUTURE = 72
SEQUENCE_LENGTH = PAST // STEP
N_FEATURES = 7
BATCH_SIZE = 256

rng = np.random.default_rng(0)
n_readings = 12000
hours = np.arange(n_readings) / 6.0
daily = np.sin(2 * np.pi * hours / 24.0)[:, None]
series = daily * rng.uniform(0.5, 2.0, size=N_FEATURES) + 0.3 * rng.standard_normal((n_readings, N_FEATURES))
series = (series - series.mean(axis=0)) / series.std(axis=0)
series = series.astype("float32")

temperature = 1  # the feature the forecast is for
starts = np.arange(0, n_readings - PAST - FUTURE, 2)
x_train = np.stack([series[s:s + PAST:STEP] for s in starts])
y_train = series[starts + PAST + FUTURE, temperature][:, None]

inputs = keras.layers.Input(shape=(SEQUENCE_LENGTH, N_FEATURES))
lstm_out = keras.layers.LSTM(32)(inputs)
outputs = keras.layers.Dense(1)(lstm_out)
model = keras.Model(inputs=inputs, outputs=outputs)
model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")
model.fit(x_train, y_train, batch_size=BATCH_SIZE, epochs=2, validation_split=0.1, verbose=2)
