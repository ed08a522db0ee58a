# -*- coding: utf-8 -*-
"""Runs the user's own training script, unchanged, under one precision, and times its training steps.

    python -u script_runner.py --precision P --log FILE --workdir DIR [--steps N ...] -- train.py [ARGS]

Like run_workload.py this runs inside the target Python (down to Python 2.7 with Keras 2.1.5: the tf1.7-cpu and
tf1.13-cpu stacks), so it stays valid Python 2.7 and 3.5 (what Python 2.7 lacks goes through compat.py) with
stdlib, numpy and Keras only, and reports through "@@fp16doctor {json}" lines (events.py). The precision is
applied from outside, as a user would: a private keras.json (floatx), and for the mixed policies the global
dtype policy, set the moment the script imports Keras. An import hook wraps Model.fit / fit_generator /
train_on_batch of whichever Keras the script imports (Keras 3, tf_keras, Keras 2), so a callback the script
never sees times each step with the built-in workload's StepTimer (timing.py).
After N measured steps the runner stops the script by an exception (any Keras), and the code after that
point (evaluation, saving) does not run.

    python -u script_runner.py --precision float32 --rounds-of float32,float16,... --log FILE --workdir DIR -- ...

times those precisions together instead, in interleaved rounds in this one process (script_rounds.py): the
script runs once per precision and its first fit() call is replayed in short blocks.

The script runs as __main__ (runpy's way: compat.run_script) with sys.argv = [script, ARGS...] and its own
folder first on sys.path, in DIR (a fresh, writable scratch directory: the script's folder may be read-only in a
container, and a checkpoint written relative to the working directory must not overwrite the user's
own, once per precision). Its stdout and stderr (Python's and the framework's C++ logs) go to FILE;
the protocol keeps the runner's original stdout.
"""
from __future__ import division, print_function

import argparse
import functools
import hashlib
import importlib
import linecache
import os
import re
import shutil
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The built-in workload's modules: they sit beside this file, inside the image too.
import events  # noqa: E402
from compat import find_spec, perf_counter, run_script  # noqa: E402
import script_rounds  # noqa: E402
from paired import MAX_ROUNDS  # noqa: E402
import frameworks  # noqa: E402
import loop_steps  # noqa: E402
import window  # noqa: E402
import timing  # noqa: E402
from events import NotApplied, Skip, emit  # noqa: E402
from model import describe_inputs, describe_model  # noqa: E402
from protocol import (  # noqa: E402
    ONEDNN_PREFIXES, PRECISIONS, PROFILE_DIR_ENV, SCRIPT_VARIANTS, WINDOW_MARKER, is_mixed)

# The user's script may have modules of the same names (model, events, dataset ...), or a package it imports
# may: ours must not shadow them. Run as a script, this folder is also sys.path[0]; what was imported stays
# reachable through the names above, and the modules themselves stay referenced here: Python 2.7 clears a
# module's globals to None once the module object goes away (compat.perf_counter would find no `time`).
_here = os.path.realpath(HERE)
_own_modules = []
sys.path[:] = [p for p in sys.path if not p or os.path.realpath(p) != _here]
for _name, _module in list(sys.modules.items()):
    _file = getattr(_module, "__file__", None)
    if _name not in ("__main__", __name__) and _file and os.path.dirname(os.path.realpath(_file)) == _here:
        _own_modules.append(_module)
        del sys.modules[_name]

# tf.keras was TensorFlow's own copy, tensorflow.python.keras, before TensorFlow 2.6 (from 2.6 it is the
# keras package; the copy stays, unused by tf.keras, and is ignored there).
TF_KERAS_MODULE = "tensorflow.python.keras"
TF_KERAS_OWN_COPY_BEFORE = (2, 6)
KERAS_MODULES = ("keras", "tf_keras", TF_KERAS_MODULE)
# What the import hook reports: the Keras modules, and TensorFlow, whose end TensorFlow 1's tf.keras waits for.
HOOKED_MODULES = KERAS_MODULES + ("tensorflow",)
TRAIN_METHODS = ("fit", "fit_generator", "train_on_batch")
WRAPPED_METHODS = TRAIN_METHODS + ("compile",)
# Keras 2 API that later Keras rejects: the runner names what the script used (fp16doctor's host side
# names the stacks where it still exists).
KERAS2_ARGUMENTS = ("lr", "decay")
KERAS2_METHODS = ("fit_generator", "evaluate_generator", "predict_generator")
OUTPUT_TAIL_LINES = 30
NOT_THE_SCRIPTS = tuple(p + "," for p in ONEDNN_PREFIXES) + (WINDOW_MARKER,)
MIN_MEASURED_STEPS = 3  # a median worth the name

_session = [None]  # what the runner learnt before the script failed (which Keras)


class Enough(BaseException):
    """Raised from the timing callback after the last measured step. A BaseException, so the script's
    own `except Exception:` cannot swallow it."""


