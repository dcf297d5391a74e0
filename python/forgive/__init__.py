"""Python side of the FORGIVE emulator: a host-API client (hostapi), real
fabrics for programs and tests (fabric), and a PyTorch DDP communication
hook that all-reduces gradients through forgived daemons (ddp)."""

import os
import sys


def prog(module: str) -> str:
    """The name a command line of this package goes by in its usage: the
    console script's (forgive-tolerance) or `python3 -m MODULE`."""
    name = os.path.basename(sys.argv[0] or "")
    if name and not name.endswith(".py") and name != "-c":
        return name
    return f"python3 -m {module}"
