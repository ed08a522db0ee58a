"""A stand-in for TensorFlow 1.x as the script runner meets it: `import tensorflow` loads its own copy of
Keras, tensorflow.python.keras, which is tf.keras (the fake Keras beside this folder, under that name)."""

from tensorflow.python import keras  # noqa: F401  (TensorFlow 1.x imports its Keras on import)
from tensorflow.python.framework.versions import __version__  # noqa: F401
