"""Python side of the FORGIVE emulator: a host-API client (hostapi), real
fabrics for programs and tests (fabric), and a PyTorch DDP communication
hook that all-reduces gradients through forgived daemons (ddp)."""
