"""Recommendations in the words and code of the run's own stack (Keras 2.1.5 is not TF 2.x is not Keras 3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fp16doctor.analysis.context import Software
from fp16doctor.analysis.pipeline_code import input_pipeline_program
from fp16doctor.analysis.values import UntestedIdea, fmt_config, fmt_ms, fmt_versus, on
from fp16doctor.knowledge.cuda import version_at_least
from fp16doctor.knowledge.frameworks import KERAS_FLOATX_BATCHES_UNTIL, has_feature
from fp16doctor.results import experiment_changes
from fp16doctor.workload.protocol import FP16, SCRIPT_VARIANTS, family, is_mixed, variant_parts


def mixed_precision_code(sw: Software) -> str:
    """How to turn on mixed precision (float32 weights, float16 compute, loss scaling) on this stack."""
    fw = sw.framework
    if fw == "keras3":
        backend = sw.keras_backend or "tensorflow"
        return (
            f"Keras {sw.keras or '3'} ({backend} backend): keep floatx float32 and set a dtype policy before "
            "building the model:\n"
            "    import keras\n"
            "    keras.mixed_precision.set_dtype_policy('mixed_float16')\n"
            "    ...\n"
            "    model.add(keras.layers.Activation('sigmoid', dtype='float32'))  # output in float32\n"
            "model.fit applies loss scaling itself (LossScaleOptimizer)."
        )
    if fw == "tf.keras":
        if has_feature("tf_keras_policy", sw.tensorflow) is False:
            if has_feature("tf_keras_policy_experimental", sw.tensorflow):
                return (
                    f"TensorFlow {sw.tensorflow} (tf.keras): keep floatx float32 and use the experimental "
                    f"policy:\n"
                    "    from tensorflow.keras.mixed_precision import experimental as mp\n"
                    "    mp.set_policy('mixed_float16')\n"
                    "    model.add(tf.keras.layers.Activation('sigmoid', dtype='float32'))"
                )
            return (
                f"TensorFlow {sw.tensorflow}: wrap the optimizer in the graph rewrite:\n"
                "    opt = tf.train.experimental.enable_mixed_precision_graph_rewrite(opt)"
            )
        return (
            f"TensorFlow {sw.tensorflow or '>= 2.4'} (tf.keras / tf_keras): keep floatx float32 and set the "
            f"policy:\n"
            "    from tensorflow.keras import mixed_precision\n"
            "    mixed_precision.set_global_policy('mixed_float16')\n"
            "    model.add(tf.keras.layers.Activation('sigmoid', dtype='float32'))  # output in float32"
        )
    if fw in ("keras2", "tensorflow"):
        where = f"Keras {sw.keras}" if sw.keras else "This stack"
        tf = sw.tensorflow or "1.x"
        if has_feature("tf_amp_graph_rewrite", sw.tensorflow):
            return (
                f"{where} on TensorFlow {tf}: multi-backend Keras has no mixed precision API; TF {tf} has "
                f"the "
                "automatic mixed precision graph rewrite for tf.keras/tf.train optimizers:\n"
                "    opt = "
                "tf.train.experimental.enable_mixed_precision_graph_rewrite(tf.keras.optimizers.RMSprop(1e-4))\n"
                "or, better, move to TF >= 2.4 and "
                "tf.keras.mixed_precision.set_global_policy('mixed_float16')."
            )
        return (
            f"{where} on TensorFlow {tf} has no mixed precision at all (the graph rewrite arrived in TF "
            f"1.14, "
            "Keras policies in TF 2.1). Keep floatx float32 here, and for fp16 speed move to TF >= 2.4:\n"
            "    pip install 'tensorflow>=2.4'\n"
            "    from tensorflow.keras import mixed_precision\n"
            "    mixed_precision.set_global_policy('mixed_float16')\n"
            "(tf.keras.preprocessing.image.ImageDataGenerator and model.fit(generator) replace "
            "fit_generator)."
        )
    if fw == "torch":
        if has_feature("torch_amp", sw.torch) is False:
            return (
                f"PyTorch {sw.torch} predates torch.cuda.amp (1.6): keep the model float32 and use NVIDIA apex, "
                "or upgrade to PyTorch >= 1.6:\n"
                "    model, opt = apex.amp.initialize(model, opt, opt_level='O1')\n"
            )
        # torch.autocast(device_type, ...) arrived in 1.10; 1.6-1.9 spell it torch.cuda.amp.autocast().
        autocast = ("torch.cuda.amp.autocast()" if version_at_least(sw.torch, "1.10") is False
                    else "torch.autocast('cuda', dtype=torch.float16)")
        return (
            f"PyTorch {sw.torch or ''}: keep the model float32 (no model.half()) and use autocast with a "
            "gradient scaler:\n"
            "    scaler = torch.cuda.amp.GradScaler()\n"
            f"    with {autocast}:\n"
            "        loss = loss_fn(model(x), y)\n"
            "    scaler.scale(loss).backward(); scaler.step(opt); scaler.update()"
        )
    if fw == "jax":
        return (
            f"JAX {sw.jax or ''}: keep parameters float32 and cast only the forward computation, e.g. "
            "with jmp:\n"
            "    policy = jmp.get_policy('params=float32,compute=float16,output=float32')\n"
            "and scale the loss (jmp.DynamicLossScale) so small gradients survive in float16."
        )
    return (
        "Keep weights in float32 and compute in float16 with your framework's mixed precision API "
        "(Keras: keras.mixed_precision.set_dtype_policy('mixed_float16'); PyTorch: torch.autocast + "
        "GradScaler)."
    )


def input_pipeline_code(sw: Software, height: int | None = None, width: int | None = None,
                        batch_size: int | None = None, program: bool = False) -> str:
    """How to take batch building off the training step's path, in the framework that ran: where its Keras has
    preprocessing layers, the images decoded once into uint8 with the rescaling and flips in the model
    (pipeline_code.py; the whole program with `program`, at the run's size); else batches built in parallel."""
    fw = sw.framework
    code = input_pipeline_program(sw, height, width, batch_size)
    if code is not None:
        where = "tf.data" if "tf.data" in code else "the arrays"
        return code if program else (
            "Decode the images once into a uint8 array, make the rescaling (Rescaling(1/255)) and the flips "
            f"(RandomFlip) layers of the model, and fit on {where}: the host builds no batch, and a quarter of "
            "float32's bytes goes to the device (the prescription's input pipeline change has the program).")
    if fw == "keras2":
        return (f"Produce batches in parallel (Keras {sw.keras or '2.x'}):\n"
                "    model.fit_generator(train_generator, steps_per_epoch=..., epochs=...,\n"
                "                        workers=4, use_multiprocessing=True, max_queue_size=20)")
    if fw == "torch":
        return ("Load batches in worker processes:\n"
                "    loader = DataLoader(dataset, batch_size=b, num_workers=4, pin_memory=True,\n"
                "                        persistent_workers=True)")
    return "Produce batches in parallel and ahead of the training step (several workers, prefetching)."


def upgrade_target(sw: Software) -> str:
    """The nearest stack with fast fp16 paths, as a pip line."""
    fw = sw.framework
    if fw in ("keras2", "tensorflow", "tf.keras"):
        return (
            "TensorFlow >= 2.4 with its matching CUDA/cuDNN (e.g. `pip install 'tensorflow[and-cuda]'` on "
            "Linux "
            "for current releases; TF 2.10 is the last with native Windows GPU support), tf.keras and the "
            "mixed_float16 policy"
        )
    if fw == "torch":
        return "PyTorch >= 1.10 (torch.autocast and GradScaler), any current CUDA build"
    if fw == "keras3":
        return f"a current Keras 3 with its {sw.keras_backend or 'tensorflow'} backend on a CUDA 12 build"
    return "a current framework release built for CUDA >= 10 and cuDNN >= 7.4"


def is_old_keras_generator(sw: Software) -> bool | None:
    """Keras < 2.2 builds ImageDataGenerator batches in K.floatx(); None when the Keras version is unknown."""
    if not sw.keras:
        return None
    return version_at_least(sw.keras, KERAS_FLOATX_BATCHES_UNTIL) is False


def upgraded(sw: Software) -> Software:
    """The same kind of stack after the upgrade `upgrade_target` names, for the code to show."""
    fw = sw.framework
    if fw in ("keras2", "tensorflow") or (
        fw == "tf.keras" and has_feature("tf_keras_policy", sw.tensorflow) is False
    ):
        # Versions left open: the code shown runs on any TF >= 2.4 (tf.keras, tf_keras or Keras 3).
        return replace(
            sw, tensorflow=None, keras=None, keras_api="tf_keras", keras_preprocessing=None, cuda=None, cudnn=None
        )
    if fw == "torch" and has_feature("torch_amp", sw.torch) is False:
        return replace(sw, torch=">= 1.10", cuda=None, cudnn=None)
    return sw


# What each adoptable variant asks of a user's own setup, beside the precision (results.VARIANT_CHANGES).
VARIANT_HOW = {
    "onednn_off": "set TF_ENABLE_ONEDNN_OPTS=0 in the environment before TensorFlow starts",
    "tf32_off": "set NVIDIA_TF32_OVERRIDE=0 in the environment (float32 without TF32)",
    "xla": "compile the training step: model.compile(..., jit_compile=True) (XLA on TensorFlow, torch.compile on "
           "torch)",
    "channels_padded": "pad the input to 8 channels (zeros) so the first convolution can use Tensor Cores",
    "float32_batches": "build the batches in float32: ImageDataGenerator(..., dtype='float32')",
}


def _precision_how(precision: str, sw: Software, on_gpu: bool, training: bool = True) -> str:
    """The one change that selects a precision in the framework the run used."""
    fw = sw.framework
    mixed = precision.startswith("mixed_")
    dtype = precision.removeprefix("mixed_")
    if precision == "float32":
        if fw == "torch":
            return "keep the model and inputs in float32, without autocast (the default)"
        if fw == "jax":
            return "keep parameters and inputs in float32 (the default)"
        if fw not in ("keras3", "tf.keras", "keras2", "tensorflow"):
            return "keep float32 weights and inputs, with no mixed precision (the default)"
        return "keep floatx float32 and no mixed precision policy (the default)"
    if fw == "keras3":
        if mixed:
            return f"keras.mixed_precision.set_dtype_policy('{precision}') before building the model"
        return f"keras.config.set_floatx('{dtype}') (or \"floatx\": \"{dtype}\" in $KERAS_HOME/keras.json)"
    if fw == "tf.keras":
        if mixed:
            if has_feature("tf_keras_policy", sw.tensorflow) is False:
                return ("tf.keras.mixed_precision.experimental.set_policy('"
                        f"{precision}') before building the model")
            return f"tf.keras.mixed_precision.set_global_policy('{precision}') before building the model"
        return f"tf.keras.backend.set_floatx('{dtype}') (or \"floatx\": \"{dtype}\" in ~/.keras/keras.json)"
    if fw in ("keras2", "tensorflow"):
        if mixed:
            return mixed_precision_code(sw).splitlines()[0]
        return f"\"floatx\": \"{dtype}\" in ~/.keras/keras.json (or K.set_floatx('{dtype}'))"
    if fw == "torch":
        device = "cuda" if on_gpu else "cpu"
        if mixed:
            # Loss scaling is training's (knowledge/modes.py): forward passes scale no gradient.
            scaler = " with a GradScaler" if family(precision) == FP16 and training else ""
            return f"with torch.autocast('{device}', dtype=torch.{dtype}): ... around the forward pass{scaler}"
        return f"model.to(torch.{dtype}) and {dtype} inputs"
    if fw == "jax":
        if mixed:
            return f"float32 parameters, the forward computation cast to jnp.{dtype} (e.g. a jmp policy)"
        return f"parameters and inputs as jnp.{dtype}"
    return f"{precision} in your framework's mixed precision API" if mixed else f"{dtype} weights and inputs"


def how_to_use(precision: str, sw: Software, variant: str = "original", on_gpu: bool = False,
               setting: str | None = None, training: bool = True) -> str:
    """The exact change for one measured configuration, in the words of the framework its run used (a variant
    fp16doctor does not know: its `setting`, as its document names the change)."""
    how = _precision_how(precision, sw, on_gpu, training)
    extra = VARIANT_HOW.get(variant) or (f"set {setting}, as the measured run did" if setting else None)
    return f"{how}; and {extra}" if extra else how


def slow_kernel_advice(sw: Software, on_gpu: bool, tried: bool = False) -> str:
    """Why a 16-bit op ran a slow kernel, for the framework and device that ran it. What to do is the phraser's,
    from the machine's measured table (the prescription); a switch nobody measured is an untested idea of the
    finding (slow_kernel_ideas)."""
    if on_gpu:
        return ("Non-Tensor-Core kernels ran these 16-bit ops: Tensor Cores need channel counts that are "
                "multiples of 8 and a cuDNN that picks them (7.2+ converts, 7.3+ pads NCHW itself).")
    if sw.framework == "torch" or (sw.framework == "keras3" and sw.keras_backend == "torch"):
        return ("PyTorch has no fast CPU kernel for these ops in 16 bits and ran its generic fallback "
                "(aten::_slow_conv2d_*); bfloat16 has oneDNN kernels on CPUs with AVX512-BF16 or AMX, float16 "
                "only with AVX512-FP16 or AMX-FP16.")
    if sw.tensorflow and (sw.keras_backend in (None, "tensorflow")):
        if tried:
            return ("oneDNN ran a reference (or generic) kernel for these 16-bit ops on this CPU; the experiment "
                    "above measured TensorFlow's own kernels instead, and the prescription weighs that run against "
                    "every other configuration measured here.")
        return "oneDNN ran a reference (or generic) kernel for these 16-bit ops on this CPU."
    return "The framework ran a slow generic kernel for these 16-bit ops on this device."


def slow_kernel_ideas(sw: Software, on_gpu: bool, precision: str) -> list[dict[str, str]]:
    """What a slow CPU kernel suggests measuring: TensorFlow's own kernels, with oneDNN off (a variant)."""
    if on_gpu or not sw.tensorflow or sw.keras_backend not in (None, "tensorflow"):
        return []
    return [{"precision": precision, "variant": "onednn_off",
             "why": "oneDNN ran a reference kernel; TensorFlow's own kernels may do better"}]


# ---------------------------------------------------------------------------------------- the one phraser
#
# Every "what to do" sentence about a configuration is written here, from one machine's measured table (its
# prescription: `recommended`, `measured`, `untested`), so no finding's advice can contradict what that machine
# measured. A finding says which remedy it would suggest (its registry entry's kind and configuration); the words
# come from the table: measured and the prescription's own, quote the prescription; measured and beaten, say so
# with its number and name the prescription, no code; not measured, point to the machine's untested entry.

CONFIGURATION_KINDS = ("configuration", "setting", "memory_only", "numerics_only")
# A remedy's configuration where it is no fixed one: the prescription's own (what measured fastest there), or the
# finding's own precision and variant.
PRESCRIBED = ("prescribed", "original")
OWN = ("own", "original")


def variant_applies(variant: str, sw: Software, script: bool) -> str | None:
    """Why a variant cannot be measured on this run's stack, or None where `diagnose --variant` measures it."""
    if script and variant not in SCRIPT_VARIANTS:
        return (f"the {variant} variant changes fp16doctor's built-in model or data, not your script's: make that "
                "change in the script and diagnose it again")
    tf_backend = sw.framework == "tf.keras" or (sw.framework == "keras3" and sw.keras_backend in (None, "tensorflow"))
    # Keras 3 compiles with jit_compile=True on torch too (torch.compile, from torch 2.1); on JAX it always does.
    torch_backend = sw.framework == "keras3" and sw.keras_backend == "torch" and version_at_least(sw.torch,
                                                                                                  "2.1") is not False
    parts = variant_parts(variant)  # each change of a combined variant (synthetic_input+xla)
    if "xla" in parts and not (tf_backend or torch_backend):
        # Unknown is unknown: a document that names no framework is not said to run another one.
        return ("the xla variant compiles Keras' training step (jit_compile: XLA on TensorFlow, torch.compile on "
                "torch from 2.1); "
                + (f"this stack runs {sw.label()}" if sw.known else "this document does not say which framework ran"))
    if "onednn_off" in parts and not sw.tensorflow:
        return "TF_ENABLE_ONEDNN_OPTS is a TensorFlow switch"
    return None


def precision_applies(precision: str, sw: Software) -> str | None:
    """Why a precision cannot be measured on this run's stack (no mixed precision API), or None."""
    if precision.startswith("mixed_") and sw.framework in ("keras2", "tensorflow"):
        return (f"{sw.label()} has no mixed precision API (multi-backend Keras 2 and TensorFlow 1.x); "
                "old_stack names the upgrade")
    return None


# The variants whose change is a framework's own compiler (knowledge/modes.py FRAMEWORK_ONLY_ADVICE).
COMPILER_VARIANTS = ("xla",)


def advice_of(precision: str | None, variant: str | None = None, marked: str | None = None) -> tuple[str, ...]:
    """The advice ids (knowledge/modes.py) a configuration or idea carries: the id its writer marked it with, a
    mixed precision policy, a framework's compiler."""
    ids = [marked] if marked else []
    if precision and is_mixed(precision):
        ids.append("mixed_policy")
    if variant in COMPILER_VARIANTS:
        ids.append("framework_compiler")
    return tuple(ids)


@dataclass(frozen=True)
class Unmeasurable:
    """A remedy that no fp16doctor variant can measure: listed untested, without a command, with why."""

    precision: str
    setting: str | None  # the switch or change beside the precision, as a user would make it
    why: str
    no_command: str  # why no fp16doctor variant measures it
    variant: str | None = None  # the variant that would, where one exists but cannot run on this stack

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "variant": self.variant, "setting": self.setting, "why": self.why,
                "command": None, "no_command": self.no_command}


