"""TensorFlow 1's device list, where software_info looks for a GPU (TensorFlow 1 has no tf.config): none here."""


def list_local_devices():
    return []
