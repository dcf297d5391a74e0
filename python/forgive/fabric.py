"""Real fabrics for Python programs and tests: `forgivectl topo up --start`.

A Fabric runs one topology in network namespaces (every trimswitch and
forgived a real process, cabled by veth pairs; docs/deploy.md), with one
lab policy configured in every forgived, and gives each rank's host
socket. It needs root, as network namespaces do, and the three binaries:
FORGIVE_BIN_DIR names a directory holding forgived, trimswitch and
forgivectl; without it they are built with `go build` (once per process)
when this package runs from the repository's python/, and are otherwise
the ones on PATH (`go install ./cmd/...`).

    with Fabric("leaf-spine-2x4-4to1", ranks=8, policy="forgive") as fab:
        for h in fab.hosts:
            print(h.rank, h.host_id, h.socket)
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Optional

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARIES = ("forgived", "trimswitch", "forgivectl")
_built: Optional[str] = None
_build_lock = threading.Lock()


class FabricError(Exception):
    """The fabric did not start, or a daemon died."""


class NeedRoot(FabricError):
    """Network namespaces need root."""


def need_root() -> None:
    if os.geteuid() != 0:
        raise NeedRoot("a fabric in network namespaces needs root (forgivectl topo up)")


def source_tree() -> Optional[str]:
    """The repository this package runs from (python/forgive of a
    checkout), or None for an installed copy."""
    if os.path.isfile(os.path.join(REPO, "go.mod")) and os.path.isdir(os.path.join(REPO, "cmd", "forgived")):
        return REPO
    return None


def bin_dir() -> str:
    """The directory of forgived, trimswitch and forgivectl: FORGIVE_BIN_DIR;
    else, from a checkout, a temporary directory they are built into; else
    the directory on PATH that holds all three."""
    global _built
    d = os.environ.get("FORGIVE_BIN_DIR")
    if d:
        missing = [b for b in BINARIES if not os.access(os.path.join(d, b), os.X_OK)]
        if missing:
            raise FabricError(f"FORGIVE_BIN_DIR={d} lacks {', '.join(missing)}")
        return d
    if source_tree() is None:
        found = shutil.which("forgivectl")
        d = os.path.dirname(found) if found else ""
        if not d or any(not os.access(os.path.join(d, b), os.X_OK) for b in BINARIES):
            raise FabricError("forgived, trimswitch and forgivectl are not in one directory on PATH: install them "
                              "(go install ./cmd/... in the repository) or set FORGIVE_BIN_DIR to their directory")
        return d
    with _build_lock:
        if _built is None:
            go = shutil.which("go") or "/usr/local/go/bin/go"
            out = tempfile.mkdtemp(prefix="forgive-bin-")
            cmd = [go, "build", "-o", out + "/"] + [f"./cmd/{b}" for b in BINARIES]
            r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            if r.returncode != 0:
                raise FabricError(f"{' '.join(cmd)} failed:\n{r.stderr}")
            _built = out
        return _built


@dataclasses.dataclass(frozen=True)
class Host:
    rank: int  # 0-based
    name: str  # "host3"
    host_id: int  # the fabric's host id (rank + 1)
    socket: str  # the host API's unix socket


_HOST_LINE = re.compile(r"^\s+(host\d+) \(host id (\d+)\): (\S+)\s*$")


class Fabric:
    """One running fabric. start() is called by the constructor; stop()
    (or leaving the with block) stops every daemon and removes the
    namespaces, veths and the configuration directory."""

    def __init__(self, topology: str, ranks: int = 0, policy: str = "forgive", profile: str = "loopback",
                 run_id: Optional[str] = None, start_timeout: float = 90.0, log_path: Optional[str] = None):
        need_root()
        self.topology, self.ranks, self.policy, self.profile = topology, ranks, policy, profile
        self.run_id = run_id or "p" + secrets.token_hex(3)[:5]
        self.dir = tempfile.mkdtemp(prefix=f"forgive-{self.run_id}-")
        os.chmod(self.dir, 0o755)  # other uids reach the sockets (their mode is 0660)
        self.log_path = log_path or os.path.join(self.dir, "fabric.log")
        self.hosts: list = []
        self.bins = bin_dir()
        self._proc: Optional[subprocess.Popen] = None
        self._log = open(self.log_path, "ab")
        try:
            self._start(start_timeout)
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> "Fabric":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _start(self, timeout: float) -> None:
        cmd = [os.path.join(self.bins, "forgivectl"), "topo", "up", self.topology, "--start",
               "--id", self.run_id, "--dir", self.dir, "--profile", self.profile, "--policy", self.policy,
               "--bin-dir", self.bins]
        if self.ranks:
            cmd += ["--ranks", str(self.ranks)]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL,
                                      text=True, bufsize=1)
        lines: list = []
        deadline = time.monotonic() + timeout
        timer = threading.Timer(timeout, self._proc.kill)  # a hung start cannot block the reader forever
        timer.start()
        try:
            for line in self._proc.stdout:
                lines.append(line)
                m = _HOST_LINE.match(line)
                if m:
                    hid = int(m.group(2))
                    self.hosts.append(Host(rank=hid - 1, name=m.group(1), host_id=hid, socket=m.group(3)))
                if line.startswith("interrupt"):
                    break
                if time.monotonic() > deadline:
                    break
        finally:
            timer.cancel()
        if not self.hosts or self._proc.poll() is not None:
            raise FabricError(f"forgivectl topo up did not start the fabric (exit {self._proc.poll()}):\n"
                              + "".join(lines) + self.log_tail())
        self.hosts.sort(key=lambda h: h.rank)
        # Keep reading stdout so the child never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        proc = self._proc
        if proc is not None and proc.stdout is not None:
            for _ in proc.stdout:
                pass

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, n: int = 20) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return b"".join(f.readlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # forgivectl stops the daemons and removes the fabric
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None:
            # Whatever the exit, nothing of this fabric may remain.
            subprocess.run([os.path.join(self.bins, "forgivectl"), "topo", "down", "--id", self.run_id,
                            "--dir", self.dir], capture_output=True)
        if not self._log.closed:
            self._log.close()
        if os.path.isdir(self.dir) and not os.environ.get("FORGIVE_KEEP_FABRIC_DIR"):
            shutil.rmtree(self.dir, ignore_errors=True)
