"""Planning the matrix, and the results file written as runs finish."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fp16doctor.diagnose import HOST_STACK, plan_runs
from fp16doctor.engines.spec import FULL, QUICK
from fp16doctor.results import ResultsWriter, new_document

WORKLOAD_DIR = Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"
sys.path.insert(0, str(WORKLOAD_DIR))  # the workload's modules import each other from beside themselves


def test_quick_plan_runs_every_precision_as_written_and_leaves_the_input_control_to_the_evidence() -> None:
    """The in-memory input control runs at a budgeted size only where a run's batch time says it could show
    something (analysis/experiments.py plans it then)."""
    specs = plan_runs([HOST_STACK], ["float32", "float16", "mixed_float16"], QUICK, None, None)
    cells = [(s.precision, s.variant) for s in specs]
    assert cells == [("float32", "original"), ("float16", "original"), ("mixed_float16", "original")]


def test_full_plan_isolates_compute_for_every_precision_and_stack() -> None:
    specs = plan_runs([HOST_STACK, "cpu"], ["float32", "float16"], FULL, None, "/data/train")
    synth = [(s.stack, s.precision) for s in specs if s.variant == "synthetic_input"]
    assert synth == [("host", "float32"), ("host", "float16"), ("cpu", "float32"), ("cpu", "float16")]
    # The user's own data lives on this host: containers use their synthetic set.
    assert {s.data_dir for s in specs if s.stack == "host" and s.variant == "original"} == {"/data/train"}
    assert {s.data_dir for s in specs if s.stack == "cpu"} == {None}


def test_results_are_on_disk_after_every_run_and_a_rerun_replaces_its_cell(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    writer = ResultsWriter(path, new_document({"gpus": []}))
    assert json.loads(path.read_text())["runs"] == []
    writer.add_run({"stack": "host", "precision": "float32", "variant": "original", "status": "failed",
                    "device": "cpu", "error": "killed"})
    assert len(json.loads(path.read_text())["runs"]) == 1
    writer.add_run({"stack": "host", "precision": "float32", "variant": "original", "status": "ok",
                    "device": "cpu", "step_time_ms": {"median": 90.0}})
    runs = json.loads(path.read_text())["runs"]
    assert [r["status"] for r in runs] == ["ok"]
    assert not list(tmp_path.glob(".tmp-*"))


def test_a_precision_the_device_computes_natively_is_profiled_in_the_rounds_where_the_budget_binds() -> None:
    """mixed_bfloat16 on a CPU with AVX512-BF16 is expected to meet no pathology: at a budgeted size on this machine
    its steps and its profiled window come from the host's rounds process, with no process of its own; elsewhere
    (the full size, another stack, no float32 beside it) it keeps its own."""
    from fp16doctor.diagnose.rounds import profiled_in_rounds

    bf16_cpu = {"cpu": {"flags": ["avx512f", "avx512_bf16"]}, "gpus": []}
    specs = plan_runs([HOST_STACK, "cpu"], ["float32", "float16", "mixed_bfloat16"], QUICK, None, None)
    assert [(s.stack, s.precision) for s in profiled_in_rounds(specs, bf16_cpu, True)] == [
        ("host", "float16"), ("host", "mixed_bfloat16")]
    assert profiled_in_rounds(specs, bf16_cpu, False) == []  # the budget does not bind (full size, queued)
    assert profiled_in_rounds([s for s in specs if s.precision != "float32"], bf16_cpu, True) == []


def test_float16_is_profiled_in_the_rounds_only_where_tensorflow_computes_it_in_its_own_kernels() -> None:
    """On a CPU without float16 arithmetic TensorFlow runs float16 in its own kernels (2-6x float32's step where
    measured); with AVX512-FP16 it hands float16 to oneDNN, whose reference kernels took 160x on a Xeon: there it
    keeps a run of its own, bounded and cut. Other backends, GPUs and unknown flags keep theirs too."""
    from fp16doctor.diagnose.rounds import profiled_in_rounds

    specs = plan_runs([HOST_STACK], ["float32", "float16", "mixed_float16", "mixed_bfloat16"], QUICK, None, None)
    epyc = {"cpu": {"flags": ["avx2", "avx512f", "avx512_bf16"]}, "gpus": [],
            "frameworks": {"keras": {"backend": "tensorflow"}}}
    assert [s.precision for s in profiled_in_rounds(specs, epyc, True)] == [
        "float16", "mixed_float16", "mixed_bfloat16"]
    avx2 = {"cpu": {"flags": ["avx2", "f16c"]}, "gpus": []}
    assert [s.precision for s in profiled_in_rounds(specs, avx2, True)] == ["float16", "mixed_float16"]
    xeon = {"cpu": {"flags": ["avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16"]}, "gpus": []}
    assert [s.precision for s in profiled_in_rounds(specs, xeon, True)] == ["mixed_bfloat16"]
    assert [s.precision for s in profiled_in_rounds(specs, epyc, True, backend="torch")] == ["mixed_bfloat16"]
    assert profiled_in_rounds(specs, {"cpu": {}, "gpus": []}, True) == []
    # A GPU that computes float16 at float32's rate or faster (7.5) takes float16 and mixed_float16 in the rounds;
    # one at 1/64 of it (6.1) keeps their runs of their own, bounded.
    gpu = {"cpu": {"flags": ["avx2"]}, "gpus": [{"compute_capability": "7.5"}]}
    assert [s.precision for s in profiled_in_rounds(specs, gpu, True)] == ["float16", "mixed_float16"]
    pascal = {"cpu": {"flags": ["avx2"]}, "gpus": [{"name": "NVIDIA GeForce GTX 1080", "compute_capability": "6.1"}]}
    assert profiled_in_rounds(specs, pascal, True) == []
