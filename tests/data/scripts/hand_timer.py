"""A plain batch-time callback, the way a user times their own steps: the wall clock from
on_train_batch_begin to on_train_batch_end, loss read as a float so the device is waited for.

The test scripts beside it add it to their callbacks; it does nothing unless HAND_TIMER_OUT names a
file, where it writes {"step_ms": [...]} when training ends, and once HAND_TIMER_STEPS steps are timed (a runner
may end training with an exception, so no end comes; writing after every step would put the file's cost into
the steps another timer measures around this one). It is independent of fp16doctor, so
tests can check fp16doctor's step times of the same script against it.
"""

import atexit
import json
import os
import time


def callbacks(callback_base):
    """[] normally; [a batch timer] when HAND_TIMER_OUT is set. callback_base: the script's Keras Callback."""
    path = os.environ.get("HAND_TIMER_OUT")
    if not path:
        return []
    save_after = int(os.environ.get("HAND_TIMER_STEPS") or 0)

    class BatchTimer(callback_base):
        def __init__(self):
            super().__init__()
            self.step_ms = []
            self.t0 = None

        def on_train_batch_begin(self, batch, logs=None):
            self.t0 = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            if logs and "loss" in logs:
                float(logs["loss"])
            self.step_ms.append((time.perf_counter() - self.t0) * 1000.0)
            if len(self.step_ms) == save_after:
                self.save()

        def on_train_end(self, logs=None):
            self.save()

        def save(self):
            with open(path, "w") as fh:
                json.dump({"step_ms": self.step_ms}, fh)

    timer = BatchTimer()
    atexit.register(timer.save)  # also when training is stopped by an exception (no on_train_end)
    return [timer]
