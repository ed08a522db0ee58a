# -*- coding: utf-8 -*-
"""Which Keras is here and what it runs on, and what is set up around it: the private keras.json before it
loads, the environment the framework reads when it loads (experiments, oneDNN's verbose mode), and the
experiment's change once it has loaded.

Runs in the target Python (down to 3.5 with Keras 2.1.5): stdlib, and the framework imported when asked.
"""
from __future__ import division, print_function

import atexit
import importlib
import json
import re
import os
import shutil
import sys
import tempfile

from compat import cpu_count
from events import NotApplied, Skip, flush_native_stdout
from protocol import (
    PADDED_CHANNELS, PRECISION_OF, SCRATCH_ENV, VARIANT_ENV, keras_json_floatx, keras_takes, variant_parts)

# oneDNN >= 3.3 reads "profile_create,profile_exec,filter=REGEX" (src/common/verbose.cpp): creation and
# execution lines of every component but gemm_api, whose thousands of small calls per step (Eigen contractions
# on AVX2 CPUs) would slow every step down; primitives (convolution, pooling, reorder, inner_product ...) stay.
# A creation line is printed before its primitive runs, so a step cut inside still names the kernel it was in
# (TensorFlow 2.21 creates its convolutions' primitives again on every step: "create:cache_hit").
ONEDNN_VERBOSE_SETTING = "profile_create,profile_exec,filter=^(?!gemm_api)"
ONEDNN_FILTER_SINCE_TF = (2, 17)


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
    scratch = os.environ.get(SCRATCH_ENV)
    home = tempfile.mkdtemp(prefix="fp16doctor-keras-", dir=scratch if scratch and os.path.isdir(scratch) else None)
    atexit.register(shutil.rmtree, home, True)  # one per run: do not leave them in /tmp
    keras_dir = os.path.join(home, ".keras")
    os.makedirs(keras_dir)
    config = {"backend": backend, "floatx": keras_json_floatx(precision),
              "image_data_format": "channels_last", "epsilon": 1e-07}
    with open(os.path.join(keras_dir, "keras.json"), "w") as fh:
        json.dump(config, fh)
    # Keras 2 and 3 read $KERAS_HOME; older releases only ~/.keras, so HOME points there too.
    os.environ["KERAS_HOME"] = keras_dir
    os.environ["HOME"] = home
    os.environ["KERAS_BACKEND"] = backend
    return keras_dir, config


def exit_now(code):
    """Leave at once, the result out: the interpreter's own teardown of a framework with models loaded took
    0.9 s after one small Keras fit on a 2-core EPYC (0.15 s with os._exit) and longer with five models, and a
    script stopped mid-way never runs its own clean-up (its non-daemon threads or worker pools would hold the
    interpreter open until the engine's limit). os._exit skips atexit, so the private Keras home made for this
    run (prepare_keras_home) is removed here, and every stream is flushed first."""
    home = os.path.dirname(os.environ.get("KERAS_HOME") or "")
    if os.path.basename(home).startswith("fp16doctor-keras-"):
        shutil.rmtree(home, True)
    sys.stdout.flush()
    sys.stderr.flush()
    flush_native_stdout()
    os._exit(code)


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

    def policy_setter(self):
        """This Keras' way to set the global dtype policy (Keras 3, tf.keras >= 2.4, tf.keras 2.1-2.3's
        experimental API), or None where it has none."""
        mp = getattr(self.keras, "mixed_precision", None)
        if mp is None:
            return None
        for name in ("set_dtype_policy", "set_global_policy"):
            if hasattr(mp, name):
                return getattr(mp, name)
        try:
            return getattr(getattr(mp, "experimental", None), "set_policy", None)
        except Exception:  # noqa: BLE001  (lazy modules raise what they like)
            return None

    def set_mixed_policy(self, policy="mixed_float16"):
        """Sets the global dtype policy; the setter's name (e.g. "set_dtype_policy")."""
        setter = self.policy_setter()
        if not keras_takes(policy, self.major_minor()[0], setter is not None):
            raise Skip("Keras %s has no %s policy (a dtype policy needs tf.keras in TF >= 2.1, or Keras 3)"
                       % (self.version, policy))
        setter(policy)
        return getattr(setter, "__name__", "set_policy")

    def set_bfloat16_floatx(self):
        """Pure bfloat16, as floatx=float16 is pure float16: only Keras 3 accepts it."""
        config = getattr(self.keras, "config", None)
        if not keras_takes("bfloat16", self.major_minor()[0], True) or config is None \
                or not hasattr(config, "set_floatx"):
            # tf_keras and Keras 2 check floatx against {float16, float32, float64}.
            raise Skip("%s %s refuses floatx bfloat16 (only Keras 3's keras.config.set_floatx accepts it)"
                       % ("tf_keras" if self.name == "tf_keras" else "Keras", self.version))
        config.set_floatx("bfloat16")

    def set_floatx(self, floatx):
        config = getattr(self.keras, "config", None)
        (getattr(config, "set_floatx", None) or self.keras.backend.set_floatx)(floatx)

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


