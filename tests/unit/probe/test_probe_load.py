"""What else the machine did while the rounds ran: read from a hand-made /proc, and said where the A/A control fails."""

from __future__ import annotations

from pathlib import Path

from fp16doctor.analysis import diagnose_document
from fp16doctor.probe.load import machine_load, snapshot


def fake_proc(root: Path, load: str, procs: dict[int, tuple[str, int, int]], mhz: float) -> Path:
    proc = root / "proc"
    proc.mkdir(parents=True, exist_ok=True)
    (proc / "loadavg").write_text(f"{load} 2/300 4242\n")
    (proc / "cpuinfo").write_text(f"processor\t: 0\ncpu MHz\t\t: {mhz}\n\nprocessor\t: 1\ncpu MHz\t\t: {mhz}\n")
    for pid, (name, ppid, ticks) in procs.items():
        (proc / str(pid)).mkdir(exist_ok=True)
        # proc(5): pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        (proc / str(pid) / "stat").write_text(f"{pid} ({name}) S {ppid} 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0\n")
    return proc


def test_the_busiest_other_processes_load_and_clock_are_read_before_and_after(tmp_path: Path) -> None:
    me = 100
    before = snapshot(fake_proc(tmp_path / "a", "0.10 0.20 0.30", {
        1: ("init", 0, 10), me: ("fp16doctor", 1, 50), 101: ("python3", me, 0),
        200: ("stress ng", 1, 1000), 300: ("sshd", 1, 5)}, 2400.0), tmp_path / "nosys", clock=lambda: 0.0)
    after = snapshot(fake_proc(tmp_path / "b", "1.90 0.80 0.40", {
        1: ("init", 0, 10), me: ("fp16doctor", 1, 60), 101: ("python3", me, 900),
        200: ("stress ng", 1, 1900), 300: ("sshd", 1, 7)}, 1800.0), tmp_path / "nosys", clock=lambda: 10.0)
    load = machine_load(before, after, me=me, cores=2, tick_hz=100.0)
    assert load["before"] == {"load_1min": 0.1, "load_5min": 0.2, "load_15min": 0.3, "cpu_mhz": 2400.0}
    assert load["after"]["load_1min"] == 1.9 and load["after"]["cpu_mhz"] == 1800.0
    # 900 ticks in 10 s at 100 Hz: 90 % of a core; this process and its child (the rounds) are ours, not others
    assert load["busiest_others"] == [{"pid": 200, "name": "stress ng", "cpu_pct": 90.0}]


def test_an_unreadable_proc_gives_an_empty_reading(tmp_path: Path) -> None:
    empty = snapshot(tmp_path / "none", tmp_path / "none", clock=lambda: 1.0)
    load = machine_load(empty, empty, me=1, cores=2, tick_hz=100.0)
    assert load["before"] == {} and load["busiest_others"] == []


def test_a_failed_aa_check_says_what_the_machine_was_doing() -> None:
    fp32 = {"median": 100.0, "rounds": [100.0, 101.0, 99.0, 100.5], "design": "interleaved", "n": 4,
            "aa_rounds": [112.0, 108.0, 110.0, 111.0]}
    bf16 = {"median": 98.0, "rounds": [98.0, 99.5, 97.0, 98.2], "design": "interleaved", "n": 4}
    doc = {"schema_version": 1, "host": {"cpu": {"flags": ["avx2", "avx512_bf16"]}, "gpus": []},
           "runs": [{"stack": "host", "precision": p, "variant": "original", "device": "cpu", "status": "ok",
                     "step_time_ms": s} for p, s in (("float32", fp32), ("mixed_bfloat16", bf16))],
           "timing_rounds": [{"stack": "host", "machine_load": {
               "cores": 2, "before": {"load_1min": 1.9, "cpu_mhz": 2400.0}, "after": {"load_1min": 2.3},
               "busiest_others": [{"pid": 200, "name": "stress-ng", "cpu_pct": 95.0}]}}]}
    verdict, = diagnose_document(doc).to_dict()["verdicts"]
    reason = verdict["aa_check"]["reason"]
    assert verdict["aa_check"]["passed"] is False and verdict["outcome"] == "no_significant_difference"
    assert "load average 1.90 -> 2.30 on 2 cores" in reason and "stress-ng (95 % of a core)" in reason
    assert "CPU clock 2400 MHz" in reason
