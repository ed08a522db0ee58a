# -*- coding: utf-8 -*-
"""What both sides of the process boundary agree on: the engine (fp16doctor's host side) imports this
module as fp16doctor.workload.protocol, the workload (the target Python) as `protocol`, from beside its
own files. Each name is defined here and nowhere else (tests/unit/workload/test_workload_protocol.py).

Valid Python 3.5, and it imports nothing: it runs in the oldest pinned stack as it is.
"""

# The workload's events: one line on stdout each, this prefix and one JSON object ("event": its kind).
PREFIX = "@@fp16doctor "

# ---------------------------------------------------------------- precisions
# Each precision's name is parsed once, here, into what it means (as Keras' own DTypePolicy parses a policy's name
# into its compute and variable dtypes): every other module asks these questions (is_16bit, is_mixed, family, ...)
# instead of comparing names.

# How a precision is applied. floatx: Keras' global float type (keras.json, or keras.config.set_floatx), every
# layer's variables and compute in it, exactly as a user sets it ("pure"); policy: a dtype policy (Keras' mixed
# precision), float32 variables and 16-bit compute.
FLOATX = "floatx"
POLICY = "policy"

# Which Keras takes it. Every Keras takes floatx float32 and float16; floatx bfloat16 only Keras 3 (Keras 2 and
# tf_keras check floatx against float16/32/64, and Keras 3's keras.json refuses it: only keras.config.set_floatx
# accepts it); a policy a Keras with a dtype-policy API (tf.keras in TF >= 2.1, or Keras 3; Keras 2.1.5 has none).
EVERY_KERAS = "every_keras"
KERAS_3 = "keras_3"
DTYPE_POLICY_API = "dtype_policy_api"

# The 16-bit families: what a device computes natively (or not), and what the analysis' tables are keyed by.
FP16 = "fp16"
BF16 = "bf16"
_FAMILIES = {"float16": FP16, "bfloat16": BF16}

# Which precisions a diagnose runs when --precision is not given: always, or where the device computes bfloat16
# (elsewhere it would only be emulated).
ALWAYS = "always"
WHERE_BFLOAT16 = "where_bfloat16"

MIXED_PREFIX = "mixed_"


class Precision(object):
    """One precision, its name parsed once: "mixed_bfloat16" is bfloat16 compute on float32 variables, applied as a
    dtype policy; "float16" is float16 compute and variables, applied as floatx."""

    __slots__ = ("name", "compute_dtype", "variable_dtype", "applied", "keras", "default")

    def __init__(self, name, keras, default=None):
        self.name = name
        if name.startswith(MIXED_PREFIX):
            self.compute_dtype, self.variable_dtype, self.applied = name[len(MIXED_PREFIX):], "float32", POLICY
        else:
            self.compute_dtype, self.variable_dtype, self.applied = name, name, FLOATX
        self.keras = keras  # which Keras takes it: EVERY_KERAS, KERAS_3 or DTYPE_POLICY_API
        self.default = default  # in the default matrix: ALWAYS, WHERE_BFLOAT16 or None

    @property
    def family(self):
        """FP16 or BF16 for a 16-bit precision, None for float32."""
        return _FAMILIES.get(self.compute_dtype)

    @property
    def mixed(self):
        return self.applied == POLICY

    @property
    def pure(self):
        """16-bit floatx: variables, gradients and optimizer state in the 16-bit type too."""
        return self.applied == FLOATX and self.family is not None

    def __repr__(self):
        return "Precision(%r)" % self.name


# In the order every list of precisions follows: float32 first (the baseline), then the 16-bit ones.
PRECISION_TABLE = (
    Precision("float32", EVERY_KERAS, ALWAYS),
    Precision("float16", EVERY_KERAS, ALWAYS),
    Precision("mixed_float16", DTYPE_POLICY_API, ALWAYS),
    Precision("bfloat16", KERAS_3),
    Precision("mixed_bfloat16", DTYPE_POLICY_API, WHERE_BFLOAT16),
)
PRECISION_OF = dict((p.name, p) for p in PRECISION_TABLE)
PRECISIONS = tuple(p.name for p in PRECISION_TABLE)
MIXED_POLICIES = tuple(p.name for p in PRECISION_TABLE if p.mixed)
# What joins the default matrix where the device computes bfloat16 (or may: a remote engine's GPUs are known only
# once it runs, and the engine keeps these where one does).
DEFAULT_WHERE_BFLOAT16 = tuple(p.name for p in PRECISION_TABLE if p.default == WHERE_BFLOAT16)


