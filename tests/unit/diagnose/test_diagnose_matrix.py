"""Which precisions and variants a diagnose runs, in which order, and the slow-step bound each run gets."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.diagnose import (
    HOST_STACK,
    default_precisions,
    experiment_specs,
    plan_experiments,
    plan_runs,
)
from fp16doctor.diagnose.checks import check_precisions, check_variants
from fp16doctor.engines.spec import (
    FULL,
    QUICK,
    SLOW_STEP_FLOOR,
    SLOW_STEP_MULTIPLE,
    SLOW_STEP_MULTIPLE_ENV,
    SLOW_STEP_S,
    RunSpec,
    ScriptSpec,
    script_runner_args,
    with_slow_step_bound,
)
from fp16doctor.errors import DoctorError
from fp16doctor.probe.cpu import parse_cpuinfo
from fp16doctor.workload.protocol import PRECISIONS, VARIANTS

PROBE_DATA = Path(__file__).resolve().parents[1] / "probe" / "data"
FAKE_NVML = Path(__file__).resolve().parents[1] / "probe" / "probe_fake_nvml.py"


def _cpu_host(cpuinfo: str, machine: str) -> dict[str, Any]:
    return {"cpu": parse_cpuinfo((PROBE_DATA / cpuinfo).read_text(), machine), "gpus": []}


@pytest.mark.parametrize("cpuinfo,machine,bf16", [
    ("cpuinfo_amd_epyc_avx512bf16.txt", "x86_64", True),  # AVX512-BF16
    ("cpuinfo_intel_sapphire_rapids.txt", "x86_64", True),  # AMX-BF16
    ("cpuinfo_intel_granite_rapids.txt", "x86_64", True),
    ("cpuinfo_arm_neoverse_v1.txt", "aarch64", True),  # Arm BF16
    ("cpuinfo_arm_neoverse_n1.txt", "aarch64", False),  # fp16, but no bf16
    ("cpuinfo_arm_cortex_a57.txt", "aarch64", False),
])
def test_mixed_bfloat16_joins_the_default_matrix_on_cpus_with_bf16_instructions(cpuinfo, machine, bf16) -> None:
    precisions = default_precisions(_cpu_host(cpuinfo, machine))
    assert precisions[:3] == ["float32", "float16", "mixed_float16"]
    assert ("mixed_bfloat16" in precisions) is bf16
    assert "bfloat16" not in precisions  # pure bfloat16 only by hand (--precision bfloat16)


def test_an_avx2_only_cpu_gets_the_three_precisions() -> None:
    host = {"cpu": {"model": "AMD EPYC", "flags": ["sse4_2", "avx2", "fma", "f16c"]}, "gpus": []}
    assert default_precisions(host) == ["float32", "float16", "mixed_float16"]
    assert default_precisions({"gpus": []}) == ["float32", "float16", "mixed_float16"]  # nothing known


@pytest.fixture
def nvml_gpus(monkeypatch: pytest.MonkeyPatch):
    """The GPUs probe_gpus reports from a replayed NVML recording."""
    spec = importlib.util.spec_from_file_location("probe_fake_nvml_for_matrix", FAKE_NVML)
    assert spec and spec.loader
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    from fp16doctor.probe.nvml import probe_gpus

    def gpus(name: str) -> list[dict[str, Any]]:
        monkeypatch.setitem(sys.modules, "pynvml", fake.make_pynvml(getattr(fake, name)))
        return probe_gpus()[0]

    return gpus


@pytest.mark.parametrize("recording,bf16", [("H200_560", True), ("TITAN_V_390", False), ("GTX_1660_TI_535", False)])
def test_on_a_gpu_only_compute_capability_8_or_newer_adds_mixed_bfloat16(nvml_gpus, recording, bf16) -> None:
    gpus = nvml_gpus(recording)
    # The CPU's bfloat16 does not count when the runs go to the GPU.
    host = {"cpu": {"flags": ["avx512_bf16", "amx_bf16"]}, "gpus": gpus}
    assert ("mixed_bfloat16" in default_precisions(host)) is bf16


def test_every_precision_and_variant_name_is_known_and_a_wrong_one_is_a_one_line_error() -> None:
    assert PRECISIONS == ("float32", "float16", "mixed_float16", "bfloat16", "mixed_bfloat16")
    assert set(VARIANTS) >= {"original", "synthetic_input", "onednn_off", "float32_batches", "channels_padded",
                             "tf32_off", "xla"}
    with pytest.raises(DoctorError) as err:
        check_variants(["onednn"])
    assert "onednn_off" in err.value.hint
    with pytest.raises(DoctorError):
        check_precisions(["bf16"])
    # float32 runs first: its step sets the bound of the others.
    assert check_precisions(["mixed_bfloat16", "float16", "float32"]) == ["float32", "mixed_bfloat16", "float16"]


def test_variants_chosen_by_hand_run_float32_first_and_carry_what_they_change() -> None:
    specs = plan_runs([HOST_STACK], ["float16", "float32"], QUICK, ["original", "onednn_off"], None)
    assert [(s.variant, s.precision) for s in specs] == [
        ("original", "float32"), ("original", "float16"), ("onednn_off", "float32"), ("onednn_off", "float16")]
    assert specs[0].experiment is None
    assert specs[2].experiment == {"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}, "tests": None}


def test_a_combined_variant_is_one_configuration_spelled_once_and_an_experiment_of_its_last_change() -> None:
    assert check_variants(["synthetic_input", "xla+synthetic_input", "synthetic_input+xla"]) == [
        "synthetic_input", "synthetic_input+xla"]
    # The configuration a combined one is compared with joins the matrix, before it.
    assert check_variants(["original", "xla+channels_padded+synthetic_input"]) == [
        "original", "synthetic_input", "synthetic_input+channels_padded", "synthetic_input+channels_padded+xla"]
    with pytest.raises(DoctorError, match="both change the batches"):
        check_variants(["float32_batches+synthetic_input"])
    specs = plan_runs([HOST_STACK], ["float32"], QUICK, ["synthetic_input", "synthetic_input+xla"], None)
    assert [(s.variant, s.experiment) for s in specs] == [
        ("synthetic_input", None), ("synthetic_input+xla", {"changes": {"jit_compile": True}, "tests": None})]


def test_planned_experiments_become_specs_once_each_and_only_for_stacks_that_run() -> None:
    items = [
        {"stack": "host", "precision": "float16", "variant": "onednn_off", "reason": "ref:any on conv2d",
         "experiment": {"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}, "tests": "slow_fp16_kernels"}},
        {"stack": "host", "precision": "float32", "variant": "onednn_off",
         "experiment": {"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}}, "tests": "slow_fp16_kernels"}},
        {"stack": "host", "precision": "float16", "variant": "onednn_off"},  # the same cell again
        {"stack": "host", "precision": "float16", "variant": "float32_batches", "tests": "host_fp16_emulation"},
        {"stack": "host", "precision": "float16", "variant": "original"},  # measured already
        {"stack": "tf1.7-cuda9.0", "precision": "float16", "variant": "xla"},  # not in this diagnose
        {"stack": "host", "precision": "float16", "variant": "warp_drive"},  # unknown: ignored
    ]
    specs = experiment_specs(items, [HOST_STACK], QUICK, "/data/train", {("host", "float16", "original")})
    assert [(s.precision, s.variant) for s in specs] == [
        ("float32", "onednn_off"), ("float16", "onednn_off"), ("float16", "float32_batches")]
    assert specs[1].experiment == {"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}},
                                   "tests": "slow_fp16_kernels", "reason": "ref:any on conv2d"}
    assert specs[2].experiment == {"changes": {"batch_dtype": "float32"}, "tests": None}
    assert {s.data_dir for s in specs} == {"/data/train"}


class _Notes:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, message: str) -> None:
        self.notes.append(message)


def test_experiments_not_worth_a_run_are_said_not_run() -> None:
    seed = {"name": "seed_cnn", "batch_size": 32, "image_height": 112, "image_width": 168}
    sw = {"tensorflow": "2.15.0", "keras": "2.15.0", "keras_backend": "tensorflow", "keras_api": "keras2"}
    doc = {"schema_version": 1, "host": {"cpu": {"flags": ["avx2"]}, "gpus": []},
           "runs": [_run("float32", workload=seed, software=sw, input_time_ms={"median": 19.0}),
                    _run("float16", median=790.0, workload=seed, software=sw, input_time_ms={"median": 25.0})]}
    progress = _Notes()
    planned = plan_experiments(doc, progress)  # type: ignore[arg-type]
    assert all(p["variant"] != "float32_batches" for p in planned)
    assert any("float32_batches skipped" in n and "under 5%" in n for n in progress.notes)


def _run(precision: str, variant: str = "original", median: float = 130.0, **extra: Any) -> dict[str, Any]:
    return {"stack": "host", "precision": precision, "variant": variant, "status": "ok", "device": "cpu",
            "step_time_ms": {"median": median, "n": 5}, "first_step_ms": 2000.0, **extra}


def test_a_16_bit_run_is_bounded_by_its_float32_partner() -> None:
    runs = [_run("float32", median=130.0), _run("float32", "synthetic_input", median=110.0)]
    spec = with_slow_step_bound(RunSpec("host", "float16", "original", QUICK), runs)
    # Time: the quick size's 5 s, which is under 50x float32's 130 ms and over 5x it.
    assert spec.bound_ms == SLOW_STEP_S["quick"] * 1000.0
    args = spec.workload_args()
    assert float(args[args.index("--bound-ms") + 1]) == pytest.approx(5000.0)
    # The same variant's float32 when there is one; else the stack's original float32.
    slow = [_run("float32", median=2000.0), _run("float32", "synthetic_input", median=50.0)]
    assert with_slow_step_bound(RunSpec("host", "float16", "original", QUICK), slow).bound_ms == \
        SLOW_STEP_FLOOR * 2000.0  # never under 5x float32's step
    synth = with_slow_step_bound(RunSpec("host", "mixed_float16", "synthetic_input", QUICK), slow)
    assert synth.bound_ms == SLOW_STEP_MULTIPLE * 50.0  # never over 50x it
    experiment = with_slow_step_bound(RunSpec("host", "float16", "onednn_off", FULL), runs)
    assert experiment.bound_ms == SLOW_STEP_MULTIPLE * 130.0  # full size: 30 s, capped at 50x


def test_a_16_bit_first_step_is_bounded_by_float32s_first_step_plus_the_steady_bound_and_5x_it() -> None:
    # The Xeon: float32 150 ms/step, first step 1.4 s. Steady bound 5 s; first-step bound max(1.4 + 5, 5 x 1.4) = 7 s.
    xeon = with_slow_step_bound(RunSpec("host", "float16", "original", QUICK),
                                [_run("float32", median=150.0, first_step_ms=1400.0)])
    assert xeon.reference_first_step_ms == 1400.0 and xeon.bound_ms == 5000.0
    assert xeon.first_bound_ms == pytest.approx(SLOW_STEP_FLOOR * 1400.0)
    # TensorFlow 1.7 on a 2-core EPYC: float32 1.76 s/step, first step 3.2 s. Steady bound 8.8 s (5x); the margin
    # (3.2 + 8.8 = 12 s) is under 5x the first step (16 s): 16 s.
    tf17 = RunSpec("tf1.7-cpu", "float16", "original", QUICK, reference_ms=1760.0, reference_first_step_ms=3200.0)
    assert tf17.bound_ms == pytest.approx(8800.0) and tf17.first_bound_ms == pytest.approx(16000.0)
    # A GPU: float32 50 ms/step, first step 20 s of autotuning. The margin (20 s + 5 s) is under 5x (100 s): 100 s,
    # so a 16-bit first step that autotunes afresh, seconds longer, is never taken for pathology.
    gpu = RunSpec("host", "mixed_float16", "original", QUICK, reference_ms=50.0, reference_first_step_ms=20000.0)
    assert gpu.bound_ms == pytest.approx(2500.0) and gpu.first_bound_ms == pytest.approx(100000.0)
    # A fast first step: the margin, the whole steady bound past float32's first step, is the larger.
    fast = RunSpec("host", "float16", "original", QUICK, reference_ms=130.0, reference_first_step_ms=400.0)
    assert fast.first_bound_ms == pytest.approx(400.0 + 5000.0)
    # Both command lines carry it, next to the steady bound.
    args = fast.workload_args()
    assert args[args.index("--bound-ms") + 2:args.index("--bound-ms") + 4] == ["--first-bound-ms", "5400.000"]
    script = replace(fast, script=ScriptSpec(path="/home/u/train.py", label="~/train.py"))
    runner = script_runner_args(script, "/tmp/w", "/tmp/w/log")
    assert runner[runner.index("--first-bound-ms") + 1] == "5400.000" and "--bound-ms" in runner
    assert runner.index("--first-bound-ms") < runner.index("--")


def test_the_first_step_bound_needs_both_of_float32s_steps_and_follows_the_forced_multiple(
        monkeypatch: pytest.MonkeyPatch) -> None:
    no_first = with_slow_step_bound(RunSpec("host", "float16", "original", QUICK),
                                    [_run("float32", first_step_ms=None)])
    assert no_first.bound_ms == 5000.0 and no_first.first_bound_ms is None
    assert "--bound-ms" in no_first.workload_args() and "--first-bound-ms" not in no_first.workload_args()
    assert RunSpec("host", "float16", "original", QUICK, reference_ms=130.0, reference_first_step_ms=0.0) \
        .first_bound_ms is None
    unbound = RunSpec("host", "float16", "original", QUICK, reference_first_step_ms=2000.0)  # no float32 median
    assert unbound.bound_ms is None and unbound.first_bound_ms is None
    assert "--first-bound-ms" not in unbound.workload_args()
    # The slow path forced (tests/integration/slow_path.py): a multiple of 0.1 makes the steady bound a tenth of
    # float32's step, and the first-step bound float32's first step plus that tenth (0.1x of it is smaller).
    monkeypatch.setenv(SLOW_STEP_MULTIPLE_ENV, "0.1")
    forced = RunSpec("host", "float16", "original", QUICK, reference_ms=400.0, reference_first_step_ms=3000.0)
    assert forced.bound_ms == pytest.approx(40.0) and forced.first_bound_ms == pytest.approx(3040.0)
    monkeypatch.setenv(SLOW_STEP_MULTIPLE_ENV, "2")  # under the floor of 5x: min(5, 2) x the first step
    assert forced.first_bound_ms == pytest.approx(max(3000.0 + 800.0, 2 * 3000.0))
    # A bound that tight may land in the one-time work any first step begins with: judged after the step, never
    # cut inside it.
    assert not forced.first_step_cuttable and "--cut-first-step" not in forced.workload_args()


def test_a_first_step_may_be_cut_inside_only_at_a_default_bound_of_5x_float32s_first_step() -> None:
    quick = RunSpec("host", "float16", "original", QUICK, reference_ms=124.0, reference_first_step_ms=815.0)
    assert quick.first_bound_ms == pytest.approx(815.0 + 5000.0) and quick.first_step_cuttable
    assert "--cut-first-step" in quick.workload_args()
    script = replace(quick, script=ScriptSpec(path="/home/u/train.py", label="~/train.py"))
    runner = script_runner_args(script, "/tmp/w", "/tmp/w/log")
    assert runner.index("--cut-first-step") < runner.index("--")  # the runner's, never the script's
    assert not RunSpec("host", "float16", "original", QUICK, reference_ms=124.0).first_step_cuttable


def test_float32_and_runs_without_a_measured_float32_are_not_bounded() -> None:
    f32 = RunSpec("host", "float32", "original", QUICK)
    assert with_slow_step_bound(f32, [_run("float32")]).bound_ms is None
    assert "--bound-ms" not in with_slow_step_bound(f32, [_run("float32")]).workload_args()
    f16 = RunSpec("host", "float16", "original", QUICK)
    assert with_slow_step_bound(f16, []).bound_ms is None
    failed = {**_run("float32"), "status": "failed"}
    assert with_slow_step_bound(f16, [failed]).bound_ms is None
    assert with_slow_step_bound(RunSpec("cpu", "float16", "original", QUICK), [_run("float32")]).bound_ms is None


def test_stacks_whose_keras_lacks_bfloat16_skip_it_with_the_reason() -> None:
    from fp16doctor.stacks import get_stack

    old = get_stack("tf1.7-cuda9.0")
    reason = old.precision_refusal("mixed_bfloat16") or ""
    assert "Keras 2.1.5" in reason and "mixed_bfloat16" in reason
    assert "refuses floatx bfloat16" in (old.precision_refusal("bfloat16") or "")
    keras2 = get_stack("tf2.15-keras2")  # a dtype policy, but Keras 2 checks floatx against float16/32/64
    assert keras2.precision_refusal("mixed_bfloat16") is None
    assert "refuses floatx bfloat16" in (keras2.precision_refusal("bfloat16") or "")
    cpu = get_stack("cpu")
    assert all(cpu.precision_refusal(p) is None for p in PRECISIONS)
    assert cpu.to_dict()["precisions"] == list(PRECISIONS)
