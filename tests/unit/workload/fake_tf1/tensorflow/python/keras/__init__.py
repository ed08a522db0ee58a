"""tf.keras of the fake TensorFlow 1.x: the fake Keras's code, run under this module's name."""

import os
import runpy

_FAKE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fake_keras", "keras", "__init__.py")
globals().update({k: v for k, v in runpy.run_path(_FAKE, run_name=__name__).items() if not k.startswith("__")})
__version__ = "2.2.4-tf"
# A copy that does not read keras.json (as TensorFlow's unused copy need not): FAKE_TF_KERAS_FLOATX.
_State.floatx = os.environ.get("FAKE_TF_KERAS_FLOATX", _State.floatx)  # noqa: F821  (from the fake Keras)


class backend(backend):  # noqa: F821  (the fake Keras's; tf.keras's backend is TensorFlow, read by software_info)
    @staticmethod
    def backend():
        return "tensorflow"
