# -*- coding: utf-8 -*-
"""Interleaved rounds for the user's own script: every precision of the comparison timed in one process.

The script runs once per configuration, in this one process: float32 first (Keras loads then, under the
private keras.json the runner made), then each other precision with the global floatx and dtype policy set
as that precision's own process would have them, then float32 once more as the A/A control. The script's
first fit() / fit_generator() call is not run: its model and its arguments are kept, and the script stops
there (it may be half-way through its own main). Then rounds.interleave times them all, a short block of
each in an order shuffled every round; a block is the script's own fit() call with the script's own data and
callbacks, stopped after its steps, without validation (which would run after the block's last step).

What cannot be replayed this way is said, and the rounds fail (each precision's ratio then rests on its own
process): a script that trains with train_on_batch or a custom loop, or one whose input runs out (a one-shot
generator) before a block is done.

Runs inside the target Python beside script_runner.py: valid Python 2.7 and 3.5, stdlib + the framework.
"""
from __future__ import division, print_function

import rounds

FIT_METHODS = ("fit", "fit_generator")
# Positional indexes (after self) of what the runner and a block change: fit(x, y, batch_size, epochs, verbose,
# callbacks, validation_split, validation_data, ...), fit_generator(generator, steps_per_epoch, epochs, verbose,
# callbacks, validation_data, ...) in Keras 2.1-2.3 and tf_keras.
POSITIONS = {
    "fit": {"epochs": 3, "callbacks": 5, "validation_split": 6, "validation_data": 7},
    "fit_generator": {"epochs": 2, "callbacks": 4, "validation_data": 5},
}
# What "no validation" is for each validation argument the script may have given.
NO_VALIDATION = {"validation_split": 0.0, "validation_data": None}
VALIDATION_ONLY = ("validation_freq", "validation_steps", "validation_batch_size")
# A block stops itself after its steps (model.stop_training); its epochs only have to outlast it, and a
# step that spans two epochs is not timed.
BLOCK_EPOCHS = 1000000


class Captured(BaseException):
    """Raised where the script calls fit(): the call is kept, the rest of the script does not run. A
    BaseException, so the script's own `except Exception:` cannot swallow it."""


class NotReplayable(Exception):
    """This script cannot be timed in interleaved rounds (why is the message)."""


class Capture(object):
    """The runner's hook for training calls while the script runs under one configuration."""

    def __init__(self):
        self.calls = []

    def __call__(self, method, orig, model, args, kwargs):
        if method not in FIT_METHODS:
            raise NotReplayable("the script trains with %s, which interleaved rounds cannot replay (they "
                                "replay a fit() call)" % method)
        self.calls.append((method, orig, model, tuple(args), dict(kwargs)))
        raise Captured()


def with_callback(method, args, kwargs, callback):
    """A training call's arguments with `callback` added to its callbacks, where the script passed them
    (positionally or by keyword)."""
    index = POSITIONS.get(method, {}).get("callbacks")
    if index is not None and index < len(args):
        args = list(args)
        args[index] = list(args[index] or []) + [callback]
        return tuple(args), kwargs
    kwargs = dict(kwargs)
    kwargs["callbacks"] = list(kwargs.get("callbacks") or []) + [callback]
    return args, kwargs


def block_arguments(method, args, kwargs, callback):
    """The script's own fit() arguments for one block: a timing callback added, epochs enough to outlast
    the block, validation off."""
    args, kwargs = with_callback(method, args, kwargs, callback)
    positions = POSITIONS[method]
    args = list(args)
    kwargs = dict(kwargs)

    def given(name):
        index = positions.get(name)
        return name in kwargs or (index is not None and index < len(args))

    def put(name, value):
        index = positions.get(name)
        if index is not None and index < len(args):
            args[index] = value
        else:
            kwargs[name] = value

    put("epochs", BLOCK_EPOCHS)
    kwargs.pop("initial_epoch", None)
    for name, off in NO_VALIDATION.items():
        if name in positions and given(name):
            put(name, off)
    for name in VALIDATION_ONLY:
        kwargs.pop(name, None)
    return tuple(args), kwargs


def _fit_block(keras, method, orig, model, args, kwargs):
    def run_block(steps, block):
        callback = rounds.timing_callback(keras, block, stop_after=steps)
        block_args, block_kwargs = block_arguments(method, args, kwargs, callback)
        orig(model, *block_args, **block_kwargs)
    return run_block


def run_script_rounds(args, session, run_script, keras_api, emit):
    """Capture one fit() call per configuration, then time them in interleaved rounds.

    run_script() runs the script once and says whether a training call was captured; keras_api(module,
    name) is the runner's view of the Keras the script loaded (for the precision switches)."""
    rounds.check_setting(args.variant)
    precisions = [p for p in args.rounds_of.split(",") if p]
    if "float32" not in precisions:
        raise NotReplayable("interleaved rounds pair every precision with float32: none was asked")
    labels = ["float32"] + [p for p in precisions if p != "float32"] + [rounds.AA_CONTROL]
    capture = Capture()
    session.capture = capture
    api = defaults = None
    configs = []
    emit("phase", phase="build")
    try:
        for label in labels:
            precision = "float32" if label == rounds.AA_CONTROL else label
            if api is not None:
                rounds._set_precision(api, precision, defaults)
            if not run_script():
                raise NotReplayable("the script ended without calling fit() under %s: interleaved rounds "
                                    "replay a fit() call" % precision)
            if api is None:  # the script's first run loaded Keras, under float32's keras.json
                api = keras_api(session.keras, session.keras_name)
                defaults = (api.floatx(), rounds._policy_name(api) or "float32")
            method, orig, model, fit_args, fit_kwargs = capture.calls[-1]
            rounds._check_dtypes(model, precision)
            configs.append(rounds.Config(label, precision,
                                         _fit_block(api.keras, method, orig, model, fit_args, fit_kwargs)))
            rounds._set_precision(api, "float32", defaults)
    finally:
        session.capture = None
    # The blocks call the unwrapped fit; a Keras whose fit calls another wrapped fit inside (Keras 2.1's
    # Sequential) must not be captured or timed twice.
    session.depth += 1
    try:
        result = rounds.interleave(configs, args, api, defaults, emit)
    finally:
        session.depth -= 1
    result["fit_method"] = capture.calls[0][0]
    return result
