"""Starts the ranks of one training run, one process each, and collects
what they wrote."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import traceback
from typing import Optional, Sequence


class RunError(Exception):
    """A rank failed or the run took too long."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(world: int, out: str, mode: str, steps: int, seed: int, hosts: Optional[Sequence] = None,
              fractions: Optional[str] = None, extra: Sequence[str] = (), timeout: float = 900.0) -> list:
    """Runs forgive.train on every rank and returns their JSON results in
    rank order. hosts (fabric.Host, in rank order) give each rank its
    daemon; the uniform control needs fractions (a JSON file) instead.

    The ranks are forked from this process after it has imported torch,
    so the eight of them do not each spend seconds importing it again on
    a two-core machine. This process must not have run torch operations
    (their thread pools do not survive fork)."""
    import torch  # noqa: F401  (imported once, before the fork)

    from . import train

    os.makedirs(out, exist_ok=True)
    port = free_port()
    pids = {}
    for rank in range(world):
        argv = ["--rank", str(rank), "--world", str(world), "--master-port", str(port), "--mode", mode,
                "--steps", str(steps), "--seed", str(seed), "--out", out, *extra]
        if hosts is not None:
            argv += ["--socket", hosts[rank].socket, "--host-ids", ",".join(str(h.host_id) for h in hosts)]
        if fractions is not None:
            argv += ["--fractions", fractions]
        log = os.open(os.path.join(out, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        pid = os.fork()
        if pid == 0:  # the rank
            code = 1
            try:
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.environ["GLOO_SOCKET_IFNAME"] = "lo"
                code = train.main(argv)
            except BaseException:  # noqa: BLE001 - reported in the rank's log
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(log)
        pids[pid] = rank
    deadline = time.monotonic() + timeout
    failed = None
    try:
        while pids and failed is None:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                if time.monotonic() > deadline:
                    raise RunError(f"run of {world} ranks did not finish within {timeout:.0f} s")
                time.sleep(0.1)
                continue
            rank = pids.pop(pid, None)
            if rank is not None and os.waitstatus_to_exitcode(status) != 0:
                failed = (rank, os.waitstatus_to_exitcode(status))
    finally:
        for pid in list(pids):  # our own children only
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if failed is not None:
        with open(os.path.join(out, f"rank{failed[0]}.log"), "rb") as f:
            tail = f.read()[-3000:].decode(errors="replace")
        raise RunError(f"rank {failed[0]} failed (exit {failed[1]}):\n{tail}")
    results = []
    for rank in range(world):
        with open(os.path.join(out, f"rank{rank}.json")) as f:
            results.append(json.load(f))
    return results
