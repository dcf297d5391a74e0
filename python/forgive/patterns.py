"""Loss patterns: where FORGIVE forgave, exported by every `forgivectl lab`
run as loss-pattern-POLICY-seedN.npz beside results.json
(docs/loss-patterns.md). numpy alone reads them (Debian: python3-numpy;
it is imported at first use, so `--help` works without it):

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
ring (forgive.tolerance's `pattern` and `pattern-uniform` runs), and
window() gives the figures of the pattern's ranks a model ring replays:

    python3 -m forgive.patterns FILE --world 8 --first-rank 7 --rank-stride 8
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from typing import Optional, Sequence


class _LazyNumpy:
    """numpy, imported at its first use: the module imports, and its command
    prints its usage, on a Python without numpy. The first attribute read
    replaces the module's `np` with numpy itself."""

    def __getattr__(self, name):
        global np
        try:
            import numpy
        except ModuleNotFoundError as e:
            raise ModuleNotFoundError("forgive.patterns needs numpy (Debian: apt-get install -y python3-numpy; "
                                      "elsewhere: pip install numpy, or the package's [train] extra)",
                                      name="numpy") from e
        np = numpy
        return getattr(numpy, name)


np = _LazyNumpy()

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


def phase_mask(lo: np.ndarray, hi: np.ndarray, total: int) -> np.ndarray:
    """The elements of a phase's stream of total elements that ranges
    [lo, hi) (as fractions of the stream) lose: an element is lost where
    the covered length, summed from the stream's start and rounded to
    whole elements, grows. So the lost elements lie where the ranges lie
    and number the covered length, rounded (a range shorter than an
    element is kept only as far as its neighbours add up)."""
    if lo.size == 0 or total == 0:
        return np.zeros(total, dtype=bool)
    order = np.argsort(lo, kind="stable")
    x0, x1 = lo[order] * total, hi[order] * total
    # merge overlaps, so no length counts twice
    keep0, keep1 = [x0[0]], [x1[0]]
    for a, b in zip(x0[1:].tolist(), x1[1:].tolist()):
        if a <= keep1[-1]:
            keep1[-1] = max(keep1[-1], b)
        else:
            keep0.append(a)
            keep1.append(b)
    x0, x1 = np.array(keep0), np.array(keep1)
    lens = x1 - x0
    before = np.concatenate([[0.0], np.cumsum(lens)])
    e = np.arange(total + 1, dtype=np.float64)
    k = np.searchsorted(x0, e, side="right")  # ranges starting before e
    last = np.maximum(k - 1, 0)
    covered = np.where(k > 0, before[last] + np.clip(e - x0[last], 0, lens[last]), 0.0)
    whole = np.floor(covered + 0.5)
    return np.diff(whole) > 0


def source_rank(rank: int, pattern_ranks: int, first_rank: int = 0, rank_stride: int = 1) -> int:
    """The pattern's rank that model rank `rank` replays."""
    return (first_rank + rank_stride * rank) % pattern_ranks


def source_ranks(world: int, pattern_ranks: int, first_rank: int = 0, rank_stride: int = 1) -> list:
    """The pattern's ranks a model ring of world ranks replays, in rank
    order; ValueError when two model ranks would replay the same one."""
    out = [source_rank(r, pattern_ranks, first_rank, rank_stride) for r in range(world)]
    if len(set(out)) != len(out):
        raise ValueError(f"rank_stride {rank_stride} from first_rank {first_rank}: the {world} model ranks would "
                         f"replay the pattern's ranks {out}, some twice")
    return out


