# This file runs in its own child process of the target Python, like the workload: it may import the
# framework (TID251), must stay Python 3.5 syntax (UP031), and reports any failure as data (BLE001).
# ruff: noqa: TID251, UP031, BLE001
"""Runs inside the target Python (any version from 3.5 on): describes one framework, prints one JSON line.

Usage: python -c "$(this file)" NAME    with NAME in python, numpy, tensorflow, keras, tf_keras, jax, torch,
pillow, scipy.
Prints `@@fp16doctor-probe {json}` as its last line: null when the framework is not installed, else a dict
(with "error" when it is installed but broken). Keep it Python 3.5 valid: no f-strings, no annotations.
"""
import json
import os
import sys

MARKER = "@@fp16doctor-probe "

# Do not let a file in the caller's working directory shadow a framework.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]


def installed(module):
    try:
        import importlib.util

        return importlib.util.find_spec(module) is not None
    except ValueError:
        return False
    except ImportError:  # Python 2: no importlib.util
        import imp

        try:
            imp.find_module(module)
            return True
        except ImportError:
            return False


def dist_version(*names):
    """The installed distribution's version, without importing it (importing Keras writes keras.json)."""
    for name in names:
        try:
            import importlib.metadata as metadata  # Python 3.8+

            return metadata.version(name)
        except ImportError:
            pass
        except Exception:  # PackageNotFoundError; try the next spelling
            continue
    for name in names:
        try:
            import pkg_resources

            return pkg_resources.get_distribution(name).version
        except Exception:
            continue
    return None


def describe_python():
    return {
        "version": "%d.%d.%d" % tuple(sys.version_info[:3]),
        "executable": sys.executable,
        "implementation": getattr(getattr(sys, "implementation", None), "name", None),
    }


def describe_numpy():
    if not installed("numpy"):
        return None
    import numpy

    return {"version": numpy.__version__}


def describe_tensorflow():
    if not installed("tensorflow"):
        return None
    import tensorflow as tf

    info = {"version": getattr(tf, "__version__", None) or getattr(tf, "VERSION", None)}
    try:
        info["built_with_cuda"] = bool(tf.test.is_built_with_cuda())
    except Exception:
        info["built_with_cuda"] = None
    cuda = cudnn = None
    get_build_info = getattr(getattr(tf, "sysconfig", None), "get_build_info", None)
    if get_build_info is not None:  # TF >= 2.3
        build = get_build_info()
        cuda, cudnn = build.get("cuda_version"), build.get("cudnn_version")
    else:
        try:
            from tensorflow.python.platform import build_info

            cuda = getattr(build_info, "cuda_version_number", None)
            cudnn = getattr(build_info, "cudnn_version_number", None)
        except ImportError:
            pass
    info["cuda_version"] = None if cuda is None else str(cuda)
    info["cudnn_version"] = None if cudnn is None else str(cudnn)
    devices = None
    config = getattr(tf, "config", None)
    lister = getattr(config, "list_physical_devices", None) or getattr(
        getattr(config, "experimental", None), "list_physical_devices", None
    )
    if lister is not None:
        devices = [d.name for d in lister("GPU")]
    else:  # TF 1.x before 1.14
        from tensorflow.python.client import device_lib

        devices = [d.name for d in device_lib.list_local_devices() if d.device_type == "GPU"]
    info["gpus_visible"] = len(devices)
    info["gpu_devices"] = devices
    return info


def describe_keras():
    if not installed("keras"):
        return None
    version = dist_version("keras", "Keras")
    if version is None:
        # No metadata API here: import it, pointing Keras at a throwaway home so no keras.json is written.
        import tempfile

        os.environ["KERAS_HOME"] = tempfile.mkdtemp(prefix="fp16doctor-keras-")
        import keras

        version = keras.__version__
    return {"version": version}


def describe_tf_keras():
    if not installed("tf_keras"):
        return None
    return {"version": dist_version("tf_keras", "tf-keras")}


def describe_jax():
    if not installed("jax"):
        return None
    import jax

    info = {"version": jax.__version__, "jaxlib": dist_version("jaxlib")}
    info["backend"] = jax.default_backend()
    info["devices"] = [str(d) for d in jax.devices()]
    return info


def describe_torch():
    if not installed("torch"):
        return None
    import torch

    info = {"version": torch.__version__, "cuda": getattr(torch.version, "cuda", None)}
    try:
        info["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        info["cudnn"] = None
    info["cuda_available"] = bool(torch.cuda.is_available())
    info["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


def describe_pillow():
    if not installed("PIL"):
        return None
    import PIL
    from PIL import Image  # what the workload's dataset and flow_from_directory load images with

    return {"version": getattr(PIL, "__version__", None) or getattr(Image, "VERSION", None)}


def describe_scipy():
    if not installed("scipy"):
        return None
    import scipy
    from scipy import ndimage  # noqa: F401  ImageDataGenerator's transforms (even flips) go through it

    return {"version": scipy.__version__}


DESCRIBERS = {
    "python": describe_python,
    "numpy": describe_numpy,
    "tensorflow": describe_tensorflow,
    "keras": describe_keras,
    "tf_keras": describe_tf_keras,
    "jax": describe_jax,
    "torch": describe_torch,
    "pillow": describe_pillow,
    "scipy": describe_scipy,
}


def main(name):
    try:
        result = DESCRIBERS[name]()
    except BaseException as exc:  # a broken install is a finding, reported as such
        result = {"version": dist_version(name), "error": "%s: %s" % (type(exc).__name__, exc)}
    sys.stdout.flush()
    sys.stdout.write("\n" + MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