def apply_precision(api, precision, defaults=None):
    """Puts this process' Keras in `precision`, as protocol.PRECISION_TABLE says it is applied, and says how (the
    script runner records it): a dtype policy for a mixed precision, floatx for a pure one. Skip where this Keras
    cannot take it (the table's Keras rule), NotApplied where floatx did not take.

    defaults: None in a process of one precision, whose floatx float16 came from the private keras.json before Keras
    loaded (prepare_keras_home); in the interleaved rounds, where the precisions take turns in one process, the
    (floatx, policy) the process started with, which float32 and the other precisions' unset globals return to
    (some layers and losses read them again at call time, so each block runs under its own)."""
    spec = PRECISION_OF[precision]
    if spec.mixed:
        note = {"how": "dtype policy injected by fp16doctor before the script built its model", "policy": precision,
                "call": "mixed_precision.%s" % api.set_mixed_policy(precision)}
    else:
        note = {"how": "keras.json floatx", "floatx": spec.compute_dtype}
    if defaults is not None:
        floatx, policy = defaults
        if not spec.mixed and getattr(api.keras, "mixed_precision", None) is not None:
            # Keras 3 reads floatx into the global policy once and keeps it (dtype_policy()), so a pure precision
            # is set as the policy of that name too: a float16 model must not quietly be built in float32.
            api.set_mixed_policy(precision if spec.pure else (policy or floatx))
    if spec.pure and keras_json_floatx(precision) != precision:
        api.set_bfloat16_floatx()  # keras.json refuses it: set after import, where this Keras takes it
        note["how"] = "keras.config.set_floatx after import (keras.json rejects bfloat16)"
    elif defaults is not None:
        api.set_floatx(precision if spec.pure else defaults[0])
    if spec.pure and api.floatx() != precision:
        raise NotApplied("floatx %s was not picked up (floatx is %s)" % (precision, api.floatx()))
    return note


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


# ---------------------------------------------------------------- the environment, and the experiment's change

def set_variant_environment(variant, backend):
    """What must be in the environment before the framework loads, for each change of the variant; returns what
    was set."""
    env = {}
    for part in variant_parts(variant):
        if part == "tf32_off" or (part == "onednn_off" and backend == "tensorflow"):
            env.update(VARIANT_ENV[part])
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
    if backend != "tensorflow" or "ONEDNN_VERBOSE" in os.environ or "onednn_off" in variant_parts(variant):
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


# The TensorFlow release that first reads TF_ENABLE_ONEDNN_OPTS: oneDNN is in the official x86-64 builds "after
# v2.5", switched by that variable (Intel's "Maximize TensorFlow Performance on CPU"); before it, PyPI's builds have none.
ONEDNN_OPTS_SINCE = (2, 5)


def apply_variant(api, variant, device, env):
    """Each change of the experiment that needs the framework loaded (a variant may combine several:
    "synthetic_input+xla"), all of them recorded; Skip where one cannot apply here."""
    applied = dict(("env " + k, v) for k, v in env.items())
    for part in variant_parts(variant):
        _apply_change(api, part, device, applied)
    return applied


def _apply_change(api, variant, device, applied):
    """One change, recorded in `applied`."""
    if variant == "onednn_off":
        if api.backend_name == "torch":
            import torch
            torch.backends.mkldnn.enabled = False  # PyTorch's switch for the same library
            applied["torch.backends.mkldnn.enabled"] = False
        elif api.backend_name != "tensorflow":
            raise Skip("onednn_off: the %s backend does not run its ops through oneDNN by default"
                       % api.backend_name)
        else:
            import tensorflow as tf
            if tuple(int(p) for p in tf.__version__.split(".")[:2]) < ONEDNN_OPTS_SINCE:
                # TensorFlow reads TF_ENABLE_ONEDNN_OPTS from 2.5 on; PyPI's builds before it run no oneDNN ops.
                raise Skip("onednn_off: TensorFlow %s reads no TF_ENABLE_ONEDNN_OPTS (it exists from 2.5) and its "
                           "PyPI build runs no oneDNN ops: there is nothing to turn off" % tf.__version__)
    elif variant == "tf32_off" and not device.startswith("gpu"):
        raise Skip("tf32_off: TF32 exists only on NVIDIA GPUs of compute capability 8.0 and newer; "
                   "this run is on the CPU")
    elif variant == "xla":
        # compile(jit_compile=True): XLA on TensorFlow, torch.compile on torch (Keras 3's torch trainer, from
        # torch 2.1: below it Keras warns and runs eagerly). Keras on JAX compiles its step with XLA already.
        if api.backend_name == "torch":
            import torch
            if tuple(int(p) for p in re.findall(r"\d+", torch.__version__)[:2]) < (2, 1):
                raise Skip("xla: Keras %s runs jit_compile=True as torch.compile from torch 2.1; this is torch %s"
                           % (api.version, torch.__version__))
        elif api.backend_name != "tensorflow":
            raise Skip("xla: Keras on %s compiles its training step already (jit_compile)" % api.backend_name)
        else:
            import tensorflow as tf
            if int(tf.__version__.split(".")[0]) < 2:
                raise Skip("xla: Keras %s on TensorFlow %s has no jit_compile" % (api.version, tf.__version__))
        applied["jit_compile"] = True
    elif variant == "float32_batches":
        applied["batch_dtype"] = "float32"
    elif variant == "channels_padded":
        applied["input_channels_in_model"] = PADDED_CHANNELS
    elif variant == "synthetic_input":
        applied["batches_in_memory"] = True


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
    cores = cpu_count()
    return {"model": model, "flags": flags or [], "cores": cores, "source": "the workload's /proc/cpuinfo"}
