"""A second Docker engine on this machine, for the scale-out test and benchmark: its own socket, data
root, exec root, pid file and bridge, started and removed by the caller (never the system's engine)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import docker

# The second engine gets its own bridge, on a /24 picked from 172.31.200-254 (two test runs at once
# get different ones). With --bridge=none instead, dockerd deletes docker0 (the first engine's
# bridge) at start-up; with a bridge of its own both engines keep theirs.
BRIDGE_NETS = range(200, 255)

class SecondEngine:
    """A dockerd of our own, started and removed by its caller (never the system's)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="fp16d2-", dir="/tmp"))
        self.socket = self.root / "docker2.sock"
        self.url = f"unix://{self.socket}"
        self.bridge = f"fp16d2-{uuid.uuid4().hex[:6]}"  # interface names stop at 15 characters
        self.log = self.root / "dockerd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], check=True)
        cidr = f"172.31.{random.choice(BRIDGE_NETS)}.1/24"
        subprocess.run(["ip", "addr", "add", cidr, "dev", self.bridge], check=True)
        subprocess.run(["ip", "link", "set", self.bridge, "up"], check=True)

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                ["dockerd", "--host", self.url, "--data-root", str(self.root / "data"),
                 "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "docker.pid"),
                 f"--bridge={self.bridge}", "--iptables=false", "--ip-masq=false"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                docker.DockerClient(base_url=self.url, timeout=5).ping()
                return
            except docker.errors.DockerException:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.5)
        raise RuntimeError("the second dockerd did not start: " + self.log.read_text()[-2000:])

    def kill(self) -> None:
        """SIGKILL, as a crashed or powered-off machine would go."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def _own_pids(self) -> list[int]:
        """Processes left by this engine (its containerd, shims): their command lines name our root."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if str(self.root) in cmdline:
                pids.append(int(entry.name))
        return pids

    def _container_pids(self) -> list[int]:
        """Processes of this engine's containers, from the cgroups named by its container ids."""
        pids: list[int] = []
        containers = self.root / "data" / "containers"
        ids = [p.name for p in containers.iterdir()] if containers.is_dir() else []
        for container_id in ids:
            for procs in Path("/sys/fs/cgroup").glob(f"*/docker/{container_id}/cgroup.procs"):
                pids += [int(p) for p in procs.read_text().split()]
        return pids

    def remove(self) -> None:
        self.stop()
        for pid in set(self._container_pids() + self._own_pids()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(1)
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                  if line.split()[1].startswith(str(self.root))]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        subprocess.run(["ip", "link", "delete", self.bridge], check=False)
