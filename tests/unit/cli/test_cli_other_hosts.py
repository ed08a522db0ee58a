"""probe, explain and report on a host that is not Linux (the question's user was on Windows 10): with Linux's
files, calls and process groups faked away, they still do their job and never reach for them; diagnose says in
one line what it does not support there."""

from __future__ import annotations

import builtins
import ctypes
import json
import os
import platform
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import EXAMPLES, SEED, run_cli

import fp16doctor.probe as probe

LINUX_ONLY = ("/proc/", "/sys/", "/etc/os-release")


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A Windows 10 host: platform says so, os lacks the POSIX calls, Linux's files are not there (and any
    attempt to read them is recorded)."""
    reached: list[str] = []
    real_open = builtins.open

    def guarded_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, Path)) and str(file).startswith(LINUX_ONLY):
            reached.append(str(file))
            raise FileNotFoundError(2, "No such file or directory", str(file))
        return real_open(file, *args, **kwargs)

    real_cdll = ctypes.CDLL

    def no_cdll(name: Any, *args: Any, **kwargs: Any) -> Any:
        if name is None:  # the running process's own symbols (libc's fflush): POSIX only
            reached.append("ctypes.CDLL(None)")
            raise OSError("no CDLL(None) on Windows")
        return real_cdll(name, *args, **kwargs)  # a named library (NVML's) loads on Windows too

    def no_os_release() -> dict[str, str]:
        reached.append("freedesktop_os_release")
        raise OSError("no /etc/os-release")

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(ctypes, "CDLL", no_cdll)
    monkeypatch.setattr(platform, "freedesktop_os_release", no_os_release)
    monkeypatch.setattr(platform, "system", lambda: "Windows")
    monkeypatch.setattr(platform, "release", lambda: "10")
    monkeypatch.setattr(platform, "version", lambda: "10.0.19045")
    monkeypatch.setattr(platform, "machine", lambda: "AMD64")
    monkeypatch.setattr(platform, "processor", lambda: "Intel64 Family 6 Model 158 Stepping 10, GenuineIntel")
    for name in ("sched_getaffinity", "killpg", "getpgid", "setsid", "uname"):
        monkeypatch.delattr(os, name, raising=False)
    # The frameworks are described by a child Python (portable, and seconds of TensorFlow import): not the point.
    monkeypatch.setattr(probe, "probe_frameworks",
                        lambda python=None, timeout_s=0: ({"version": "3.7.3", "executable": "python.exe"}, {}))
    return reached


def test_probe_describes_a_windows_host_without_linux_calls(windows: list[str]) -> None:
    done = run_cli("probe", "--json")
    assert done.code == 0, done.stderr
    host = json.loads(done.stdout)
    assert host["os"] == "Windows 10.0.19045 (AMD64)"
    assert host["cpu"]["source"] == "platform" and host["cpu"]["cores"] == os.cpu_count()
    assert host["cpu"]["cores_usable"] == os.cpu_count() and host["cpu"]["cpu_limit_cores"] is None
    assert windows == []
    assert run_cli("probe").code == 0 and windows == []


def test_explain_and_report_run_on_a_windows_host(windows: list[str], tmp_path: Path) -> None:
    explained = run_cli("explain", str(EXAMPLES / "cpu-epyc-avx512bf16-quick" / "report.html"))
    assert explained.code == 0, explained.stderr
    assert "mixed_bfloat16" in explained.stdout
    out = tmp_path / "report.html"
    reported = run_cli("report", str(SEED), "--out", str(out))
    assert reported.code == 0, reported.stderr
    assert "NVIDIA TITAN V" in out.read_text(encoding="utf-8")
    assert windows == []


def test_diagnose_says_in_one_line_what_it_does_not_support_off_linux(windows: list[str], tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from fp16doctor.diagnose import DiagnoseOptions, run_diagnose
    from fp16doctor.errors import DoctorError

    notes: list[str] = []

    class Stop(Exception):
        pass

    def stop_at_probe(python: Any = None) -> Any:
        raise Stop

    monkeypatch.setattr(probe, "probe_host", stop_at_probe)

    class Notes:
        def note(self, message: str) -> None:
            notes.append(message)

        def start_run(self, spec: Any, total: int, index: int) -> None: ...
        def event(self, event: dict[str, Any]) -> None: ...
        def finish_run(self, record: dict[str, Any]) -> None: ...

    with pytest.raises((Stop, DoctorError)):
        run_diagnose(DiagnoseOptions(out_dir=tmp_path), Notes())
    off_linux = [n for n in notes if "not Linux" in n]
    assert len(off_linux) == 1 and "\n" not in off_linux[0]
    assert off_linux[0].startswith("Windows is not Linux") and "--slurm" in off_linux[0]
