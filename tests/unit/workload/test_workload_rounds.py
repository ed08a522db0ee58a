"""The interleaved rounds loop (workload/rounds.py) on a fake Keras and a fake clock: every configuration gets a
block in every round, in a new order each time, with its first step dropped; rounds fill the budget and never
stop under the minimum."""

from __future__ import annotations

import importlib.util
import math
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROUNDS = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload" / "rounds.py"
STEP_S = {"float32": 0.10, "float16": 0.25, "mixed_float16": 0.20}

@pytest.fixture(autouse=True)
def _real_clock_after() -> Any:
    """The loop reads time.perf_counter, which the fake clock replaces: put the real one back after each test."""
    real = time.perf_counter
    yield
    time.perf_counter = real



def load() -> Any:
    if str(ROUNDS.parent) not in sys.path:  # the workload's modules import each other from beside themselves
        sys.path.insert(0, str(ROUNDS.parent))
    spec = importlib.util.spec_from_file_location("rounds_under_test", ROUNDS)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeKeras:
    """The few calls the loop makes: floatx and a policy to switch, fit() that runs N steps on a clock."""

    def __init__(self, clock: Clock, module: Any) -> None:
        self.clock = clock
        self.name, self.backend_name = "tf_keras", "tensorflow"  # fit() takes the generator itself
        self._floatx = "float32"
        self._policy = "float32"
        self.blocks: list[tuple[str, int]] = []
        self.noise: random.Random | None = None  # set: every block's steps scaled by a factor drawn from it
        outer = self

        class Callback:
            pass

        self.keras = SimpleNamespace(
            callbacks=SimpleNamespace(Callback=Callback),
            backend=SimpleNamespace(set_floatx=self.set_floatx, floatx=lambda: outer._floatx),
            config=SimpleNamespace(set_floatx=self.set_floatx),
            mixed_precision=SimpleNamespace(set_dtype_policy=self.set_policy,
                                            dtype_policy=lambda: SimpleNamespace(name=outer._policy)))
        time.perf_counter = clock  # the loop's step clock (compat.perf_counter reads it at each call)

    def set_floatx(self, value: str) -> None:
        self._floatx = value

    def set_policy(self, value: str) -> None:
        self._policy = value

    def floatx(self) -> str:
        return self._floatx

    def set_mixed_policy(self, policy: str) -> None:
        self._policy = policy

    def fit_stream(self, model: Any, generator: Any, steps: int, epochs: int, callbacks: list[Any]) -> None:
        # The model was built for one precision; the globals must be that precision's while it trains.
        assert (self._floatx, self._policy) == model.built_under, (self._floatx, self._policy, model.built_under)
        self.blocks.append((model.label, steps))
        scale = 1.0 + self.noise.uniform(-0.3, 0.3) if self.noise is not None else 1.0  # a shared machine's drift
        for callback in callbacks:
            callback.model = model  # as fit() sets it
        model.stop_training = False
        callbacks[0].on_train_begin({})
        for step in range(steps):
            # A block's first step: a new iterator. An input that decodes images adds its time to every step.
            self.clock.now += model.step_s * scale * (3 if step == 0 else 1) + getattr(generator, "decode_s", 0.0)
            for callback in callbacks:
                callback.on_train_batch_end(step, {"loss": 0.5})
            if model.stop_training:  # Keras 3 and tf.keras check it after every step
                break


