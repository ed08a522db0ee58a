"""Failed runs explained from their output (logs in tests/data/container-logs, built from the messages CUDA, cuDNN,
TensorFlow and nvidia-container-cli print verbatim), and a user's script that raised under a 16-bit precision: its
known causes named with their fix, its reason one line, its record saying where and whether it would fail again."""

from __future__ import annotations

from pathlib import Path

import pytest

from fp16doctor.engines.failures import MAX_REASON, classify, log_tail, one_line, plain, script_cause
from fp16doctor.engines.runloop import Streamed, to_record

LOGS = Path(__file__).resolve().parents[2] / "data" / "container-logs"


@pytest.mark.parametrize(("log", "kind", "words"), [
    ("tf1.7-on-a100.log", "no_kernel_image", "no kernels for this GPU"),
    ("tf1.13-old-driver.log", "driver_too_old", "driver is too old"),
    ("cudnn-mismatch.log", "cudnn_mismatch", "7.0.5 but source was compiled with: 7.1.4"),
    ("require-cuda.log", "nvidia_require_cuda", "cuda>=12.1"),
    ("gpu-oom.log", "gpu_oom", "out of device memory"),
    ("no-gpu-runtime.log", "no_gpu_runtime", "nvidia-container-toolkit"),
    ("tf1-without-driver.log", "no_gpu_driver", "libcuda.so.1"),
])
def test_recorded_logs_are_classified(log: str, kind: str, words: str) -> None:
    failure = classify((LOGS / log).read_text(), exit_code=1)
    assert failure.kind == kind
    assert words in failure.reason


def test_oom_killed_and_exit_137() -> None:
    assert classify("Epoch 1/32", 137, oom_killed=True).kind == "host_oom"
    killed = classify("Epoch 1/32\n", 137)
    assert killed.kind == "killed" and "137" in killed.reason


def test_illegal_instruction_names_avx() -> None:
    assert "AVX" in classify("Illegal instruction (core dumped)", 132).reason


def test_unknown_failure_quotes_the_last_line() -> None:
    failure = classify("starting\nValueError: something odd\n", 1)
    assert failure.kind == "unknown"
    assert "exit 1" in failure.reason and "ValueError: something odd" in failure.reason


def test_log_tail_keeps_the_last_non_empty_lines() -> None:
    text = "\n".join(f"line {i}" for i in range(100)) + "\n\n"
    assert log_tail(text, 3) == ["line 97", "line 98", "line 99"]


# ---------------------------------------------------------------- a script's own fault under a precision

# The messages TensorFlow 2.21 / Keras 3.15 print, verbatim (escape codes as Keras writes them).
SAMPLING = ("Exception encountered when calling Sampling.call().\n\n\x1b[1mCould not automatically infer the output "
            "shape / dtype of 'sampling' (of type Sampling). Error encountered:\n\nInput 'y' of 'Mul' Op has type "
            "float32 that does not match type bfloat16 of argument 'x'.\x1b[0m\n\nArguments received by "
            "Sampling.call():\n  • args=(['<KerasTensor shape=(None, 4), dtype=bfloat16>'])")
EAGER_MUL = ("cannot compute Mul as input #1(zero-based) was expected to be a bfloat16 tensor but is a float tensor "
             "[Op:Mul] name: ")
CONCAT = ("in user code:\n\n    File \"train.py\", line 22, in g  *\n        return tf.concat([x, y], 0)\n\n"
          "    TypeError: Tensors in list passed to 'values' of 'ConcatV2' Op have types [float16, float32] that "
          "don't all match.\n")
RANGE = ("No OpKernel was registered to support Op 'Range' used by {{node StatefulPartitionedCall/functional_1/"
         "add_positions_1/range}} with these attrs: [Tidx=DT_INT16]\nRegistered devices: [CPU]\nRegistered kernels:\n"
         "  device='XLA_CPU_JIT'; Tidx in [DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT16, DT_HALF]\n"
         "  device='CPU'; Tidx in [DT_INT64]\n  device='CPU'; Tidx in [DT_HALF]\n")