def parse_args(argv):
    if "--" not in argv:
        raise SystemExit("usage: script_runner.py [options] -- SCRIPT [ARGS...]")
    cut = argv.index("--")
    p = argparse.ArgumentParser(description="fp16doctor: run a user's training script, measured")
    p.add_argument("--precision", choices=PRECISIONS, required=True)
    p.add_argument("--backend", default=None)
    p.add_argument("--log", required=True, help="the script's stdout and stderr go here")
    p.add_argument("--workdir", required=True, help="the script's working directory (writable)")
    p.add_argument("--script-label", default=None, help="the script's path as results may show it")
    p.add_argument("--steps", type=int, default=None, help="exactly this many measured steps")
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--min-steps", type=int, default=5)
    p.add_argument("--max-steps", type=int, default=60)
    p.add_argument("--max-measure-s", type=float, default=8.0)
    p.add_argument("--stable-tolerance", type=float, default=0.05)
    p.add_argument("--variant", choices=SCRIPT_VARIANTS, default="original", help="the experiment's one change")
    p.add_argument("--bound-ms", type=float, default=None, help="slow-step bound (see timing.py)")
    p.add_argument("--first-bound-ms", type=float, default=None, help="first-step bound (see timing.py)")
    p.add_argument("--cut-first-step", action="store_true",
                   help="the workload's; a script's steps are judged after they end")
    p.add_argument("--profile-dir", default=None, help="record a profiled window of steps here")
    p.add_argument("--profile-steps", type=int, default=3, help="steps in the profiled window")
    p.add_argument("--rounds-of", default=None,
                   help="time these precisions (comma-separated) in interleaved rounds in this one process")
    p.add_argument("--rounds-budget-s", type=float, default=20.0, help="rounds go on until this long")
    p.add_argument("--rounds-min-s", type=float, default=None,
                   help="rounds go on at least this long, whatever the start-up took")
    p.add_argument("--rounds-unsettled-s", type=float, default=None,
                   help="past the budget, rounds go on up to this long with the comparisons still unsettled")
    p.add_argument("--rounds-precision", type=float, default=None,
                   help="rounds stop sooner once every ratio against float32 is known to within this (0.05: 5 %%)")
    p.add_argument("--min-rounds", type=int, default=3)
    p.add_argument("--max-rounds", type=int, default=MAX_ROUNDS)
    p.add_argument("--rounds-seed", type=int, default=None, help="the shuffle's seed (none: a fresh one)")
    p.add_argument("--copy-in", action="append", default=[], metavar="REL=SOURCE",
                   help="copy the file SOURCE to REL under the working directory before the script runs (an "
                        "argument naming an existing file: the script reads the same content and writes a copy)")
    args = p.parse_args(argv[:cut])
    rest = argv[cut + 1:]
    if not rest:
        raise SystemExit("script_runner.py: no script after --")
    args.script = os.path.abspath(rest[0])
    args.script_args = rest[1:]
    return args


def redirect_output(log_path):
    """fd 1 and 2 -> the log (the framework's C++ logs too); the protocol keeps a copy of fd 1."""
    sys.stdout.flush()
    sys.stderr.flush()
    events.send_to(os.fdopen(os.dup(1), "w"))
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)


def output_tail(log_path, lines=OUTPUT_TAIL_LINES):
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        with open(log_path, "rb") as fh:
            data = fh.read()[-20000:]
    except (IOError, OSError):
        return ""
    # The script's own output: oneDNN's verbose lines and the window markers share the stream but are
    # fp16doctor's (diagnose moves them out of the log once the run ends).
    own = [line for line in data.decode("utf-8", "replace").splitlines() if not line.startswith(NOT_THE_SCRIPTS)]
    return "\n".join(own[-lines:])


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def copy_in(pairs, workdir):
    """Each REL=SOURCE of --copy-in: SOURCE copied to REL under `workdir`, so the script's argument, as the user typed
    it, names a copy of the user's file (what the script writes there never reaches the user's own); a SOURCE this
    machine cannot see is left out (the script then says what it misses)."""
    for pair in pairs:
        rel, _, source = pair.partition("=")
        target = os.path.join(workdir, rel)
        if not rel or os.path.isabs(rel) or not os.path.isfile(source) or os.path.exists(target):
            continue
        folder = os.path.dirname(target)
        if folder and not os.path.isdir(folder):
            os.makedirs(folder)
        shutil.copyfile(source, target)


# Frames that are not the user's: this folder (the runner, runpy's caller) and installed packages.
LIBRARY_PARTS = ("site-packages", "dist-packages")
FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
CODE_CHARS = 120
TRAILING_COMMENT = re.compile(r"\s+#[^'\"]*$")  # a comment after the code (no quote in it: no string cut)


def _is_users(path, script):
    """Whether a frame's file is the user's: the script, or a file in its folder (not the runner's, not a
    package's)."""
    if not path or path.startswith("<"):
        return False
    real = os.path.realpath(path)
    if os.path.dirname(real) == _here or any(part in LIBRARY_PARTS for part in real.split(os.sep)):
        return False
    folder = os.path.dirname(os.path.realpath(script))
    return real == os.path.realpath(script) or real.startswith(folder + os.sep)


