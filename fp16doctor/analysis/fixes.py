"""The fix as code, for the user's own stack: the same finding needs different code on Keras 2.1.5 / TF 1.x,
on tf.keras 2.x and on Keras 3.

The analysis may attach its own snippet to a finding (`fix_code`); this table is the fallback, so every
report shows code that runs on the stack that was measured. Each snippet names the API version it needs. Only code
that is no configuration lives here (an input pipeline, a TF32 switch for a fair baseline): a precision's code is
the prescription's `how`, quoted by the phraser (analysis/advice.py) where the machine measured it fastest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from fp16doctor.analysis.verdict import Verdict
from fp16doctor.knowledge.cuda import version_tuple

# Flavours of Keras a stack can have, in the order they appeared.
KERAS2_TF1 = "keras2-tf1"  # standalone Keras 2.x on TF 1.x (the 2018 stacks)
TF_KERAS2 = "tf-keras2"  # tf.keras (Keras 2 API) on TF 2.x, or tf_keras
KERAS3 = "keras3"


@dataclass(frozen=True)
class Fix:
    flavour_label: str
    code: str


def _major(value: object) -> int | None:
    """3 for "3.3.3" (or 3.3 typed as a number by hand); None when not a version."""
    parts = version_tuple(str(value)) if value is not None else None
    return parts[0] if parts else None


def flavour_of(software: Mapping[str, Any]) -> str | None:
    """Which Keras API a run's software speaks; None when the run did not record it."""
    keras = _major(software.get("keras"))
    tf = _major(software.get("tensorflow"))
    if keras is not None and keras >= 3:
        return KERAS3
    if tf is not None and tf >= 2:
        return TF_KERAS2
    if keras is not None or tf is not None:
        return KERAS2_TF1
    return None


def flavour_label(software: Mapping[str, Any]) -> str:
    bits = []
    if software.get("keras"):
        bits.append(f"Keras {software['keras']}")
    if software.get("tensorflow"):
        bits.append(f"TensorFlow {software['tensorflow']}")
    backend = software.get("keras_backend")
    if bits and backend and str(backend).lower() != "tensorflow":
        bits[0] += f" on {backend}"
    return " / ".join(bits) or "this stack"


# Sources:
#  keras.json floatx: https://keras.io/getting_started/faq/ (Keras reads $KERAS_HOME/keras.json)
#  TF 1.14+ graph rewrite: https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/train/experimental/enable_mixed_precision_graph_rewrite
#  tf.keras policies (stable API since TF 2.4): https://www.tensorflow.org/guide/mixed_precision
#  Keras 3 policies and LossScaleOptimizer: https://keras.io/api/mixed_precision/
#  ImageDataGenerator(dtype=...): tf.keras 2.x and Keras 3's legacy class accept dtype; Keras 2.1.5's has none
#  and builds batches in K.floatx().
SNIPPETS: dict[str, dict[str, str]] = {
    "host_fp16_emulation": {
        KERAS2_TF1: (
            "# Keras 2.1.5's ImageDataGenerator builds batches in K.floatx(): with floatx=float16\n"
            "# numpy emulates float16 on the CPU. Keep keras.json at float32:\n"
            "from keras import backend as K\n"
            "K.set_floatx('float32')  # before building generators and the model"
        ),
        TF_KERAS2: (
            "datagen = tf.keras.preprocessing.image.ImageDataGenerator(\n"
            "    rescale=1./255, horizontal_flip=True, vertical_flip=True,\n"
            "    dtype='float32')  # build batches in float32 on the host"
        ),
        KERAS3: (
            "from keras.src.legacy.preprocessing.image import ImageDataGenerator\n"
            "datagen = ImageDataGenerator(rescale=1./255, horizontal_flip=True, vertical_flip=True,\n"
            "                             dtype='float32')  # float32 on the host, cast on the device"
        ),
    },
    "input_pipeline_bound": {
        # Where Keras has preprocessing layers (Keras 3, tf.keras from TF 2.3), the code is the program the
        # prescription's input_pipeline change carries (analysis/pipeline_code.py), said once there.
        KERAS2_TF1: (
            "model.fit_generator(train_generator, steps_per_epoch=steps, epochs=nb_epoch,\n"
            "                    workers=4, use_multiprocessing=True, max_queue_size=16)"
        ),
    },
    "tf32_baseline": {
        # torch: cuDNN convolutions run TF32 by default (torch.backends.cudnn.allow_tf32 = True), matmuls not since
        # PyTorch 1.12 (https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices)
        f"{KERAS3}/torch": (
            "import torch  # compare against true float32 (the torch backend)\n"
            "torch.backends.cudnn.allow_tf32 = False\n"
            "torch.backends.cuda.matmul.allow_tf32 = False"
        ),
        f"{KERAS3}/jax": (
            "import jax  # compare against true float32 (the JAX backend)\n"
            "jax.config.update('jax_default_matmul_precision', 'highest')"
        ),
        TF_KERAS2: (
            "# compare against true float32 (TF >= 2.4 runs float32 matmuls/convs as TF32 on 8.0+)\n"
            "tf.config.experimental.enable_tensor_float_32_execution(False)"
        ),
        KERAS3: (
            "import tensorflow as tf  # TensorFlow backend\n"
            "tf.config.experimental.enable_tensor_float_32_execution(False)"
        ),
    },
}