NO_HALF = ("No OpKernel was registered to support Op 'MatrixInverse' used by {{node model/whitening/MatrixInverse}} "
           "with these attrs: [T=DT_HALF, adjoint=false]\nRegistered devices: [CPU]")


@pytest.mark.parametrize(("text", "precision", "kind", "reason", "fix"), [
    (SAMPLING, "mixed_bfloat16", "dtype_mixing",
     "a bfloat16 tensor times a float32 one under the mixed_bfloat16 policy", "cast the float32 one"),
    (EAGER_MUL, "mixed_bfloat16", "dtype_mixing", "a bfloat16 tensor times a float32 one", "tf.cast"),
    (CONCAT, "mixed_float16", "dtype_mixing",
     "a float16 tensor concatenated with a float32 one under the mixed_float16 policy", "compute_dtype"),
    (RANGE, "float16", "int16_range",
     "`ops.arange` made an int16 range in layer add_positions_1 under floatx float16", 'dtype="int32"'),
    (NO_HALF, "mixed_float16", "no_16bit_kernel",
     "no float16 kernel for MatrixInverse (layer whitening)", 'dtype="float32"'),
])
def test_known_script_faults_are_named_with_their_fix(text: str, precision: str, kind: str, reason: str,
                                                      fix: str) -> None:
    failure = script_cause(text, precision)
    assert failure is not None and failure.kind == kind
    assert reason in failure.reason and fix in failure.fix
    assert len(failure.reason) <= MAX_REASON and "\x1b" not in failure.reason + failure.fix


def test_a_float32_fault_or_an_unknown_one_is_no_precisions() -> None:
    assert script_cause(EAGER_MUL, "float32") is None
    assert script_cause("KeyError: 'label'", "float16") is None


def test_one_line_takes_out_escape_codes_and_cuts_at_a_word() -> None:
    text = "\x1b[1mValueError:\x1b[0m  the\nmessage " + "word " * 80
    line = one_line(text)
    assert "\x1b" not in line and "\n" not in line and line.startswith("ValueError: the message word")
    assert len(line) <= MAX_REASON and line.endswith("word…")
    assert plain("\x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b[31mred\x1b[0m") == "link red"


def _streamed(error: dict) -> Streamed:
    return Streamed(final={"event": "error", "status": "failed", **error}, exit_code=1)


def test_a_scripts_failure_record_is_one_line_with_the_users_line_its_fix_and_deterministic() -> None:
    location = {"file": "train.py", "line": 14, "code": "return z_mean + tf.exp(0.5 * z_log_var) * epsilon"}
    error = {"error": "TypeError: " + SAMPLING, "traceback": "Traceback (most recent call last):\n" + "x" * 4000,
             "script_failure": {"kind": "exception", "exception": "TypeError", "location": location}}
    record = to_record({"stack": "host", "precision": "mixed_bfloat16"}, _streamed(error), "", 600)
    assert record["status"] == "failed" and record["failure_kind"] == "dtype_mixing"
    assert record["error"] == "a bfloat16 tensor times a float32 one under the mixed_bfloat16 policy"
    assert record["fix"].startswith("cast the float32 one") and record["error_location"] == location
    assert record["deterministic"] is True
    assert not any("\x1b" in line for line in record["log_tail"])


def test_an_unknown_script_failure_is_still_one_line_and_a_timeout_is_not_deterministic() -> None:
    error = {"error": "ValueError: \x1b[1m" + "a long message " * 40 + "\x1b[0m",
             "script_failure": {"kind": "exception", "exception": "ValueError"}}
    record = to_record({"stack": "host", "precision": "float16"}, _streamed(error), "", 600)
    assert record["failure_kind"] == "unknown" and record["error"].startswith("ValueError: a long message")
    assert len(record["error"]) <= MAX_REASON and "\x1b" not in record["error"] and "fix" not in record
    assert "error_location" not in record and record["deterministic"] is True
    timed_out = _streamed(error)
    timed_out.timed_out = True
    record = to_record({"stack": "host", "precision": "float16"}, timed_out, "", 600)
    assert record["failure_kind"] == "timeout" and record["deterministic"] is False
