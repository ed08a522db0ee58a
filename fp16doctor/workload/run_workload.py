# -*- coding: utf-8 -*-
"""The seed workload: the user's Keras script, run as written and measured, in its own process.

This file runs inside the target Python: the host's, or a pinned stack's (Python 3.5 with Keras 2.1.5
in the oldest one). So it stays valid Python 3.5, imports only stdlib, numpy, PIL and the framework,
and speaks whichever Keras API is installed: Keras 3 (its legacy ImageDataGenerator), tf_keras, or
Keras 2. It reports to the engine through stdout lines "@@fp16doctor {json}".
"""
from __future__ import division, print_function

import argparse
import importlib
import atexit
import inspect
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback

PREFIX = "@@fp16doctor "
PRECISIONS = ("float32", "float16", "mixed_float16", "bfloat16", "mixed_bfloat16")
MIXED_POLICIES = ("mixed_float16", "mixed_bfloat16")
# original: the script as posted; synthetic_input: the same model on batches already in memory; the rest
# are experiments that change one thing (fp16doctor/engines/base.py VARIANT_CHANGES says what).
VARIANTS = ("original", "synthetic_input", "onednn_off", "float32_batches", "channels_padded", "tf32_off", "xla")
# The profiled window's markers on stdout; oneDNN's verbose lines between them belong to the window.
WINDOW_START = "=== fp16doctor-window-start"
WINDOW_END = "=== fp16doctor-window-end"
# oneDNN >= 3.3 reads "profile_exec,filter=REGEX" (src/common/verbose.cpp): execution lines of every
# component but gemm_api, whose thousands of small calls per step (Eigen contractions on AVX2 CPUs)
# would slow every step down; primitives (convolution, pooling, reorder, inner_product ...) stay.
ONEDNN_VERBOSE_SETTING = "profile_exec,filter=^(?!gemm_api)"
ONEDNN_FILTER_SINCE_TF = (2, 17)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dataset  # noqa: E402  (sits beside this file, inside the image too)
import rounds  # noqa: E402


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
    p.add_argument("--bound-ms", type=float, default=None,
                   help="a steady step (not the first) longer than this ends the run after it (a slow-step bound)")
    p.add_argument("--profile-dir", default=None, help="record the profiled window here (none: no profile)")
    p.add_argument("--profile-steps", type=int, default=2, help="steps in the window after the timed steps")
    p.add_argument("--rounds-of", default=None,
                   help="time these precisions (comma-separated) in interleaved rounds in this one process")
    p.add_argument("--rounds-budget-s", type=float, default=20.0, help="rounds go on until this long")
    p.add_argument("--min-rounds", type=int, default=3)
    p.add_argument("--max-rounds", type=int, default=30)
    p.add_argument("--rounds-seed", type=int, default=None, help="the shuffle's seed (none: a fresh one)")
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
    user did it: floatx in keras.json, epsilon left at its 1e-07 default. keras.json refuses floatx
    bfloat16 (Keras 3 accepts only float16/32/64 there), so bfloat16 is set after import."""
    # Inside the engine's scratch folder when it names one (removed by the engine even when this process
    # is killed); else in the temporary folder, removed at exit.
    scratch = os.environ.get("FP16DOCTOR_SCRATCH")
    home = tempfile.mkdtemp(prefix="fp16doctor-keras-", dir=scratch if scratch and os.path.isdir(scratch) else None)
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

    def set_mixed_policy(self, policy="mixed_float16"):
        mp = getattr(self.keras, "mixed_precision", None)
        if mp is None:
            raise Skip("Keras %s has no %s policy (a dtype policy needs tf.keras in TF >= 2.1, or Keras 3)"
                       % (self.version, policy))
        if hasattr(mp, "set_dtype_policy"):
            mp.set_dtype_policy(policy)
        elif hasattr(mp, "set_global_policy"):
            mp.set_global_policy(policy)
        else:
            mp.experimental.set_policy(policy)

    def set_bfloat16_floatx(self):
        """Pure bfloat16, as floatx=float16 is pure float16: only Keras 3 accepts it."""
        config = getattr(self.keras, "config", None)
        if self.name != "keras3-legacy" or config is None or not hasattr(config, "set_floatx"):
            # tf_keras and Keras 2 check floatx against {float16, float32, float64}.
            raise Skip("%s %s refuses floatx bfloat16 (only Keras 3's keras.config.set_floatx accepts it)"
                       % ("tf_keras" if self.name == "tf_keras" else "Keras", self.version))
        config.set_floatx("bfloat16")

    def compile(self, model, jit_compile=False, run_options=None):
        kwargs = {}
        if jit_compile:
            kwargs["jit_compile"] = True
        if run_options is not None:
            # TF1 Keras hands these to Session.run (Keras 2.1.5 docs of Model.compile's **kwargs).
            kwargs["options"], kwargs["run_metadata"] = run_options
        try:
            model.compile(loss="binary_crossentropy", optimizer=self.rmsprop(), metrics=["accuracy"], **kwargs)
        except TypeError as exc:
            if not jit_compile:
                raise
            raise Skip("Keras %s cannot compile with jit_compile (XLA): %s" % (self.version, exc))

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

    Slow-step bound: a steady step (any after the first, which pays tracing) longer than `bound_ms` ends the
    run after that step, which becomes its only measured step (`bound` = True), so a run that is hundreds of
    times slower than float32 costs two steps, not seven, and is still compared step for step with float32's.

    Profiled window: with `window_steps`, once the measurement is done the run goes on for that many
    steps, kept apart from the timed ones (`window_ms`); the caller profiles them.
    """

    def __init__(self, warmup_steps, min_steps, max_steps, max_measure_s, tolerance, clock=time.perf_counter,
                 bound_ms=None, window_steps=0):
        self.clock = clock
        self.warmup_steps = warmup_steps
        self.min_steps = min_steps
        self.max_steps = max_steps
        self.max_measure_s = max_measure_s
        self.tolerance = tolerance
        self.bound_ms = bound_ms
        self.window_steps = window_steps
        self.model = None
        self.start = None
        self.last = None
        self.measure_start = None
        self.first_step_ms = None
        self.warmup_ms = []
        self.step_ms = []
        self.window_ms = []
        self.losses = []
        self.stop_reason = None
        self.bound = False
        self.bound_limit_ms = None
        self.in_window = False
        self.window_hold = 0  # steps to run, untimed and unprofiled, before the window's first
        self.done = False

    @property
    def may_be_bound(self):
        return self.bound_ms is not None

    def begin(self):
        self.start = self.last = self.clock()

    def train_begin(self):
        """A fit call begins (the built-in workload makes one)."""
        self.begin()

    def skip_time(self):
        """Leave out of the next step what ran since the last one (the profiler starting or stopping)."""
        self.last = self.clock()

    def end_step(self, logs):
        """Record one finished step; True when training should stop."""
        if self.done:
            # Keras 2.0-era loops honour stop_training only at the end of an epoch: ignore the rest.
            return True
        loss = (logs or {}).get("loss")
        loss = float(loss) if loss is not None else None  # waits for the device first
        now = self.clock()
        elapsed_ms = (now - self.last) * 1000.0
        self.last = now
        if self.in_window and self.window_hold > 0:
            self.window_hold -= 1
            emit("step", phase="before_window", ms=round(elapsed_ms, 3), loss=loss)
            return False
        if self.in_window:
            self.window_ms.append(elapsed_ms)
            emit("step", phase="window", index=len(self.window_ms) - 1, ms=round(elapsed_ms, 3), loss=loss)
            self.done = len(self.window_ms) >= self.window_steps
            return self.done
        if loss is not None:
            self.losses.append(loss)
        done = len(self.warmup_ms) + len(self.step_ms)
        if self.first_step_ms is None or len(self.warmup_ms) < self.warmup_steps:
            first = self.first_step_ms is None
            if first:
                self.first_step_ms = elapsed_ms
            self.warmup_ms.append(elapsed_ms)
            # The first step pays tracing and autotuning: it never ends a run, so a slowdown is always judged on a
            # steady step, like float32's median.
            limit = None if first else self.bound_ms
            if limit is not None and elapsed_ms > limit:
                # Far beyond float32 already: this step is the measurement, a bound on the slowdown.
                self.step_ms = [elapsed_ms]
                self.bound = True
                self.bound_limit_ms = limit
                self.stop_reason = "slow_step_bound"
                self.done = True
                emit("step", phase="measure", index=done, ms=round(elapsed_ms, 3), loss=loss, bound=True,
                     limit_ms=round(limit, 3))
                return True
            emit("step", phase="warmup", index=done, ms=round(elapsed_ms, 3), loss=loss)
            return False
        if self.measure_start is None:
            self.measure_start = now - elapsed_ms / 1000.0
        if not self.step_ms and len(self.warmup_ms) == 1 and self.bound_ms is not None and elapsed_ms > self.bound_ms:
            # No warm-up step after the first: the first steady step is the one the bound judges.
            self.step_ms = [elapsed_ms]
            self.bound = True
            self.bound_limit_ms = self.bound_ms
            self.stop_reason = "slow_step_bound"
            self.done = True
            emit("step", phase="measure", index=done, ms=round(elapsed_ms, 3), loss=loss, bound=True,
                 limit_ms=round(self.bound_ms, 3))
            return True
        self.step_ms.append(elapsed_ms)
        emit("step", phase="measure", index=done, ms=round(elapsed_ms, 3), loss=loss)
        if not self.should_stop(now):
            return False
        if self.window_steps > 0:
            self.in_window = True
            return False
        self.done = True
        return True

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