def fix_for(finding: Mapping[str, Any], software: Mapping[str, Any]) -> Fix | None:
    """The code that fixes this finding on this stack, or None when the fix is not code, or is the code of a
    configuration its machine measured slower than the prescription (the phraser's `remedy.show_code`)."""
    remedy = finding.get("remedy")
    if isinstance(remedy, Mapping) and remedy.get("show_code") is False:
        return None
    own = finding.get("fix_code")
    if isinstance(own, str) and own.strip():
        return Fix(flavour_label(software), own.strip())
    flavour = flavour_of(software)
    table = SNIPPETS.get(str(finding.get("id")), {})
    if flavour is None:
        return None
    backend = str(software.get("keras_backend") or "tensorflow").lower()
    if flavour == KERAS3 and backend != "tensorflow":
        # Keras 3 on another backend: that backend's code, never TensorFlow's (it may not be installed).
        code = table.get(f"{KERAS3}/{backend}")
        if code is None and not _speaks_tensorflow(table.get(KERAS3, "")):
            code = table.get(KERAS3)
        return Fix(flavour_label(software), code) if code is not None else None
    if flavour not in table:
        return None
    return Fix(flavour_label(software), table[flavour])


def _speaks_tensorflow(code: str) -> bool:
    return "tf." in code or "tensorflow" in code


class _Ran(Protocol):
    """A run as the analysis reads it (context.RunView, runs.RunRow): its stack and its software."""

    @property
    def stack(self) -> str: ...

    @property
    def software(self) -> Any: ...


def attach_fixes(findings: list[dict[str, Any]], runs: Iterable[_Ran], verdicts: Iterable[Verdict]) -> None:
    """Each finding's fix as code for the stack it is about (`fix`: `{"flavour", "code"}`), chosen once here, so an
    output prints it and chooses nothing; none where the recommendation already holds the code for that stack. A
    finding that names no stack is about the first judged one (else the first run's)."""
    runs = list(runs)
    software: dict[str, dict[str, Any]] = {}
    for run in runs:
        if run.software is not None:
            software.setdefault(run.stack, asdict(run.software))
    judged = [v.stack for v in verdicts] or [r.stack for r in runs]
    for finding in findings:
        stack = finding.get("stack") if isinstance(finding.get("stack"), str) and finding.get("stack") else None
        stacks = finding.get("stacks")
        if stack is None and isinstance(stacks, list) and stacks and isinstance(stacks[0], str):
            stack = stacks[0]
        if any(line.startswith(("    ", "\t")) and line.strip()
               for line in str(finding.get("recommendation") or "").splitlines()):
            continue  # the analysis wrote the code into the recommendation (its indented lines)
        fix = fix_for(finding, software.get(stack or (judged[0] if judged else ""), {}))
        if fix is not None:
            finding["fix"] = {"flavour": fix.flavour_label, "code": fix.code}
