"""Does oneDNN's verbose mode, on for a whole run so the profiled window can be read, slow the timed steps?

oneDNN reads ONEDNN_VERBOSE once per process and TensorFlow exports no switch, so the workload turns it
on for the whole process and brackets the window with markers. This measures what that costs the timed
steps: rounds of the workload (float32, in-memory batches, a fixed number of steps, no profiled window)
alternate between three settings, each a fresh process:

- off: ONEDNN_VERBOSE unset;
- workload: the setting the workload uses (frameworks.ONEDNN_VERBOSE_SETTING: every component but
  gemm_api);
- all: ONEDNN_VERBOSE=1, every line (gemm_api included).

    python benchmarks/onednn_verbose_overhead.py [--rounds 3] [--steps 20]

Prints one JSON object: the median step per setting, oneDNN lines per step, the overhead against "off",
and the cost per printed line (all vs off), from which the cost on another CPU follows from its lines
per step. Target: at most 2 % for the workload's setting.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

WORKLOAD = Path(__file__).resolve().parent.parent / "fp16doctor" / "workload" / "run_workload.py"
sys.path.insert(0, str(WORKLOAD.parent))

from frameworks import ONEDNN_VERBOSE_SETTING  # noqa: E402
from protocol import PREFIX  # noqa: E402

SETTINGS = {"off": None, "workload": ONEDNN_VERBOSE_SETTING, "all": "1"}


def one_run(setting: str | None, steps: int) -> tuple[float, float]:
    """(median step ms, oneDNN exec lines per step) of one fresh workload process."""
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_VERBOSE"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    if setting is not None:
        env["ONEDNN_VERBOSE"] = setting
    total = 3 + steps
    proc = subprocess.run(
        [sys.executable, "-u", str(WORKLOAD), "--precision", "float32", "--variant", "synthetic_input",
         "--height", "112", "--width", "168", "--batch-size", "32", "--warmup-steps", "3",
         "--min-steps", str(steps), "--max-steps", str(steps), "--max-measure-s", "1000",
         "--stable-tolerance", "0", "--input-batches", "1", "--backend", "tensorflow"],
        capture_output=True, text=True, env=env, check=True)
    lines = proc.stdout.splitlines()
    exec_lines = sum(1 for line in lines if line.startswith("onednn_verbose") and ",exec," in line)
    result = next(json.loads(line[len(PREFIX):]) for line in lines
                  if line.startswith(PREFIX) and '"event": "result"' in line)
    return float(result["run"]["step_time_ms"]["median"]), exec_lines / total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    medians: dict[str, list[float]] = {name: [] for name in SETTINGS}
    per_step: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for _ in range(args.rounds):  # alternating, so drift on a shared machine falls on every setting
        for name, setting in SETTINGS.items():
            ms, lines = one_run(setting, args.steps)
            medians[name].append(ms)
            per_step[name].append(lines)
    step = {name: statistics.median(v) for name, v in medians.items()}
    lines = {name: statistics.median(v) for name, v in per_step.items()}
    extra_lines = lines["all"] - lines["off"]
    per_line_us = (step["all"] - step["off"]) * 1000.0 / extra_lines if extra_lines > 0 else None
    print(json.dumps({
        "machine": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "rounds": args.rounds, "steps_per_run": args.steps,
        "median_step_ms": {k: round(v, 2) for k, v in step.items()},
        "step_ms_per_round": medians,
        "onednn_lines_per_step": {k: round(v, 1) for k, v in lines.items()},
        "overhead_vs_off": {k: round(step[k] / step["off"] - 1.0, 4) for k in ("workload", "all")},
        "cost_per_line_us": round(per_line_us, 2) if per_line_us is not None else None,
    }, indent=2))


if __name__ == "__main__":
    main()