# ---------------------------------------------------------------- the profiled window

def flush_native_stdout():
    """oneDNN prints with C stdio; flush it so its lines and our markers keep their order."""
    try:
        import ctypes
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):
        pass  # Windows has no CDLL(None): Python's own flush is all there is


class WindowProfiler(object):
    """Records raw profiles of one window of steps; it never parses them, and never fails the run.

    TensorFlow 2.x and JAX: the profiler's xplane trace. TensorFlow 1.x: RunMetadata step stats through
    Keras' compile(options=..., run_metadata=...). PyTorch: torch.profiler, with a record_function range
    per Keras layer. oneDNN (TensorFlow and PyTorch on the CPU): its verbose lines on stdout between
    WINDOW_START and WINDOW_END. Each window gets its own folder under `root`.
    """

    def __init__(self, api, root, onednn_env):
        self.api = api
        self.root = root
        self.backend = api.backend_name
        self.onednn = onednn_env or self.backend == "torch"
        self.kind = None
        self.windows = {}
        self.errors = []
        self.epoch_start = False  # the window holds an epoch's first step
        self.t0 = None
        self.model = None
        self.tf_major = None
        self.run_options = None  # TF1: (RunOptions, RunMetadata), handed to compile
        self.tf1_steps = []
        self.torch_prof = None
        self.torch_verbose = None
        self.wrapped = []
        if self.backend == "tensorflow":
            import tensorflow as tf
            self.tf_major = int(tf.__version__.split(".")[0])
            if self.tf_major < 2:
                self.run_options = (tf.RunOptions(trace_level=tf.RunOptions.NO_TRACE), tf.RunMetadata())

    def _note(self, what, exc):
        self.errors.append("%s: %s: %s" % (what, exc.__class__.__name__, exc))

    def start(self, kind, clock):
        self.kind = kind
        folder = os.path.join(self.root, kind)
        window = {"folder": folder}
        self.windows[kind] = window
        try:
            if os.path.isdir(folder):
                shutil.rmtree(folder, True)  # a kind profiled again (bound_step: each warm-up step in turn)
            os.makedirs(folder)
            self._start_backend(folder)
        except Exception as exc:  # noqa: BLE001  (a profiler that cannot start leaves the run as it was)
            self._note("starting the %s profiler" % self.backend, exc)
        if self.onednn:
            flush_native_stdout()
            sys.stdout.write("%s %.3f kind %s\n" % (WINDOW_START, time.time(), kind))
            sys.stdout.flush()
        self.t0 = clock()

    def after_step(self):
        if self.run_options is not None and self.kind is not None:
            try:
                from google.protobuf import json_format
                self.tf1_steps.append(json_format.MessageToDict(self.run_options[1].step_stats))
            except Exception as exc:  # noqa: BLE001
                self._note("reading TF1 step stats", exc)

    def stop(self, steps, clock):
        if self.kind is None:
            return
        wall_ms = (clock() - self.t0) * 1000.0
        steps = max(1, steps)
        if self.onednn:
            flush_native_stdout()
            sys.stdout.write("%s %.3f ms_per_step %.3f steps %d kind %s\n"
                             % (WINDOW_END, time.time(), wall_ms / steps, steps, self.kind))
            sys.stdout.flush()
        window = self.windows[self.kind]
        # wall_ms is per step, as the attribution reads it; total_ms is the whole window.
        window["window"] = {"kind": self.kind, "steps": steps, "wall_ms": round(wall_ms / steps, 3),
                            "total_ms": round(wall_ms, 3)}
        if self.epoch_start and self.kind == "after_timing":
            window["window"]["epoch_start"] = True
        try:
            self._stop_backend(window)
        except Exception as exc:  # noqa: BLE001
            self._note("stopping the %s profiler" % self.backend, exc)
        self.kind = None

    # -- per backend

    def _start_backend(self, folder):
        if self.backend == "tensorflow" and self.tf_major >= 2:
            import tensorflow as tf
            tf.profiler.experimental.start(folder)
        elif self.backend == "tensorflow":
            import tensorflow as tf
            self.tf1_steps = []
            self.run_options[0].trace_level = tf.RunOptions.FULL_TRACE
            self._tf1_rebuild_callable()
        elif self.backend == "jax":
            import jax
            jax.profiler.start_trace(folder)
        elif self.backend == "torch":
            import torch
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self._label_layers(True)
            self.torch_prof = torch.profiler.profile(activities=activities, record_shapes=True)
            self.torch_prof.start()
            if torch.backends.mkldnn.is_available():
                # PyTorch switches oneDNN's verbose mode at run time: on for the window only.
                self.torch_verbose = torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON)
                self.torch_verbose.__enter__()

    def _stop_backend(self, window):
        folder = window["folder"]
        if self.backend == "tensorflow" and self.tf_major >= 2:
            import tensorflow as tf
            tf.profiler.experimental.stop()
            window["xplane"] = first_file(folder, ".xplane.pb")
        elif self.backend == "tensorflow":
            import tensorflow as tf
            self.run_options[0].trace_level = tf.RunOptions.NO_TRACE
            self._tf1_rebuild_callable()
            path = os.path.join(folder, "tf1_step_stats.json")
            with open(path, "w") as fh:
                json.dump({"steps": self.tf1_steps}, fh)
            window["tf1_step_stats"] = path
        elif self.backend == "jax":
            import jax
            jax.profiler.stop_trace()
            window["xplane"] = first_file(folder, ".xplane.pb")
        elif self.backend == "torch":
            if self.torch_verbose is not None:
                self.torch_verbose.__exit__(None, None, None)
                self.torch_verbose = None
            prof, self.torch_prof = self.torch_prof, None
            if prof is not None:
                prof.stop()
            self._label_layers(False)
            if prof is not None:
                from profile_export import export_torch_events
                path = os.path.join(folder, "torch_events.json")
                with open(path, "w") as fh:
                    json.dump(export_torch_events(prof), fh)
                window["torch_events_path"] = path

    def _tf1_rebuild_callable(self):
        # Keras 2.2.4 bakes the RunOptions into a callable when it first runs; drop it so the next
        # step makes a new one with the trace level now set (Keras 2.1.5 reads them on every call).
        fn = getattr(self.model, "train_function", None)
        if fn is not None and hasattr(fn, "_callable_fn"):
            fn._callable_fn = None

    def _label_layers(self, on):
        """torch ops carry no Keras name scope: a record_function range per layer call names them."""
        if not on:
            for layer, had_own in self.wrapped:
                if had_own is None:
                    try:
                        del layer.call
                    except AttributeError:
                        pass
                else:
                    layer.call = had_own
            self.wrapped = []
            return
        if self.model is None:
            return
        import torch

        for layer in self.model.layers:
            own = layer.__dict__.get("call")
            try:
                layer.call = labelled_call(torch, layer.name, layer.call)
            except (AttributeError, TypeError, ValueError) as exc:
                self._note("labelling layer %s" % layer.name, exc)
                continue
            self.wrapped.append((layer, own))

    def result(self, kind):
        """What the engine needs about the window `kind`; the other windows' folders are removed."""
        for other, window in self.windows.items():
            if other != kind:
                shutil.rmtree(window["folder"], True)
        out = dict(self.windows.get(kind) or {})
        out.pop("folder", None)
        if kind not in self.windows:
            self.errors.append("no %s window was recorded" % kind)
        out.update({"backend": self.backend, "onednn": bool(self.onednn), "dir": self.root})
        if self.errors:
            out["error"] = "; ".join(self.errors)[:2000]
        return out


