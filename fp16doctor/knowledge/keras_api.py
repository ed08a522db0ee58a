"""Keras 2 API that later Keras rejects, as data: what a user's script may use, and the first Keras
release that no longer accepts it (so the stacks that still run it can be named)."""

from __future__ import annotations

from fp16doctor.knowledge.cuda import version_at_least

TF_2_11_RELEASE = "https://github.com/tensorflow/tensorflow/releases/tag/v2.11.0"

# name -> the first Keras version that rejects it.
# - `decay=`: TF/Keras 2.11 made tf.keras.optimizers the new optimizers (TF_2_11_RELEASE, "Breaking
#   Changes"); they raise ValueError for it (measured: tf_keras 2.21 "decay is deprecated in the new
#   TF-Keras optimizer"). Keras 3 only warns and ignores it.
# - `lr=`: Keras 3's optimizers reject unknown keyword arguments (measured: Keras 3.15 "Argument(s)
#   not recognized: {'lr': ...}"); the 2.11+ optimizers still accept it with a warning.
# - fit_generator / evaluate_generator / predict_generator: gone from Keras 3's Model (tf_keras keeps them).
KERAS2_ONLY: dict[str, str] = {
    "lr": "3.0",
    "decay": "2.11",
    "fit_generator": "3.0",
    "evaluate_generator": "3.0",
    "predict_generator": "3.0",
}


def accepts(keras_version: str | None, names: list[str]) -> bool:
    """Whether this Keras still accepts every one of `names` (unknown names are assumed accepted)."""
    for name in names:
        first_rejecting = KERAS2_ONLY.get(name)
        if first_rejecting is not None and version_at_least(keras_version, first_rejecting) is not False:
            return False
    return True
