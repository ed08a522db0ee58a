"""What else the machine was doing while a measurement ran: the load average before and after, the other processes
that used the most CPU in between, and the CPU clock where the kernel shows it.

Stdlib only and Linux's /proc and /sys only; anything unreadable is left out, never an error. A timing whose A/A
control failed quotes these (analysis/context.load_words) so "too noisy" comes with a reason a user can act on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fp16doctor.workload.contention import mean_mhz

BUSIEST_KEPT = 3  # the other processes named, busiest first
# Processes using less than this share of one core over the timing are not named: a shell's housekeeping.
MIN_BUSY_PCT = 5.0


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


@dataclass(frozen=True)
class Snapshot:
    """One reading: the load averages, the CPU clock, and every process's CPU ticks and parent."""

    at: float  # time.monotonic()
    load: tuple[float, float, float] | None
    cpu_mhz: float | None
    ticks: dict[int, tuple[str, int, int]] = field(default_factory=dict)  # pid -> (name, parent pid, CPU ticks)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.load is not None:
            out.update(load_1min=self.load[0], load_5min=self.load[1], load_15min=self.load[2])
        if self.cpu_mhz is not None:
            out["cpu_mhz"] = round(self.cpu_mhz, 1)
        return out


def _load(proc: Path) -> tuple[float, float, float] | None:
    text = _read(proc / "loadavg")
    try:
        one, five, fifteen = (float(v) for v in (text or "").split()[:3])
    except ValueError:
        return None
    return one, five, fifteen


def _cpu_mhz(proc: Path, sys_cpu: Path) -> float | None:
    """The mean current clock over the CPUs, as the rounds read it (workload/contention.py mean_mhz)."""
    freqs = [_read(freq) for freq in sorted(sys_cpu.glob("cpu[0-9]*/cpufreq/scaling_cur_freq"))]
    return mean_mhz(freqs, _read(proc / "cpuinfo"))


def _ticks(proc: Path) -> dict[int, tuple[str, int, int]]:
    """pid -> (command name, parent pid, user + system ticks) from /proc/PID/stat (proc(5): the name is in
    parentheses and may hold spaces; fields after it are 3 state, 4 ppid, 14 utime, 15 stime)."""
    found = {}
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        text = _read(entry / "stat")
        if not text or ")" not in text:
            continue
        name = text[text.find("(") + 1:text.rfind(")")]
        rest = text[text.rfind(")") + 2:].split()
        try:
            found[int(entry.name)] = (name, int(rest[1]), int(rest[11]) + int(rest[12]))
        except (IndexError, ValueError):
            continue
    return found


def snapshot(proc: Path = Path("/proc"), sys_cpu: Path = Path("/sys/devices/system/cpu"),
             clock: Callable[[], float] = time.monotonic) -> Snapshot:
    return Snapshot(clock(), _load(proc), _cpu_mhz(proc, sys_cpu), _ticks(proc))


def _ours(pid: int, parents: dict[int, int], me: int) -> bool:
    """Whether a process is this one or descends from it (the measurement's own processes)."""
    seen = set()
    while pid and pid not in seen:
        if pid == me:
            return True
        seen.add(pid)
        pid = parents.get(pid, 0)
    return False


def machine_load(before: Snapshot, after: Snapshot, me: int | None = None, cores: int | None = None,
                 tick_hz: float | None = None) -> dict[str, Any]:
    """The record kept beside a timing (`timing_rounds[].machine_load`): load and clock before and after, and the
    other processes that used the most CPU between the two readings (this process and its children excluded)."""
    me = os.getpid() if me is None else me
    cores = cores if cores is not None else os.cpu_count()
    if tick_hz is None:
        try:
            tick_hz = float(os.sysconf("SC_CLK_TCK"))
        except (AttributeError, ValueError, OSError):
            tick_hz = 100.0  # Linux's USER_HZ on every common architecture
    seconds = max(after.at - before.at, 1e-9)
    parents = {pid: ppid for pid, (_, ppid, _) in {**before.ticks, **after.ticks}.items()}
    busy: list[dict[str, Any]] = []
    for pid, (name, _, ticks) in after.ticks.items():
        if pid not in before.ticks or _ours(pid, parents, me):
            continue
        pct = 100.0 * (ticks - before.ticks[pid][2]) / tick_hz / seconds
        if pct >= MIN_BUSY_PCT:
            busy.append({"pid": pid, "name": name, "cpu_pct": round(pct, 1)})
    busy.sort(key=lambda p: -float(p["cpu_pct"]))
    return {"seconds": round(seconds, 3), "cores": cores, "before": before.summary(), "after": after.summary(),
            "busiest_others": busy[:BUSIEST_KEPT]}
