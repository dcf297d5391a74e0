"""Loss patterns: where FORGIVE forgave, exported by every `forgivectl lab`
run as loss-pattern-POLICY-seedN.npz beside results.json
(docs/loss-patterns.md). numpy alone reads them:

    from forgive import patterns
    p = patterns.load("lab-out/loss-pattern-forgive-seed1.npz")
    lost = patterns.apply_mask(grad, p.ranges, step=3, rank=0, tensor_bytes=p.tensor_bytes)

`ranges` is a structured array, one record per forgiven range (step,
receiver, sender, flow, phase 0 reduce-scatter / 1 all-gather, round,
offset and length in bytes of the receiver's flat gradient tensor,
time_s); `control` the same fields for the uniform control (time_s NaN);
`steps` one record per step (step, critical, forgiven, start_s, end_s);
`meta` a JSON string.

For the tolerance experiment, PatternLoss maps a pattern onto a smaller
ring (forgive.tolerance's `pattern` and `pattern-uniform` runs).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

FIELDS = ("step", "receiver", "sender", "flow", "phase", "round", "offset", "length", "time_s")


@dataclass
class Pattern:
    ranges: np.ndarray
    control: np.ndarray
    steps: np.ndarray
    meta: dict

    @property
    def ranks(self) -> int:
        return int(self.meta["ranks"])

    @property
    def chunk_bytes(self) -> int:
        return int(self.meta["chunk_bytes"])

    @property
    def tensor_bytes(self) -> int:
        return int(self.meta["tensor_bytes"])

    def array(self, which: str) -> np.ndarray:
        if which not in ("ranges", "control"):
            raise ValueError(f"which {which!r}: want ranges or control")
        return self.ranges if which == "ranges" else self.control


def load(path: str) -> Pattern:
    """Reads a loss-pattern .npz (no pickle) and checks its fields."""
    with np.load(path, allow_pickle=False) as z:
        missing = {"ranges", "control", "steps", "meta"} - set(z.files)
        if missing:
            raise ValueError(f"{path}: no {', '.join(sorted(missing))} in it: not a loss pattern")
        p = Pattern(z["ranges"], z["control"], z["steps"], json.loads(str(z["meta"])))
    for name in ("ranges", "control"):
        got = p.array(name).dtype.names
        if tuple(got or ()) != FIELDS:
            raise ValueError(f"{path}: {name} has fields {got}, want {FIELDS}")
    return p


def mask(ranges: np.ndarray, step: int, rank: int, numel: int, tensor_bytes: Optional[int] = None,
         itemsize: int = 4) -> np.ndarray:
    """The elements of a flat gradient of numel elements that the ranges
    of (step, rank) touch. With tensor_bytes (the pattern's tensor) other
    than numel * itemsize, every offset and length is scaled by their
    ratio, and a range touches at least one element."""
    out = np.zeros(numel, dtype=bool)
    sel = ranges[(ranges["step"] == step) & (ranges["receiver"] == rank)]
    if sel.size == 0:
        return out
    nbytes = numel * itemsize
    scale = 1.0 if tensor_bytes is None else nbytes / tensor_bytes
    start = np.floor(sel["offset"] * scale / itemsize).astype(np.int64)
    end = np.ceil((sel["offset"] + sel["length"]) * scale / itemsize).astype(np.int64)
    end = np.maximum(end, start + 1)
    start, end = np.clip(start, 0, numel), np.clip(end, 0, numel)
    # mark [start, end) of every range: a difference array, summed
    d = np.zeros(numel + 1, dtype=np.int64)
    np.add.at(d, start, 1)
    np.add.at(d, end, -1)
    out[:] = np.cumsum(d[:-1]) > 0
    return out


def apply_mask(grad: np.ndarray, ranges: np.ndarray, step: int, rank: int,
               tensor_bytes: Optional[int] = None) -> np.ndarray:
    """Zeroes, in place, the elements of the flat gradient grad that the
    ranges forgave at (step, rank), and returns the mask."""
    if grad.ndim != 1:
        raise ValueError(f"grad of shape {grad.shape}: want a flat gradient")
    m = mask(ranges, step, rank, grad.size, tensor_bytes, grad.itemsize)
    grad[m] = 0
    return m


# --- onto another ring: the tolerance experiment ----------------------------------


def segments(critical: Sequence[bool]) -> tuple:
    """Steps (1-based) as three lists: the leading critical block, the
    middle, the trailing critical block."""
    n = len(critical)
    lead = 0
    while lead < n and critical[lead]:
        lead += 1
    trail = 0
    while trail < n - lead and critical[n - 1 - trail]:
        trail += 1
    steps = list(range(1, n + 1))
    return steps[:lead], steps[lead:n - trail], steps[n - trail:]


def step_map(pattern_critical: Sequence[bool], model_critical: Sequence[bool]) -> dict:
    """{model step: pattern step}, so that critical steps align: the i-th
    step of the model's leading critical block takes the pattern's
    leading block's step i (cycled), and so on for the middle and the
    trailing block. A block the pattern lacks takes the pattern's
    critical steps (for a critical block) or all its steps."""
    ps, ms = segments(pattern_critical), segments(model_critical)
    crit = [s for s, c in enumerate(pattern_critical, 1) if c]
    every = list(range(1, len(pattern_critical) + 1))
    out = {}
    for k, (mseg, pseg) in enumerate(zip(ms, ps)):
        src = pseg or (crit if k != 1 and crit else every)
        for i, s in enumerate(mseg):
            out[s] = src[i % len(src)]
    return out


class PatternLoss:
    """A loss pattern as the uniform control's loss (ddp.UniformLoss's
    interface): in model step t, rank r zeroes the elements of its
    received ring messages where pattern rank r mod R forgave in pattern
    step step_map[t]. A range in round k of a phase of the pattern's ring
    (R ranks) lands in round floor(k (n-1) / (R-1)) of the same phase of
    the model's ring (n ranks), at the same relative position in the
    message: offsets and lengths scale by the ratio of the chunks, and a
    range keeps at least one element."""

    def __init__(self, ring, pattern: Pattern, which: str, steps: int, schedule: set):
        self.ring, self.world, self.rank = ring, ring.world, ring.rank
        arr = pattern.array(which)
        R, chunk = pattern.ranks, pattern.chunk_bytes
        self.source_rank = self.rank % R
        self.map = step_map([bool(c) for c in pattern.steps["critical"]], [s in schedule for s in range(1, steps + 1)])
        mine = arr[arr["receiver"] == self.source_rank]
        n = self.world
        self.sizes = [ring.size(ring.recv_chunk(p)) for p in range(2 * (n - 1))]
        self.starts = list(np.cumsum([0] + self.sizes))
        # the pattern's ranges of this rank, by pattern step: (model phase, first element, end element)
        self.by_step: dict = {}
        pchunk = ((mine["offset"] // chunk) % R).astype(np.int64)
        rel_lo = (mine["offset"] - pchunk * chunk) / chunk
        rel_hi = rel_lo + mine["length"] / chunk
        rounds = (mine["round"].astype(np.int64) * (n - 1)) // (R - 1)
        phase = np.where(mine["phase"] == 1, n - 1 + rounds, rounds)
        for s, ph, lo, hi in zip(mine["step"].tolist(), phase.tolist(), rel_lo.tolist(), rel_hi.tolist()):
            size = self.sizes[ph]
            a = min(size - 1, int(math.floor(lo * size)))
            b = max(a + 1, min(size, int(math.ceil(hi * size))))
            self.by_step.setdefault(s, []).append((ph, a, b))
        self.mask: Optional[np.ndarray] = None
        self.fraction = 0.0

    def begin_step(self, step: int) -> None:
        self.mask = np.zeros(self.starts[-1], dtype=bool)
        for ph, a, b in self.by_step.get(self.map.get(step), []):
            self.mask[self.starts[ph] + a: self.starts[ph] + b] = True
        self.fraction = float(self.mask.mean()) if self.mask.size else 0.0

    def __call__(self, phase: int, arr: np.ndarray) -> list:
        m = self.mask[self.starts[phase]: self.starts[phase + 1]]
        arr[m] = 0
        return [(int(i) * 4, 4) for i in np.flatnonzero(m)]