def labelled_call(torch, name, original):
    import functools

    from profile_export import LAYER_PREFIX

    def call(*args, **kwargs):
        with torch.autograd.profiler.record_function(LAYER_PREFIX + name):
            return original(*args, **kwargs)

    return functools.wraps(original)(call)


def first_file(folder, suffix):
    for dirpath, _, files in os.walk(folder):
        for name in sorted(files):
            if name.endswith(suffix):
                return os.path.join(dirpath, name)
    return None


def window_placement(next_in_epoch, steps_per_epoch, window_steps, steps_left=None):
    """Where the profiled window starts, as (steps to run first, steps in the window), so that it
    holds no epoch's first step: the time between two epochs (the old data iterator torn down, a new
    one built: 1.8 s inside no op, beside 0.4 s steps, in one TensorFlow trace) is no part of a step's work.

    next_in_epoch: the index in its epoch of the step that comes next; steps_left: the steps this fit
    call has left. Where either is unknown, an epoch is a single step or the fit call ends too soon,
    the window starts now, as it is."""
    if next_in_epoch is None or not steps_per_epoch or steps_per_epoch < 2 or steps_left is None:
        return 0, window_steps
    window = min(window_steps, steps_per_epoch - 1)
    at = next_in_epoch % steps_per_epoch
    if 1 <= at <= steps_per_epoch - window:
        delay = 0
    else:
        delay = steps_per_epoch - at + 1 if at else 1
    if delay + window > steps_left:
        return 0, window_steps
    return delay, window


