"""What a run's profiled window left, turned into its measured ops: the oneDNN lines kept from its stdout
(`WindowCapture`), the profile files it wrote, and the attribution (fp16doctor.attribution) that reads them."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from fp16doctor.workload.protocol import ONEDNN_PREFIXES, WINDOW_END, WINDOW_START

# oneDNN lines kept per window: a window's steps run tens to hundreds of primitives each.
MAX_WINDOW_LINES = 20000



class WindowCapture:
    """Keeps the oneDNN verbose lines of each profiled window (by its kind) and drops every other line.

    With ONEDNN_VERBOSE on for the whole process, every step prints; only the window's lines matter.
    """

    def __init__(self, max_lines: int = MAX_WINDOW_LINES) -> None:
        self.windows: dict[str, list[str]] = {}
        self.truncated: set[str] = set()
        self.max_lines = max_lines
        self.outside = 0  # oneDNN execution lines printed outside any window (during the timed steps)
        self._kind: str | None = None

    def feed(self, line: str) -> bool:
        """Take one stdout line; True when it was a window marker or a oneDNN line (not for the log)."""
        if line.startswith(WINDOW_START):
            self._kind = _marker_field(line, "kind") or "window"
            self.windows[self._kind] = []
            return True
        if line.startswith(WINDOW_END):
            self._kind = None
            return True
        if not line.startswith(ONEDNN_PREFIXES):
            return False
        if self._kind is not None:
            lines = self.windows[self._kind]
            if len(lines) < self.max_lines:
                lines.append(line.rstrip("\n"))
            else:
                self.truncated.add(self._kind)
        elif ",exec," in line:
            self.outside += 1
        return True


def split_script_log(path: str | Path, capture: WindowCapture) -> None:
    """A script run's log holds the script's own output and, interleaved, oneDNN's verbose lines and the
    window markers (the runner sends the script's stdout there, and oneDNN prints to the same stream):
    those go to `capture`, and the log keeps the script's output alone. A log that cannot be read or
    rewritten is left as it is."""
    log = Path(path)
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    kept = [line for line in text.splitlines(keepends=True) if not capture.feed(line)]
    if len(kept) != len(text.splitlines()):
        try:
            log.write_text("".join(kept), encoding="utf-8")
        except OSError:
            pass


def _marker_field(line: str, name: str) -> str | None:
    """ "=== fp16doctor-window-start 1764.2 kind first_step" -> "first_step" for name "kind"."""
    words = line.split()
    for i, word in enumerate(words[:-1]):
        if word == name:
            return words[i + 1]
    return None


# Paths the workload's `profile` may name; relocated when the files were copied out of a container.
PROFILE_PATH_KEYS = ("xplane", "torch_events_path", "tf1_step_stats")


def attach_ops(record: dict[str, Any], capture: WindowCapture, local_dir: Path | None,
               keep_dir: Path | None = None) -> None:
    """Turn the run's raw profile into `record["ops"]` (fp16doctor.attribution), or say why not in
    `record["ops_error"]`. `local_dir` holds the workload's profile folder here (for a container: the
    copy taken out of it); `keep_dir`, when given, receives a copy of the raw files. Never raises for
    a profile it cannot read: the run's measurement stands without it. A rounds process's configurations with no
    run of their own (`own_run`) each get theirs the same way, in their own entry."""
    own_run = record.get("own_run")
    if isinstance(own_run, dict):
        for label, fields in own_run.items():
            if isinstance(fields, dict):
                fields.setdefault("device", record.get("device"))
                attach_ops(fields, capture, local_dir, keep_dir / label if keep_dir is not None else None)
    profile = record.get("profile")
    if not isinstance(profile, dict):
        return
    began = time.monotonic()
    window = profile.get("window") if isinstance(profile.get("window"), dict) else None
    kind = str((window or {}).get("kind", ""))
    remote_dir = str(profile.get("dir") or "")
    artifacts: dict[str, Any] = {k: v for k, v in profile.items() if k not in ("dir", "error")}
    artifacts["device"] = record.get("device")
    for key in PROFILE_PATH_KEYS:
        path = artifacts.get(key)
        if isinstance(path, str) and local_dir is not None and remote_dir and path.startswith(remote_dir):
            artifacts[key] = str(local_dir / path[len(remote_dir):].lstrip("/"))
    lines = capture.windows.get(kind, []) if profile.get("onednn") else []
    if lines:
        artifacts["onednn_lines"] = lines
        if local_dir is not None and local_dir.is_dir():
            log = local_dir / kind / "onednn_verbose.log"
            try:
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text("\n".join(lines) + "\n", encoding="utf-8")
                artifacts["onednn_log"] = str(log)
            except OSError:
                pass  # the lines themselves are in the artifacts
    errors = [str(profile["error"])] if profile.get("error") else []
    if kind in capture.truncated:
        errors.append(f"oneDNN verbose output cut at {capture.max_lines} lines")
    torch_path = artifacts.get("torch_events_path")
    if isinstance(torch_path, str):
        try:
            artifacts["torch_events"] = json.loads(Path(torch_path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            errors.append(f"cannot read the torch profile: {exc.__class__.__name__}")
    if isinstance(artifacts.get("xplane"), str):
        # The attribution's names for the trace and whose it is.
        artifacts["xplane_path"] = artifacts["xplane"]
        artifacts["xplane_framework"] = "jax" if profile.get("backend") == "jax" else "tensorflow"
    tf1_path = artifacts.get("tf1_step_stats")
    if isinstance(tf1_path, str):
        artifacts["tf1_step_stats_path"] = tf1_path
        try:
            artifacts["tf1_step_stats"] = _merge_step_stats(json.loads(Path(tf1_path).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            artifacts.pop("tf1_step_stats")
            errors.append(f"cannot read the TF1 step stats: {exc.__class__.__name__}")
    present = sorted(k for k in ("xplane", "torch_events_path", "tf1_step_stats_path", "onednn_lines")
                     if artifacts.get(k) and (k == "onednn_lines" or Path(str(artifacts[k])).exists()))
    summary: dict[str, Any] = {"window": window, "artifacts": present}
    if capture.outside:
        # What oneDNN printed while the timed steps ran: a cost on them (benchmarks/onednn_verbose_overhead.py).
        summary["onednn_lines_outside_window"] = capture.outside
    ops, why = _build_ops(artifacts, (record.get("model") or {}).get("layers") or []) if present else (
        None, "the profiled window recorded nothing")
    if ops is not None:
        record["ops"] = ops
        device_time = _build_device_time(artifacts)
        if device_time is not None:
            record["device_time"] = device_time
    else:
        errors.insert(0, why)
    if errors:
        record["ops_error"] = "; ".join(e for e in errors if e)
    if keep_dir is not None and local_dir is not None and local_dir.is_dir():
        try:
            shutil.copytree(local_dir, keep_dir, dirs_exist_ok=True)
            summary["kept"] = str(keep_dir)
        except OSError as exc:
            record["ops_error"] = "; ".join([*errors, f"could not keep the profile: {exc}"])
    # What reading and attributing this window took here: the budget prices the windows still to come with it.
    summary["attribution_s"] = round(time.monotonic() - began, 3)
    record["profile"] = summary


def _merge_step_stats(recorded: Any) -> dict[str, Any]:
    """The workload's {"steps": [step_stats, ...]} (one RunMetadata.step_stats per window step, as
    MessageToDict gives it) as one step_stats holding every step's nodes, device by device."""
    devices: dict[str, list[Any]] = {}
    for step in recorded.get("steps", []) if isinstance(recorded, dict) else []:
        for dev in step.get("devStats", []) if isinstance(step, dict) else []:
            devices.setdefault(str(dev.get("device", "")), []).extend(dev.get("nodeStats", []))
    return {"devStats": [{"device": name, "nodeStats": nodes} for name, nodes in devices.items()]}


def _build_ops(artifacts: dict[str, Any], layers: list[Any]) -> tuple[dict[str, Any] | None, str]:
    try:
        # Imported when needed: the attribution reads traces (xprof) that a run without a profile never needs.
        from fp16doctor.attribution import build_ops
    except ImportError as exc:
        return None, f"no attribution here ({exc})"
    try:
        ops = build_ops(artifacts, layers)
    except Exception as exc:  # noqa: BLE001  (a parser's failure must not lose the measured run; it is recorded)
        return None, f"attribution failed: {exc.__class__.__name__}: {exc}"
    if not isinstance(ops, dict):
        return None, "the attribution found no ops in this profile"
    return ops, ""


def _build_device_time(artifacts: dict[str, Any]) -> dict[str, Any] | None:
    """The run's device time from its trace's timestamps (a GPU run's), or None (also without the attribution)."""
    try:
        from fp16doctor.attribution import build_device_time
    except ImportError:
        return None
    try:
        return build_device_time(artifacts)
    except (TypeError, ValueError, KeyError):  # a malformed trace costs the figure, never the measured run
        return None
