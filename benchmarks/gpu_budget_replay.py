"""The planner's replay of a recorded GPU diagnose: what this release's default diagnose would plan on the machine
that made a results document, phase by phase, priced from that document's measured phases (import times, first
steps, step times, input times, profiled windows, its prepare phase). Nothing runs: the figures are replayed, not
measured.

    python benchmarks/gpu_budget_replay.py [docs/examples/gpu-h200-keras-torch-full/results.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fp16doctor.diagnose.replay import replay
from fp16doctor.diagnose.rounds import ProcessExperiment

DEFAULT = Path(__file__).parents[1] / "docs" / "examples" / "gpu-h200-keras-torch-full" / "results.json"


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DEFAULT
    doc = json.loads(path.read_text())
    # A backend experiment (the in-memory float32 and mixed_bfloat16 on another Keras backend, a fresh process),
    # priced beside the budget at the recorded import.
    backend = ProcessExperiment("a backend experiment", ("float32+synthetic_input", "mixed_bfloat16+synthetic_input"))
    replayed = replay(doc, (backend,))
    gpus = ", ".join(str(g.get("name")) for g in doc["host"].get("gpus") or []) or "no GPU"
    print(f"replayed from {path.name} ({gpus}; recorded {doc.get('created')}), not measured")
    print(f"own processes: {', '.join(s.label for s in replayed.own)}")
    print(f"one rounds process: {', '.join(replayed.rounds_labels())}, float32's A/A control")
    print("\n".join(replayed.plan.lines()))
    return 0 if replayed.plan.fits else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
