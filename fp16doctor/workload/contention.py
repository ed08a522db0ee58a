# -*- coding: utf-8 -*-
"""What else used the CPU while the rounds measured, read from inside the measuring process, so every engine that
runs the workload records it alike (the host, a Docker container, a Slurm node): /proc/stat and /proc/loadavg are
the machine's, not the container's.

`reading()` before and after the rounds; `contention(before, after)` the record kept beside them
(`timing_rounds[].contention`, docs/results-schema.md): the share of the whole CPU that other processes used (the
machine's busy time less this process's own), the hypervisor's steal, the load average against the cores, and the
clock where the kernel shows it. Anything unreadable is left out, never an error.

Runs inside the target Python: valid Python 2.7 and 3.5, stdlib only, and it imports no sibling.
"""
from __future__ import division

import os
import time

STAT = "/proc/stat"
LOADAVG = "/proc/loadavg"
CPUFREQ = "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq"
CPUINFO = "/proc/cpuinfo"
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal guest guest_nice (proc(5)); guest time is
# counted in user and nice already.
_IDLE, _IOWAIT, _STEAL = 3, 4, 7


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _stat(text):
    """(busy ticks, all ticks, steal ticks, CPUs) from /proc/stat's text; None where it is not there."""
    total_line, cpus = None, 0
    for line in (text or "").splitlines():
        if line.startswith("cpu "):
            total_line = line
        elif line.startswith("cpu") and line[3:4].isdigit():
            cpus += 1
    if total_line is None:
        return None
    try:
        values = [int(v) for v in total_line.split()[1:9]]
    except ValueError:
        return None
    if len(values) < 8:
        return None
    total = sum(values)
    return total - values[_IDLE] - values[_IOWAIT], total, values[_STEAL], cpus or None


def _load(text):
    try:
        return float((text or "").split()[0])
    except (IndexError, ValueError):
        return None


def mean_mhz(freq_texts, cpuinfo_text):
    """The mean current clock: cpufreq's scaling_cur_freq texts (kHz) where the kernel has them, else
    /proc/cpuinfo's "cpu MHz" lines (a virtual machine often shows only the nominal clock there); None without
    either. The host's probe (probe/load.py) reads the clock with it too."""
    khz = [int(text.strip()) for text in freq_texts if text and text.strip().isdigit()]
    if khz:
        return sum(khz) / len(khz) / 1000.0
    mhz = []
    for line in (cpuinfo_text or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "cpu MHz":
            try:
                mhz.append(float(value))
            except ValueError:
                continue
    return sum(mhz) / len(mhz) if mhz else None


def _mhz(read, cpus):
    return mean_mhz([read(CPUFREQ % index) for index in range(cpus or 0)], read(CPUINFO))


def _own_s():
    """This process's CPU time (every thread; its waited-for children's too), in seconds."""
    times = os.times()
    return times[0] + times[1] + times[2] + times[3]


def reading(read=_read, clock=time.time, own_s=_own_s):
    """One reading: the machine's CPU ticks, this process's CPU seconds, the load average and the clock."""
    stat = _stat(read(STAT))
    return {"at": clock(), "stat": stat, "own_s": own_s(), "load_1min": _load(read(LOADAVG)),
            "cpu_mhz": _mhz(read, stat[3] if stat else 0)}


def _tick_hz():
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100.0  # Linux's USER_HZ on every common architecture


def contention(before, after, tick_hz=None):
    """The record of what else used the CPU between two readings (`timing_rounds[].contention`): `others_cpu_pct`,
    the share of the whole CPU (every core) other processes used, and `steal_pct`, the hypervisor's, where
    /proc/stat was read; the load average before and after against `cores`; the clock before and after."""
    out = {"seconds": round(max(after["at"] - before["at"], 0.0), 3)}
    if before.get("stat") and after.get("stat"):
        busy = after["stat"][0] - before["stat"][0]
        total = after["stat"][1] - before["stat"][1]
        steal = after["stat"][2] - before["stat"][2]
        own = (after["own_s"] - before["own_s"]) * (tick_hz or _tick_hz())
        if total > 0:
            out["others_cpu_pct"] = round(min(100.0, max(0.0, 100.0 * (busy - steal - own) / total)), 1)
            out["steal_pct"] = round(max(0.0, 100.0 * steal / total), 1)
            out["own_cpu_pct"] = round(min(100.0, max(0.0, 100.0 * own / total)), 1)
        out["cores"] = after["stat"][3]
    for key in ("load_1min", "cpu_mhz"):
        pair = [before.get(key), after.get(key)]
        if any(v is not None for v in pair):
            out[key] = [None if v is None else round(v, 2) for v in pair]
    return out