def _label(precision: str, variant: str) -> str:
    setting = variant_setting(variant)
    return fmt_config({"precision": precision, "setting": setting})


def variant_setting(variant: str | None, changes: Mapping[str, Any] | None = None) -> str | None:
    """The switch a variant flips, as a user would set it: 'TF_ENABLE_ONEDNN_OPTS=0', 'jit_compile=True'; a variant
    fp16doctor does not know (a hand-written document's) by the `changes` its experiment names."""
    changes = experiment_changes(variant or "") or changes  # a combined variant's: its last change's
    if not changes:
        return None
    env = changes.get("env")
    parts = [f"{k}={v}" for k, v in env.items()] if isinstance(env, Mapping) else []
    parts += [f"{k}={v}" for k, v in changes.items() if k != "env"]
    return ", ".join(parts)


def _versus(entry: Mapping[str, Any]) -> str:
    interval = entry.get("speedup_interval")
    known = interval if isinstance(interval, list) and len(interval) == 2 else None
    return fmt_versus(float(entry.get("speedup") or 0), known, str(entry.get("outcome")), "than float32")


def _untested_line(idea: Mapping[str, Any], where: str) -> str:
    return UntestedIdea.of(idea).advice(where)


@dataclass(frozen=True)
class Phrased:
    """What the phraser wrote for one machine and stack: the sentences, what the finding recommends there (as
    data), the configuration it set aside for a measured faster one, and whether its code may be shown."""

    text: str
    recommends: dict[str, Any] | None
    instead_of: dict[str, Any] | None
    show_code: bool


