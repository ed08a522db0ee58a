"""Where the attribution tests find their data: real recordings under tests/data (read-only here)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data"
RECORDINGS = DATA / "recordings"
PUBLIC = DATA / "public"
XEON = RECORDINGS / "cpu-xeon-spr-tf2.21"
EPYC = RECORDINGS / "cpu-epyc-avx2-tf2.21"
EPYC_BF16 = RECORDINGS / "cpu-epyc-avx512bf16-tf2.21"
# The recorded windows: record.py times 3 steps for float32 / mixed_bfloat16 and 1 for float16.
WINDOW_STEPS = {"float32": 3, "float16": 1, "mixed_bfloat16": 3}


def model_layers(precision: str) -> list[dict]:
    return json.loads((RECORDINGS / "model_layers.json").read_text())[precision]


def onednn_lines(machine: Path, precision: str) -> list[str]:
    plain = machine / f"{precision}.onednn_verbose.log"
    if plain.exists():
        return plain.read_text().splitlines()
    with gzip.open(machine / f"{precision}.onednn_verbose.log.gz", "rt") as handle:
        return handle.read().splitlines()


def artifacts(machine: Path, precision: str, xplane: bool = True) -> dict:
    found: dict = {"window": {"steps": WINDOW_STEPS[precision], "kind": "after_timing"},
                   "onednn_lines": onednn_lines(machine, precision)}
    if xplane:
        found["xplane_path"] = str(machine / f"{precision}.xplane.pb")
    return found
