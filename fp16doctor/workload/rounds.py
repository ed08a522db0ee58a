# -*- coding: utf-8 -*-
"""Interleaved rounds: every precision of one comparison group timed in one process, so drift of a shared
machine (another job, a thermal limit, a noisy neighbour) hits all of them alike.

Each precision gets its own model, built and compiled under its own floatx or dtype policy, and its own
generator (whose batches follow floatx, as the user's did). A round times one short block of each, in an
order shuffled every round; a block is one fit() call whose first step (a new iterator) is dropped.
A second float32 model runs as an A/A control: the ratio of two identical configurations shows the noise
floor. Rounds fill the time budget, never fewer than --min-rounds, and stop sooner once every ratio is known to
within --rounds-precision.

Runs inside the target Python beside run_workload.py: valid Python 3.5, stdlib + numpy + the framework.
"""
from __future__ import division, print_function

import random

import frameworks
from compat import perf_counter
from contention import contention, reading
from paired import PRECISION_MIN_ROUNDS, ratio_half_width, unsettled
from protocol import (  # AA_CONTROL: float32's 2nd model
    AA_CONTROL, BLOCK_TARGET_S, MODEL_VARIANTS, ROUNDS_VARIANTS, VARIANT_LABEL_SEP, compute_dtype, is_mixed,
    variable_dtype, window_steps)

# A profiled configuration's window kind (and folder): this prefix and its label.
WINDOW_PREFIX = "rounds_"

MAX_BLOCK_STEPS = 20
# A slow step's block times one step: two steps of one block differ by 1-3 %, blocks of one model by 5-10 % on a
# shared 2-core machine, so shorter rounds (their blocks closer in time, more of them) pair better.
MIN_BLOCK_STEPS = 1
# A block of more than one step times at least three: its median is then a step of its own, which one stray step
# cannot move, where a block of two is their mean: a 2-core VM's mixed_bfloat16 run stepped in 571 and 666 ms
# among fifty steps of about 90 ms.
MIN_MEDIAN_BLOCK_STEPS = 3


def _rounded(value):
    return None if value is None else round(value, 3)


def widest_ratio(configs):
    """The widest relative half-width of every configuration's ratio against float32 (its A/A control's
    included); None where float32 is not among them or a ratio has no interval yet."""
    reference = next((c for c in configs if c.label == reference_label([c.label for c in configs])), None)
    if reference is None or len(configs) < 2:
        return None
    widths = [ratio_half_width(reference.rounds, c.rounds) for c in configs if c is not reference]
    return None if any(w is None for w in widths) else max(widths)


def _unsettled_configs(configs):
    """The configurations rounds go on with past their budget: each precision whose speed-up over the reference is
    beyond the equivalence band with an interval still reaching 1, or an effect the A/A control cannot yet tell from
    two identical models (paired.unsettled), with the reference and its A/A control beside it; none where every such
    comparison is settled."""
    labels = [c.label for c in configs]
    reference = next((c for c in configs if c.label == reference_label(labels)), None)
    if reference is None:
        return []
    control = next((c.rounds for c in configs if c.label == AA_CONTROL), None)
    unsure = [c for c in configs if c is not reference and c.label != AA_CONTROL and config_of(c.label)[1] is None
              and unsettled(reference.rounds, c.rounds, control)]
    return [c for c in configs if c is reference or c.label == AA_CONTROL] + unsure if unsure else []


def _median(values):
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return None
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


class _BlockTimer(object):
    """Step ends of one fit() call: the time between consecutive ends is a step, end to end; the first step
    (from the call's start: a new iterator, the epoch's first batch) is left out, and so is a step that spans
    the start of a new epoch (epoch-end callbacks, a new iterator)."""

    def __init__(self):
        self.began = None  # when the fit() call began (its train_begin)
        self.ends = []
        self.losses = []
        self.crossed = []  # indexes into ends: the step ending there began in the epoch before

    def train_begin(self):
        if self.began is None:
            self.began = perf_counter()

    def first_step_ms(self):
        """The call's first step from its start, as a run's own first step is timed (tracing included in a
        model's first call); None where the start was not seen."""
        if self.began is None or not self.ends:
            return None
        return (self.ends[0] - self.began) * 1000.0

    def epoch_begin(self):
        if self.ends:
            self.crossed.append(len(self.ends))

    def step_end(self, logs):
        loss = (logs or {}).get("loss")
        self.losses.append(float(loss) if loss is not None else None)  # waits for the device first
        self.ends.append(perf_counter())

    def steps_ms(self):
        return [(self.ends[i] - self.ends[i - 1]) * 1000.0 for i in range(1, len(self.ends))
                if i not in self.crossed]