def prescription_pointer(where: str) -> str:
    """What a finding's fix says where it defers to the prescription of its machine and stack."""
    return f"See the prescription for {where}." if where else "See the prescription."


def phrase_remedy(kind: str, target: tuple[str, str] | None, where: str,
                  prescription: Mapping[str, Any] | None, extra_untested: Sequence[Mapping[str, Any]] = ()) -> Phrased:
    """The what-to-do sentence of one finding on one machine and stack, from that machine's measured table.

    `target` is the (precision, variant) the finding's remedy steers to; None: the prescription's own. Ideas the
    finding names that nobody measured are read from `extra_untested` (already in the prescription's untested).
    `where`: the machine and stack as sentences name them, "" where the document has only one (Context.place).
    """
    extras = list(dict.fromkeys(_untested_line(i, where) for i in extra_untested))
    if prescription is None:
        if target is None:
            return Phrased(" ".join(extras), None, None, False)
        label = _label(*target)
        return Phrased(" ".join([f"{label} was not compared with float32{on(where)} (no float32 run there).",
                                 *extras]), {"precision": target[0], "variant": target[1],
                                             "setting": variant_setting(target[1]), "measured_speedup": None},
                       None, False)
    chosen = prescription["recommended"]
    # The prescription is said once, in its own place; a finding's fix points at it (each fact once).
    quoted = prescription_pointer(where)
    prescribed = {"precision": chosen["precision"], "variant": chosen["variant"], "setting": chosen.get("setting"),
                  "measured_speedup": chosen.get("speedup"), "speedup_interval": chosen.get("speedup_interval")}
    if target is None or (target[0], target[1]) == (chosen["precision"], chosen["variant"]):
        hardware = [_untested_line(i, where) for i in prescription.get("untested") or []
                    if i.get("from") == "hardware" and chosen["precision"] == "float32"]
        return Phrased(" ".join(dict.fromkeys([quoted, *hardware, *extras])), prescribed, None, True)
    precision, variant = target
    entry = measured_entry(prescription, precision, variant)
    if entry is None:
        idea = next((i for i in prescription.get("untested") or []
                     if (i.get("precision"), i.get("variant") or "original") == (precision, variant)), None)
        pointer = _untested_line(idea, where) if idea else f"Untested{on(where)}: {_label(precision, variant)}."
        # No code for what nobody measured here: the command measures it first.
        return Phrased(" ".join([pointer, f"Until it is measured: {quoted}", *extras]),
                       {"precision": precision, "variant": variant, "setting": variant_setting(variant),
                        "measured_speedup": None}, None, False)
    label = _label(entry["precision"], variant)
    instead = {"precision": entry["precision"], "variant": variant, "setting": variant_setting(variant),
               "measured_speedup": entry.get("speedup"), "speedup_interval": entry.get("speedup_interval"),
               "step_ms": entry.get("step_ms")}
    if entry.get("outcome") == "baseline":
        said = f"Not float32{on(where)}: float32 took {fmt_ms(entry.get('step_ms'))} per step. {quoted}"
    elif kind == "setting" and variant != "original" and entry["precision"] == precision:
        said = (f"Do not set {variant_setting(variant)}{on(where)} for speed: {label} measured {_versus(entry)}, "
                f"{fmt_ms(entry.get('step_ms'))} per step. {quoted}")
    else:
        said = f"Not {label}{on(where)}: it measured {_versus(entry)}, {fmt_ms(entry.get('step_ms'))} per step"
        notes = [str(n) for n in entry.get("notes") or [] if n] or [str(entry.get("unsafe") or "")]
        if float(entry.get("speedup") or 0) >= float(chosen.get("speedup") or 0) and any(notes):
            said += f", but {'; '.join(n for n in notes if n)}"  # faster, and not safe to recommend
        said += f". {quoted}"
    return Phrased(" ".join([said, *extras]), prescribed, instead, False)


def measured_entry(prescription: Mapping[str, Any], precision: str, variant: str) -> dict[str, Any] | None:
    """The measured configuration a recommendation names; for a variant measured only at another precision (the
    experiment ran on the 16-bit run it tested), that one: the switch is what is recommended."""
    same = [m for m in prescription.get("measured") or [] if m.get("variant") == variant]
    exact = next((m for m in same if m.get("precision") == precision), None)
    return exact if exact is not None or variant == "original" else (same[0] if same else None)