def _location(path, line, code, script):
    folder = os.path.dirname(os.path.realpath(script))
    code = TRAILING_COMMENT.sub("", " ".join((code or linecache.getline(path, line) or "").split()))
    if len(code) > CODE_CHARS:
        code = code[:CODE_CHARS - 3] + "..."
    return {"file": os.path.relpath(os.path.realpath(path), folder), "line": int(line), "code": code}


def user_frame(tb, script, message=""):
    """Where the user's own code raised: the deepest frame of the script's folder that the exception names. A
    traced function's error lists its frames in its message ("in user code: File ..., line N"), deeper than the
    traceback's (which ends in the framework); else the traceback's last frame of the user's; None where neither
    names one."""
    for path, line in reversed(FILE_LINE.findall(message or "")):
        if _is_users(path, script):
            return _location(path, int(line), None, script)
    for frame in reversed(traceback.extract_tb(tb)):
        if _is_users(frame[0], script):
            return _location(frame[0], frame[1], frame[3], script)
    return None


# ---------------------------------------------------------------- timing

class ScriptTimer(timing.StepTimer):
    """StepTimer, plus what a script does that the built-in workload does not: several fit calls
    (the first step after each is warm-up again: new data adapter, maybe a retrace) and epoch ends
    (validation and epoch callbacks run there: excluded from the step after them, timed apart)."""

    def __init__(self, *args, **kwargs):
        super(ScriptTimer, self).__init__(*args, **kwargs)
        self.rewarm = False
        self.epoch_end_ms = []
        self.steps_in_epoch = 0

    def train_begin(self):
        """A fit call begins (or the first train_on_batch call)."""
        if self.start is None:
            self.begin()
        else:
            self.last = self.clock()
            self.rewarm = True

    def epoch_begin(self):
        self.steps_in_epoch = 0
        if self.start is not None:
            self.last = self.clock()

    def epoch_end(self):
        if self.steps_in_epoch and self.last is not None:
            self.epoch_end_ms.append(round((self.clock() - self.last) * 1000.0, 3))

    def end_step(self, logs):
        self.steps_in_epoch += 1
        if self.rewarm and self.stop_reason is None:
            self.rewarm = False
            loss = (logs or {}).get("loss")
            loss = float(loss) if loss is not None else None
            now = self.clock()
            elapsed_ms = (now - self.last) * 1000.0
            self.last = now
            if loss is not None:
                self.losses.append(loss)
            self.warmup_ms.append(elapsed_ms)
            emit("step", phase="warmup", index=len(self.warmup_ms) + len(self.step_ms) - 1,
                 ms=round(elapsed_ms, 3), loss=loss)
            return self.should_stop(now)
        return super(ScriptTimer, self).end_step(logs)


def _stop_script():
    """Stop the user's script where it is: enough steps are measured (what fit()'s callback raises too)."""
    raise Enough()


def _finite(value):
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def _first_value(result):
    """train_on_batch returns the loss, [loss, metrics...] or (Keras 3, return_dict) a dict."""
    if isinstance(result, dict):
        return result.get("loss")
    if isinstance(result, (list, tuple)):
        return result[0] if result else None
    return result


