# -*- coding: utf-8 -*-
"""The profiled window: the profiler that records it, where it goes among the steps, and the hooks through
which a training loop drives the step timer and the profiler together (the built-in workload's callback,
the script runner's callback and train_on_batch wrapper).

Runs in the target Python (down to 3.5): stdlib, and the framework's profiler imported when asked.
"""
from __future__ import division, print_function

import functools
import json
import math
import os
import shutil
import sys
import time

from events import emit, flush_native_stdout
from profile_export import LAYER_PREFIX, export_torch_events
from protocol import WINDOW_END, WINDOW_START
from step_watchdog import StepWatchdog

# A TensorFlow op that oneDNN runs is named _Mkl... in the profiler's trace (_MklNativeConv2DBackpropFilter ...).
ONEDNN_OP_MARK = b"_Mkl"
# Where TensorFlow hands a 16-bit dtype's ops to oneDNN: its own rule, IsDataTypeSupportedByOneDNNOnThisCPU
# (tensorflow/core/util/util.cc), on the CPU's flags as Linux names them. float16: AVX512BW with AVX512-FP16 or
# AMX-FP16, or AVX-NE-CONVERT, and only in builds with oneDNN 3 (2.x has no float16); bfloat16: AVX-512F or
# AVX-NE-CONVERT. Each entry: any one of these sets of flags.
ONEDNN_DTYPE_FLAGS = {
    "float16": (("avx512bw", "avx512_fp16"), ("avx512bw", "amx_fp16"), ("avx_ne_convert",)),
    "bfloat16": (("avx512f",), ("avx_ne_convert",)),
}
# The first TensorFlow taken at that rule before a step has run: 2.15 and later build oneDNN 3 on x86 (a floor
# kept high on purpose: an older one is judged from its first step's trace, after that step).
ONEDNN_RULE_FROM_TF = (2, 15)


def cpu_flags(path="/proc/cpuinfo"):
    """The CPU's flags as Linux lists them (empty where there is no /proc/cpuinfo)."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except (IOError, OSError):
        pass
    return set()


def onednn_computes(dtype, flags):
    """Whether TensorFlow hands `dtype`'s ops to oneDNN on a CPU with these flags (ONEDNN_DTYPE_FLAGS)."""
    return any(all(flag in flags for flag in needed) for needed in ONEDNN_DTYPE_FLAGS.get(dtype, ()))


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
        self.tf_version = None  # (major, minor)
        self.run_options = None  # TF1: (RunOptions, RunMetadata), handed to compile
        self.tf1_steps = []
        self.torch_prof = None
        self.torch_verbose = None
        self.wrapped = []
        if self.backend == "tensorflow":
            import tensorflow as tf
            self.tf_major = int(tf.__version__.split(".")[0])
            self.tf_version = tuple(int(part) for part in tf.__version__.split(".")[:2] if part.isdigit())
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

    def cut(self, clock):
        """The window's step was ended inside, by the step watchdog: the end marker and the window say so, with
        the time of the cut (ms since the epoch, oneDNN's clock), so the attribution bounds the primitive that was
        still running. The backend is not stopped (TensorFlow writes its trace only then, after the step)."""
        if self.kind is None:
            return
        wall_ms = (clock() - self.t0) * 1000.0
        cut_at = time.time()
        flush_native_stdout()
        sys.stdout.write("%s %.3f ms_per_step %.3f steps 1 kind %s cut_in_step 1\n"
                         % (WINDOW_END, cut_at, wall_ms, self.kind))
        sys.stdout.flush()
        window = self.windows[self.kind]
        window.pop("xplane", None)
        window["window"] = {"kind": self.kind, "steps": 1, "wall_ms": round(wall_ms, 3), "total_ms": round(wall_ms, 3),
                            "cut_in_step": True, "cut_at_ms": round(cut_at * 1000.0, 3)}
        self.kind = None

    def names_running_kernel_from_start(self, dtype, flags):
        """Whether a cut inside the first step keeps its op source, before any trace could tell: oneDNN prints
        creation lines (as names_running_kernel asks), and TensorFlow's own rule hands `dtype`'s ops to oneDNN on a
        CPU with these flags (ONEDNN_DTYPE_FLAGS), in a TensorFlow taken at that rule (ONEDNN_RULE_FROM_TF)."""
        if self.backend != "tensorflow" or not self.onednn or (self.tf_version or (0,)) < ONEDNN_RULE_FROM_TF:
            return False
        if "profile_create" not in os.environ.get("ONEDNN_VERBOSE", ""):
            return False
        return onednn_computes(dtype, flags)

    def names_running_kernel(self):
        """Whether a cut inside a step keeps its op source: oneDNN's creation lines, printed before a primitive
        runs, name the one still running (TensorFlow 2 with ONEDNN_VERBOSE's profile_create), and the first
        step's trace shows that oneDNN runs the ops (where TensorFlow runs its own kernels oneDNN prints nothing,
        and the trace the cut loses is the only source)."""
        if self.backend != "tensorflow" or (self.tf_major or 0) < 2 or not self.onednn:
            return False
        if "profile_create" not in os.environ.get("ONEDNN_VERBOSE", ""):
            return False
        trace = (self.windows.get("first_step") or {}).get("xplane")
        if not trace:
            return False
        try:
            with open(trace, "rb") as fh:
                return ONEDNN_OP_MARK in fh.read()
        except (IOError, OSError):
            return False

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
        return self.window_result(kind)

    def window_result(self, kind):
        """What the engine needs about the window `kind`, the others left as they are (a rounds process profiles
        several configurations, each its own window)."""
        out = dict(self.windows.get(kind) or {})
        out.pop("folder", None)
        if kind not in self.windows:
            self.errors.append("no %s window was recorded" % kind)
        out.update({"backend": self.backend, "onednn": bool(self.onednn), "dir": self.root})
        if self.errors:
            out["error"] = "; ".join(self.errors)[:2000]
        return out