def precision_of(name):
    # type: (object) -> Precision | None
    """The table's row for a precision name; None for a name that is none (a hand-written document's)."""
    try:
        return PRECISION_OF.get(name)
    except TypeError:  # unhashable: a list where a name belongs
        return None


def is_16bit(name):
    # type: (object) -> bool
    p = precision_of(name)
    return p is not None and p.family is not None


def family(name):
    # type: (object) -> str | None
    """FP16 or BF16 for a 16-bit precision; None for float32 or an unknown name."""
    p = precision_of(name)
    return p.family if p is not None else None


def is_mixed(name, of_family=None):
    # type: (object, str | None) -> bool
    """A dtype policy (of that 16-bit family, where one is named)."""
    p = precision_of(name)
    return p is not None and p.mixed and of_family in (None, p.family)


def is_pure(name, of_family=None):
    # type: (object, str | None) -> bool
    """A 16-bit floatx (of that family, where one is named): weights and optimizer state in 16 bits too."""
    p = precision_of(name)
    return p is not None and p.pure and of_family in (None, p.family)


def compute_dtype(name):
    # type: (object) -> str | None
    p = precision_of(name)
    return p.compute_dtype if p is not None else None


def variable_dtype(name):
    # type: (object) -> str | None
    p = precision_of(name)
    return p.variable_dtype if p is not None else None


def keras_json_floatx(name):
    # type: (str) -> str
    """The floatx a run's private keras.json carries: a pure precision every Keras takes is set there, before
    Keras loads, as a user sets it; every other is float32 there (floatx bfloat16 is set after import)."""
    p = PRECISION_OF[name]
    return p.compute_dtype if p.applied == FLOATX and p.keras == EVERY_KERAS else "float32"


def keras_takes(name, keras_major, dtype_policy_api):
    # type: (str, int, bool) -> bool
    """Whether a Keras of this major version, with or without a dtype-policy API, can run the precision; a name the
    table does not know (a policy the process started with, "float64") has no rule of ours to break."""
    p = precision_of(name)
    if p is None:
        return True
    needs = p.keras
    if needs == DTYPE_POLICY_API:
        return bool(dtype_policy_api)
    if needs == KERAS_3:
        return keras_major >= 3
    return True


def default_precisions(bfloat16_device):
    # type: (bool) -> tuple[str, ...]
    """The precisions a diagnose runs when --precision is not given, in the table's order."""
    return tuple(p.name for p in PRECISION_TABLE
                 if p.default == ALWAYS or (p.default == WHERE_BFLOAT16 and bfloat16_device))