def epoch_position(epoch, batch, params):
    """(index of the next step in its epoch, steps per epoch, steps left in the fit call) from what
    Keras hands its callbacks; None where Keras does not say."""
    if batch is None or not isinstance(params, dict):
        return None
    steps = params.get("steps")
    if not steps and params.get("samples") and params.get("batch_size"):  # Keras 2 fit on arrays
        steps = int(math.ceil(params["samples"] / float(params["batch_size"])))
    if not steps:
        return None
    steps = int(steps)
    epochs = params.get("epochs")
    left = None
    if epoch is not None and epochs:
        left = (int(epochs) - int(epoch) - 1) * steps + (steps - int(batch) - 1)
    return int(batch) + 1, steps, left


class StepHooks(object):
    """The step timer and the window profiler, driven by a training loop: the built-in workload's
    callback and the script runner's (its fit callback and its train_on_batch wrapper) both call these.

    train_begin: before the first step of a fit call (the first step may be the only one, under the
    slow-step bound: it is profiled, to be sure; so is each later warm-up step, `bound_step`, since the
    bound may stop the run there instead, where that step, not the first with its tracing, is the
    measurement). step_end: after each step; True when training should stop. train_end: when a fit call
    ends (a window still open is closed with what it has).
    epoch_begin, and step_end's `batch` and `params`, where the loop gives them (a fit callback): where
    the step stands in its epoch, so the window is placed clear of an epoch's first step (window_placement)."""

    def __init__(self, timer, profiler=None):
        self.timer = timer
        self.profiler = profiler
        self.window_placed = False
        self.epoch = None

    def epoch_begin(self, epoch):
        self.epoch = epoch

    def train_begin(self, model):
        timer, profiler = self.timer, self.profiler
        if profiler is not None and timer.may_be_bound and timer.start is None:
            profiler.model = model
            profiler.start("first_step", timer.clock)
        timer.train_begin()

    def step_end(self, model, logs, batch=None, params=None):
        timer, profiler = self.timer, self.profiler
        if timer.done:
            return True
        stop = timer.end_step(logs)
        if profiler is not None:
            profiler.after_step()
            if profiler.kind in ("first_step", "bound_step"):
                profiler.stop(1, timer.clock)
                warming = timer.first_step_ms is not None and len(timer.warmup_ms) < timer.warmup_steps
                if warming and not timer.done:
                    profiler.start("bound_step", timer.clock)  # the next warm-up step may meet the bound
                timer.skip_time()
            where = epoch_position(self.epoch, batch, params)
            if profiler.kind == "after_timing" and where is not None and where[0] == 1:
                profiler.epoch_start = True  # the step just ended began an epoch (no room to avoid it)
            if timer.in_window and not self.window_placed and not timer.done:
                self.window_placed = True
                if where is not None:
                    timer.window_hold, timer.window_steps = window_placement(
                        where[0], where[1], timer.window_steps, where[2])
            if (timer.in_window and timer.window_hold == 0 and profiler.kind is None and not timer.window_ms
                    and not timer.done):
                emit("phase", phase="window", steps=timer.window_steps)
                profiler.model = model
                profiler.epoch_start = False
                profiler.start("after_timing", timer.clock)
                timer.skip_time()
            if stop and profiler.kind is not None:
                profiler.stop(len(timer.window_ms), timer.clock)
        return stop

    def train_end(self):
        profiler = self.profiler
        if profiler is not None and profiler.kind is not None:
            profiler.stop(len(self.timer.window_ms) or 1, self.timer.clock)

    def result_fields(self):
        """What the run's result says about the bound and the window (both runners)."""
        timer, out = self.timer, {}
        if timer.bound:
            out["bound"] = True
            out["bound_limit_ms"] = round(timer.bound_limit_ms, 3)
        if timer.window_ms:
            out["window_step_ms"] = [round(v, 3) for v in timer.window_ms]
        if self.profiler is not None:
            out["profile"] = self.profiler.result(self.window_kind())
        return out

    def window_kind(self):
        """The window that stands for the run: the step that met the slow-step bound, or the one after timing."""
        timer = self.timer
        if not timer.bound:
            return "after_timing"
        return "first_step" if len(timer.warmup_ms) <= 1 else "bound_step"


