# -*- coding: utf-8 -*-
"""The seed workload: the user's Keras script, run as written and measured, in its own process.

This file runs inside the target Python: the host's, or a pinned stack's (Python 3.5 with Keras 2.1.5
in the oldest one). So it stays valid Python 3.5, imports only stdlib, numpy, PIL and the framework,
and speaks whichever Keras API is installed: Keras 3 (its legacy ImageDataGenerator), tf_keras, or
Keras 2. It reports to the engine through stdout lines "@@fp16doctor {json}".
"""
from __future__ import division, print_function

import argparse
import atexit
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback

PREFIX = "@@fp16doctor "
PRECISIONS = ("float32", "float16", "mixed_float16")
VARIANTS = ("original", "synthetic_input")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dataset  # noqa: E402  (sits beside this file, inside the image too)


class Skip(Exception):
    """This precision cannot run on this stack at all (not a failure of the run)."""


def emit(event, **fields):
    fields["event"] = event
    sys.stdout.write(PREFIX + json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return None
    pos = (len(ordered) - 1) * q
    lo = int(math.floor(pos))
    hi = int(math.ceil(pos))
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summary(values):
    return {"median": round(percentile(values, 0.5), 3), "p10": round(percentile(values, 0.1), 3),
            "p90": round(percentile(values, 0.9), 3), "n": len(values)}


def parse_args(argv):
    p = argparse.ArgumentParser(description="fp16doctor seed workload")
    p.add_argument("--precision", choices=PRECISIONS, required=True)
    p.add_argument("--variant", choices=VARIANTS, default="original")
    p.add_argument("--height", type=int, default=224)
    p.add_argument("--width", type=int, default=336)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument("--min-steps", type=int, default=10)
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--max-measure-s", type=float, default=120.0)
    p.add_argument("--input-batches", type=int, default=5)
    p.add_argument("--stable-tolerance", type=float, default=0.05)
    p.add_argument("--data", default=None, help="train directory with one folder per class")
    p.add_argument("--cache-dir", default=None, help="where the synthetic dataset is kept")
    p.add_argument("--backend", default=None, help="Keras 3 backend (tensorflow, jax, torch)")
    return p.parse_args(argv)


# ---------------------------------------------------------------- precision set-up (before Keras loads)

def user_keras_config():
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    path = os.path.join(home, "keras.json")
    try:
        with open(path) as fh:
            return json.load(fh)
    except (IOError, OSError, ValueError):
        return {}


def prepare_keras_home(precision, backend):
    """A private keras.json, so the user's own config cannot leak in; float16 is set exactly as the
    user did it: floatx in keras.json, epsilon left at its 1e-07 default."""
    home = tempfile.mkdtemp(prefix="fp16doctor-keras-")
    atexit.register(shutil.rmtree, home, True)  # one per run: do not leave them in /tmp
    keras_dir = os.path.join(home, ".keras")
    os.makedirs(keras_dir)
    config = {"backend": backend, "floatx": "float16" if precision == "float16" else "float32",
              "image_data_format": "channels_last", "epsilon": 1e-07}
    with open(os.path.join(keras_dir, "keras.json"), "w") as fh:
        json.dump(config, fh)
    # Keras 2 and 3 read $KERAS_HOME; older releases only ~/.keras, so HOME points there too.
    os.environ["KERAS_HOME"] = keras_dir
    os.environ["HOME"] = home
    os.environ["KERAS_BACKEND"] = backend
    return keras_dir, config


# ---------------------------------------------------------------- which Keras is here

class KerasAPI(object):
    """The few differences between Keras 2.1.5, tf_keras and Keras 3 that the seed script touches."""

    def __init__(self, name, keras, image_data_generator, layers, backend_name):
        self.name = name  # keras3-legacy | tf_keras | keras2
        self.keras = keras
        self.ImageDataGenerator = image_data_generator
        self.layers = layers
        self.backend_name = backend_name

    @property
    def version(self):
        return getattr(self.keras, "__version__", None)

    def major_minor(self):
        parts = (self.version or "0.0").split(".")
        try:
            return int(parts[0]), int(parts[1])
        except (ValueError, IndexError):
            return 0, 0

    def floatx(self):
        return self.keras.backend.floatx()

    def rmsprop(self):
        # The user's optimizer: RMSprop(lr=0.0001, rho=0.9, epsilon=1e-04, decay=0.0).
        opt = self.keras.optimizers.RMSprop
        if self.name == "keras2" and self.major_minor() < (2, 3):
            return opt(lr=0.0001, rho=0.9, epsilon=1e-04, decay=0.0)
        # `lr`/`decay` were renamed or removed later; decay=0.0 was a no-op anyway.
        return opt(learning_rate=0.0001, rho=0.9, epsilon=1e-04)

    def set_mixed_policy(self):
        mp = getattr(self.keras, "mixed_precision", None)
        if mp is None:
            raise Skip("mixed_float16 needs a Keras dtype policy (tf.keras in TF >= 2.1, or Keras 3); "
                       "Keras %s has none" % self.version)
        if hasattr(mp, "set_dtype_policy"):
            mp.set_dtype_policy("mixed_float16")
        elif hasattr(mp, "set_global_policy"):
            mp.set_global_policy("mixed_float16")
        else:
            mp.experimental.set_policy("mixed_float16")

    def fit_stream(self, model, generator, steps_per_epoch, epochs, callbacks):
        if self.name == "keras2" and hasattr(model, "fit_generator"):
            # What the user's script called (Keras 2.1.5); one worker, the default.
            return model.fit_generator(generator, steps_per_epoch=steps_per_epoch, epochs=epochs,
                                       verbose=0, callbacks=callbacks)
        return model.fit(generator, steps_per_epoch=steps_per_epoch, epochs=epochs, verbose=0,
                         callbacks=callbacks)


def load_keras(backend):
    forced = os.environ.get("FP16DOCTOR_KERAS_API")
    errors = []
    if forced in (None, "", "keras3-legacy", "keras2"):
        try:
            import keras
            major = int(keras.__version__.split(".")[0])
            if major >= 3:
                from keras.src.legacy.preprocessing.image import ImageDataGenerator
                return KerasAPI("keras3-legacy", keras, ImageDataGenerator, keras.layers,
                                keras.backend.backend())
            from keras.preprocessing.image import ImageDataGenerator
            return KerasAPI("keras2", keras, ImageDataGenerator, keras.layers, keras.backend.backend())
        except ImportError as exc:
            errors.append("keras: %s" % exc)
    if forced in (None, "", "tf_keras"):
        try:
            os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
            import tf_keras
            from tf_keras.preprocessing.image import ImageDataGenerator
            return KerasAPI("tf_keras", tf_keras, ImageDataGenerator, tf_keras.layers, "tensorflow")
        except ImportError as exc:
            errors.append("tf_keras: %s" % exc)
        try:
            from tensorflow import keras as tfk
            from tensorflow.keras.preprocessing.image import ImageDataGenerator
            return KerasAPI("tf_keras", tfk, ImageDataGenerator, tfk.layers, "tensorflow")
        except ImportError as exc:
            errors.append("tensorflow.keras: %s" % exc)
    raise ImportError("no usable Keras (" + "; ".join(errors) + ")")


# ---------------------------------------------------------------- what ran, on what

def software_info(api):
    info = {"python": "%d.%d.%d" % sys.version_info[:3], "keras": api.version, "keras_api": api.name,
            "keras_backend": api.backend_name}
    try:
        import numpy
        info["numpy"] = numpy.__version__
    except ImportError:
        pass
    device = "cpu"
    if api.backend_name == "tensorflow":
        import tensorflow as tf
        info["tensorflow"] = tf.__version__
        build = {}
        try:
            build = dict(tf.sysconfig.get_build_info())
        except AttributeError:
            pass
        # CPU builds still list the CUDA they would have used; only a CUDA build has one.
        if build.get("is_cuda_build") is False:
            build = {}
        if build.get("cuda_version"):
            info["cuda"] = str(build.get("cuda_version"))
        if build.get("cudnn_version"):
            info["cudnn"] = str(build.get("cudnn_version"))
        try:
            gpus = tf.config.list_physical_devices("GPU")
        except AttributeError:
            from tensorflow.python.client import device_lib
            gpus = [d for d in device_lib.list_local_devices() if d.device_type == "GPU"]
        if gpus:
            device = "gpu:0"
    elif api.backend_name == "jax":
        import jax
        info["jax"] = jax.__version__
        try:
            platform = jax.devices()[0].platform
        except Exception:  # noqa: BLE001  (no device means CPU here)
            platform = "cpu"
        if platform in ("gpu", "cuda", "rocm"):
            device = "gpu:0"
    elif api.backend_name == "torch":
        import torch
        info["torch"] = torch.__version__
        if torch.version.cuda:
            info["cuda"] = str(torch.version.cuda)
        if torch.cuda.is_available():
            device = "gpu:0"
            cudnn = torch.backends.cudnn.version()
            if cudnn:
                info["cudnn"] = str(cudnn)
    return info, device


# ---------------------------------------------------------------- the user's model, as posted

def build_seed_model(api, height, width, mixed):
    L = api.layers
    model = api.keras.models.Sequential()
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
    model.compile(loss="binary_crossentropy", optimizer=api.rmsprop(), metrics=["accuracy"])
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
        if weights:
            entry["variable_dtype"] = str(weights[0].dtype)
        elif policy is not None and getattr(policy, "variable_dtype", None):
            entry["variable_dtype"] = str(policy.variable_dtype)
        total_flops += entry.get("flops_per_example", 0.0)
        layers.append(entry)
    return {"params": int(model.count_params()), "flops_per_example": total_flops,
            "flops_note": "forward pass, multiply-add = 2 FLOPs; a training step is about 3x",
            "optimizer": model.optimizer.__class__.__name__, "layers": layers}


# ---------------------------------------------------------------- measurement

class StepTimer(object):
    """Times each training step end to end (input + compute), as the user's progress bar did.

    The loss is read as a Python float on every step, which also waits for the device, so an
    asynchronous backend cannot make a step look faster than it is.
    """

    def __init__(self, warmup_steps, min_steps, max_steps, max_measure_s, tolerance, clock=time.perf_counter):
        self.clock = clock
        self.warmup_steps = warmup_steps
        self.min_steps = min_steps
        self.max_steps = max_steps
        self.max_measure_s = max_measure_s
        self.tolerance = tolerance
        self.model = None
        self.start = None
        self.last = None
        self.measure_start = None
        self.first_step_ms = None
        self.warmup_ms = []
        self.step_ms = []
        self.losses = []
        self.stop_reason = None

    def begin(self):
        self.start = self.last = self.clock()

    def end_step(self, logs):
        if self.stop_reason is not None:
            # Keras 2.0-era loops honour stop_training only at the end of an epoch: ignore the rest.
            return True
        loss = (logs or {}).get("loss")
        loss = float(loss) if loss is not None else None  # waits for the device first
        now = self.clock()
        elapsed_ms = (now - self.last) * 1000.0
        self.last = now
        if loss is not None:
            self.losses.append(loss)
        done = len(self.warmup_ms) + len(self.step_ms)
        if self.first_step_ms is None:
            self.first_step_ms = elapsed_ms
            self.warmup_ms.append(elapsed_ms)
            emit("step", phase="warmup", index=done, ms=round(elapsed_ms, 3), loss=loss)
        elif len(self.warmup_ms) < self.warmup_steps:
            self.warmup_ms.append(elapsed_ms)
            emit("step", phase="warmup", index=done, ms=round(elapsed_ms, 3), loss=loss)
        else:
            if self.measure_start is None:
                self.measure_start = now - elapsed_ms / 1000.0
            self.step_ms.append(elapsed_ms)
            emit("step", phase="measure", index=done, ms=round(elapsed_ms, 3), loss=loss)
        return self.should_stop(now)

    def should_stop(self, now):
        n = len(self.step_ms)
        if n >= self.max_steps:
            self.stop_reason = "max_steps"
            return True
        # The time budget ends a slow run once it has a median worth the name (3+ steps).
        if self.measure_start is not None and now - self.measure_start >= self.max_measure_s and n >= 3:
            self.stop_reason = "time_budget"
            return True
        if n >= self.min_steps:
            half = n // 2
            first = percentile(self.step_ms[:half], 0.5)
            second = percentile(self.step_ms[half:], 0.5)
            overall = percentile(self.step_ms, 0.5)
            if overall and abs(first - second) / overall <= self.tolerance:
                self.stop_reason = "stable"
                return True
        return False


def make_callback(api, timer):
    base = api.keras.callbacks.Callback

    class _TimerCallback(base):
        def on_train_begin(self, logs=None):
            timer.begin()

        def on_batch_end(self, batch, logs=None):
            if timer.end_step(logs):
                self.model.stop_training = True

        def on_train_batch_end(self, batch, logs=None):
            self.on_batch_end(batch, logs)

    return _TimerCallback()


def make_generator(api, train_dir, height, width, batch_size):
    # As posted: rescale on the host, random flips, batches built in K.floatx().
    datagen = api.ImageDataGenerator(rescale=1. / 255, horizontal_flip=True, vertical_flip=True)
    return datagen.flow_from_directory(train_dir, target_size=(height, width), batch_size=batch_size,
                                       class_mode="binary")


def time_input(generator, batches):
    """Host time to produce one batch with the same generator and floatx, median of `batches`."""
    x, _ = next(generator)  # first batch opens files and warms caches
    times = []
    for _ in range(max(1, batches)):
        t0 = time.perf_counter()
        x, _ = next(generator)
        times.append((time.perf_counter() - t0) * 1000.0)
    return summary(times), str(x.dtype)


def in_memory_batches(generator, batches):
    import numpy as np

    xs, ys = [], []
    for _ in range(batches):
        x, y = next(generator)
        xs.append(x)
        ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)


