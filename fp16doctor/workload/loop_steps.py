"""The steps of a custom training loop (no fit(), fit_generator or train_on_batch): found where the loop calls the
same step function once an iteration, and timed end to end between two of its calls, as fit()'s steps are.

A step function is one that updates weights: a tf.function whose trace called an optimizer's apply_gradients (or
Keras 3's apply), or, in an eager loop (torch, TensorFlow without tf.function), the optimizer's update itself. The
first such function called twice at the top level leads: its first call (tracing included) is the first step, each
later call ends a step, and the run's step timer (timing.StepTimer) keeps its warm-up, its measured steps and its
stop rule, so the script is stopped (Enough) once enough steps are measured. A step function's scalar result is read
as the step's loss (which also waits for the device). A jitted JAX function is not seen: such a loop stays timed as
the whole script.

Python 2.7-compatible: this runs inside the oldest pinned stacks too.
"""

from __future__ import division, print_function

import functools
import sys

from compat import perf_counter

# The optimizer methods a training step calls once per step, outermost first (Keras 3's apply_gradients calls
# apply; tf.keras and Keras 2 have apply_gradients only).
OPTIMIZER_METHODS = ("apply_gradients", "apply")
# A leader needs this many calls before its steps are timed: its first (tracing) and one more.
LEAD_CALLS = 2


class LoopSteps(object):
    """What the patched step functions report: which trains, which leads, and each of its calls' ends."""

    def __init__(self, timer, fit_seen, stop, clock=perf_counter):
        self.timer = timer
        self.fit_seen = fit_seen  # () -> True once a fit / train_on_batch call was seen: then nothing is taken
        self.stop = stop  # () -> raises what stops the script (the runner's Enough)
        self.clock = clock
        self.depth = 0
        self.tracing = []  # the keys of the top-level calls now running (a trace that calls apply marks its key)
        self.trains = set()  # keys whose trace, or whose own eager call, updated weights
        self.first = {}  # key -> (start, end) of its first top-level call
        self.calls = {}  # key -> top-level calls so far
        self.names = {}
        self.leader = None

    @property
    def name(self):
        """The leading step function's name, None before one leads."""
        return self.names.get(self.leader) if self.leader is not None else None

    def around(self, key, name, call, loss_of=None):
        """A top-level call of a candidate step function (`call` runs it): timed and marked; a nested call, or one
        after fit() was seen, runs as it is."""
        if self.depth or self.fit_seen():
            return call()
        start = self.clock()
        self.depth += 1
        self.tracing.append(key)
        try:
            result = call()
        finally:
            self.depth -= 1
            self.tracing.pop()
        if key in self.trains:
            self._mark(key, name, start, loss_of(result) if loss_of is not None else None)
        return result

    def updated(self, eager_key=None):
        """An optimizer updated weights: inside a traced step function (marks it as training), or eagerly at the
        top level (`eager_key`: the optimizer's own call is then the step function)."""
        if self.tracing:
            self.trains.add(self.tracing[-1])
        elif eager_key is not None:
            self.trains.add(eager_key)

    def _mark(self, key, name, start, loss):
        self.names.setdefault(key, name)
        if self.leader is None:
            count = self.calls.get(key, 0) + 1
            self.calls[key] = count
            if count == 1:
                self.first[key] = (start, self.clock())
                return
            if count < LEAD_CALLS:
                return
            self.leader = key
            self.timer.window_steps = 0  # no profiled window: the profiler's hooks follow fit()'s callbacks
            first_start, first_end = self.first[key]
            self.timer.start = self.timer.last = first_start
            clock, self.timer.clock = self.timer.clock, lambda: first_end
            try:
                done = self.timer.end_step(None)  # the first step: its call, tracing included
            finally:
                self.timer.clock = clock
            if done or self.timer.end_step({"loss": loss}):
                self.stop()
            return
        if key == self.leader and self.timer.end_step({"loss": loss}):
            self.stop()


def scalar_loss(result):
    """A step function's result as a loss: a scalar (a 0-d tensor or array, a float), or a dict's "loss"; None
    for anything else. Reading it waits for the device, as fit()'s loss does."""
    if isinstance(result, dict):
        result = result.get("loss")
    if isinstance(result, (list, tuple)) and result:
        result = result[0]
    shape = getattr(result, "shape", None)
    if shape is not None:
        try:
            if len(shape) != 0:
                return None
        except (TypeError, ValueError):
            return None
    try:
        return float(result)
    except (TypeError, ValueError):
        return None


def patch_tf_functions(loops):
    """Wrap tf.function's __call__ (TensorFlow 2): each eager top-level call goes through `loops`; True where patched.
    A call inside a trace (a tf.function calling another) runs as it is."""
    tf = sys.modules.get("tensorflow")
    cls = None
    for dotted in ("tensorflow.python.eager.polymorphic_function.polymorphic_function",
                   "tensorflow.python.eager.def_function"):
        module = sys.modules.get(dotted)
        if module is None and tf is not None:
            try:
                module = __import__(dotted, fromlist=["Function"])
            except ImportError:
                module = None
        cls = getattr(module, "Function", None) if module is not None else None
        if cls is not None:
            break
    if tf is None or cls is None or getattr(cls.__call__, "_fp16doctor", False):
        return False
    orig = cls.__call__
    eager = getattr(tf, "executing_eagerly", None)

    @functools.wraps(orig)
    def patched(self, *args, **kwargs):
        # fit()'s own step function is called here every step: it passes straight through, nothing built for it.
        if loops.fit_seen() or eager is None or not eager():
            return orig(self, *args, **kwargs)
        name = getattr(self, "__name__", None) or getattr(getattr(self, "_python_function", None), "__name__", None)
        return loops.around(id(self), name or "tf.function", lambda: orig(self, *args, **kwargs), scalar_loss)

    patched._fp16doctor = True
    cls.__call__ = patched
    return True


def patch_optimizers(loops, keras):
    """Wrap the Keras optimizer's weight updates (OPTIMIZER_METHODS on `keras.optimizers.Optimizer`): inside a
    traced step function they mark it as training; called eagerly at the top level, the update is the step."""
    optimizers = getattr(keras, "optimizers", None)
    cls = getattr(optimizers, "Optimizer", None) if optimizers is not None else None
    if not isinstance(cls, type):
        return False
    tf = sys.modules.get("tensorflow")
    eager = getattr(tf, "executing_eagerly", None) if tf is not None else None
    patched_any = False
    for method in OPTIMIZER_METHODS:
        orig = getattr(cls, method, None)
        if orig is None or getattr(orig, "_fp16doctor", False):
            continue

        def make(orig, method):
            @functools.wraps(orig)
            def patched(self, *args, **kwargs):
                if loops.tracing or (eager is not None and not eager()):
                    loops.updated()
                    return orig(self, *args, **kwargs)
                key = ("optimizer", id(self))
                loops.updated(key)
                return loops.around(key, "%s.%s" % (type(self).__name__, method),
                                    lambda: orig(self, *args, **kwargs))
            patched._fp16doctor = True
            return patched

        setattr(cls, method, make(orig, method))
        patched_any = True
    return patched_any