class Session(object):
    """What the runner learns while the script runs: which Keras, which model, which calls."""

    def __init__(self, args, timer, onednn_env=None, variant_env=None):
        self.args = args
        self.timer = timer
        self.hooks = window.StepHooks(timer)  # the profiler joins once Keras (and its backend) loads
        self.onednn_env = onednn_env or {}
        self.variant_env = variant_env or {}
        self.variant_applied = None
        self.compile_kwargs = {}  # what every compile call gets (TF1 trace options, the XLA experiment)
        self.fit_calls = 0
        # A custom loop's steps, where the script trains without fit() (loop_steps.py); none are taken after a fit.
        self.loops = loop_steps.LoopSteps(timer, fit_seen=lambda: bool(self.calls), stop=_stop_script)
        self.keras = None  # the Keras the script trains with (the first imported, until a model says)
        self.keras_name = None
        self.modules = {}
        self.import_s = 0.0
        self.depth = 0
        self.calls = []
        self.model = None
        self.model_info = None
        self.inputs_info = None  # the model's inputs as the first batch fed them (model.describe_inputs)
        self.precision_note = None
        self.policy_at_first_call = None
        self.jit_compile = None  # the model's resolved jit_compile, where it says one (saw_model)
        self.notes = []
        self.capture = None  # interleaved rounds: takes each training call instead of timing it
        self.tensorflow_loaded = sys.modules.get("tensorflow") is not None
        self.deferred = []  # TensorFlow 1's tf.keras, loaded before TensorFlow was (on_keras_import)

    # -------------------------------------------------------- precision, applied when Keras loads

    def on_keras_import(self, name, module, seconds):
        """A hooked module has executed. TensorFlow 1 imports its own tf.keras half-way through `import
        tensorflow` (tensorflow/python/__init__.py), before tensorflow has its __version__ or its backend
        functions: that tf.keras waits until TensorFlow has loaded and, where the import of another Keras (Keras
        2.2.4 imports TensorFlow) loaded it, until that Keras has had its turn: the script's Keras comes first."""
        if name == "tensorflow":
            self.tensorflow_loaded = True
        elif name == TF_KERAS_MODULE and not self.tensorflow_loaded:
            self.deferred.append((name, module, seconds))
            return
        else:
            self.keras_loaded(name, module, seconds)
        importing = [n for n in ("keras", "tf_keras") if sys.modules.get(n) is not None and n not in self.modules]
        if self.deferred and self.tensorflow_loaded and not importing:
            deferred, self.deferred = self.deferred, []
            for args in deferred:
                self.keras_loaded(*args)

    def keras_loaded(self, name, module, seconds):
        # Several may load (tf.keras can be either): each gets the precision and the patches.
        if name == TF_KERAS_MODULE:
            if not tf_keras_is_own_copy():
                return
            name = "tensorflow.keras"
            self.modules["tensorflow"] = module  # its models' classes live under tensorflow.python.keras
        self.modules[name] = module
        self.import_s += seconds
        first = self.keras is None
        if first:
            self.keras, self.keras_name = module, name
        apply_precision(self, module, name)
        if first:
            self.prepare_run(module, name)
        patch_models(self, module)
        if not self.args.rounds_of:  # the rounds replay fit() calls only
            loop_steps.patch_optimizers(self.loops, module)
            loop_steps.patch_tf_functions(self.loops)

    def prepare_run(self, module, name):
        """Once the script's Keras (and so its backend) has loaded: the experiment's change and the profiler."""
        api = keras_api(module, name)
        _, device = frameworks.software_info(api)
        self.variant_applied = frameworks.apply_variant(api, self.args.variant, device, self.variant_env)
        if self.variant_applied.pop("jit_compile", None):
            self.compile_kwargs["jit_compile"] = True
            self.variant_applied["compile(jit_compile=True)"] = True
        if not self.args.profile_dir:
            return
        if self.onednn_env and api.backend_name == "tensorflow":
            try:
                frameworks.prime_onednn_verbose()
            except Exception as exc:  # noqa: BLE001  (then the names are at risk, the run is not)
                self.notes.append("oneDNN was not primed: %s: %s" % (exc.__class__.__name__, exc))
        try:
            profiler = window.WindowProfiler(api, self.args.profile_dir, bool(self.onednn_env))
        except Exception as exc:  # noqa: BLE001  (no profile is no reason to lose the measurement)
            self.notes.append("profiling was off: %s: %s" % (exc.__class__.__name__, exc))
            return
        if profiler.run_options is not None:
            # TF1 Keras hands compile's options and run_metadata to Session.run: how step stats are traced.
            self.compile_kwargs["options"], self.compile_kwargs["run_metadata"] = profiler.run_options
        self.hooks.profiler = profiler

    # -------------------------------------------------------- the wrapped training entry points

    def call(self, method, orig, model, args, kwargs):
        if self.depth:  # Keras 2.1's Sequential.fit calls its inner Model.fit: time the outer call only
            return orig(model, *args, **kwargs)
        self.depth += 1
        try:
            if method == "compile":
                return orig(model, *args, **self.with_compile_kwargs(kwargs))
            self.saw_model(model)
            if self.inputs_info is None and method in ("fit", "train_on_batch"):
                self.saw_batch(model, args[0] if args else kwargs.get("x"))
            if method not in self.calls:
                self.calls.append(method)
            if self.capture is not None:
                return self.capture(method, orig, model, args, kwargs)
            if method == "train_on_batch":
                if self.timer.start is None:  # the first call starts the clock (and maybe the profile)
                    self.hooks.train_begin(model)
                result = orig(model, *args, **kwargs)
                if self.hooks.step_end(model, {"loss": _first_value(result)}):
                    self.hooks.train_end()
                    raise Enough()
                return result
            args, kwargs = script_rounds.with_callback(method, args, kwargs, make_callback(self.keras, self))
            return orig(model, *args, **kwargs)
        finally:
            self.depth -= 1

    def with_compile_kwargs(self, kwargs):
        if not self.compile_kwargs:
            return kwargs
        merged = dict(kwargs)
        if "jit_compile" in self.compile_kwargs and merged.get("jit_compile") not in (None, "auto", True):
            self.notes.append("the script compiled with jit_compile=%r; the XLA experiment set it to True"
                              % (merged.get("jit_compile"),))
        for key, value in self.compile_kwargs.items():
            if key == "jit_compile" or key not in merged:
                merged[key] = value
        return merged

    def saw_model(self, model):
        if self.model is not None:
            return
        self.model = model
        root = type(model).__module__.split(".")[0]
        if root in self.modules:
            # The Keras the model belongs to, by the name the script knows it ("tensorflow" is tf.keras).
            self.keras = self.modules[root]
            self.keras_name = "tensorflow.keras" if root == "tensorflow" else root
        self.policy_at_first_call = global_policy_name(self.keras)
        # Whether the training step runs as one compiled cluster (Keras' jit_compile, resolved at compile: XLA on
        # TensorFlow, torch.compile on torch): a profiler sees its ops as one launch, not one by one.
        compiled = getattr(model, "jit_compile", None)
        self.jit_compile = compiled if isinstance(compiled, bool) else None
        self.describe_model()

    def describe_model(self, last_try=False):
        """The model's layers and dtypes, once it can say them: a subclassed model is built by its first step, so
        one that cannot be described when fit() starts is tried again when the run ends (`last_try`), and only
        then said to be undescribed."""
        if self.model is None or self.model_info is not None:
            return
        try:
            self.model_info = describe_model(self.model)
        except Exception as exc:  # noqa: BLE001  (an unusual model is described less, never fatal)
            if last_try or getattr(self.model, "built", True):
                self.notes.append("the model could not be described (%s: %s)" % (exc.__class__.__name__, exc))

    def saw_batch(self, model, x):
        try:
            self.inputs_info = describe_inputs(model, x)
        except Exception as exc:  # noqa: BLE001  (inputs that cannot be described are described less, never fatal)
            self.inputs_info = []
            self.notes.append("the model's inputs could not be described (%s: %s)" % (exc.__class__.__name__, exc))


