"""Interleaved rounds of a user's script (workload/script_rounds.py) on a fake Keras and a fake clock: the script
runs once per configuration under that configuration's floatx and policy, its fit() call is kept instead of run,
and the rounds replay that call in short blocks of the script's own arguments (validation off, a timing callback
added, stopped after the block's steps)."""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

WORKLOAD = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"
STEP_S = {"float32": 0.010, "float16": 0.025, "mixed_float16": 0.020}

@pytest.fixture(autouse=True)
def _real_clock_after() -> Any:
    """The loop reads time.perf_counter, which the fake clock replaces: put the real one back after each test."""
    real = time.perf_counter
    yield
    time.perf_counter = real



@pytest.fixture()
def modules() -> Any:
    sys.path.insert(0, str(WORKLOAD))
    try:
        for name in ("rounds", "script_rounds"):
            sys.modules.pop(name, None)
        rounds = importlib.import_module("rounds")
        script_rounds = importlib.import_module("script_rounds")
    finally:
        sys.path.remove(str(WORKLOAD))
        for name in ("rounds", "script_rounds", "protocol"):
            sys.modules.pop(name, None)
    return SimpleNamespace(rounds=rounds, script_rounds=script_rounds)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeKeras:
    """The Keras the script loaded: floatx and a policy to switch, a model's fit() that runs steps on a clock
    until a callback sets stop_training."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._floatx = "float32"
        self._policy = "float32"
        self.fits: list[dict[str, Any]] = []
        outer = self

        class Callback:
            model: Any = None

        self.keras = SimpleNamespace(
            callbacks=SimpleNamespace(Callback=Callback),
            backend=SimpleNamespace(set_floatx=self.set_floatx, floatx=lambda: outer._floatx),
            config=SimpleNamespace(set_floatx=self.set_floatx),
            mixed_precision=SimpleNamespace(set_dtype_policy=self.set_policy,
                                            dtype_policy=lambda: SimpleNamespace(name=outer._policy)))

    def set_floatx(self, value: str) -> None:
        self._floatx = value

    def set_policy(self, value: str) -> None:
        self._policy = value

    def floatx(self) -> str:
        return self._floatx

    def set_mixed_policy(self, policy: str) -> None:
        self._policy = policy

    def set_bfloat16_floatx(self) -> None:
        self._floatx = "bfloat16"

    def build(self, own_policy: str | None = None) -> Any:
        precision = own_policy or self._policy
        variable = "float32" if precision.startswith("mixed_") else precision
        return SimpleNamespace(step_s=STEP_S.get(precision, 0.01), built_under=(self._floatx, self._policy),
                               stop_training=False,
                               layers=[SimpleNamespace(weights=[], dtype=None),  # an input layer
                                       SimpleNamespace(weights=[1], dtype=variable,
                                                       compute_dtype=precision.removeprefix("mixed_"))])

    def fit(self, model: Any, *args: Any, **kwargs: Any) -> None:
        assert (self._floatx, self._policy) == model.built_under, "a block ran under another precision"
        self.fits.append({"args": args, "kwargs": kwargs})
        callbacks = kwargs.get("callbacks") or args[5]
        model.stop_training = False
        for callback in callbacks:
            callback.model = model
        for step in range(1000):
            self.clock.now += model.step_s * (3 if step == 0 else 1)
            for callback in callbacks:
                callback.on_train_batch_end(step, {"loss": 0.5})
            if model.stop_training:
                return


def run(modules: Any, script: Any = None, rounds_of: str = "float32,float16,mixed_float16") -> tuple[Any, Any]:
    clock = Clock()
    time.perf_counter = clock  # the loop's step clock (compat.perf_counter reads it at each call)
    fake = FakeKeras(clock)
    session = SimpleNamespace(capture=None, depth=0, keras=fake.keras, keras_name="keras")
    runs: list[str] = []

    def run_script() -> bool:
        runs.append(fake._policy)
        model = script(fake) if script else fake.build()
        # The script's own call: fit(x, y, batch_size=256, epochs=3, validation_split=0.1, callbacks=[...])
        session.capture("fit", fake.fit, model, ("x", "y"),
                        {"batch_size": 256, "epochs": 3, "validation_split": 0.1, "callbacks": []})
        return False  # not reached: the capture stops the script

    def wrapped() -> bool:
        try:
            return run_script()
        except modules.script_rounds.Captured:
            return True

    args = SimpleNamespace(rounds_of=rounds_of, variant="original", warmup_steps=2, rounds_budget_s=0.0,
                           min_rounds=3, max_rounds=30, rounds_seed=3)
    result = modules.script_rounds.run_script_rounds(args, session, wrapped, lambda module, name: fake,
                                                     lambda *a, **k: None)
    return result, SimpleNamespace(fake=fake, runs=runs, session=session)


def test_the_script_runs_once_per_configuration_and_its_fit_is_replayed_in_rounds(modules: Any) -> None:
    result, seen = run(modules)
    # float32 first (Keras loads under its keras.json), the A/A control last.
    assert seen.runs == ["float32", "float16", "mixed_float16", "float32"]
    assert set(result["rounds"]) == {"float32", "float16", "mixed_float16", "float32_aa"}
    assert len(result["order"]) == 3 and result["fit_method"] == "fit"
    for label, values in result["rounds"].items():
        expected = STEP_S["float32" if label == "float32_aa" else label] * 1000.0
        assert values == pytest.approx([expected] * 3), label  # each block's first step dropped
    assert seen.session.capture is None and seen.session.depth == 0


def test_a_block_is_the_scripts_own_call_without_validation_and_stopped_after_its_steps(modules: Any) -> None:
    _, seen = run(modules)
    block = seen.fake.fits[-1]
    assert block["args"] == ("x", "y")
    kwargs = block["kwargs"]
    assert kwargs["batch_size"] == 256 and kwargs["validation_split"] == 0.0
    assert kwargs["epochs"] == modules.script_rounds.BLOCK_EPOCHS and len(kwargs["callbacks"]) == 1


def test_block_arguments_follow_positional_and_keyword_calls(modules: Any) -> None:
    block_arguments = modules.script_rounds.block_arguments
    mine, theirs = object(), object()
    args, kwargs = block_arguments("fit", ("x", "y", 32, 4, 2, [theirs], 0.2), {"validation_freq": 2,
                                                                             "initial_epoch": 1}, mine)
    assert args == ("x", "y", 32, modules.script_rounds.BLOCK_EPOCHS, 2, [theirs, mine], 0.0)
    assert kwargs == {}
    args, kwargs = block_arguments("fit_generator", ("gen", 10), {"validation_data": "val"}, mine)
    assert args == ("gen", 10)
    assert kwargs == {"epochs": modules.script_rounds.BLOCK_EPOCHS, "callbacks": [mine], "validation_data": None}


def test_a_script_without_fit_cannot_be_replayed(modules: Any) -> None:
    capture = modules.script_rounds.Capture()
    with pytest.raises(modules.script_rounds.NotReplayable, match="train_on_batch"):
        capture("train_on_batch", None, None, (), {})


def test_a_script_that_sets_its_own_policy_stops_the_rounds(modules: Any) -> None:
    """A model built in another precision than the one asked would time the wrong thing."""
    with pytest.raises(RuntimeError, match="float16 model was built with float32"):
        run(modules, script=lambda fake: fake.build(own_policy="float32"))