class PatternLoss:
    """A loss pattern as the uniform control's loss (ddp.UniformLoss's
    interface): in model step t, rank r zeroes the elements of its
    received ring messages where pattern rank (first_rank + rank_stride
    * r) mod R forgave in pattern step step_map[t]. With the default
    stride 1 the model's ring replays a window of the pattern's ring,
    neighbours staying neighbours; a stride of 8 on the seed's 8-host
    leaves takes one rank of each leaf, at the same place in it.

    Each phase (reduce-scatter, all-gather) of a rank's step is read as
    one stream of its receives in round order: R-1 chunks in the
    pattern's ring of R ranks, n-1 in the model's. A range keeps its
    relative position in its phase's stream and its share of it
    (phase_mask), so each phase keeps its forgiven fraction, to the
    element, and the early rounds' loss stays early (vesting forgives
    little in a step's first rounds)."""

    def __init__(self, ring, pattern: Pattern, which: str, steps: int, schedule: set, first_rank: int = 0,
                 rank_stride: int = 1):
        self.ring, self.world, self.rank = ring, ring.world, ring.rank
        arr = pattern.array(which)
        R, chunk = pattern.ranks, pattern.chunk_bytes
        if not 0 <= first_rank < R:
            raise ValueError(f"first_rank {first_rank}: the pattern has ranks 0 to {R - 1}")
        if rank_stride < 1:
            raise ValueError(f"rank_stride {rank_stride}: want 1 or more")
        self.source_rank = source_rank(self.rank, R, first_rank, rank_stride)
        self.map = step_map([bool(c) for c in pattern.steps["critical"]], [s in schedule for s in range(1, steps + 1)])
        mine = arr[arr["receiver"] == self.source_rank]
        n = self.world
        self.sizes = [ring.size(ring.recv_chunk(p)) for p in range(2 * (n - 1))]
        self.starts = list(np.cumsum([0] + self.sizes))
        stream = (R - 1) * chunk  # bytes of one phase's receives in the pattern's ring
        pchunk = (mine["offset"] // chunk).astype(np.int64)
        lo = (mine["round"].astype(np.int64) * chunk + mine["offset"] - pchunk * chunk) / stream
        hi = lo + mine["length"] / stream
        split = self.starts[n - 1]
        # one mask of the model's receives per pattern step that forgave
        self.by_step: dict = {}
        for s in np.unique(mine["step"]).tolist():
            m = np.zeros(self.starts[-1], dtype=bool)
            for ph, (a, b) in ((0, (0, split)), (1, (split, self.starts[-1]))):
                sel = (mine["step"] == s) & (mine["phase"] == ph)
                m[a:b] = phase_mask(lo[sel], hi[sel], b - a)
            self.by_step[s] = m
        self.mask: Optional[np.ndarray] = None
        self.fraction = 0.0

    def begin_step(self, step: int) -> None:
        m = self.by_step.get(self.map.get(step))
        self.mask = m if m is not None else np.zeros(self.starts[-1], dtype=bool)
        self.fraction = float(self.mask.mean()) if self.mask.size else 0.0

    def __call__(self, phase: int, arr: np.ndarray) -> list:
        m = self.mask[self.starts[phase]: self.starts[phase + 1]]
        arr[m] = 0
        return [(int(i) * 4, 4) for i in np.flatnonzero(m)]


# --- the ranks a model replays: their figures ------------------------------------


def message_fractions(arr: np.ndarray, ranks: int, steps: int) -> np.ndarray:
    """[step - 1, receiver, message]: the forgiven share of each of a rank's
    2(R - 1) ring messages (the phase's round, the all-gather's after the
    reduce-scatter's), as lab/pattern/pattern.go counts them. Records outside the
    steps, the ranks or the rounds are left out, as the lab leaves them."""
    R, M = ranks, 2 * (ranks - 1)
    out = np.zeros((steps, R, M))
    arr = arr[(arr["step"] >= 1) & (arr["step"] <= steps) & (arr["receiver"] >= 0) & (arr["receiver"] < R)
              & (arr["round"] >= 0) & (arr["round"] < R - 1) & (arr["phase"] <= 1)]
    if arr.size:
        msg = arr["round"].astype(np.int64) + arr["phase"].astype(np.int64) * (R - 1)
        np.add.at(out, (arr["step"].astype(np.int64) - 1, arr["receiver"].astype(np.int64), msg),
                  arr["length"].astype(np.float64))
    return out


def mean_pair_correlation(rows: np.ndarray) -> Optional[float]:
    """The Pearson correlation of every pair of rows, averaged; rows that
    do not vary are left out (lab/pattern/pattern.go's meanPairCorrelation).
    None when no pair is left."""
    keep = [r for r in rows if r.size >= 2 and r.std() > 0]
    cs = [float(np.corrcoef(a, b)[0, 1]) for i, a in enumerate(keep) for b in keep[i + 1:]]
    return float(np.mean(cs)) if cs else None


def window(p: Pattern, which: str, world: int, first_rank: int = 0, rank_stride: int = 1) -> dict:
    """The figures of the pattern's ranks that a model ring of world ranks
    replays (PatternLoss's choice): their forgiven share of their receives,
    the all-gather's part of it, and the correlation across them of each
    ring message's forgiven share within a step, averaged over the steps
    (the lab's message_correlation, over these ranks only)."""
    ranks = source_ranks(world, p.ranks, first_rank, rank_stride)
    steps = int(p.meta.get("steps", p.steps.size))
    per = message_fractions(p.array(which), p.ranks, steps)[:, ranks] / p.chunk_bytes
    corr = [c for c in (mean_pair_correlation(per[s]) for s in range(steps)) if c is not None]
    total = float(per.sum())
    return {"ranks": ranks, "which": which,
            "forgiven_fraction": total / (steps * len(ranks) * per.shape[2]),
            "gather_share": float(per[:, :, p.ranks - 1:].sum()) / total if total else 0.0,
            "message_correlation": float(np.mean(corr)) if corr else None,
            "steps_correlated": len(corr)}


def main(argv=None) -> int:
    from . import prog

    ap = argparse.ArgumentParser(prog=prog("forgive.patterns"),
                                 description="The figures of the ranks of a loss pattern that a model ring replays "
                                 "(forgive.tolerance --pattern), for the pattern and its control.")
    ap.add_argument("pattern", help="a lab run's loss-pattern-*.npz")
    ap.add_argument("--world", type=int, help="the model's ranks (default: the pattern's, its whole ring)")
    ap.add_argument("--first-rank", type=int, default=0)
    ap.add_argument("--rank-stride", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        p = load(args.pattern)
        world = args.world or p.ranks
        if not 0 <= args.first_rank < p.ranks:
            raise ValueError(f"--first-rank {args.first_rank}: the pattern has ranks 0 to {p.ranks - 1}")
        if args.rank_stride < 1 or not 1 <= world <= p.ranks:
            raise ValueError(f"--rank-stride {args.rank_stride}, --world {world}: want a stride of 1 or more and "
                             f"1 to {p.ranks} ranks")
        out = [window(p, w, world, args.first_rank, args.rank_stride) for w in ("ranges", "control")]
    except (OSError, ValueError, ModuleNotFoundError) as e:
        print(f"{prog('forgive.patterns')}: {e}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