def make_callback(keras, session):
    timer, hooks = session.timer, session.hooks

    class _ScriptTimerCallback(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            session.fit_calls += 1
            hooks.train_begin(self.model)

        def on_epoch_begin(self, epoch, logs=None):
            hooks.epoch_begin(epoch)
            timer.epoch_begin()

        def on_batch_end(self, batch, logs=None):
            if hooks.step_end(self.model, logs, batch, getattr(self, "params", None)):
                self.model.stop_training = True
                hooks.train_end()
                raise Enough()

        def on_train_batch_end(self, batch, logs=None):
            self.on_batch_end(batch, logs)

        def on_epoch_end(self, epoch, logs=None):
            timer.epoch_end()

        def on_train_end(self, logs=None):
            hooks.train_end()

    return _ScriptTimerCallback()


def _wrap(session, method, orig):
    @functools.wraps(orig)
    def patched(self, *args, **kwargs):
        return session.call(method, orig, self, args, kwargs)

    patched._fp16doctor = True
    return patched


def _lookup(module, dotted):
    obj = module
    for part in dotted.split("."):
        try:
            obj = getattr(obj, part)
        except Exception:  # noqa: BLE001  (lazy modules raise what they like)
            return None
    return obj


def patch_models(session, module):
    # Keras 3 and tf_keras: Model (Sequential inherits). Keras 2.1: models.Sequential has its own fit.
    seen = []
    for dotted in ("Model", "models.Model", "models.Sequential", "engine.training.Model"):
        cls = _lookup(module, dotted)
        if not isinstance(cls, type) or cls in seen:
            continue
        seen.append(cls)
        for method in WRAPPED_METHODS:
            orig = getattr(cls, method, None)
            if orig is None or getattr(orig, "_fp16doctor", False):
                continue
            setattr(cls, method, _wrap(session, method, orig))


def tf_keras_is_own_copy():
    """Whether this TensorFlow's tf.keras is tensorflow.python.keras (TensorFlow before 2.6)."""
    try:
        from tensorflow.python.framework import versions
        parts = tuple(int(p) for p in str(versions.__version__).split(".")[:2])
    except (ImportError, AttributeError, ValueError):
        return False
    return len(parts) == 2 and parts < TF_KERAS_OWN_COPY_BEFORE


def keras_api(module, name):
    """The built-in workload's view (frameworks.KerasAPI) of the Keras the script imported (for software_info,
    the variant, the profiler)."""
    kind = "tf_keras" if name == "tf_keras" else ("keras3" if keras_major(module) >= 3 else "keras2")
    backend_name = "tensorflow"
    try:
        backend_name = module.backend.backend()
    except Exception:  # noqa: BLE001  (Keras 2.1's backend() is there; anything odd means TensorFlow)
        pass
    return frameworks.KerasAPI(kind, module, None, None, backend_name)


def keras_version(module):
    return getattr(module, "__version__", None) or "?"


def keras_major(module):
    try:
        return int(keras_version(module).split(".")[0])
    except ValueError:
        return 0


def global_policy_name(keras):
    mp = getattr(keras, "mixed_precision", None)
    for name in ("dtype_policy", "global_policy"):
        getter = getattr(mp, name, None) if mp is not None else None
        if getter is not None:
            try:
                return str(getter().name)
            except Exception:  # noqa: BLE001
                return None
    return None


def apply_precision(session, keras, name):
    """The run's precision on a Keras the script imported (frameworks.apply_precision), and how, for the record."""
    note = frameworks.apply_precision(keras_api(keras, name), session.args.precision)
    if "call" in note:
        note["call"] = "%s.%s" % (name, note["call"])
    session.precision_note = note


class KerasImportHook(object):
    """A meta-path finder that finds `keras` / `tf_keras`, TensorFlow 1's tf.keras and `tensorflow` as the normal
    finders do, and calls back the moment the module has executed, before the script's next line.

    Python 3 asks find_spec (PEP 451): the normal finders' spec is returned with its loader's exec_module
    wrapped. Python 2.7 knows only PEP 302 and asks find_module, then the loader it returns (this hook) to
    load_module: the module is imported by the normal finders meanwhile (the hook stands aside for that name),
    then called back. Python 3.4 to 3.11 fall back to find_module only for a finder without find_spec, so each
    Python takes one path."""

    def __init__(self, on_import):
        self.on_import = on_import
        self.busy = set()

    def _wanted(self, fullname):
        return fullname in HOOKED_MODULES and fullname not in self.busy

    def find_spec(self, fullname, path=None, target=None):
        if not self._wanted(fullname):
            return None
        self.busy.add(fullname)
        try:
            spec = find_spec(fullname)
        finally:
            self.busy.discard(fullname)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return None
        original = loader.exec_module
        hook = self

        def exec_module(module):
            started = perf_counter()
            original(module)
            hook.on_import(fullname, module, perf_counter() - started)

        loader.exec_module = exec_module
        return spec

    def find_module(self, fullname, path=None):
        """PEP 302 (Python 2.7): this hook loads the Keras modules."""
        return self if self._wanted(fullname) else None

    def load_module(self, fullname):
        """PEP 302: the module, imported by the normal finders, then called back; one already in sys.modules (a
        reload) is returned as it is."""
        module = sys.modules.get(fullname)
        if module is not None:
            return module
        self.busy.add(fullname)
        started = perf_counter()
        try:
            module = importlib.import_module(fullname)
        finally:
            self.busy.discard(fullname)
        self.on_import(fullname, module, perf_counter() - started)
        return module


# ---------------------------------------------------------------- running the script

def recognise_keras2_api(exc, tb, script):
    """The Keras 2 API a newer Keras rejects (RMSprop(lr=..., decay=...), fit_generator), named from
    the exception and the script's own line that raised it; None when it is another error."""
    message = str(exc)
    source = " ".join(frame[3] or "" for frame in traceback.extract_tb(tb) if frame[0] == script)
    if isinstance(exc, (TypeError, ValueError)):
        used = [a for a in KERAS2_ARGUMENTS
                if re.search(r"\b%s\s*=" % a, source) or re.search(r"['\"]%s['\"]|\b%s is deprecated" % (a, a),
                                                                   message)]
        if used:
            callee = re.search(r"(\w+)\s*\([^()]*\b(?:%s)\s*=" % "|".join(used), source)
            return {"kind": "keras2_arguments", "arguments": used,
                    "callable": callee.group(1) if callee else None}
    if isinstance(exc, AttributeError):
        missing = [m for m in KERAS2_METHODS if ("'%s'" % m) in message]
        if missing:
            return {"kind": "keras2_methods", "methods": missing}
    return None


def run(args):
    backend = args.backend or os.environ.get("KERAS_BACKEND") or frameworks.user_keras_config().get("backend") \
        or "tensorflow"
    script_sha256 = sha256_of(args.script)
    keras_dir, _ = frameworks.prepare_keras_home(args.precision, backend)
    if args.steps:
        warmup, min_steps, max_steps, budget, tolerance = args.warmup_steps, args.steps, args.steps, 1e12, -1.0
    else:
        warmup, min_steps, max_steps = args.warmup_steps, args.min_steps, args.max_steps
        budget, tolerance = args.max_measure_s, args.stable_tolerance
    # Not KERAS_MAX_EPOCHS / KERAS_MAX_STEPS_PER_EPOCH (Keras 3, keras/src/backend/config.py): they cap
    # each fit call, not the run, and the second *sets* steps_per_epoch where the script left it None,
    # so an in-memory dataset with fewer batches "runs out of data" and its training is cut short.
    # The runner's own exception (Enough) stops every Keras after the last measured step instead.
    profile_dir = args.profile_dir or os.environ.get(PROFILE_DIR_ENV)  # a container's, by environment
    if args.rounds_of:
        profile_dir = None  # the rounds time steps; each precision's own run recorded its ops
    args.profile_dir = profile_dir
    # Before the script imports its framework: what the framework reads from the environment when it loads.
    variant_env = frameworks.set_variant_environment(args.variant, backend)
    onednn_env = frameworks.enable_onednn_verbose(backend, args.variant) if profile_dir else {}
    timer = ScriptTimer(warmup, min_steps, max_steps, budget, tolerance, bound_ms=args.bound_ms,
                        first_bound_ms=args.first_bound_ms,
                        window_steps=max(0, args.profile_steps) if profile_dir else 0)
    session = Session(args, timer, onednn_env, variant_env)
    _session[0] = session
    sys.meta_path.insert(0, KerasImportHook(session.on_keras_import))

    if not os.path.isdir(args.workdir):
        os.makedirs(args.workdir)
    copy_in(args.copy_in, args.workdir)
    os.chdir(args.workdir)
    sys.argv = [args.script] + list(args.script_args)
    sys.path.insert(0, os.path.dirname(args.script))  # as `python train.py` would
    emit("phase", phase="train", script_sha256=script_sha256)
    redirect_output(args.log)
    if args.rounds_of:
        return run_rounds(args, session, script_sha256)
    started = perf_counter()
    ended = "completed"
    exit_code = None
    raised = None
    try:
        run_script(args.script)
    except Enough:
        ended = "stopped"
    except SystemExit as exc:
        exit_code = exc.code
        ended = "exited" if exc.code in (None, 0) else "exit_status"
    except Exception as exc:  # noqa: BLE001  (after its measured steps, what the script did next is its own)
        if len(timer.step_ms) < MIN_MEASURED_STEPS:
            raise
        raised = ended_by(exc, sys.exc_info()[2], args.script)
        ended = "raised"
        traceback.print_exc()  # into the script's log, as Python prints an uncaught exception
        session.hooks.train_end()  # the fit call never ended: a window still open is closed with what it has
    script_s = perf_counter() - started
    sys.stdout.flush()
    sys.stderr.flush()

    session.describe_model(last_try=True)  # a subclassed model is built by now
    software, device = {"python": "%d.%d.%d" % sys.version_info[:3]}, "cpu"
    if session.keras is not None:
        software, device = frameworks.software_info(keras_api(session.keras, session.keras_name))

    timed = list(session.calls)
    steps = timer.step_ms
    # A custom loop whose step function was found (loop_steps.py), with a median worth the name.
    loop_timed = not timed and session.loops.leader is not None and len(steps) >= MIN_MEASURED_STEPS
    failure = None
    if ended == "exit_status":
        failure = {"kind": "exited", "exit_status": exit_code,
                   "message": "the script exited with status %s" % exit_code}
    elif ended != "stopped" and timed and len(steps) < MIN_MEASURED_STEPS:
        failure = {"kind": "too_few_steps",
                   "message": "the script ended after %d training step(s) (%d warm-up, %d measured); "
                              "fp16doctor needs %d warm-up and at least %d measured steps"
                              % (len(timer.warmup_ms) + len(steps), len(timer.warmup_ms), len(steps),
                                 warmup, MIN_MEASURED_STEPS)}
    if failure is not None:
        failure.update(steps_measured=len(steps), output_tail=output_tail(args.log))
        emit("error", status="failed", error=failure["message"], script_failure=failure)
        return 1

    workload = {"name": "script", "script": args.script_label or args.script, "script_sha256": script_sha256,
                "api": timed or ["custom_loop"],
                "fit_calls": session.fit_calls, "steps_measured": len(steps), "warmup_steps": len(timer.warmup_ms),
                "steps_requested": args.steps, "stop_reason": timer.stop_reason, "ended": ended,
                "keras_module": session.keras_name, "precision_applied": session.precision_note,
                "policy_at_first_call": session.policy_at_first_call, "jit_compile": session.jit_compile}
    notes = list(session.notes)
    if timer.epoch_end_ms:
        workload["epoch_end_ms"] = timer.epoch_end_ms
        notes.append("the time from an epoch's last step to its end (validation, epoch-end callbacks) is "
                     "excluded from the step times and kept apart in workload.epoch_end_ms")
    if session.fit_calls > 1:
        notes.append("the script called fit %d times; the first step of each call counts as warm-up"
                     % session.fit_calls)
    if ended in ("completed", "exited") and steps and args.steps and len(steps) < args.steps:
        workload["stop_reason"] = "script_ended"
        notes.append("the script ended after %d measured steps (%d asked)" % (len(steps), args.steps))
    if raised is not None:
        workload["ended_by"] = raised
        if workload["stop_reason"] is None:
            workload["stop_reason"] = "script_raised"
        where = raised.get("location")
        notes.append("the script raised %s%s after %d measured steps; the steps measured before it are kept"
                     % (raised["exception"], " at %s:%d" % (where["file"], where["line"]) if where else "", len(steps)))
    if session.precision_note and session.policy_at_first_call and is_mixed(args.precision) \
            and session.policy_at_first_call != args.precision:
        notes.append("the script set its own dtype policy (%s) over the injected %s"
                     % (session.policy_at_first_call, args.precision))
    result = {"status": "ok", "device": device, "software": software, "workload": workload,
              "keras_config": {"floatx": session.keras.backend.floatx() if session.keras is not None else None,
                               "config_path": os.path.join(keras_dir, "keras.json")},
              "timing": {"import_s": round(session.import_s, 3), "script_s": round(script_s, 3)},
              # Where the run stopped, as the built-in workload's record says it: "slow_step_bound" marks a cut run.
              "stop_reason": workload["stop_reason"]}
    if session.model_info is not None:
        result["model"] = session.model_info
        if session.inputs_info:
            result["model"]["inputs"] = session.inputs_info
        by_dtype = {}
        for layer in session.model_info.get("layers", []):
            key = "%s compute, %s variables" % (layer.get("compute_dtype") or "unknown",
                                                layer.get("variable_dtype") or "no")
            by_dtype.setdefault(key, []).append(layer.get("name"))
        workload["layer_dtypes"] = by_dtype
    if steps and (timed or loop_timed):
        losses = timer.losses
        bad = [v for v in losses if v != v or v in (float("inf"), float("-inf"))]
        result.update({
            "step_time_ms": timing.summary(steps),
            "first_step_ms": round(timer.first_step_ms, 3),
            "warmup_step_ms": [round(v, 3) for v in timer.warmup_ms],
            "step_ms_all": [round(v, 3) for v in steps],
            # results.json is strict JSON: a NaN or infinite loss is said by nan_or_inf, its value is null.
            "loss": {"first": _finite(losses[0]) if losses else None,
                     "last": _finite(losses[-1]) if losses else None, "nan_or_inf": bool(bad)},
        })
        workload["per_step"] = True
        result.update(session.hooks.result_fields())
        if loop_timed:
            result.pop("profile", None)  # the profiler's window follows fit()'s callbacks: none was opened
            workload.update(timing="loop_calls", loop_step=session.loops.name)
            notes.append("no fit, fit_generator or train_on_batch call: each step was timed end to end between two "
                         "calls of the loop's step function %s (it updates the weights), its first call the first "
                         "step; no profiled window" % session.loops.name)
    else:
        # A custom loop (GradientTape, a torch loop): the whole script, less the Keras import, is all
        # there is to time; the step count, warm-up and loss are the script's own business.
        whole_ms = round(max(script_s - session.import_s, 0.0) * 1000.0, 3)
        result["step_time_ms"] = {"median": whole_ms, "p10": whole_ms, "p90": whole_ms, "n": 1}
        workload.update(per_step=False, timing="whole_run", whole_run_ms=whole_ms)
        notes.append("no fit, fit_generator or train_on_batch call: the whole script was timed (%.1f s, "
                     "Keras import excluded); per-step time, warm-up, loss and the number of steps could "
                     "not be measured%s" % (whole_ms / 1000.0, ", nor the ops of a profiled window"
                                              if args.profile_dir else ""))
    if not timed and is_mixed(args.precision):
        workload["numerics_comparable"] = False
        notes.append("an injected mixed policy in a custom loop has no loss scaling: no numerics "
                     "finding is drawn from this run")
    if session.variant_applied:
        result["variant_applied"] = session.variant_applied
    cpu = frameworks.cpu_facts()
    if cpu is not None:
        result["cpu"] = cpu
    workload["notes"] = notes
    emit("result", run=result)
    return 0


def ended_by(exc, tb, script):
    """How a script ended that raised after its measured steps: the exception, its message's first line and the
    user's line it came from."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    out = {"exception": exc.__class__.__name__, "message": lines[0][:300] if lines else ""}
    location = user_frame(tb, script, str(exc))
    if location is not None:
        out["location"] = location
    return out


def run_rounds(args, session, script_sha256):
    """Interleaved rounds of the script's precisions in this one process (script_rounds.py)."""
    def run_once():
        sys.argv = [args.script] + list(args.script_args)
        os.chdir(args.workdir)
        try:
            run_script(args.script)
        except script_rounds.Captured:
            return True
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise script_rounds.NotReplayable("the script exited with status %s" % exc.code)
        return False

    started = perf_counter()
    try:
        result = script_rounds.run_script_rounds(args, session, run_once, keras_api, emit)
    except (script_rounds.NotReplayable, RuntimeError) as exc:  # RuntimeError: a precision that did not take,
        emit("error", status="failed", error=str(exc))  # an input that ran out
        return 1
    software, device = frameworks.software_info(keras_api(session.keras, session.keras_name))
    result.update(device=device, software=software)
    result["workload"] = {"name": "script", "script": args.script_label or args.script,
                          "script_sha256": script_sha256, "api": [result.pop("fit_method")],
                          "keras_module": session.keras_name}
    result["timing"]["script_s"] = round(perf_counter() - started, 3)
    result["timing"]["import_s"] = round(session.import_s, 3)
    cpu = frameworks.cpu_facts()
    if cpu is not None:
        result["cpu"] = cpu
    emit("result", run=result)
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not os.path.isfile(args.script):
        emit("error", status="failed", error="no script at %s" % args.script)
        return 1
    try:
        return run(args)
    except Skip as exc:
        emit("error", status="skipped", error=str(exc))
        return 0
    except NotApplied as exc:
        emit("error", status="failed", error=str(exc))
        return 1
    except KeyboardInterrupt:
        emit("error", status="failed", error="interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001  (the script's own failure: reported, with its output)
        _, _, tb = sys.exc_info()
        failure = {"kind": "exception", "exception": exc.__class__.__name__}
        location = user_frame(tb, args.script, str(exc))
        if location is not None:
            failure["location"] = location
        recognised = recognise_keras2_api(exc, tb, args.script)
        if recognised is not None:
            failure.update(recognised)
        if _session[0] is not None and _session[0].keras is not None:
            failure["keras"] = keras_version(_session[0].keras)
            failure["keras_module"] = _session[0].keras_name
        traceback.print_exc()  # into the script's log, as Python prints an uncaught exception
        failure["output_tail"] = output_tail(args.log)
        emit("error", status="failed", error="%s: %s" % (exc.__class__.__name__, exc),
             traceback=traceback.format_exc()[-4000:], script_failure=failure)
        return 1


if __name__ == "__main__":
    frameworks.exit_now(main())