class _BoundCheck(object):
    """The slow-step bound of a run of its own (--first-bound-ms, --bound-ms: engines/spec.py), on the warm-up of a
    configuration that has none: a first step past the first-step bound, or a later one past the bound, ends its
    warm-up there, and `passed` says why. The step is not cut inside: it ends first (one slow step is the cost)."""

    def __init__(self, keras, block, args):
        self.block = block
        self.first_bound_ms = getattr(args, "first_bound_ms", None)
        self.bound_ms = getattr(args, "bound_ms", None)
        self.passed = None
        check = self

        class _Callback(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if check.judge():
                    self.model.stop_training = True

            def on_batch_end(self, batch, logs=None):  # Keras 2.0-era loops call only this one
                if not hasattr(keras.callbacks.Callback, "on_train_batch_end"):
                    self.on_train_batch_end(batch, logs)

        self.callback = _Callback()

    def judge(self):
        block = self.block
        if len(block.ends) == 1:
            first = block.first_step_ms()
            if self.first_bound_ms is not None and first is not None and first > self.first_bound_ms:
                self.passed = "its first step took %.0f ms, past the first-step bound of %.0f ms" % (
                    first, self.first_bound_ms)
        else:
            steps = block.steps_ms()
            if self.bound_ms is not None and steps and steps[-1] > self.bound_ms:
                self.passed = "a warm-up step took %.0f ms, past the slow-step bound of %.0f ms" % (
                    steps[-1], self.bound_ms)
        return self.passed is not None


def timing_callback(keras, block, stop_after=None):
    """A Keras callback feeding `block`; with stop_after, it stops fit() after that many steps (fit checks
    model.stop_training after every step, Keras 3 and tf.keras alike)."""
    class _RoundsCallback(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            block.train_begin()

        def on_epoch_begin(self, epoch, logs=None):
            block.epoch_begin()

        def on_train_batch_end(self, batch, logs=None):
            block.step_end(logs)
            if stop_after is not None and len(block.ends) >= stop_after:
                self.model.stop_training = True

        def on_batch_end(self, batch, logs=None):  # Keras 2.0-era loops call only this one
            if not hasattr(keras.callbacks.Callback, "on_train_batch_end"):
                self.on_train_batch_end(batch, logs)

    return _RoundsCallback()


class Config(object):
    """One configuration of the comparison: its label, its precision, and how to run one block of it:
    run_block(steps, block) trains `steps` batches in one fit() call, feeding `block` (a _BlockTimer)."""

    def __init__(self, label, precision, run_block, room=None):
        self.label = label
        self.precision = precision
        self.run_block = run_block
        self.room = room  # the most batches one block can run (one epoch of a finite input), None: unknown
        self.block_steps = 2
        self.first_step_ms = None  # its first fit() call's first step (tracing included)
        self.warmup_step_ms = None  # the median of the warm-up's later steps
        self.rounds = []
        self.losses = []
        self.model = None  # set where the configuration is profiled in this process (run_rounds)
        self.left_out = None  # why it left the rounds: its warm-up passed the slow-step bound
        self.facts = {}  # what a run of its own would say of it besides its steps: its model, its input
        self.window_ms = []  # the profiled block's steps


def _set_precision(api, precision, defaults):
    """The global floatx and dtype policy this precision's model was built under (they are read again at
    call time by some layers and losses, so each block runs under its own): frameworks.apply_precision, imported
    with this module (the script runner takes its own modules off sys.path before the user's script runs)."""
    frameworks.apply_precision(api, precision, defaults)


def _check_dtypes(model, precision):
    """The model really is in its precision: its first weighted layer's variables (and compute, for mixed) say so.
    A model built in another precision would time the wrong thing, so the rounds stop instead."""
    # The first layer with variables (a functional model's first layer is its input, which has none).
    layer = next((one for one in model.layers if getattr(one, "weights", None)), model.layers[0])
    variable = str(getattr(layer, "dtype", "") or "")
    compute = str(getattr(layer, "compute_dtype", "") or variable)
    expected = ((variable_dtype(precision), compute_dtype(precision)), (variable, compute))
    if variable and expected[0] != expected[1]:
        raise RuntimeError("the %s model was built with %s variables and %s compute" % (precision, variable, compute))


def _policy_name(api):
    mp = getattr(api.keras, "mixed_precision", None)
    if mp is None:
        return None
    for getter in ("dtype_policy", "global_policy"):
        fn = getattr(mp, getter, None)
        if fn is not None:
            policy = fn()
            return getattr(policy, "name", None) or str(policy)
    return None


def check_setting(variant):
    """Rounds time one process's setting: a variant that changes a model or its input is not one they apply."""
    if variant not in ROUNDS_VARIANTS:
        raise ValueError("interleaved rounds time a setting of the whole process (%s), not %s"
                         % (", ".join(ROUNDS_VARIANTS), variant))


def reference_label(labels):
    """The configuration every ratio of the rounds is against: float32 as written, else the first float32 with a
    change (another Keras backend's rounds time float32 with batches in memory only)."""
    if "float32" in labels:
        return "float32"
    return next((label for label in labels if label != AA_CONTROL and config_of(label)[0] == "float32"), None)


def config_of(label):
    """A rounds configuration's precision and the change to its model or input it times (protocol.MODEL_VARIANTS),
    from its label: "float16" is (float16, None), "float32+synthetic_input" (float32, synthetic_input); the A/A
    control is float32's."""
    if label == AA_CONTROL:
        return "float32", None
    precision, _, variant = label.partition(VARIANT_LABEL_SEP)
    return precision, variant or None


def run_rounds(args, api, train_dir, build_model, make_generator, emit, clock=perf_counter, profiler=None,
               process_started=None, device="cpu"):
    """Time every configuration in args.rounds_of in interleaved rounds, each with its own model of the built-in
    workload, in the process's setting (args.variant); the result's fields, rounds included. A label names a
    precision, or a precision with a change to its model or its input ("float32+synthetic_input": an experiment
    timed beside the configuration it changes). The precisions in args.profile_rounds have no run of their own:
    each gets a profiled block after the warm-up (`profiler`, a window.WindowProfiler), and what its run would have
    said of its model and its input."""
    check_setting(args.variant)
    labels = [p for p in args.rounds_of.split(",") if p]
    profiled = [p for p in (getattr(args, "profile_rounds", None) or "").split(",") if p in labels]
    defaults = (api.floatx(), _policy_name(api) or "float32")
    configs = []
    emit("phase", phase="build")
    # The A/A control: a second model of the reference configuration (float32 as written, or its in-memory one).
    aa_of = reference_label(labels) or "float32"
    for label in labels + [AA_CONTROL]:
        precision, variant = config_of(aa_of if label == AA_CONTROL else label)
        if variant is not None:
            config = _variant_config(args, api, train_dir, build_model, make_generator,
                                     aa_of if label == AA_CONTROL else label, device, defaults, label in profiled)
            config.label = label
            configs.append(config)
            continue
        _set_precision(api, precision, defaults)
        generator = make_generator(api, train_dir, args.height, args.width, args.batch_size)
        model = build_model(api, args.height, args.width, is_mixed(precision))
        _check_dtypes(model, precision)
        facts = _run_facts(generator, model, args.input_batches) if label in profiled else {}
        data = _tf_input(api, generator)
        configs.append(Config(label, precision, _fit_block(api, model, generator if data is None else data),
                              # One fit() call over the generator is one epoch of at most len(generator)
                              # batches; the tf.data input goes on for as long as a block needs.
                              room=None if data is not None else len(generator)))
        if label in profiled:
            configs[-1].model, configs[-1].facts = model, facts
        _set_precision(api, "float32", defaults)
    block = _profiled_block(api, profiler, args.profile_steps, clock) if profiled and profiler is not None else None
    result = interleave(configs, args, api, defaults, emit, clock, profile_block=block,
                        process_started=process_started)
    own = _own_run_fields(configs, profiled, profiler) if profiled else {}
    # A changed model's configuration: what its run of its own would say of the change (its record is made from
    # these rounds).
    own.update((c.label, dict(c.facts)) for c in configs
               if config_of(c.label)[1] is not None and not c.left_out and c.label not in own)
    if own:
        result["own_run"] = own
    return result


def _variant_config(args, api, train_dir, build_model, make_generator, label, device, defaults, profiled=False):
    """The configuration of a label with a change to its model or its input, built as its run of its own builds
    it (run_workload.py), its model kept to profile where `profiled` (a GPU's in-memory control, with no run of its
    own); left out of the rounds, with why, where the change does not apply here, or not in a
    process that holds other models (a Keras whose generator takes no dtype gets float32 batches by redirecting
    K.floatx() for every generator in the process), or where building it failed: the engine then runs it on its
    own, and the rounds go on without it."""
    from events import Skip
    from frameworks import apply_variant
    from model import accepts_batch_dtype, check_batches, host_arrays, jit_compile_of, variant_changes
    from protocol import in_memory_batch_count

    precision, variant = config_of(label)
    try:
        if variant not in MODEL_VARIANTS or args.variant != "original":
            raise Skip("%s changes a model or its input: it is timed in the original's rounds only" % variant)
        applied = apply_variant(api, variant, device, {})
        if variant == "float32_batches" and not accepts_batch_dtype(api):
            raise Skip("float32_batches: this Keras' generator takes no dtype, and its float32 batches would be "
                       "every other model's in this process too")
        _set_precision(api, precision, defaults)
        batches_in, changes = variant_changes(variant)
        generator = make_generator(api, train_dir, args.height, args.width, args.batch_size, batches_in)
        if host_arrays(generator) is not None:
            applied["host_arrays"] = host_arrays(generator)
        built = str(generator[0][0].dtype)
        check_batches(variant, built)
        model = build_model(api, args.height, args.width, is_mixed(precision), **changes)
        _check_dtypes(model, precision)
        source = generator
        if variant == "synthetic_input":
            count = in_memory_batch_count(args.batch_size, args.height, args.width, MAX_BLOCK_STEPS + 1)
            source = _in_memory(api, generator, count)
        data = _tf_input(api, source)
        config = Config(label, precision, _fit_block(api, model, source if data is None else data),
                        room=None if data is not None else len(source))
        config.facts = _model_facts(model)
        config.facts.update(variant_applied=applied, batch_dtype=built, jit_compile=jit_compile_of(model))
        if profiled:
            config.model = model
    except Exception as exc:  # noqa: BLE001  (one experiment that cannot be built never ends the rounds)
        config = Config(label, precision, None)
        config.left_out = str(exc) if isinstance(exc, Skip) else "%s: %s" % (exc.__class__.__name__, exc)
    _set_precision(api, "float32", defaults)
    return config


def _in_memory(api, generator, count):
    """The same model's input with its batches already made: the generator's first `count` batches, kept and
    served as the generator serves them (by index, an epoch of `count`), so the rounds feed it as they feed the
    original, and what differs is producing the batches (a run of its own's synthetic_input, in a rounds process)."""
    kept = [tuple(generator[i % len(generator)]) for i in range(count)]

    class InMemory(api.keras.utils.Sequence):
        def __len__(self):
            return len(kept)

        def __getitem__(self, index):
            return kept[index % len(kept)]

        def on_epoch_end(self):
            pass

    return InMemory()


def _run_facts(generator, model, input_batches):
    """What a run of its own measures of a configuration besides its steps: its model (the attribution names
    layers from it) and one batch's time and dtype from its generator (model.time_input)."""
    from model import time_input

    input_ms, batch_dtype = time_input(generator, input_batches)
    facts = _model_facts(model)
    facts.update(input_time_ms=input_ms, batch_dtype=batch_dtype)
    return facts


def _model_facts(model):
    """A model as a run of its own describes it (model.describe_model), with the names its layers would have as
    the first model of a process (`layer_names`)."""
    from model import describe_model

    described = describe_model(model)
    names = [layer.get("name") for layer in described.get("layers") or []]
    return {"model": described, "layer_names": first_model_names(names)}


def first_model_names(names):
    """{name: the name its layer would have in a process that built no model before}, for the names that differ:
    Keras numbers each layer name's base across the process (conv2d, conv2d_1, ...), so a rounds process's later
    models get conv2d_12 ...; a run of its own is the first model of its process, and its ops compare by name."""
    seen, renamed = {}, {}
    for name in names:
        if not name:
            continue
        base, _, suffix = name.rpartition("_")
        if not (base and suffix.isdigit()):
            base = name
        count = seen.get(base, 0)
        seen[base] = count + 1
        first = base if count == 0 else "%s_%d" % (base, count)
        if first != name:
            renamed[name] = first
    return renamed


def _profiled_block(api, profiler, profile_steps, clock):
    """run(config, block, warmup, callbacks, stopped): a configuration's warm-up and its profiled window in one fit()
    call. Its first `warmup` steps are the warm-up (`block` times them; `callbacks`, the slow-step bound, may end the
    call there: `stopped()` then says so and no window is opened); the next steps are the window, `profile_steps` of
    them, fewer for a long step (protocol.window_steps on the warm-up's later steps), profiled as a run's own window
    after its timed steps and kept on the configuration (window_ms). One call, not two: the window needs no new
    call's first step to run outside it (2 s on a 2-core AVX2 EPYC for float16)."""
    keras = api.keras

    def run(config, block, warmup, callbacks, stopped):
        kind = WINDOW_PREFIX + config.label
        ends = []
        window = []  # its steps, once it is open

        class _Profiled(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                ends.append(clock())
                if len(ends) == warmup and not stopped():
                    window.append(window_steps(max(1, profile_steps), _median(block.steps_ms())))
                    profiler.model = config.model
                    profiler.start(kind, clock)
                elif window and len(ends) > warmup and profiler.kind is not None:
                    profiler.after_step()
                    if len(ends) == warmup + window[0]:
                        profiler.stop(window[0], clock)
                        self.model.stop_training = True

            def on_batch_end(self, batch, logs=None):  # Keras 2.0-era loops call only this one
                if not hasattr(keras.callbacks.Callback, "on_train_batch_end"):
                    self.on_train_batch_end(batch, logs)

        # After the timing callback and the bound's: the window opens on what they made of the same step.
        config.run_block(warmup + max(1, profile_steps), block, *(list(callbacks) + [_Profiled()]))
        if profiler.kind is not None:  # the call ended early (its input ran out): the window has what it has
            profiler.stop(max(1, len(ends) - warmup), clock)
        # Its steps only: a Keras 2.0-era loop honours stop_training at an epoch's end, after more steps.
        config.window_ms = [(ends[i] - ends[i - 1]) * 1000.0
                            for i in range(warmup, min(len(ends), warmup + window[0]))] if window else []

    return run


def _own_run_fields(configs, profiled, profiler):
    """Per profiled configuration: its profile (the engine attributes it), its window's steps, its model and its
    input, as its run of its own would have reported them."""
    out = {}
    for config in configs:
        if config.label not in profiled or config.left_out:
            continue
        fields = dict(config.facts)
        fields.update(_loss_scales(config.model))
        if config.window_ms:
            fields["window_step_ms"] = [round(v, 3) for v in config.window_ms]
        if profiler is not None:
            fields["profile"] = profiler.window_result(WINDOW_PREFIX + config.label)
        else:
            fields["profile_error"] = "this process recorded no profile (its log says why)"
        out[config.label] = fields
    return out


def _loss_scales(model):
    """A mixed_float16 model's dynamic loss scale, first and last (model.py), as its own run reports them."""
    from model import initial_loss_scale, loss_scale

    first = initial_loss_scale(model)
    return {"scale_first": first, "scale_last": loss_scale(model)} if first is not None else {}


def _fit_block(api, model, data):
    def run_block(steps, block, *more_callbacks):
        api.fit_stream(model, data, steps, 1, [timing_callback(api.keras, block)] + list(more_callbacks))
    return run_block


def _tf_input(api, generator):
    """Keras 3 on TensorFlow: the generator as the tf.data pipeline Keras' own adapter makes of it (its batches
    through from_generator, prefetched), made once per model, endless (its position kept from block to block,
    the generator's on_epoch_end called as the data wraps), with tf.data's autotuning off. Keras makes a new
    autotuned pipeline every fit() call, and tearing one down waits for its tuning thread's next tick: 0.1-1 s
    after every block on a 2-core CPU, longer the longer the block ran (benchmarks/rounds_block_overhead.py). None elsewhere (Keras 2's fit_generator,
    tf_keras, the JAX and PyTorch backends keep the generator)."""
    if api.name != "keras3-legacy" or api.backend_name != "tensorflow":
        return None
    import numpy as np
    import tensorflow as tf

    position = [0]

    def batches():
        while True:
            index = position[0] % len(generator)
            if index == 0 and position[0]:
                generator.on_epoch_end()
            position[0] += 1
            yield tuple(generator[index])

    first = tuple(np.asarray(part) for part in generator[0])
    signature = tuple(tf.TensorSpec((None,) + part.shape[1:], tf.as_dtype(part.dtype)) for part in first)
    options = tf.data.Options()
    options.autotune.enabled = False
    return tf.data.Dataset.from_generator(batches, output_signature=signature).prefetch(
        tf.data.AUTOTUNE).with_options(options)


def interleave(configs, args, api, defaults, emit, clock=perf_counter, profile_block=None, process_started=None):
    """Warm every configuration up (its first fit() traces and compiles, and sizes its blocks; one with a model to
    profile goes on in the same call into its profiled window, profile_block, untimed), then time them in rounds,
    each round in a new order, while the next round (as long as the last) fits in args.rounds_budget_s, and at least
    args.min_rounds of them (at most args.max_rounds); with args.rounds_precision, they stop sooner where every ratio
    against float32 is known to within it (PRECISION_MIN_ROUNDS at least). With args.rounds_end_s and `process_started` (the
    clock when the process began), the rounds instead fill what is left until that many seconds after the start:
    what the process itself spent before them (import, builds, warm-ups, windows) is measured, not guessed; never
    less than args.rounds_min_s of them. Past the budget, with args.rounds_unsettled_s, the rounds go on for up to that
    long with the configurations whose comparison with float32 is unsettled (_unsettled_configs) and float32 beside
    them, until each is settled (`extended` names them). The result keeps what else used the CPU meanwhile
    (`contention`)."""
    started = clock()
    emit("phase", phase="warmup")
    for config in configs:
        if config.left_out:  # not built (run_rounds): said with the others left out
            emit("log", message="%s left out of the rounds: %s" % (config.label, config.left_out))
            continue
        block = _BlockTimer()
        _set_precision(api, config.precision, defaults)
        # The first step traces (and autotunes); the others size the blocks: the size's warm-up steps, the first
        # included (two at the quick size), as a run's own warm-up counts them. A configuration with no run of its
        # own meets the slow-step bound here, as its run would have (and leaves the rounds if it passes it).
        bound = _BoundCheck(api.keras, block, args) if config.model is not None and config.precision != "float32" \
            else None
        callbacks = [bound.callback] if bound is not None else []
        warmup = max(2, args.warmup_steps)
        if profile_block is not None and config.model is not None:
            # Its profiled window follows in the same call (untimed), unless the bound ends the warm-up first.
            profile_block(config, block, warmup, callbacks, lambda: bound is not None and bound.passed is not None)
        else:
            config.run_block(warmup, block, *callbacks)
        config.first_step_ms = block.first_step_ms()
        if bound is not None and bound.passed:
            config.left_out = bound.passed
            emit("log", message="%s left out of the rounds: %s" % (config.label, bound.passed))
            continue
        config.warmup_step_ms = _median(block.steps_ms()[:warmup - 1])  # not the window's
        step_ms = config.warmup_step_ms or 1000.0
        # A block's first step is dropped, the rest timed: at most what one fit() call holds.
        room = max(1, config.room - 1) if config.room else MAX_BLOCK_STEPS
        steps = max(MIN_BLOCK_STEPS, int(BLOCK_TARGET_S * 1000.0 / step_ms))
        config.block_steps = min(MAX_BLOCK_STEPS, room, MIN_MEDIAN_BLOCK_STEPS if steps == 2 else steps)
        emit("step", phase="warmup", config=config.label, ms=round(step_ms, 3))
    left_out = dict((c.label, c.left_out) for c in configs if c.left_out)
    configs = [c for c in configs if not c.left_out]
    rng = random.Random(args.rounds_seed)
    order = []
    emit("phase", phase="measure")
    measure_start = clock()
    budget_s = args.rounds_budget_s
    end_s = getattr(args, "rounds_end_s", None)
    if end_s is not None and process_started is not None:
        budget_s = max(0.0, process_started + end_s - measure_start)
    # Never less than this of rounds, however long the start-up took (a first step cut by the slow-step bound
    # must not eat the rounds' whole share); then, past it, up to `extra_s` more for the unsettled alone.
    budget_s = max(budget_s, getattr(args, "rounds_min_s", None) or 0.0)
    extra_s = getattr(args, "rounds_unsettled_s", None) or 0.0
    active = configs  # who takes part in the next round: all, until the budget; then the unsettled alone
    extended = []
    last_round_s = 0.0
    precision = getattr(args, "rounds_precision", None)
    before = reading()
    while True:
        done = len(order)
        if done >= args.max_rounds:
            stop = "max_rounds"
            break
        # Every ratio known well enough: more rounds would only narrow intervals already this narrow.
        if precision and done >= max(args.min_rounds, PRECISION_MIN_ROUNDS) and not extended:
            widest = widest_ratio(configs)
            if widest is not None and widest <= precision:
                stop = "precision"
                break
        # The next round would end past the budget (as long as the last one took): stop before it, not after;
        # past it, only while a comparison that would change the prescription is unsettled, with it alone.
        if done >= args.min_rounds and clock() - measure_start + last_round_s >= budget_s:
            active = _unsettled_configs(configs) if extra_s > 0 else []
            if not active:
                stop = "settled" if extended else "time_budget"
                break
            if clock() - measure_start + last_round_s >= budget_s + extra_s:
                stop = "unsettled_budget"
                break
            extended = [c.label for c in active]
        round_start = clock()
        this_round = list(active)
        rng.shuffle(this_round)
        order.append([c.label for c in this_round])
        for config in this_round:
            block = _BlockTimer()
            _set_precision(api, config.precision, defaults)
            config.run_block(config.block_steps + 1, block)
            steps = block.steps_ms()
            if not steps:
                raise RuntimeError("a block of %s timed no step (its input ran out after %d batch(es))"
                                   % (config.label, len(block.ends)))
            config.rounds.append(_median(steps))
            config.losses.extend(block.losses)
            emit("step", phase="round", index=done, config=config.label, ms=round(config.rounds[-1], 3))
        last_round_s = clock() - round_start
    _set_precision(api, "float32", defaults)
    return {
        "status": "ok",
        # What else used the CPU while the rounds measured (contention.py).
        "contention": contention(before, reading()),
        # Past the budget, the configurations still timed (the reference and its A/A control beside them).
        "extended": extended,
        "rounds": {c.label: [round(v, 3) for v in c.rounds] for c in configs},
        "block_steps": {c.label: c.block_steps for c in configs},
        # Each configuration's warm-up: its first step (tracing included) and its later steps' median.
        "warmup": {c.label: {"first_step_ms": _rounded(c.first_step_ms), "step_ms": _rounded(c.warmup_step_ms)}
                   for c in configs},
        "order": order,
        "stop_reason": stop,
        # The widest ratio's relative half-width when the rounds stopped, against the target they stop at.
        "stop_precision": {"target": precision, "widest": _rounded(widest_ratio(configs))} if precision else None,
        "losses": {c.label: [None if v is None or v != v or v in (float("inf"), float("-inf")) else round(v, 6)
                             for v in c.losses] for c in configs},
        "timing": {"measure_s": round(clock() - measure_start, 3), "total_s": round(clock() - started, 3)},
        "left_out": left_out,
    }
