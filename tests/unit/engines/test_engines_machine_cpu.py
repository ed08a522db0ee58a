"""The engine machine's CPU as the workload reports it: what lets a remote engine's runs be judged by
their own CPU's flags, not this machine's."""

from __future__ import annotations

import sys
from pathlib import Path

from fp16doctor.analysis.context import build_context
from fp16doctor.engines.base import merge_workload_result
from fp16doctor.results import new_document

RECORDINGS = Path(__file__).resolve().parents[2] / "data" / "recordings"
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "fp16doctor" / "workload"))
import frameworks  # noqa: E402


def test_the_workload_reads_the_flags_that_decide_16_bit_speed_from_real_cpuinfo() -> None:
    xeon = frameworks.cpu_facts(str(RECORDINGS / "cpu-xeon-spr-tf2.21" / "cpuinfo.txt"))
    assert xeon is not None and "Xeon" in (xeon["model"] or "")
    assert {"avx512_fp16", "amx_bf16", "avx512_bf16"} <= set(xeon["flags"])
    epyc = frameworks.cpu_facts(str(RECORDINGS / "cpu-epyc-avx2-tf2.21" / "cpuinfo.txt"))
    assert epyc is not None and "avx2" in epyc["flags"] and not any(f.startswith("avx512") for f in epyc["flags"])
    assert frameworks.cpu_facts("/nonexistent/cpuinfo") is None


def test_a_remote_engines_runs_are_judged_by_the_cpu_they_ran_on() -> None:
    xeon = frameworks.cpu_facts(str(RECORDINGS / "cpu-xeon-spr-tf2.21" / "cpuinfo.txt"))
    record = {"stack": "cpu", "precision": "float16", "variant": "original", "device": "cpu",
              "engine": {"kind": "docker", "docker_host": "tcp://xeon-box:2376", "name": "xeon-box"}}
    merged = merge_workload_result(record, {"status": "ok", "cpu": xeon,
                                            "step_time_ms": {"median": 9000.0, "p10": 8900.0, "p90": 9100.0}})
    assert "cpu" not in merged and merged["engine"]["cpu"] == xeon
    assert merged["engine"]["docker_host"] == "tcp://xeon-box:2376"
    doc = new_document({"cpu": {"model": "AMD EPYC", "flags": ["avx2"]}, "gpus": []})
    doc["runs"] = [merged]
    ctx = build_context(doc)
    (run,) = ctx.runs
    assert "avx512_fp16" in ctx.cpu_for(run).flags  # not this machine's AVX2-only EPYC