def labelled_call(torch, name, original):
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
    first-step bound, or the only one besides the step the slow-step bound ends the run at: it is profiled, to be
    sure; so is each later warm-up step, `bound_step`, since the
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
        self.watchdog = None
        self.snapshot = None
        self.report_cut = None
        self.in_step = None  # None until the first bounded step: whether a cut inside it keeps the op source
        self.dtype = None  # the 16-bit dtype the run computes in (float16 | bfloat16), for the first step's cut

    def cut_inside_steps(self, snapshot, report, dtype=None):
        """Let the step watchdog end a step that passes the bound inside it, where the op source survives that
        (WindowProfiler.names_running_kernel, and for the first step, before it has a trace,
        names_running_kernel_from_start with `dtype`; elsewhere the run is cut after the step, as without this).
        snapshot(): what the report needs that cannot be read while a step runs (called between steps, outside
        the timed time); report(): emit the run's result (called on the watchdog's thread, then the process ends)."""
        self.snapshot, self.report_cut, self.dtype = snapshot, report, dtype
        self.watchdog = StepWatchdog(self.timer.clock, self._cut)

    def _cut(self, elapsed_ms):
        self.timer.cut_in_step(elapsed_ms)
        if self.profiler is not None:
            self.profiler.cut(self.timer.clock)
        self.report_cut()

    def _arm(self):
        timer, profiler = self.timer, self.profiler
        if self.watchdog is None or not timer.judges_next_step():
            return
        if self.in_step is None:
            self.in_step = profiler is not None and profiler.names_running_kernel()
            if self.in_step:
                self.snapshot()
                emit("log", message="a step past the slow-step bound is ended at the bound: oneDNN names the "
                                    "kernel still running")
            timer.skip_time()
            if profiler is not None and profiler.kind is not None:
                profiler.t0 = timer.last  # the window is the step: the look at the trace and the snapshot are not
        if self.in_step and profiler.kind == "bound_step":  # the step is profiled: its oneDNN lines are the window
            self.watchdog.arm(timer.last, timer.bound_ms)

    def epoch_begin(self, epoch):
        self.epoch = epoch

    def train_begin(self, model):
        timer, profiler = self.timer, self.profiler
        first = timer.start is None
        if profiler is not None and timer.may_be_bound and first:
            profiler.model = model
            profiler.start("first_step", timer.clock)
        cut_first = (first and self.watchdog is not None and profiler is not None and profiler.kind == "first_step"
                     and timer.judges_first_step()
                     and profiler.names_running_kernel_from_start(self.dtype, cpu_flags()))
        if cut_first:
            self.snapshot()
            emit("log", message="a first step past its bound is ended at the bound: TensorFlow hands %s to oneDNN "
                                "here, whose creation lines name the kernel still running" % self.dtype)
        timer.train_begin()
        if cut_first:
            profiler.t0 = timer.last  # the window is the step: the snapshot is not in it
            self.watchdog.arm(timer.last, timer.first_bound_ms)

    def step_end(self, model, logs, batch=None, params=None):
        timer, profiler = self.timer, self.profiler
        if self.watchdog is not None:
            self.watchdog.disarm()  # waits, where the watchdog is cutting this step, until the process ends
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
        if not stop:
            self._arm()
        return stop

    def train_end(self):
        if self.watchdog is not None:
            self.watchdog.disarm()
        profiler = self.profiler
        if profiler is not None and profiler.kind is not None:
            profiler.stop(len(self.timer.window_ms) or 1, self.timer.clock)

    def result_fields(self):
        """What the run's result says about the bound and the window (both runners)."""
        timer, out = self.timer, {}
        if timer.bound:
            out["bound"] = True
            out["bound_limit_ms"] = round(timer.bound_limit_ms, 3)
            if timer.bound_on is not None:
                out["bound_on"] = timer.bound_on  # "first_step": its one step includes one-time work
        if timer.cut:
            out["cut_in_step"] = True
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
        return "first_step" if timer.bound_on == "first_step" or len(timer.warmup_ms) <= 1 else "bound_step"


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