# original: the script as posted; synthetic_input: the same model on batches already in memory; the rest
# are experiments that change one thing (fp16doctor/results.py VARIANT_CHANGES says what).
VARIANTS = ("original", "synthetic_input", "onednn_off", "float32_batches", "channels_padded", "tf32_off", "xla")
# The experiments that apply to a user's script: each changes the environment or a compile argument, never
# the model or its data.
SCRIPT_VARIANTS = ("original", "onednn_off", "tf32_off", "xla")
# What an experiment sets in the environment before the framework loads (onednn_off: TensorFlow only).
VARIANT_ENV = {
    "onednn_off": {"TF_ENABLE_ONEDNN_OPTS": "0"},  # TensorFlow reads it when it loads
    # Read by cuBLAS and cuDNN themselves, so it holds for every framework (NVIDIA's TF32 notes).
    "tf32_off": {"NVIDIA_TF32_OVERRIDE": "0"},
}
# The settings a whole process shares, its environment and nothing else: each is timed in interleaved rounds of
# its own, float32 beside the 16-bit precisions in the same setting. The others change a model or its input.
ROUNDS_VARIANTS = ("original", "onednn_off", "tf32_off")
# The experiments that change one model or its input, not the process: each is timed in its stack's original
# interleaved rounds, beside the configuration it changes, as a configuration labelled "<precision>+<variant>".
MODEL_VARIANTS = ("synthetic_input", "float32_batches", "channels_padded", "xla")
VARIANT_LABEL_SEP = "+"
# A variant may combine changes, joined by VARIANT_LABEL_SEP: "synthetic_input+xla" is one configuration with
# batches in memory and a compiled step, compared with the configuration that lacks its last change in VARIANTS'
# order (variant_base: float32 with batches in memory). What each change touches: two that touch the same thing
# clash (synthetic_input keeps the batches in memory in the precision's dtype, float32_batches makes them float32).
VARIANT_TOUCHES = {"synthetic_input": "the batches", "float32_batches": "the batches",
                   "channels_padded": "the first layer's input", "xla": "the training step's compilation",
                   "onednn_off": "the CPU's kernels", "tf32_off": "the GPU's float32 kernels"}
# The device each change is for alone: no device takes both oneDNN off and TF32 off.
VARIANT_DEVICE = {"onednn_off": "cpu", "tf32_off": "gpu"}


def variant_parts(variant):
    """The changes a variant makes, in VARIANTS' order: "xla+synthetic_input" is ("synthetic_input", "xla");
    "original" makes none. A name VARIANTS does not know is kept, last (variant_clash names it)."""
    if variant == "original":
        return ()
    parts = variant.split(VARIANT_LABEL_SEP)
    return tuple(sorted(parts, key=lambda p: VARIANTS.index(p) if p in VARIANTS else len(VARIANTS)))


def compose_variant(parts):
    """One variant name for these changes, in VARIANTS' order ("original" for none)."""
    return VARIANT_LABEL_SEP.join(variant_parts(VARIANT_LABEL_SEP.join(parts)) if parts else ()) or "original"


def variant_base(variant):
    """The configuration a variant is compared with: the one that differs by one change, its last in VARIANTS'
    order ("synthetic_input+xla": "synthetic_input"; a single change: "original")."""
    return compose_variant(variant_parts(variant)[:-1])


def variant_clash(variant):
    """Why a variant names no configuration, in one line ("synthetic_input+float32_batches: ..."); None where it
    names one: each part a known change, none twice, "original" alone, no two that touch the same thing
    (VARIANT_TOUCHES), no two for different devices (VARIANT_DEVICE)."""
    parts = variant.split(VARIANT_LABEL_SEP)
    unknown = [p for p in parts if p not in VARIANTS]
    if unknown:
        return "unknown variant %r" % unknown[0]
    if len(parts) == 1:
        return None
    if "original" in parts:
        return "%s: original is the workload as written and combines with no change" % variant
    twice = [p for p in parts if parts.count(p) > 1]
    if twice:
        return "%s names %s twice" % (variant, twice[0])
    for i, a in enumerate(parts):
        for b in parts[i + 1:]:
            if VARIANT_TOUCHES.get(a) == VARIANT_TOUCHES.get(b):
                return "%s: %s and %s both change %s" % (variant, a, b, VARIANT_TOUCHES[a])
            if a in VARIANT_DEVICE and b in VARIANT_DEVICE and VARIANT_DEVICE[a] != VARIANT_DEVICE[b]:
                return "%s: %s applies on a %s only and %s on a %s only" % (
                    variant, a, VARIANT_DEVICE[a].upper(), b, VARIANT_DEVICE[b].upper())
    return None


# A rounds block's timed steps are aimed at this long (a 10 ms step gets 20 of them, capped), never under one step.
BLOCK_TARGET_S = 0.4
# A profiled window is aimed at this long, in whole steps: at least one, at most the size's profile_steps. A step of
# a second or more runs every op of the model, so a second such step adds its time, not new ops (a 2 s float16 step
# on a 2-core AVX2 EPYC made two windows of 4 s each in a quick diagnose, for the ops one step names).
WINDOW_TARGET_S = 1.0


