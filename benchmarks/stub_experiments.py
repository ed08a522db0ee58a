"""Run the fp16doctor CLI with a stand-in experiment planner, to time a quick diagnose with experiments
before the analysis plans any (fp16doctor.analysis.experiments absent) or with a fixed plan.

    python benchmarks/stub_experiments.py diagnose --quick --out DIR

The stand-in plans what the evidence on a CPU without native float16 asks for: float16 with float32
batches (host-side float16 work) and float16 with oneDNN off, for every float16 run of the original
variant. It only chooses runs; running them is diagnose's own code.
"""

from __future__ import annotations

import sys
import types
from typing import Any


def plan_experiments(doc: dict[str, Any]) -> list[dict[str, Any]]:
    plan = []
    for run in doc.get("runs", []):
        if run.get("precision") == "float16" and run.get("variant") == "original" and run.get("status") == "ok":
            plan.append({"stack": run["stack"], "precision": "float16", "variant": "float32_batches",
                         "experiment": {"changes": {"batch_dtype": "float32"}, "tests": "host_fp16_emulation"},
                         "reason": "stand-in plan (benchmarks/stub_experiments.py)"})
            plan.append({"stack": run["stack"], "precision": "float16", "variant": "onednn_off",
                         "experiment": {"changes": {"env": {"TF_ENABLE_ONEDNN_OPTS": "0"}},
                                        "tests": "slow_fp16_kernels"},
                         "reason": "stand-in plan (benchmarks/stub_experiments.py)"})
    return plan


if __name__ == "__main__":
    module = types.ModuleType("fp16doctor.analysis.experiments")
    module.plan_experiments = plan_experiments  # type: ignore[attr-defined]
    sys.modules["fp16doctor.analysis.experiments"] = module
    from fp16doctor.cli import main

    sys.argv = ["fp16doctor", *sys.argv[1:]]
    main()