class FakeProfiler:
    """window.WindowProfiler's calls the rounds make: a window started, stepped and stopped, its result."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.kind: str | None = None
        self.model: Any = None
        self.windows: list[tuple[str, float, int, float, str]] = []  # kind, start, steps, stop, model
        self.stepped = 0

    def start(self, kind: str, clock: Any) -> None:
        self.kind, self.began = kind, clock()

    def after_step(self) -> None:
        self.stepped += 1

    def stop(self, steps: int, clock: Any) -> None:
        assert self.kind is not None
        self.windows.append((self.kind, self.began, steps, clock(), self.model.label))
        self.kind = None

    def window_result(self, kind: str) -> dict[str, Any]:
        return {"window": {"kind": kind}}


def run(budget_s: float, min_rounds: int = 3, variant: str = "original", profile: str | None = None,
        profiler: Any = None, clock: Clock | None = None, bound_ms: float | None = None,
        first_bound_ms: float | None = None, precision: float | None = None,
        noise_seed: int | None = None, module: Any = None, **more: Any) -> tuple[dict[str, Any], FakeKeras]:
    module = module or load()
    module._run_facts = lambda generator, model, batches: {"model": {"name": model.label}}  # no real model here
    clock = clock or Clock()
    api = FakeKeras(clock, module)
    if noise_seed is not None:
        api.noise = random.Random(noise_seed)
    built: list[str] = []

    def build(api_: Any, height: int, width: int, mixed: bool) -> Any:
        # As Keras 3 does: once a global policy is set, it decides the layers' dtypes, whatever floatx says.
        precision = api_._policy
        label = precision if precision not in built else "float32_aa"
        built.append(precision)
        variable = "float32" if precision.startswith("mixed_") else precision
        compute = precision.removeprefix("mixed_")
        return SimpleNamespace(label=label, step_s=STEP_S[precision], built_under=(api_._floatx, api_._policy),
                               layers=[SimpleNamespace(dtype=variable, compute_dtype=compute)])

    def generator(api_: Any, train_dir: str, height: int, width: int, batch: int) -> list[int]:
        return list(range(8))  # eight batches an epoch

    args = SimpleNamespace(rounds_of="float32,float16,mixed_float16", variant=variant, height=8, width=8, batch_size=2,
                           warmup_steps=2, rounds_budget_s=budget_s, min_rounds=min_rounds, max_rounds=30,
                           rounds_seed=7, profile_rounds=profile, profile_steps=2, input_batches=3,
                           bound_ms=bound_ms, first_bound_ms=first_bound_ms, rounds_precision=precision, **more)
    return module.run_rounds(args, api, "data", build, generator, lambda *a, **k: None, clock=clock,
                             profiler=profiler), api


def test_a_precision_with_no_run_of_its_own_gets_a_profiled_window_in_its_warm_ups_call() -> None:
    """Its warm-up (the first step, tracing, and one more) runs outside the window, the next two steps of the same
    fit() call are the window: no new call's first step to spend first; the call is no round, and its model and
    input are described as its own run would."""
    clock = Clock()
    profiler = FakeProfiler(clock)
    result, api = run(budget_s=0.0, profile="mixed_float16", profiler=profiler, clock=clock)
    assert [(kind, steps, model) for kind, _, steps, _, model in profiler.windows] == [
        ("rounds_mixed_float16", 2, "mixed_float16")]
    kind, began, _, ended, _ = profiler.windows[0]
    assert ended - began == pytest.approx(0.4)  # two 0.2 s steps, the warm-up's outside it
    # float32's warm-up (0.3 + 0.1 s), float16's (0.75 + 0.25 s), then mixed_float16's (0.6 + 0.2 s) before it.
    assert began == pytest.approx(0.4 + 1.0 + 0.8)
    assert profiler.stepped == 2
    assert result["warmup"]["mixed_float16"] == {"first_step_ms": 600.0, "step_ms": 200.0}
    own = result["own_run"]
    assert set(own) == {"mixed_float16"}
    assert own["mixed_float16"] == {"model": {"name": "mixed_float16"}, "window_step_ms": [200.0, 200.0],
                                    "profile": {"window": {"kind": "rounds_mixed_float16"}}}
    assert api.blocks[2] == ("mixed_float16", 4)  # its warm-up's two steps and the window's, in one call
    assert len(api.blocks) == 4 + 4 * 3  # the four warm-ups and the rounds: no call for the window alone
    assert result["rounds"]["mixed_float16"] == [200.0] * 3 and len(result["order"]) == 3


def test_a_precision_whose_step_takes_over_a_second_gets_a_window_of_one_step(monkeypatch: Any) -> None:
    """A 2 s float16 step (a 2-core AVX2 EPYC's) runs every op of the model: its window is one step, not the
    size's two (protocol.window_steps)."""
    monkeypatch.setitem(STEP_S, "float16", 2.0)
    clock = Clock()
    profiler = FakeProfiler(clock)
    result, api = run(budget_s=0.0, profile="float16,mixed_float16", profiler=profiler, clock=clock)
    assert [(kind, steps) for kind, _, steps, _, _ in profiler.windows] == [
        ("rounds_float16", 1), ("rounds_mixed_float16", 2)]
    assert result["own_run"]["float16"]["window_step_ms"] == [2000.0]


def test_without_a_profiler_a_precision_with_no_run_of_its_own_says_why_it_has_no_profile() -> None:
    result, api = run(budget_s=0.0, profile="mixed_float16")
    assert result["own_run"]["mixed_float16"]["profile_error"]
    assert len(api.blocks) == 4 + 4 * 3  # warm-ups and rounds only: no profiled block


def test_every_configuration_gets_a_block_in_every_round_in_a_shuffled_order() -> None:
    result, api = run(budget_s=0.0)
    assert result["stop_reason"] == "time_budget"
    order = result["order"]
    assert len(order) == 3  # the minimum, though no budget was left
    assert all(sorted(r) == sorted(["float32", "float16", "mixed_float16", "float32_aa"]) for r in order)
    assert len({tuple(r) for r in order}) > 1  # shuffled
    assert set(result["rounds"]) == {"float32", "float16", "mixed_float16", "float32_aa"}


def test_a_pure_float16_model_is_built_in_float16_though_a_policy_was_set_before() -> None:
    """Keras 3 keeps the first global policy it derives from floatx: float32 set before must not leak into the
    float16 model (its steps would then be float32's)."""
    result, _ = run(budget_s=0.0)
    assert result["rounds"]["float16"] != result["rounds"]["float32"]


def test_a_blocks_first_step_is_dropped_and_its_steps_are_the_configurations_own() -> None:
    result, _ = run(budget_s=0.0)
    for label, values in result["rounds"].items():
        expected = STEP_S["float32" if label == "float32_aa" else label] * 1000.0
        assert values == [expected] * 3, (label, values)


def test_each_configurations_warm_up_says_its_first_step_as_a_runs_own_first_step_is_timed() -> None:
    """From the fit() call's start to its first step's end (tracing and a new iterator included), and the later
    steps' median: an experiment timed only in rounds is compared with its original on these."""
    result, _ = run(budget_s=0.0)
    assert result["warmup"]["float16"] == {"first_step_ms": 750.0, "step_ms": 250.0}
    assert result["warmup"]["float32_aa"] == {"first_step_ms": 300.0, "step_ms": 100.0}


def test_rounds_time_a_setting_of_the_whole_process_never_a_change_to_a_model() -> None:
    """A variant that pads a model's channels or compiles it with XLA would need models built its way: the rounds
    refuse it rather than time the original models under its name."""
    assert run(budget_s=0.0, variant="onednn_off")[0]["status"] == "ok"
    with pytest.raises(ValueError, match="not xla"):
        run(budget_s=0.0, variant="xla")


def test_blocks_fit_in_one_epoch_and_rounds_fill_the_budget() -> None:
    result, api = run(budget_s=40.0)
    assert result["stop_reason"] == "time_budget" and len(result["order"]) > 3
    assert all(steps <= 8 for _, steps in api.blocks)  # never more batches than one epoch holds
    assert result["block_steps"]["float32"] == 4  # 0.4 s of 0.1 s steps



def test_a_block_of_more_than_one_step_times_three_so_its_median_is_a_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """0.4 s of 0.15 s steps would be two, whose median is their mean: three, so one stray step cannot move it; a
    0.25 s step's block stays one step."""
    monkeypatch.setitem(STEP_S, "mixed_float16", 0.15)
    result, _ = run(budget_s=0.0)
    assert result["block_steps"]["mixed_float16"] == 3 and result["block_steps"]["float16"] == 1


def test_rounds_stop_before_a_round_that_would_end_past_the_budget() -> None:
    """A round is stopped before it starts when, as long as the last one, it would end past the budget: the
    rounds end within it instead of a whole round beyond (--quick's 90 s)."""
    result, _ = run(budget_s=40.0)
    assert result["stop_reason"] == "time_budget"
    assert result["timing"]["measure_s"] <= 40.0


def test_rounds_stop_once_every_ratio_is_known_to_within_the_precision_asked() -> None:
    """A machine whose steps never vary knows every ratio exactly after the fewest rounds the early stop allows:
    the rounds stop there, long before the budget, and say why and how wide the widest ratio was."""
    result, _ = run(budget_s=40.0, precision=0.05)
    assert result["stop_reason"] == "precision" and len(result["order"]) == 5
    assert result["stop_precision"] == {"target": 0.05, "widest": 0.0}
    assert result["timing"]["measure_s"] < 20.0


def test_rounds_on_a_noisy_machine_go_on_while_a_ratio_is_still_wider_than_the_precision_asked() -> None:
    """Steps drifting by up to 30 % a block keep each ratio wider than 1 % either way: the rounds fill the budget,
    and say how wide the widest ratio still was."""
    result, _ = run(budget_s=40.0, precision=0.01, noise_seed=3)
    assert result["stop_reason"] == "time_budget" and len(result["order"]) > 5
    assert result["stop_precision"]["widest"] > 0.01


def test_without_a_precision_the_rounds_fill_the_budget_however_exact_the_ratios() -> None:
    result, _ = run(budget_s=40.0)
    assert result["stop_reason"] == "time_budget" and len(result["order"]) > 5 and result["stop_precision"] is None


def test_the_early_stop_draws_each_ratios_interval_with_the_one_paired_interval() -> None:
    """The rounds stop on the half-width of the interval the analysis draws: the one module's (workload/paired.py),
    which the workload imports from beside itself and the analysis as a package module."""
    module = load()
    fp32, fp16 = [140.1, 140.9, 137.6, 134.9, 129.0, 140.9], [782.0, 793.6, 788.9, 747.7, 770.4, 794.8]
    configs = [SimpleNamespace(label="float32", rounds=fp32), SimpleNamespace(label="float16", rounds=fp16)]
    logs = [math.log(a / b) for a, b in zip(fp32, fp16, strict=True)]
    sd = math.sqrt(sum((v - sum(logs) / 6) ** 2 for v in logs) / 5)
    assert module.widest_ratio(configs) == pytest.approx(math.exp(2.5706 * sd / math.sqrt(6)) - 1.0, rel=1e-4)
    assert module.ratio_half_width is sys.modules["paired"].ratio_half_width


def test_stopping_where_every_ratio_is_precise_enough_keeps_the_intervals_95_percent_coverage() -> None:
    """Stopping once the intervals look narrow favours rounds whose spread happened to look small, which would make
    intervals too short if the rule stopped on a spread from two or three rounds. Simulated on the workload's own
    rule: float32, its A/A control and one 16-bit configuration with a true ratio of 2, each block drifting by 5 %
    (log-normal: the spread at which this 5 % target stops early about half the time), at most 12 rounds as a quick
    budget holds here. The true ratio stays inside 93.5 % of the intervals at least (95 % is nominal; 94.2 % here,
    where stopping from the second round on would give 93.5 %)."""
    module = load()
    rng = random.Random(11)
    covered, trials, early = 0, 1500, 0
    for _ in range(trials):
        fp32, aa, half = (SimpleNamespace(label=label, rounds=[]) for label in ("float32", "float32_aa", "float16"))
        for done in range(1, 13):
            for config, step in ((fp32, 100.0), (aa, 100.0), (half, 50.0)):
                config.rounds.append(step * math.exp(rng.gauss(0.0, 0.05)))
            widest = module.widest_ratio([fp32, aa, half])
            if done >= module.PRECISION_MIN_ROUNDS and widest is not None and widest <= 0.05:
                early += 1
                break
        logs = [math.log(a / b) for a, b in zip(fp32.rounds, half.rounds, strict=True)]
        width = module.ratio_half_width(fp32.rounds, half.rounds)
        covered += abs(sum(logs) / len(logs) - math.log(2.0)) <= math.log1p(width)
    assert 0.2 < early / trials < 0.8  # the rule is exercised both ways
    assert covered / trials >= 0.935


class Batches:
    """A Keras Sequence's surface: four numbered batches, and how often an epoch ended."""

    def __init__(self) -> None:
        self.epochs_ended = 0
        self.read: list[int] = []

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        import numpy as np

        self.read.append(index)
        return np.full((2, 3), index, dtype="float16"), np.zeros((2,), dtype="float32")

    def on_epoch_end(self) -> None:
        self.epochs_ended += 1


def test_keras_3_on_tensorflow_gets_one_endless_pipeline_per_model_without_autotuning() -> None:
    """Every block's fit() starts a new iterator on the same pipeline: it goes on where the last block stopped
    (not from batch 0 again), the generator's epochs end as it wraps, batches keep their dtype, and autotuning is
    off (tearing down an autotuned iterator waits for its tuning thread)."""
    pytest.importorskip("tensorflow")
    module = load()
    batches = Batches()
    data = module._tf_input(SimpleNamespace(name="keras3-legacy", backend_name="tensorflow"), batches)
    assert data.options().autotune.enabled is False
    batches.read.clear()  # the batch read for the pipeline's signature
    first = [int(x[0, 0]) for x, _ in data.take(3).as_numpy_iterator()]
    second = [int(x[0, 0]) for x, _ in data.take(6).as_numpy_iterator()]
    assert first == [0, 1, 2] and len(second) == 6
    # One stream over both iterators (what the first prefetched is skipped), never back to batch 0 mid-epoch.
    assert batches.read == [i % 4 for i in range(len(batches.read))]
    assert batches.epochs_ended == (len(batches.read) - 1) // 4
    x, y = next(iter(data))
    assert (x.dtype.name, y.dtype.name) == ("float16", "float32")


@pytest.mark.parametrize("name, backend", [("keras3-legacy", "jax"), ("keras3-legacy", "torch"),
                                           ("tf_keras", "tensorflow"), ("keras2", "tensorflow")])
def test_other_kerases_and_backends_keep_the_generator(name: str, backend: str) -> None:
    assert load()._tf_input(SimpleNamespace(name=name, backend_name=backend), Batches()) is None


def test_a_later_models_layers_are_named_as_the_first_model_of_a_process_names_them() -> None:
    """Keras numbers layer names across a process: the rounds' fifth model has conv2d_12 where a run of its own has
    conv2d; ops compare across runs by layer name."""
    names = ["conv2d_12", "activation_15", "conv2d_13", "activation_16", "flatten_3", "dense_3", "activation_17"]
    assert load().first_model_names(names) == {
        "conv2d_12": "conv2d", "activation_15": "activation", "conv2d_13": "conv2d_1", "activation_16": "activation_1",
        "flatten_3": "flatten", "dense_3": "dense", "activation_17": "activation_2"}
    assert load().first_model_names(["conv2d", "conv2d_1", "dense"]) == {}


def test_a_warm_up_past_the_slow_step_bound_leaves_the_rounds_and_says_why() -> None:
    """A configuration with no run of its own meets its run's bound in the warm-up: float16's 250 ms steps pass a
    220 ms bound after one steady step (its warm-up ends there); it gets no window and no rounds, the others go on."""
    clock = Clock()
    profiler = FakeProfiler(clock)
    module_args = {"bound_ms": 220.0, "first_bound_ms": 5000.0}
    result, api = run(budget_s=0.0, profile="float16,mixed_float16", profiler=profiler, clock=clock,
                      **module_args)
    assert set(result["left_out"]) == {"float16"} and "past the slow-step bound of 220 ms" in result["left_out"][
        "float16"]
    assert "float16" not in result["rounds"] and "float16" not in result["own_run"]
    assert [kind for kind, *_ in profiler.windows] == ["rounds_mixed_float16"]
    assert len(result["rounds"]["mixed_float16"]) == 3
    # A first step past the first-step bound ends the warm-up after it.
    profiler = FakeProfiler(Clock())
    result, api = run(budget_s=0.0, profile="mixed_float16", profiler=profiler, first_bound_ms=500.0)
    assert "first step took 600 ms" in result["left_out"]["mixed_float16"]
    assert [b for b in api.blocks if b[0] == "mixed_float16"] == [("mixed_float16", 4)]  # its warm-up's call alone
    assert profiler.windows == []  # and no window opened in it


def test_with_an_end_time_the_rounds_fill_what_the_process_start_up_left_of_it() -> None:
    """--rounds-end-s: the rounds end that long after the process started, whatever its import, builds and warm-ups
    took (measured, not priced); never under the minimum."""
    module = load()
    clock = Clock()
    api = FakeKeras(clock, module)
    built: list[str] = []

    def build(api_: Any, height: int, width: int, mixed: bool) -> Any:
        precision = api_._policy
        label = precision if precision not in built else "float32_aa"
        built.append(precision)
        variable = "float32" if precision.startswith("mixed_") else precision
        return SimpleNamespace(label=label, step_s=STEP_S[precision], built_under=(api_._floatx, api_._policy),
                               layers=[SimpleNamespace(dtype=variable, compute_dtype=precision.removeprefix("mixed_"))])

    def timed(end_s: float) -> dict[str, Any]:
        clock.now = 100.0
        started = clock.now - 10.0  # the process started ten seconds before: import and data
        args = SimpleNamespace(rounds_of="float32,float16", variant="original", height=8, width=8, batch_size=2,
                               warmup_steps=2, rounds_budget_s=0.0, min_rounds=3, max_rounds=30, rounds_seed=7,
                               rounds_end_s=end_s)
        result = module.run_rounds(args, api, "data", build, lambda *a: list(range(8)), lambda *a, **k: None,
                                   clock=clock, process_started=started)
        assert clock.now <= started + end_s or len(result["order"]) == 3
        return result

    assert len(timed(20.0)["order"]) == 3  # start-up took most of it: the minimum
    built.clear()
    long = timed(60.0)
    assert len(long["order"]) > 3 and long["stop_reason"] == "time_budget"


class Images:
    """A directory generator's surface: eight batches of its dtype by index, each taking 50 ms to decode."""

    decode_s = 0.05

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        import numpy as np

        return np.zeros((2, 3), dtype=self.dtype), np.zeros((2,), dtype="float32")


def _variant_rounds(labels: str, takes_dtype: bool = True) -> dict[str, Any]:
    module = load()
    module._model_facts = lambda model: {"model": {"name": model.label}}  # no real model here
    clock = Clock()
    api = FakeKeras(clock, module)
    api.keras.utils = SimpleNamespace(Sequence=object)

    class ImageDataGenerator:  # Keras 3's legacy class: the batches' dtype is a parameter
        def __init__(self, rescale: float = 1.0, dtype: str | None = None) -> None:
            pass

    class OldImageDataGenerator:  # Keras 2.1.5's: none
        def __init__(self, rescale: float = 1.0) -> None:
            pass

    api.ImageDataGenerator = ImageDataGenerator if takes_dtype else OldImageDataGenerator  # type: ignore[attr-defined]

    def build(api_: Any, height: int, width: int, mixed: bool, pad_to: int | None = None) -> Any:
        precision = api_._policy
        label = precision + (f"+padded{pad_to}" if pad_to else "")
        variable = "float32" if precision.startswith("mixed_") else precision
        # Padded channels make this fake's float16 model 40 % faster.
        step_s = STEP_S[precision] * (0.6 if pad_to else 1.0)
        return SimpleNamespace(label=label, step_s=step_s, built_under=(api_._floatx, api_._policy),
                               layers=[SimpleNamespace(dtype=variable, compute_dtype=precision.removeprefix("mixed_"))])

    def generator(api_: Any, train_dir: str, height: int, width: int, batch: int, dtype: str | None = None) -> Images:
        return Images(dtype or api_._floatx)

    args = SimpleNamespace(rounds_of=labels, variant="original", height=8, width=8, batch_size=2, warmup_steps=2,
                           rounds_budget_s=0.0, min_rounds=3, max_rounds=30, rounds_seed=7)
    result: dict[str, Any] = module.run_rounds(args, api, "data", build, generator, lambda *a, **k: None,
                                               clock=clock)
    return result


def test_a_change_to_a_model_or_its_input_is_timed_beside_the_configuration_it_changes() -> None:
    """float32 on batches already in memory, float16 with its channels padded and float16 on float32 batches: each
    its own model in the same rounds, built the way its run of its own builds it, with what that run would say
    of the change."""
    result = _variant_rounds("float32,float16,float32+synthetic_input,float16+channels_padded,float16+float32_batches")
    rounds = result["rounds"]
    assert all(len(values) == 3 for values in rounds.values()) and not result["left_out"]
    assert sorted(result["order"][0]) == sorted(["float32", "float16", "float32+synthetic_input",
                                                 "float16+channels_padded", "float16+float32_batches", "float32_aa"])
    assert rounds["float32"] == [150.0] * 3  # 100 ms of compute and 50 ms decoding images
    assert rounds["float32+synthetic_input"] == [100.0] * 3  # the same model, its batches already made
    assert rounds["float16+channels_padded"] == [200.0] * 3 and rounds["float16"] == [300.0] * 3
    own = result["own_run"]
    assert own["float16+float32_batches"] == {"model": {"name": "float16"}, "batch_dtype": "float32",
                                              "variant_applied": {"batch_dtype": "float32"}, "jit_compile": None}
    assert own["float16+channels_padded"]["model"] == {"name": "float16+padded8"}  # described as built
    assert own["float16+channels_padded"]["variant_applied"] == {"input_channels_in_model": 8}
    assert own["float16+channels_padded"]["batch_dtype"] == "float16"
    assert set(own) == {"float32+synthetic_input", "float16+channels_padded", "float16+float32_batches"}


def test_a_change_that_cannot_share_a_process_leaves_the_rounds_and_says_why() -> None:
    """A Keras whose generator takes no dtype would give every model in the process float32 batches: that
    configuration is left out (its run of its own follows), the others are timed."""
    result = _variant_rounds("float32,float16,float16+float32_batches", takes_dtype=False)
    assert "takes no dtype" in result["left_out"]["float16+float32_batches"]
    assert set(result["rounds"]) == {"float32", "float16", "float32_aa"}
    assert "own_run" not in result


def test_past_the_budget_only_the_unsettled_comparisons_go_on_beside_float32_and_its_control() -> None:
    """A comparison that would change the prescription and is not yet told from noise (paired.unsettled) keeps its
    rounds going past the budget, for up to --rounds-unsettled-s, with float32 and its A/A control beside it and
    nothing else; the record names them and keeps what else used the CPU meanwhile."""
    module = load()
    module.unsettled = lambda reference, other, control=None: len(other) < 12 and other[0] < 0.25 * 1000
    result, api = run(budget_s=10.0, module=module, rounds_unsettled_s=10.0)
    assert result["extended"] == ["float32", "float32_aa", "mixed_float16"]
    assert result["stop_reason"] in ("unsettled_budget", "settled")
    rounds = result["rounds"]
    assert len(rounds["mixed_float16"]) == len(rounds["float32"]) == len(rounds["float32_aa"])
    assert len(rounds["float16"]) < len(rounds["float32"])
    assert result["timing"]["measure_s"] <= 20.0 + 2.0
    assert "seconds" in result["contention"]


def test_without_an_unsettled_comparison_the_rounds_end_at_the_budget_as_before() -> None:
    module = load()
    module.unsettled = lambda reference, other, control=None: False
    result, _ = run(budget_s=10.0, module=module, rounds_unsettled_s=10.0)
    assert result["stop_reason"] == "time_budget" and result["extended"] == []


def test_the_rounds_keep_their_floor_however_long_the_start_up_took() -> None:
    """An end time the start-up already passed (the first steps of runs cut by the slow-step bound ate the budget)
    still leaves the rounds --rounds-min-s, not only their minimum of three."""
    result, _ = run(budget_s=0.0, rounds_min_s=30.0)
    assert len(result["order"]) > 3 and result["timing"]["measure_s"] <= 30.0