def window_steps(profile_steps, step_ms):
    """The steps of a profiled window for a step of `step_ms` (None: unknown, the size's profile_steps)."""
    if not step_ms or step_ms <= 0:
        return profile_steps
    return max(1, min(profile_steps, int(-(-WINDOW_TARGET_S * 1000.0 // step_ms))))


def in_memory_batch_count(batch_size, height, width, steps=None):
    """How many batches the in-memory input (synthetic_input) keeps: eight when they fit in 1 GiB (so epoch
    boundaries stay rare in the timing), else four; never more than `steps` (None: no cap). The host's planner
    prices making them (diagnose/rounds.py)."""
    batch_bytes = batch_size * height * width * 3 * 4
    count = 8 if 8 * batch_bytes <= 2 ** 30 else 4
    return count if steps is None else min(count, steps)


# channels_padded: Tensor Core convolutions want channel counts that are multiples of 8 (cuDNN 7 developer
# guide), so the model appends zero channels to the 3-channel input and its first conv sees this many.
PADDED_CHANNELS = 8

# The profiled window's markers on stdout; oneDNN's verbose lines between them belong to the window. The end
# marker carries the window's wall ms per step: "=== fp16doctor-window-end <epoch s> ms_per_step 24473.1 ...".
WINDOW_MARKER = "=== fp16doctor-window-"
WINDOW_START = WINDOW_MARKER + "start"
WINDOW_END = WINDOW_MARKER + "end"
# How oneDNN's verbose lines begin (oneDNN 3.x, 1.x-2.x as DNNL, 0.x as MKL-DNN).
ONEDNN_PREFIXES = ("onednn_verbose", "dnnl_verbose", "mkldnn_verbose")

# Interleaved rounds: the second float32 model, the A/A control (same configuration, its own weights).
AA_CONTROL = "float32_aa"

# The built-in workload's name in a run's `workload` section.
SEED_WORKLOAD = "seed_cnn"
# How big one run is. full: the user's script as posted (224x336 images, batch 128); quick: the size that fits
# a 2-core CPU in 90 s; smoke: a check that a stack, engine or cluster runs the whole diagnose end to end, its steps
# a sixteenth of quick's (too small to say how training at a real size goes). The engine passes a size on the
# command line; the runners default to these.
SIZES = {
    "full": {"image_height": 224, "image_width": 336, "batch_size": 128, "warmup_steps": 3, "min_steps": 10,
             "max_steps": 200, "max_measure_s": 120.0, "input_batches": 5, "profile_steps": 3},
    # A quick run's own process stops measuring after 3 s: every quick configuration the slow-step bound did not
    # cut is timed again in the interleaved rounds, whose figures replace its own (with 8 s a 2-core AVX-512 EPYC's
    # float16 and mixed_float16 runs took 19-24 s each, with 3 s 14-16 s; docs/benchmarks.md).
    "quick": {"image_height": 112, "image_width": 168, "batch_size": 32, "warmup_steps": 2, "min_steps": 5,
              "max_steps": 60, "max_measure_s": 3.0, "input_batches": 3, "profile_steps": 2},
    "smoke": {"image_height": 64, "image_width": 96, "batch_size": 8, "warmup_steps": 2, "min_steps": 5,
              "max_steps": 40, "max_measure_s": 2.0, "input_batches": 2, "profile_steps": 2},
}  # type: dict

# Environment the engine sets for a run: the folder the profile goes to (a container's, copied out after),
# and a scratch folder removed by the engine even when the run is killed.
PROFILE_DIR_ENV = "FP16DOCTOR_PROFILE_DIR"
SCRATCH_ENV = "FP16DOCTOR_SCRATCH"

# The Keras 3 backends a run may be asked to load (`--backend`, KERAS_BACKEND's values: keras/src/backend/config.py).
KERAS3_BACKENDS = ("tensorflow", "jax", "torch")
