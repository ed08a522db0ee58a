"""Wall time of one diagnose matrix on one Docker engine against two.

The matrix is `fp16doctor diagnose --quick --stack cpu --no-host` (float32, float16, mixed_float16 and
float32 on synthetic input: 4 container runs). "one" runs it on the default engine; "two" on the
default engine plus a second dockerd this script starts on the same machine (own socket, data root,
exec root, pid file and bridge; the cpu image copied into it through the API, timed too). The modes
alternate (one, two, two, one, ...) so that drift on a shared machine hits both alike.

    sudo python benchmarks/scale_engines.py [--rounds 2] [--json-out FILE]

Needs root (a second dockerd) and a running default engine (`bash .ci/docker-up.sh`). Prints one JSON
object with what was measured and on what.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from docker_env import ca_bundle  # noqa: E402
from scale_second_engine import SecondEngine  # noqa: E402

from fp16doctor.engines.context import BuildOptions  # noqa: E402
from fp16doctor.engines.docker import sdk  # noqa: E402
from fp16doctor.engines.docker.build import ensure_image  # noqa: E402
from fp16doctor.stacks import get_stack  # noqa: E402

FIRST = "unix:///var/run/docker.sock"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def diagnose(out: Path, engines: list[str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "fp16doctor", "diagnose", "--quick", "--stack", "cpu", "--no-host",
               "--out", str(out)]
    for url in engines:
        command += ["--docker-host", url]
    env = dict(os.environ)
    ca = ca_bundle()
    if ca is not None:
        env["FP16DOCTOR_CA_BUNDLE"] = str(ca)
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    wall_s = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"diagnose failed ({result.returncode}): {result.stderr[-2000:]}")
    doc = json.loads((out / "results.json").read_text())
    runs = [{"cell": f"{r['precision']}/{r['variant']}", "engine": r["engine"]["docker_host"],
             "step_ms_median": r["step_time_ms"]["median"],
             "concurrent_runs": r["engine"].get("concurrent_runs")} for r in doc["runs"]]
    return {"engines": len(engines), "wall_s": round(wall_s, 1), "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()

    image = ensure_image(get_stack("cpu"), FIRST, BuildOptions(docker_host=FIRST, ca_bundle=ca_bundle()),
                         lambda _line: None)
    facts = sdk.engine_facts(FIRST)
    second = SecondEngine()
    measurements: list[dict[str, Any]] = []
    try:
        second.start()
        started = time.perf_counter()
        sdk.copy_image(FIRST, second.url, image, lambda _line: None)
        copy_s = time.perf_counter() - started
        with tempfile.TemporaryDirectory(prefix="fp16doctor-bench-") as tmp:
            for round_index in range(args.rounds):
                order = [[FIRST], [FIRST, second.url]]
                if round_index % 2:
                    order.reverse()
                for engines in order:
                    out = Path(tmp) / f"r{round_index}-{len(engines)}"
                    measurements.append({"round": round_index, **diagnose(out, engines)})
                    print(json.dumps(measurements[-1]), file=sys.stderr)
    finally:
        sdk.forget_client(second.url)
        second.remove()

    def wall(n: int) -> float:
        return statistics.median(m["wall_s"] for m in measurements if m["engines"] == n)

    def steps(n: int) -> dict[str, float]:
        cells: dict[str, list[float]] = {}
        for m in measurements:
            if m["engines"] == n:
                for r in m["runs"]:
                    cells.setdefault(r["cell"], []).append(r["step_ms_median"])
        return {cell: round(statistics.median(v), 1) for cell, v in sorted(cells.items())}

    report = {
        "benchmark": "scale_engines",
        "matrix": "diagnose --quick --stack cpu --no-host (4 container runs)",
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "os": platform.platform(),
                    "memory_mib": facts.mem_total_mib},
        "docker": {"server_version": facts.server_version, "second_engine": "same machine, same cores"},
        "image": image,
        "image_copy_s": round(copy_s, 1),
        "rounds": args.rounds,
        "wall_s_median": {"one_engine": wall(1), "two_engines": wall(2)},
        "speedup": round(wall(1) / wall(2), 2),
        "step_ms_median": {"one_engine": steps(1), "two_engines": steps(2)},
        "measurements": measurements,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")


if __name__ == "__main__":
    main()
