"""What the integration tests that run fp16doctor on a user's script share: the environment both processes run in,
and the command itself, run from a folder as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def script_env(**extra: str) -> dict[str, str]:
    """One TensorFlow thread in both processes: two threads on a shared 2-core machine stall at every parallel op
    whenever another process takes a core, and the medians then say more about the neighbours than about fp16doctor
    (TF reads these in tensorflow/core/common_runtime/process_util.cc). This checkout first on the path."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
           "OMP_NUM_THREADS": "1", **extra}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def fp16doctor(cwd: Path, *args: str, timeout: int = 900, **env: str) -> subprocess.CompletedProcess[str]:
    """`fp16doctor ARGS` run in `cwd`, its output captured."""
    return subprocess.run([sys.executable, "-m", "fp16doctor", *args], capture_output=True, text=True,
                          env=script_env(**env), cwd=cwd, timeout=timeout)
