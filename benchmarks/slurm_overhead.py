"""What Slurm adds to a stack's matrix: the per-job overhead and the wall time against the local Docker engine.

The matrix is the `cpu` stack's quick comparison group: `fp16doctor diagnose --quick --stack cpu --no-host
--precision float32 --precision float16 --variant original --no-experiments` (two container runs, one group).
It runs on the local Docker engine (no Slurm), and as one exclusive Slurm job whose node runs the container
with docker, and with podman. The modes alternate each round, so drift on a shared machine hits all alike.

Per Slurm job it reads the job's progress file (engines/slurm/job.py) while the job runs:
  submit -> job start      sbatch until the job's first line (the controller's scheduling and slurmd's launch)
  job start -> image ready  the runtime found, stale containers swept, the image inspected (or built)
  image ready -> 1st step   the container started, the framework imported, the model built, its first step

    sudo python benchmarks/slurm_overhead.py [--rounds 2] [--json-out FILE]

Needs the one-node cluster (`bash .ci/slurm-up.sh`), a Docker engine (`bash .ci/docker-up.sh`) and podman
with the `cpu` image in it (tests/integration/test_slurm_runtimes.py copies it there). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

MATRIX = ["--quick", "--stack", "cpu", "--no-host", "--precision", "float32", "--precision", "float16",
          "--variant", "original", "--no-experiments"]
MODES = {"docker engine": [], "slurm + docker": ["--slurm", "--runtime", "docker"],
         "slurm + podman": ["--slurm", "--runtime", "podman"]}


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def _watch_progress(out: Path, seen: dict[str, float], stop: threading.Event) -> None:
    """When the job's script was written (just before sbatch) and when its first step came, by this clock."""
    while not stop.is_set():
        for script in out.glob("slurm/*/array-*/job.sh"):
            seen.setdefault("submit", script.stat().st_mtime)
        for path in out.glob("slurm/*/array-*/*/progress.jsonl"):
            for line in path.read_text().splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("kind") == "job":
                    seen.setdefault("job_start", float(entry["time"]))
                elif entry.get("kind") == "image":
                    seen.setdefault("image_ready", float(entry["time"]))
                elif (entry.get("kind") == "event" and entry["event"].get("event") == "step"
                      and "first_step" not in seen):
                    seen["first_step"] = time.time()
        time.sleep(0.05)


def diagnose(out: Path, extra: list[str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "fp16doctor", "diagnose", *MATRIX, *extra, "--out", str(out)]
    seen: dict[str, float] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_progress, args=(out, seen, stop), daemon=True)
    watcher.start()
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    wall_s = time.perf_counter() - started
    stop.set()
    watcher.join()
    if result.returncode != 0:
        raise SystemExit(f"diagnose {' '.join(extra)} failed ({result.returncode}): {result.stderr[-2000:]}")
    runs = json.loads((out / "results.json").read_text())["runs"]
    measured: dict[str, Any] = {"wall_s": round(wall_s, 1),
                                "step_ms": {r["precision"]: r["step_time_ms"]["median"] for r in runs},
                                "run_wall_s": {r["precision"]: r.get("wall_s") for r in runs}}
    if {"submit", "job_start", "image_ready", "first_step"} <= set(seen):
        measured["submit_to_job_start_s"] = round(seen["job_start"] - seen["submit"], 2)
        measured["job_start_to_image_ready_s"] = round(seen["image_ready"] - seen["job_start"], 2)
        measured["image_ready_to_first_step_s"] = round(seen["first_step"] - seen["image_ready"], 2)
        measured["submit_to_first_step_s"] = round(seen["first_step"] - seen["submit"], 2)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    names = list(MODES)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="fp16doctor-slurm-bench-") as tmp:
        for round_index in range(args.rounds):
            order = names if round_index % 2 == 0 else list(reversed(names))
            for name in order:
                measured = diagnose(Path(tmp) / f"{round_index}-{name.replace(' ', '_')}", MODES[name])
                print(f"round {round_index + 1} {name}: {measured}", file=sys.stderr)
                results[name].append(measured)
    summary: dict[str, Any] = {}
    for name, rounds in results.items():
        entry: dict[str, Any] = {"wall_s_median": statistics.median(r["wall_s"] for r in rounds),
                                 "wall_s": [r["wall_s"] for r in rounds], "rounds": rounds}
        for key in ("submit_to_job_start_s", "job_start_to_image_ready_s", "image_ready_to_first_step_s",
                    "submit_to_first_step_s"):
            values = [r[key] for r in rounds if key in r]
            if values:
                entry[key + "_median"] = statistics.median(values)
        summary[name] = entry
    report = {"machine": {"cpu": cpu_model(), "cores": len([line for line in Path("/proc/cpuinfo").read_text()
                                                             .splitlines() if line.startswith("processor")]),
                          "slurm": subprocess.run(["sinfo", "--version"], capture_output=True,
                                                  text=True).stdout.strip(),
                          "docker": subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"],
                                                   capture_output=True, text=True).stdout.strip(),
                          "podman": subprocess.run(["podman", "--version"], capture_output=True,
                                                   text=True).stdout.strip()},
              "date": time.strftime("%Y-%m-%d"), "matrix": MATRIX, "results": summary}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")


if __name__ == "__main__":
    main()
