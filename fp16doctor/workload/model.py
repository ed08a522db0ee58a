# -*- coding: utf-8 -*-
"""The user's model and its input, as posted: the seed CNN, its ImageDataGenerator, and what the run's
result says about the model (layers, dtypes, FLOPs, loss scale).

Runs in the target Python (down to 3.5 with Keras 2.1.5): stdlib, numpy and the framework.
"""
from __future__ import division, print_function

import sys

from compat import parameter_names, perf_counter
from events import Skip
from protocol import PADDED_CHANNELS, in_memory_batch_count, variant_parts
from timing import summary


# ---------------------------------------------------------------- the model, as posted

def pad_channels_layer(api, height, width, channels):
    """Zero channels appended to the 3-channel input inside the model, so the first conv is built for
    `channels` (Tensor Core convolutions want multiples of 8) while the batches stay as they were."""
    ops = getattr(api.keras, "ops", None) or api.keras.backend
    extra = channels - 3

    def pad(t):
        zeros = ops.zeros_like(t)
        parts = [t] + [zeros] * (extra // 3)
        if extra % 3:
            parts.append(zeros[:, :, :, :extra % 3])
        return ops.concatenate(parts, axis=-1)

    return api.layers.Lambda(pad, input_shape=(height, width, 3), output_shape=(height, width, channels),
                             name="pad_channels")


def variant_changes(variant):
    """What a variant changes in the built-in workload, as (the generator's batch dtype, build_seed_model's keyword
    arguments): float32 batches, a padded first layer, XLA, each change of a combined variant
    ("synthetic_input+xla"); (None, {}) for one that changes neither."""
    batches, changes = None, {}
    for part in variant_parts(variant):
        dtype, kwargs = _one_change(part)
        batches = dtype or batches
        changes.update(kwargs)
    return batches, changes


def _one_change(variant):
    if variant == "float32_batches":
        return "float32", {}
    if variant == "channels_padded":
        return None, {"pad_to": PADDED_CHANNELS}
    if variant == "xla":
        return None, {"jit_compile": True}
    return None, {}


def check_batches(variant, batch_dtype):
    """float32_batches with batches that are not float32 (this Keras' generator ignored the dtype): Skip."""
    if "float32_batches" in variant_parts(variant) and batch_dtype != "float32":
        raise Skip("float32_batches: this Keras' generator still built %s batches" % batch_dtype)


def build_seed_model(api, height, width, mixed, pad_to=None, jit_compile=False, run_options=None):
    L = api.layers
    model = api.keras.models.Sequential()
    if pad_to:
        model.add(pad_channels_layer(api, height, width, pad_to))
        model.add(L.Conv2D(32, (3, 3), padding="same", kernel_initializer="lecun_normal"))
    else:
        model.add(L.Conv2D(32, (3, 3), input_shape=(height, width, 3), padding="same",
                           kernel_initializer="lecun_normal"))
    model.add(L.Activation("relu"))
    model.add(L.MaxPooling2D(pool_size=(2, 2)))
    model.add(L.Conv2D(32, (3, 3), padding="same"))
    model.add(L.Activation("relu"))
    model.add(L.MaxPooling2D(pool_size=(2, 2)))
    model.add(L.Conv2D(64, (3, 3), padding="same"))
    model.add(L.Activation("relu"))
    model.add(L.MaxPooling2D(pool_size=(2, 2)))
    model.add(L.Conv2D(64, (3, 3), padding="same"))
    model.add(L.Activation("relu"))
    model.add(L.MaxPooling2D(pool_size=(2, 2)))
    model.add(L.AveragePooling2D(pool_size=(2, 2)))
    model.add(L.Flatten())
    model.add(L.Dense(1))
    if mixed:
        # The mixed-precision guides keep the model's output in float32 for a stable loss.
        model.add(L.Activation("sigmoid", dtype="float32"))
    else:
        model.add(L.Activation("sigmoid"))
    api.compile(model, jit_compile=jit_compile, run_options=run_options)
    return model


def _shape(layer):
    shape = getattr(layer, "output_shape", None)
    if shape is None:
        try:
            shape = tuple(layer.output.shape)
        except (AttributeError, ValueError):
            return None
    if isinstance(shape, list):
        shape = shape[0]
    return [int(d) for d in shape[1:] if d is not None]


def describe_model(model):
    layers = []
    total_flops = 0.0
    for layer in model.layers:
        entry = {"type": layer.__class__.__name__, "name": layer.name}
        out = _shape(layer)
        if out is not None:
            entry["output_shape"] = out
        weights = layer.get_weights()
        entry["params"] = int(layer.count_params()) if weights else 0
        kind = entry["type"]
        if kind == "Conv2D" and weights:
            kh, kw, cin, cout = [int(d) for d in weights[0].shape]
            entry.update({"in_channels": cin, "out_channels": cout, "kernel": [kh, kw]})
            if out is not None:
                entry["flops_per_example"] = 2.0 * kh * kw * cin * cout * out[0] * out[1]
        elif kind == "Dense" and weights:
            fan_in, units = [int(d) for d in weights[0].shape]
            entry.update({"in_features": fan_in, "out_features": units,
                          "flops_per_example": 2.0 * fan_in * units})
        policy = getattr(layer, "dtype_policy", None)
        compute_dtype = getattr(layer, "compute_dtype", None)
        if compute_dtype is not None:
            entry["compute_dtype"] = str(compute_dtype)
        autocast = getattr(layer, "autocast", None)
        if isinstance(autocast, bool):
            # Keras casts a floating input to the layer's compute dtype unless the layer says not to (Embedding).
            entry["autocast"] = autocast
        if weights:
            entry["variable_dtype"] = str(weights[0].dtype)
        elif policy is not None and getattr(policy, "variable_dtype", None):
            entry["variable_dtype"] = str(policy.variable_dtype)
        total_flops += entry.get("flops_per_example", 0.0)
        layers.append(entry)
    try:
        params = int(model.count_params())
    except ValueError:  # a subclassed model with no call() of its own (a VAE's train_step) is never "built"
        params = sum(entry["params"] for entry in layers)
    return {"params": params, "flops_per_example": total_flops,
            "flops_note": "forward pass, multiply-add = 2 FLOPs; a training step is about 3x",
            "optimizer": model.optimizer.__class__.__name__, "layers": layers}


# The values of a batch read to tell ids from measurements: enough to see a vocabulary's largest id in a batch.
INPUT_SAMPLE = 65536


def _dtype_name(dtype):
    name = getattr(dtype, "name", None)
    return str(name if name is not None else dtype).replace("<dtype: '", "").replace("'>", "")


def _values(array):
    """What a batch's array holds, for the analysis to tell integer ids from measurements: whether every sampled
    value is a whole number, and the largest magnitude; None where the array cannot be read."""
    try:
        import numpy as np
        flat = np.asarray(array).ravel()[:INPUT_SAMPLE]
        if flat.size == 0 or flat.dtype.kind not in "iuf":
            return None
        if flat.dtype.kind == "f":
            finite = flat[np.isfinite(flat)]
            integer = bool(finite.size == flat.size and np.all(finite == np.floor(finite)))
        else:
            integer = True
        return {"dtype": str(flat.dtype), "integer": integer, "max_abs": float(np.max(np.abs(flat))),
                "sampled": int(flat.size)}
    except Exception:  # noqa: BLE001  (a batch that cannot be read is described less, never fatal)
        return None


def _consumers(model, tensor):
    """The layers that take `tensor` (a model input) as their input, by name."""
    names = []
    for layer in model.layers:
        if layer.__class__.__name__ == "InputLayer":
            continue
        try:
            given = layer.input
        except (AttributeError, ValueError, RuntimeError):
            continue
        given = given if isinstance(given, (list, tuple)) else [given]
        if any(g is tensor for g in given):
            names.append(layer.name)
    return names


def describe_inputs(model, x):
    """The model's inputs as the batch fed them: each input's dtype, the layers that take it and what the batch's
    values are (`x` as fit() got it: an array, or a list or dict of arrays; anything else is described without
    values)."""
    inputs = list(getattr(model, "inputs", None) or [])
    if isinstance(x, dict):
        arrays = [x.get(getattr(t, "name", "").split(":")[0]) for t in inputs]
        if not any(a is not None for a in arrays):
            arrays = list(x.values())
    elif isinstance(x, (list, tuple)):
        arrays = list(x)
    else:
        arrays = [x]
    described = []
    for index, tensor in enumerate(inputs):
        entry = {"name": str(getattr(tensor, "name", "input_%d" % index)).split(":")[0],
                 "dtype": _dtype_name(getattr(tensor, "dtype", None)), "consumers": _consumers(model, tensor)}
        values = _values(arrays[index]) if index < len(arrays) and arrays[index] is not None else None
        if values is not None:
            entry["values"] = values
        described.append(entry)
    return described


def jit_compile_of(model):
    """Whether the model was compiled with XLA (jit_compile), where its Keras says."""
    value = getattr(model, "jit_compile", None)
    return value if isinstance(value, bool) else None


def finite(value):
    """The loss as a JSON-safe number: None for NaN and infinities."""
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def _as_float(value):
    try:
        return float(value.numpy() if hasattr(value, "numpy") else value)
    except (TypeError, ValueError, AttributeError):
        return None


def loss_scale(model):
    """The dynamic loss scale after training (Keras 3: dynamic_scale; tf.keras: loss_scale), or None."""
    optimizer = getattr(model, "optimizer", None)
    for attr in ("dynamic_scale", "loss_scale"):
        value = getattr(optimizer, attr, None)
        if value is not None and not callable(value):
            return finite(_as_float(value))
    return None


def initial_loss_scale(model):
    optimizer = getattr(model, "optimizer", None)
    value = getattr(optimizer, "initial_scale", None)
    return finite(_as_float(value)) if value is not None and loss_scale(model) is not None else None


# ---------------------------------------------------------------- its input, as posted

class _Float32Backend(object):
    """Keras 2.1.5's image module as seen through this: floatx() is float32, the rest is the backend."""

    def __init__(self, backend):
        self._backend = backend

    def floatx(self):
        return "float32"

    def __getattr__(self, name):
        return getattr(self._backend, name)


class _ImageUtilsIn(object):
    """An image module's `image_utils` as seen through this: img_to_array, asked for no dtype, builds the array in
    the dtype of the iterator that asks (its `dtype`, the batch's), else floatx as before; the rest is the module.
    Per iterator, so the other generators of a rounds process keep floatx's arrays."""

    def __init__(self, image_utils):
        self._image_utils = image_utils

    def img_to_array(self, img, data_format=None, dtype=None):
        if dtype is None:
            caller = sys._getframe(1).f_locals.get("self")  # the DirectoryIterator building its batch
            dtype = getattr(caller, "dtype", None)
        return self._image_utils.img_to_array(img, data_format=data_format, dtype=dtype)

    def __getattr__(self, name):
        return getattr(self._image_utils, name)


def host_arrays_in(api):
    """Has the generator's module build each image's array in its iterator's dtype, so that what it computes on the
    host (standardize's rescale, the flips) runs in the batch's dtype too: Keras 3's legacy iterator and tf_keras's
    call image_utils.img_to_array without a dtype, which then follows floatx. True where it could be arranged."""
    module = sys.modules.get(api.ImageDataGenerator.__module__)
    utils = getattr(module, "image_utils", None)
    if utils is None or not hasattr(utils, "img_to_array"):
        return False
    if not isinstance(utils, _ImageUtilsIn):
        module.image_utils = _ImageUtilsIn(utils)
    return True


# What make_generator's iterator says of the arrays its images were built in: the batch's dtype, or "floatx".
HOST_ARRAYS_ATTR = "fp16doctor_host_arrays"


def make_generator(api, train_dir, height, width, batch_size, batch_dtype=None):
    # As posted: rescale on the host, random flips, batches built in K.floatx().
    kwargs = {}
    if batch_dtype is not None:
        if accepts_batch_dtype(api):
            kwargs["dtype"] = batch_dtype
            # The batch's dtype alone would leave each image's array, and the arithmetic on it, in floatx.
            arrays = batch_dtype if host_arrays_in(api) else "floatx"
        else:
            arrays = batch_dtype  # the module's floatx itself is redirected: its arrays too
            # Keras 2.1.5's DirectoryIterator asks K.floatx() for every batch: give only the image
            # module a backend whose floatx() is float32, so the model itself is left as it is.
            module = sys.modules[api.ImageDataGenerator.__module__]
            if not hasattr(module, "K"):
                raise Skip("this Keras' ImageDataGenerator takes no dtype and reads no K.floatx() to redirect")
            module.K = _Float32Backend(module.K)
    datagen = api.ImageDataGenerator(rescale=1. / 255, horizontal_flip=True, vertical_flip=True, **kwargs)
    iterator = datagen.flow_from_directory(train_dir, target_size=(height, width), batch_size=batch_size,
                                           class_mode="binary")
    if batch_dtype is not None:
        setattr(iterator, HOST_ARRAYS_ATTR, arrays)
    return iterator


def host_arrays(generator):
    """"float32" (or another dtype) where make_generator had the images built in the batch's dtype, "floatx" where
    only the batch was; None for a generator built without a batch dtype."""
    return getattr(generator, HOST_ARRAYS_ATTR, None)


def accepts_batch_dtype(api):
    """Whether this Keras' ImageDataGenerator takes the batches' dtype (Keras 3's legacy class, tf_keras,
    keras_preprocessing >= 1.0.6); elsewhere make_generator redirects the image module's K.floatx(), for every
    generator in the process."""
    try:
        return "dtype" in parameter_names(api.ImageDataGenerator.__init__)
    except (TypeError, ValueError):
        return False


def time_input(generator, batches):
    """Host time to produce one batch with the same generator and floatx, median of `batches`."""
    x, _ = next(generator)  # first batch opens files and warms caches
    times = []
    for _ in range(max(1, batches)):
        t0 = perf_counter()
        x, _ = next(generator)
        times.append((perf_counter() - t0) * 1000.0)
    return summary(times), str(x.dtype)


def in_memory_batches(generator, batches):
    import numpy as np

    xs, ys = [], []
    for _ in range(batches):
        x, y = next(generator)
        xs.append(x)
        ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)