def make_callback(api, timer, profiler=None):
    hooks = StepHooks(timer, profiler)

    class _TimerCallback(api.keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            hooks.train_begin(self.model)

        def on_epoch_begin(self, epoch, logs=None):
            hooks.epoch_begin(epoch)

        def on_batch_end(self, batch, logs=None):
            if hooks.step_end(self.model, logs, batch, getattr(self, "params", None)):
                self.model.stop_training = True

        def on_train_batch_end(self, batch, logs=None):
            self.on_batch_end(batch, logs)

        def on_train_end(self, logs=None):
            hooks.train_end()

    return _TimerCallback(), hooks


class _Float32Backend(object):
    """Keras 2.1.5's image module as seen through this: floatx() is float32, the rest is the backend."""

    def __init__(self, backend):
        self._backend = backend

    def floatx(self):
        return "float32"

    def __getattr__(self, name):
        return getattr(self._backend, name)


def make_generator(api, train_dir, height, width, batch_size, batch_dtype=None):
    # As posted: rescale on the host, random flips, batches built in K.floatx().
    kwargs = {}
    if batch_dtype is not None:
        try:
            accepts_dtype = "dtype" in inspect.signature(api.ImageDataGenerator.__init__).parameters
        except (TypeError, ValueError):
            accepts_dtype = False
        if accepts_dtype:  # Keras 3's legacy class, tf_keras, keras_preprocessing >= 1.0.6
            kwargs["dtype"] = batch_dtype
        else:
            # Keras 2.1.5's DirectoryIterator asks K.floatx() for every batch: give only the image
            # module a backend whose floatx() is float32, so the model itself is left as it is.
            module = sys.modules[api.ImageDataGenerator.__module__]
            if not hasattr(module, "K"):
                raise Skip("this Keras' ImageDataGenerator takes no dtype and reads no K.floatx() to redirect")
            module.K = _Float32Backend(module.K)
    datagen = api.ImageDataGenerator(rescale=1. / 255, horizontal_flip=True, vertical_flip=True, **kwargs)
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


def set_variant_environment(variant, backend):
    """What must be in the environment before the framework loads; returns what was set."""
    env = {}
    if variant == "onednn_off" and backend == "tensorflow":
        env["TF_ENABLE_ONEDNN_OPTS"] = "0"  # TensorFlow reads it when it loads
    if variant == "tf32_off":
        # Read by cuBLAS and cuDNN themselves, so it holds for every framework (NVIDIA's TF32 notes).
        env["NVIDIA_TF32_OVERRIDE"] = "0"
    os.environ.update(env)
    return env


TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-intel", "tensorflow-macos", "tf-nightly")


def installed_version(names):
    """A distribution's version without importing it (Python >= 3.8; None on older Pythons)."""
    try:
        metadata = importlib.import_module("importlib.metadata")  # Python 3.8+; older ones answer None
    except ImportError:
        return None
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def enable_onednn_verbose(backend, variant="original"):
    """oneDNN reads ONEDNN_VERBOSE once, when it first runs a primitive, and TensorFlow exports no switch,
    so it is on for the whole run and the engine keeps only the lines between the window markers. It is
    set before the framework loads: setting a variable while the framework's threads read the environment
    corrupts the C library's heap. Only where the oneDNN reads the filter (TensorFlow >= 2.17; TF 2.21
    ships oneDNN 3.7.3): an older one reads a longer value as 0, and "1" would print every gemm_api call of
    every timed step. Not for the oneDNN-off experiment (nothing to name), nor with
    FP16DOCTOR_ONEDNN_VERBOSE=0. The caller primes oneDNN once the framework is loaded
    (prime_onednn_verbose)."""
    if backend != "tensorflow" or "ONEDNN_VERBOSE" in os.environ or variant == "onednn_off":
        return {}
    if os.environ.get("FP16DOCTOR_ONEDNN_VERBOSE") == "0":
        return {}
    version = installed_version(TENSORFLOW_DISTRIBUTIONS)
    try:
        parsed = tuple(int(p) for p in (version or "").split(".")[:2])
    except ValueError:
        return {}
    if len(parsed) < 2 or parsed < ONEDNN_FILTER_SINCE_TF:
        return {}
    os.environ["ONEDNN_VERBOSE"] = ONEDNN_VERBOSE_SETTING
    # Each line then starts with its time, so the attribution can measure how much of the window it covers.
    os.environ.setdefault("ONEDNN_VERBOSE_TIMESTAMP", "1")
    return {"ONEDNN_VERBOSE": ONEDNN_VERBOSE_SETTING}


def prime_onednn_verbose():
    """Make oneDNN's first call on this thread, before the model runs ops on several threads at once.

    oneDNN 3.x parses ONEDNN_VERBOSE on its first call into shared state without a lock (get_verbose in
    src/common/verbose.cpp: the filter's component list is a static string appended to): two of
    TensorFlow's threads making their first oneDNN call together corrupt the heap, and the run dies with
    SIGSEGV or "malloc(): unaligned tcache chunk detected" (5 of 28 runs of a small model on a 2-core CPU;
    0 of 60 primed: benchmarks/onednn_verbose_race.py). One small eager convolution is that first call."""
    import tensorflow as tf

    tf.nn.conv2d(tf.ones([1, 4, 4, 1]), tf.ones([1, 1, 1, 1]), 1, "VALID").numpy()
    tf.matmul(tf.ones([2, 2]), tf.ones([2, 2])).numpy()
    flush_native_stdout()


def apply_variant(api, variant, device, env):
    """The experiment's one change that needs the framework loaded; Skip where it cannot apply here."""
    applied = dict(("env " + k, v) for k, v in env.items())
    if variant == "onednn_off":
        if api.backend_name == "torch":
            import torch
            torch.backends.mkldnn.enabled = False  # PyTorch's switch for the same library
            applied["torch.backends.mkldnn.enabled"] = False
        elif api.backend_name != "tensorflow":
            raise Skip("onednn_off: the %s backend does not run its ops through oneDNN by default"
                       % api.backend_name)
    elif variant == "tf32_off" and not device.startswith("gpu"):
        raise Skip("tf32_off: TF32 exists only on NVIDIA GPUs of compute capability 8.0 and newer; "
                   "this run is on the CPU")
    elif variant == "xla":
        if api.backend_name != "tensorflow":
            raise Skip("xla: an experiment for the TensorFlow backend (JAX always compiles with XLA, and "
                       "torch.compile takes minutes)")
        import tensorflow as tf
        if int(tf.__version__.split(".")[0]) < 2:
            raise Skip("xla: Keras %s on TensorFlow %s has no jit_compile" % (api.version, tf.__version__))
        applied["jit_compile"] = True
    elif variant == "float32_batches":
        applied["batch_dtype"] = "float32"
    elif variant == "channels_padded":
        applied["input_channels_in_model"] = PADDED_CHANNELS
    return applied


# Tensor Core convolutions want channel counts that are multiples of 8 (cuDNN 7 developer guide).
PADDED_CHANNELS = 8


def _finite(value):
    """The loss as a JSON-safe number: None for NaN and infinities."""
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def _as_float(value):
    try:
        return float(value.numpy() if hasattr(value, "numpy") else value)
    except (TypeError, ValueError, AttributeError):
        return None


def _loss_scale(model):
    """The dynamic loss scale after training (Keras 3: dynamic_scale; tf.keras: loss_scale), or None."""
    optimizer = getattr(model, "optimizer", None)
    for attr in ("dynamic_scale", "loss_scale"):
        value = getattr(optimizer, attr, None)
        if value is not None and not callable(value):
            return _finite(_as_float(value))
    return None


def _initial_loss_scale(model):
    optimizer = getattr(model, "optimizer", None)
    value = getattr(optimizer, "initial_scale", None)
    return _finite(_as_float(value)) if value is not None and _loss_scale(model) is not None else None


def run(args):
    started = time.perf_counter()
    backend = args.backend or os.environ.get("KERAS_BACKEND") or user_keras_config().get("backend") \
        or "tensorflow"
    cache_root = args.cache_dir or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "fp16doctor")
    keras_dir, keras_config = prepare_keras_home(args.precision, backend)
    # In a container the engine names the folder by environment (it copies it out afterwards).
    profile_dir = args.profile_dir or os.environ.get("FP16DOCTOR_PROFILE_DIR")
    env = set_variant_environment(args.variant, backend)

    emit("phase", phase="data")
    if args.data:
        train_dir = args.data
    else:
        # Eight batches an epoch at the quick size (batch 32), four at the script's own (512 images of 128): an
        # epoch's first step (a new iterator) then falls on every eighth step of the timing, not every fourth.
        per_class = max(2 * args.batch_size, 128)
        train_dir = dataset.ensure_dataset(cache_root, args.height, args.width, per_class)

    # Everything the framework reads from the environment is set before it loads (see enable_onednn_verbose).
    onednn_env = enable_onednn_verbose(backend, args.variant) if profile_dir else {}
    if profile_dir and backend == "torch":
        os.environ.setdefault("ONEDNN_VERBOSE_TIMESTAMP", "1")  # read when the window first turns verbose on

    emit("phase", phase="import")
    t0 = time.perf_counter()
    api = load_keras(backend)
    import_s = time.perf_counter() - t0
    if onednn_env:
        try:
            prime_onednn_verbose()
        except Exception as exc:  # noqa: BLE001  (then the names are at risk, the run is not)
            emit("log", message="oneDNN was not primed: %s: %s" % (exc.__class__.__name__, exc))
    software, device = software_info(api)
    emit("phase", phase="build", device=device, software=software)
    if args.rounds_of:
        result = rounds.run_rounds(args, api, train_dir, build_seed_model, make_generator, emit)
        result.update(device=device, software=software)
        cpu = cpu_facts()
        if cpu is not None:
            result["cpu"] = cpu
        emit("result", run=result)
        return
    applied = apply_variant(api, args.variant, device, env)

    mixed = args.precision in MIXED_POLICIES
    if mixed:
        api.set_mixed_policy(args.precision)
    elif args.precision == "bfloat16":
        api.set_bfloat16_floatx()
    if args.precision in ("float16", "bfloat16") and api.floatx() != args.precision:
        raise RuntimeError("floatx %s was not picked up (floatx is %s)" % (args.precision, api.floatx()))

    generator = make_generator(api, train_dir, args.height, args.width, args.batch_size,
                               "float32" if args.variant == "float32_batches" else None)
    input_ms, batch_dtype = time_input(generator, args.input_batches)
    if args.variant == "float32_batches" and batch_dtype != "float32":
        raise Skip("float32_batches: this Keras' generator still built %s batches" % batch_dtype)
    emit("phase", phase="input_timed", input_time_ms=input_ms, batch_dtype=batch_dtype)

    profiler = None
    if profile_dir:
        try:
            profiler = WindowProfiler(api, profile_dir, bool(onednn_env))
        except Exception as exc:  # noqa: BLE001  (no profile is no reason to lose the measurement)
            emit("log", message="profiling is off: %s: %s" % (exc.__class__.__name__, exc))
    model = build_seed_model(api, args.height, args.width, mixed,
                             pad_to=PADDED_CHANNELS if args.variant == "channels_padded" else None,
                             jit_compile=args.variant == "xla",
                             run_options=profiler.run_options if profiler is not None else None)
    timer = StepTimer(args.warmup_steps, args.min_steps, args.max_steps, args.max_measure_s,
                      args.stable_tolerance, bound_ms=args.bound_ms,
                      window_steps=args.profile_steps if profiler is not None else 0)
    callback, hooks = make_callback(api, timer, profiler)
    # Room for the window to wait past an epoch's first step (window_placement); training stops by itself.
    total_steps = args.warmup_steps + args.max_steps + (2 * timer.window_steps + 1 if timer.window_steps else 0)
    emit("phase", phase="train")
    streamed = args.variant != "synthetic_input"
    if streamed:
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
    bad = [v for v in losses if not _finite(v)]
    result = {
        "status": "ok",
        "device": device,
        "software": software,
        "workload": {
            "name": "seed_cnn", "image_height": args.height, "image_width": args.width, "channels": 3,
            "batch_size": args.batch_size, "steps_measured": len(timer.step_ms),
            "warmup_steps": len(timer.warmup_ms), "stop_reason": timer.stop_reason,
            "data": "user" if args.data else "synthetic", "images": generator.samples,
            "api": "fit_generator" if api.name == "keras2" and streamed else "fit",
            "jit_compile": _jit_compile(model),
        },
        "stop_reason": timer.stop_reason,
        "step_time_ms": summary(timer.step_ms),
        "first_step_ms": round(timer.first_step_ms, 3),
        "warmup_step_ms": [round(v, 3) for v in timer.warmup_ms],
        "step_ms_all": [round(v, 3) for v in timer.step_ms],
        # Non-finite values are null in JSON (nan_or_inf says so); every step's loss, for the numerics rule.
        "loss": {"first": _finite(losses[0]) if losses else None, "last": _finite(losses[-1]) if losses else None,
                 "nan_or_inf": bool(bad), "scale_first": _initial_loss_scale(model),
                 "scale_last": _loss_scale(model)},
        "losses": [None if _finite(v) is None else round(v, 6) for v in losses],
        "model": describe_model(model),
        "keras_config": {"floatx": api.floatx(), "epsilon": keras_config["epsilon"],
                         "config_path": os.path.join(keras_dir, "keras.json")},
        "batch_dtype": batch_dtype,
        "timing": {"import_s": round(import_s, 3), "total_s": round(time.perf_counter() - started, 3)},
    }
    if applied:
        result["variant_applied"] = applied
    result.update(hooks.result_fields())
    cpu = cpu_facts()
    if cpu is not None:
        result["cpu"] = cpu
    if streamed:
        result["input_time_ms"] = input_ms
    emit("result", run=result)


# The CPU flags that decide 16-bit speed (knowledge/cpu.py reads them): x86's AVX-512 and AMX families
# and F16C; Arm's half-precision (asimdhp, fphp) and bfloat16 (bf16, sve ones) features.
CPU_FLAG_PREFIXES = ("avx", "amx", "f16c", "fma", "asimd", "fphp", "bf16", "sve")


def cpu_facts(path="/proc/cpuinfo"):
    """The CPU this process runs on, as the engine records it for a machine it cannot probe itself (a
    remote Docker engine): model, the flags that matter, cores. None where /proc/cpuinfo is missing."""
    model, flags = None, None
    try:
        with open(path) as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key == "model name" and model is None:
                    model = value.strip()
                elif key in ("flags", "features") and flags is None:
                    flags = sorted(f for f in value.split() if f.startswith(CPU_FLAG_PREFIXES))
    except (IOError, OSError):
        return None
    cores = os.cpu_count() if hasattr(os, "cpu_count") else None
    return {"model": model, "flags": flags or [], "cores": cores, "source": "the workload's /proc/cpuinfo"}


def _jit_compile(model):
    value = getattr(model, "jit_compile", None)
    return value if isinstance(value, bool) else None


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
