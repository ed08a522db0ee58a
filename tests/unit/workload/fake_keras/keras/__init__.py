"""A stand-in for Keras with just what the script runner touches: Model.fit / train_on_batch calling
callbacks, floatx from $KERAS_HOME/keras.json, a global dtype policy, and an optimizer that rejects
Keras 2 arguments as Keras 3 does. Each step sleeps FAKE_STEP_S, so step times are known."""

import json
import os
import time

__version__ = "3.0.0-fake"
if os.environ.get("FAKE_KERAS_IMPORTS_TENSORFLOW") and __name__ == "keras":
    import tensorflow  # noqa: F401  (as Keras 2.2.4's backend does: TensorFlow 1 then loads its own tf.keras)
STEP_S = float(os.environ.get("FAKE_STEP_S", "0.002"))
LOSS = float(os.environ.get("FAKE_LOSS", "0.5"))


def _read_floatx():
    path = os.path.join(os.environ.get("KERAS_HOME", os.path.expanduser("~/.keras")), "keras.json")
    try:
        with open(path) as fh:
            return json.load(fh).get("floatx", "float32")
    except OSError:
        return "float32"


class _State:
    floatx = _read_floatx()
    policy = None


class backend:
    @staticmethod
    def floatx():
        return _State.floatx

    @staticmethod
    def backend():
        return "fake"


class config:
    @staticmethod
    def set_floatx(value):
        _State.floatx = value


class _Policy:
    def __init__(self, name):
        self.name = name


class mixed_precision:
    @staticmethod
    def set_dtype_policy(name):
        _State.policy = name

    @staticmethod
    def dtype_policy():
        return _Policy(_State.policy or _State.floatx)


class callbacks:
    class Callback:
        def __init__(self):
            self.model = None

        def on_train_begin(self, logs=None):
            pass

        def on_epoch_begin(self, epoch, logs=None):
            pass

        def on_train_batch_end(self, batch, logs=None):
            pass

        def on_epoch_end(self, epoch, logs=None):
            pass


class optimizers:
    class Optimizer:
        """Keras 3's: apply_gradients calls apply; each updates the weights once."""

        def apply_gradients(self, grads_and_vars):
            return self.apply([g for g, _ in grads_and_vars])

        def apply(self, grads):
            return len(grads)

    class RMSprop:
        def __init__(self, learning_rate=0.001, **kwargs):
            if kwargs:
                raise ValueError(f"Argument(s) not recognized: {kwargs!r}")


class Model:
    def __init__(self):
        self.layers = []
        self.optimizer = None
        self.stop_training = False
        self.dtype_policy_name = mixed_precision.dtype_policy().name

    def count_params(self):
        return 0

    def compile(self, optimizer=None, loss=None, **kwargs):
        print("compile", sorted(kwargs.items()))

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose=1, callbacks=None, steps_per_epoch=4):
        cbs = list(callbacks or [])
        for cb in cbs:
            cb.model = self
        for cb in cbs:
            cb.on_train_begin()
        for epoch in range(epochs):
            for cb in cbs:
                cb.on_epoch_begin(epoch)
            for step in range(steps_per_epoch):
                time.sleep(STEP_S)
                for cb in cbs:
                    cb.on_train_batch_end(step, {"loss": LOSS})
                if self.stop_training:
                    break
            time.sleep(STEP_S * 5)  # "validation"
            for cb in cbs:
                cb.on_epoch_end(epoch)
            if self.stop_training:
                break

    def train_on_batch(self, x, y):
        time.sleep(STEP_S)
        return [LOSS, 1.0]