def run(args):
    started = time.perf_counter()
    backend = args.backend or os.environ.get("KERAS_BACKEND") or user_keras_config().get("backend") \
        or "tensorflow"
    cache_root = args.cache_dir or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "fp16doctor")
    keras_dir, keras_config = prepare_keras_home(args.precision, backend)

    emit("phase", phase="data")
    if args.data:
        train_dir = args.data
    else:
        per_class = max(2 * args.batch_size, 64)
        train_dir = dataset.ensure_dataset(cache_root, args.height, args.width, per_class)

    emit("phase", phase="import")
    t0 = time.perf_counter()
    api = load_keras(backend)
    import_s = time.perf_counter() - t0
    software, device = software_info(api)
    emit("phase", phase="build", device=device, software=software)

    mixed = args.precision == "mixed_float16"
    if mixed:
        api.set_mixed_policy()
    if args.precision == "float16" and api.floatx() != "float16":
        raise RuntimeError("keras.json floatx=float16 was not picked up (floatx is %s)" % api.floatx())

    generator = make_generator(api, train_dir, args.height, args.width, args.batch_size)
    input_ms, batch_dtype = time_input(generator, args.input_batches)
    emit("phase", phase="input_timed", input_time_ms=input_ms, batch_dtype=batch_dtype)

    model = build_seed_model(api, args.height, args.width, mixed)
    timer = StepTimer(args.warmup_steps, args.min_steps, args.max_steps, args.max_measure_s,
                      args.stable_tolerance)
    callback = make_callback(api, timer)
    total_steps = args.warmup_steps + args.max_steps
    emit("phase", phase="train")
    if args.variant == "original":
        steps_per_epoch = max(1, int(math.ceil(generator.samples / float(args.batch_size))))
        epochs = int(math.ceil(total_steps / float(steps_per_epoch)))
        api.fit_stream(model, generator, steps_per_epoch, epochs, [callback])
    else:
        # Same model, batches already in memory: isolates device compute from the input pipeline.
        # Eight batches when they fit in 1 GiB, so epoch boundaries stay rare in the timing.
        batch_bytes = args.batch_size * args.height * args.width * 3 * 4
        n_batches = min(8 if 8 * batch_bytes <= 2 ** 30 else 4, total_steps)
        x, y = in_memory_batches(generator, n_batches)
        epochs = int(math.ceil(total_steps / float(n_batches)))
        model.fit(x, y, batch_size=args.batch_size, epochs=epochs, shuffle=False, verbose=0,
                  callbacks=[callback])

    if not timer.step_ms:
        raise RuntimeError("training stopped before any step was measured")
    losses = timer.losses
    bad = [v for v in losses if v != v or v in (float("inf"), float("-inf"))]
    result = {
        "status": "ok",
        "device": device,
        "software": software,
        "workload": {
            "name": "seed_cnn", "image_height": args.height, "image_width": args.width, "channels": 3,
            "batch_size": args.batch_size, "steps_measured": len(timer.step_ms),
            "warmup_steps": len(timer.warmup_ms), "stop_reason": timer.stop_reason,
            "data": "user" if args.data else "synthetic", "images": generator.samples,
            "api": "fit_generator" if api.name == "keras2" and args.variant == "original" else "fit",
        },
        "step_time_ms": summary(timer.step_ms),
        "first_step_ms": round(timer.first_step_ms, 3),
        "warmup_step_ms": [round(v, 3) for v in timer.warmup_ms],
        "step_ms_all": [round(v, 3) for v in timer.step_ms],
        "loss": {"first": losses[0] if losses else None, "last": losses[-1] if losses else None,
                 "nan_or_inf": bool(bad)},
        "model": describe_model(model),
        "keras_config": {"floatx": api.floatx(), "epsilon": keras_config["epsilon"],
                         "config_path": os.path.join(keras_dir, "keras.json")},
        "batch_dtype": batch_dtype,
        "timing": {"import_s": round(import_s, 3), "total_s": round(time.perf_counter() - started, 3)},
    }
    if args.variant == "original":
        result["input_time_ms"] = input_ms
    emit("result", run=result)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        run(args)
    except Skip as exc:
        emit("error", status="skipped", error=str(exc))
        return 0
    except KeyboardInterrupt:
        emit("error", status="failed", error="interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001  (reported to the engine, which classifies it)
        emit("error", status="failed", error="%s: %s" % (exc.__class__.__name__, exc),
             traceback=traceback.format_exc()[-4000:])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
