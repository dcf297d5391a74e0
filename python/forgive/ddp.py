"""A PyTorch DDP communication hook that all-reduces gradients through the
ranks' forgived daemons.

Each rank holds a host-API client to its own forgived. The hook gathers
the step's gradient buckets into registered memory, one flat buffer, and
runs a ring all-reduce over two gradient flows (to the right neighbour,
from the left one): N-1 reduce-scatter phases, each adding the received
partial sum of one chunk into the rank's own, then N-1 all-gather phases,
each receiving a finished chunk straight into place. Every receive names
its phase ("reduce"; "gather-owner" for the all-gather's first round,
whose sender finished the chunk; "gather"), for the daemon's gather
policy.

A step is declared to the daemon twice (begin_step). It is opened, with
the bytes the ring will bring this rank and no classification, before
any rank can send into it: step 1 when the hook is made, step N+1 when
this rank's reduce-scatter of step N is done (no rank finishes step N
before this rank sends the chunk it finished next, so none can start
step N+1). It is classified when its gradients are ready, before this
rank sends its first byte of it: with the per-layer norms of the rank's
own gradients (the daemon's Accordion detector decides) or a fixed
schedule's verdict. After the last receive the hook ends the step
(end_step).

Forgiven ranges stay zero, as the completions report them: a range
forgiven in the reduce-scatter is a partial sum that contributes nothing
(the rank adds its own gradient to zeros there); a range forgiven in the
all-gather is zero in the gradient this rank applies, and in the copies
of the ranks after it on the ring, which receive it from this one. A
daemon whose gather policy is `repair` forgives no gathered byte; under
`owner` it forgives them only in the first round, and the hook zeroes
them at the chunk's owner too (HostAPIRing). Either way the replicas
stay identical.

    ring = HostAPIRing(client, rank, world, host_ids, numel)
    state = ForgiveHook(ring, model, mode="detector", steps=200)
    ddp = DistributedDataParallel(model, bucket_cap_mb=25)
    ddp.register_comm_hook(state, forgive_hook)
"""

from __future__ import annotations

import dataclasses
import math
import struct
import time
from typing import Callable, Optional, Sequence

import numpy as np

from . import hostapi

FLOW_BASE = 0x46470000  # "FG" in the high half: ring flow ids are FLOW_BASE + sender rank
NOTICE_BASE = 0x464F0000  # "FO": the owner notices' flows, NOTICE_BASE + sender rank
_SEND = 1 << 62  # wr_id bit of sends
_NOTICE = 0xFFFF  # the phase field of a notice's wr_id
GATHER_POLICIES = ("forgive", "repair", "owner")


def chunk_bounds(numel: int, world: int) -> list:
    """The ring's chunks: [(start, stop)] of a flat buffer, as even as can be."""
    return [(i * numel // world, (i + 1) * numel // world) for i in range(world)]


@dataclasses.dataclass
class Phase:
    """What one receive of the ring brought: which chunk, and the ranges
    (in elements of that chunk) that were lost."""

    phase: int
    chunk: int
    forgiven_bytes: int
    forgiven: tuple  # (offset, length) in bytes, relative to the chunk
    nonzero: int = 0  # bytes of forgiven ranges that did not read zero when received


class HostAPIRing:
    """The ring's transport through forgived: one registered region (the
    accumulator, then one staging chunk per reduce-scatter phase) and two
    gradient flows.

    gather names the daemons' gather policy (None: ask the daemon, whose
    status reports it; "forgive" if it does not). Under "owner" a finished
    value may be forgiven only in the all-gather's first round, whose
    sender is the value's owner (the rank that finished reducing it), and
    the hook does its half: it tells the owner which byte ranges were
    forgiven (a notice on a flow of class other to the left neighbour,
    which nothing forgives), and the owner zeroes them in its own copy
    before the step's update. The ranks after the forgiving one receive
    the zeros forwarded, so every replica holds the same bytes."""

    def __init__(self, client: hostapi.Client, rank: int, world: int, host_ids: Sequence[int], numel: int,
                 entropy: str = "single", gather: Optional[str] = None):
        if world < 2 or numel < world:
            raise ValueError(f"a ring needs 2 or more ranks and at least one element per rank (world {world}, {numel} elements)")
        if gather is None:
            gather = (client.status().get("backend") or {}).get("gather", "forgive")
        if gather not in GATHER_POLICIES:
            raise ValueError(f"gather policy {gather!r}: want one of {', '.join(GATHER_POLICIES)}")
        self.client, self.rank, self.world, self.numel = client, rank, world, numel
        self.gather = gather
        self.bounds = chunk_bounds(numel, world)
        self.max_chunk = max(b - a for a, b in self.bounds)
        self.stage_off = 4 * numel
        self.region = client.register_memory(4 * (numel + (world - 1) * self.max_chunk))
        self.acc = self.region.array("float32", 0, numel)
        right, left = (rank + 1) % world, (rank - 1) % world
        self.tx_flow, self.rx_flow = FLOW_BASE + rank, FLOW_BASE + left
        client.create_flow(self.tx_flow, peer=host_ids[right], cls="gradient", entropy=entropy)
        client.create_flow(self.rx_flow, peer=host_ids[left], cls="gradient", entropy=entropy)
        self.notices: Optional[hostapi.Region] = None
        if gather == "owner":
            # A notice: uint32 count, then count (offset, length) pairs of
            # uint32, little-endian, relative to the chunk. Ranges are whole
            # trimmed packets, disjoint and apart, so one per 512 bytes of
            # the largest chunk is far more than a completion can list.
            self.notice_max = max(64, 4 * self.max_chunk // 512)
            self.notice_len = 4 + 8 * self.notice_max
            self.notices = client.register_memory(3 * self.notice_len)  # [send | receive, odd steps | even]
            self.notice_tx, self.notice_rx = NOTICE_BASE + rank, NOTICE_BASE + right
            client.create_flow(self.notice_tx, peer=host_ids[left], cls="other")
            client.create_flow(self.notice_rx, peer=host_ids[right], cls="other")
        self._done: dict = {}  # recv wr_id -> completion that came early
        self._sends = 0  # send completions outstanding
        self.posted_step: Optional[int] = None

    def size(self, c: int) -> int:
        a, b = self.bounds[c % self.world]
        return b - a

    def expected_bytes(self) -> int:
        """The bytes one all-reduce brings this rank: every chunk but its
        own in the reduce-scatter, every chunk but the one it finishes in
        the all-gather."""
        r = self.rank
        return 4 * (2 * self.numel - self.size(r) - self.size(r + 1))

    def recv_chunk(self, phase: int) -> int:
        n, r = self.world, self.rank
        return (r - phase - 1) % n if phase < n - 1 else (r - (phase - (n - 1))) % n

    def stage(self, phase: int) -> np.ndarray:
        c = self.recv_chunk(phase)
        off = self.stage_off + 4 * phase * self.max_chunk
        return self.region.array("float32", off, self.size(c))

    def chunk(self, c: int) -> np.ndarray:
        a, b = self.bounds[c % self.world]
        return self.acc[a:b]

    def open_step(self, step: int) -> None:
        """Opens a step's budget at the daemon (begin_step with the bytes
        the ring brings and no classification: the daemon counts the step
        as critical until classify says otherwise) and posts every receive
        of it, so that no message of the step finds the rank unready (a
        drop the sender's timer would have to repair) or its ledger closed
        (bytes no budget covers)."""
        self.client.begin_step(step, self.expected_bytes())
        self.post_receives(step)

    def classify(self, step: int, norms: Optional[Sequence[float]] = None, critical: Optional[bool] = None,
                 lr_decay: bool = False) -> None:
        """The second begin_step of an open step: the per-layer norms for
        the daemon's detector, or the application's own verdict."""
        self.client.begin_step(step, self.expected_bytes(), norms=norms, critical=critical, lr_decay=lr_decay)

    def post_receives(self, step: int) -> None:
        """Posts every receive of a step, each with its ring phase:
        "reduce" for the reduce-scatter's partial sums, "gather" for the
        all-gather's finished values."""
        n = self.world
        for phase in range(2 * (n - 1)):
            c = self.recv_chunk(phase)
            if phase < n - 1:
                off = self.stage_off + 4 * phase * self.max_chunk
            else:
                off = 4 * self.bounds[c][0]
            self.client.post_recv(self.rx_flow, self.region, off, 4 * self.size(c), step=step,
                                  wr_id=_wr(step, phase), phase=ring_phase(phase, n))
        if self.notices is not None:
            self.client.post_recv(self.notice_rx, self.notices, self._notice_off(step), self.notice_len,
                                  wr_id=_wr(step, _NOTICE))
        self.posted_step = step

    def _notice_off(self, step: int) -> int:
        # Two steps' notice receives are posted at a time (the next step
        # opens before this one ends), each into its own buffer.
        return self.notice_len * (1 + step % 2)

    def notify_owner(self, step: int, forgiven: Sequence) -> None:
        """Under "owner": tells the left neighbour, the owner of the chunk
        this rank received in the all-gather's first round, which byte
        ranges of it were forgiven here (none is news too: the owner waits
        for every notice)."""
        if self.notices is None:
            return
        if len(forgiven) > self.notice_max:
            raise RuntimeError(f"step {step}: {len(forgiven)} forgiven ranges, a notice holds {self.notice_max}")
        body = struct.pack(f"<I{2 * len(forgiven)}I", len(forgiven), *(v for r in forgiven for v in r))
        self.notices.view()[: len(body)] = body
        self.client.post_send(self.notice_tx, self.notices, 0, len(body), wr_id=_SEND | _wr(step, _NOTICE))
        self._sends += 1

    def owner_zeroes(self, step: int, timeout: float) -> list:
        """Under "owner": waits for the right neighbour's notice and zeroes
        the ranges it lists in this rank's copy of the chunk it finished
        (the one it sent that neighbour first in the all-gather). Returns
        them, as (offset, length) in bytes relative to that chunk."""
        if self.notices is None:
            return []
        comp = self.wait_recv(step, _NOTICE, timeout)
        off = self._notice_off(step)
        raw = bytes(self.notices.view()[off: off + comp.len])
        if len(raw) < 4:
            raise RuntimeError(f"step {step}: a notice of {len(raw)} bytes")
        (count,) = struct.unpack_from("<I", raw)
        if len(raw) != 4 + 8 * count:
            raise RuntimeError(f"step {step}: a notice of {len(raw)} bytes lists {count} ranges")
        vals = struct.unpack_from(f"<{2 * count}I", raw, 4)
        ranges = list(zip(vals[::2], vals[1::2]))
        chunk = self.chunk(self.rank + 1).view(np.uint8)
        for off, length in ranges:
            if length == 0 or off + length > chunk.size:
                raise RuntimeError(f"step {step}: notice range [{off}, {off + length}) outside a chunk of {chunk.size} bytes")
            chunk[off: off + length] = 0
        return ranges

    def send(self, step: int, phase: int, c: int) -> None:
        self.client.post_send(self.tx_flow, self.region, 4 * self.bounds[c][0], 4 * self.size(c),
                              wr_id=_SEND | _wr(step, phase))
        self._sends += 1

    def wait_recv(self, step: int, phase: int, timeout: float) -> hostapi.Completion:
        want = _wr(step, phase)
        while want not in self._done:
            comp = self.client.poll(timeout=timeout)
            self._file(comp)
        comp = self._done.pop(want)
        if not comp.ok:
            raise RuntimeError(f"step {step} phase {phase}: receive failed: {comp.err}")
        return comp

    def wait_sends(self, timeout: float) -> None:
        while self._sends:
            self._file(self.client.poll(timeout=timeout))

    def _file(self, comp: hostapi.Completion) -> None:
        if comp.kind == "send":
            if not comp.ok:
                raise RuntimeError(f"send {comp.wr_id & ~_SEND:#x} failed: {comp.err}")
            self._sends -= 1
        else:
            self._done[comp.wr_id] = comp

    def close(self) -> None:
        self.client.close()

    def __repr__(self) -> str:
        return f"HostAPIRing(rank {self.rank} of {self.world}, {self.numel} elements, gather {self.gather})"


def _wr(step: int, phase: int) -> int:
    return (step << 16) | phase


def ring_phase(phase: int, world: int) -> str:
    """What receive `phase` of the ring carries: a partial sum (the first
    world-1, the reduce-scatter) or a finished value (the all-gather),
    the first of which comes from its owner, the rank that finished it."""
    if phase < world - 1:
        return "reduce"
    return "gather-owner" if phase == world - 1 else "gather"


class GlooRing:
    """The same ring over torch.distributed point-to-point (gloo), with no
    network loss: the uniform-loss control's transport."""

    def __init__(self, rank: int, world: int, numel: int):
        import torch

        if world < 2 or numel < world:
            raise ValueError(f"a ring needs 2 or more ranks and at least one element per rank (world {world}, {numel} elements)")
        self.torch = torch
        self.rank, self.world, self.numel = rank, world, numel
        self.bounds = chunk_bounds(numel, world)
        self.max_chunk = max(b - a for a, b in self.bounds)
        self.acc = np.zeros(numel, dtype=np.float32)
        self._stage = np.zeros((world - 1, self.max_chunk), dtype=np.float32)
        self._works: list = []

    size = HostAPIRing.size
    expected_bytes = HostAPIRing.expected_bytes
    recv_chunk = HostAPIRing.recv_chunk
    chunk = HostAPIRing.chunk

    def stage(self, phase: int) -> np.ndarray:
        return self._stage[phase, : self.size(self.recv_chunk(phase))]

    def open_step(self, step: int) -> None:
        pass

    def notify_owner(self, step: int, forgiven: Sequence) -> None:
        pass

    def owner_zeroes(self, step: int, timeout: float) -> list:
        return []

    def send(self, step: int, phase: int, c: int) -> None:
        dist = self.torch.distributed
        t = self.torch.from_numpy(self.chunk(c).copy())
        self._works.append(dist.isend(t, (self.rank + 1) % self.world, tag=phase))

    def wait_recv(self, step: int, phase: int, timeout: float) -> hostapi.Completion:
        c = self.recv_chunk(phase)
        dst = self.stage(phase) if phase < self.world - 1 else self.chunk(c)
        self.torch.distributed.recv(self.torch.from_numpy(dst), (self.rank - 1) % self.world, tag=phase)
        return hostapi.Completion(wr_id=_wr(step, phase), kind="recv", flow=0, status="ok", len=4 * dst.size,
                                  step=step)

    def wait_sends(self, timeout: float) -> None:
        for w in self._works:
            w.wait()
        self._works.clear()

    def close(self) -> None:
        pass


def ring_allreduce(ring, step: int, lose: Optional[Callable] = None, timeout: float = 60.0,
                   reduced: Optional[Callable] = None) -> list:
    """Sums ring.acc over the ranks in place (every rank ends with the same
    sum, up to what was forgiven). lose(phase, array) may zero elements of
    each received message (the control). reduced() runs when this rank's
    reduce-scatter is done, before it sends the chunk it finished: no
    other rank can finish the step before that send, so what reduced()
    does (open the next step) comes before any rank's next step. Returns
    a Phase per receive."""
    n, r = ring.world, ring.rank
    phases = []

    def received(phase: int, comp: hostapi.Completion, arr: np.ndarray) -> None:
        forgiven = lose(phase, arr) if lose is not None else comp.forgiven
        raw = arr.view(np.uint8)
        nonzero = sum(int(np.count_nonzero(raw[off: off + length])) for off, length in forgiven)
        phases.append(Phase(phase, ring.recv_chunk(phase), sum(n_ for _, n_ in forgiven), tuple(forgiven), nonzero))

    ring.send(step, 0, r)
    for k in range(n - 1):  # reduce-scatter
        comp = ring.wait_recv(step, k, timeout)
        c = ring.recv_chunk(k)
        stage = ring.stage(k)
        received(k, comp, stage)
        mine = ring.chunk(c)
        mine += stage
        if k < n - 2:
            ring.send(step, k + 1, c)
    if reduced is not None:
        reduced()
    ring.send(step, n - 1, (r + 1) % n)  # the chunk this rank finished
    for k in range(n - 1):  # all-gather: each chunk lands in place
        phase = n - 1 + k
        comp = ring.wait_recv(step, phase, timeout)
        received(phase, comp, ring.chunk(ring.recv_chunk(phase)))
        if k < n - 2:
            ring.send(step, phase + 1, ring.recv_chunk(phase))
        if k == 0:
            ring.notify_owner(step, comp.forgiven)
    ring.wait_sends(timeout)
    return phases


class UniformLoss:
    """The control's loss: in one step, zero `fraction` of the float32
    elements this rank receives, chosen uniformly at random over all its
    receives of the step."""

    def __init__(self, ring, rng: np.random.Generator):
        self.ring, self.rng = ring, rng
        self.mask: Optional[np.ndarray] = None
        self.starts: list = []

    def begin(self, fraction) -> None:
        """fraction: one number for the whole step, or one per ring phase
        (then each phase's message loses its own share)."""
        sizes = [self.ring.size(self.ring.recv_chunk(p)) for p in range(2 * (self.ring.world - 1))]
        self.starts = list(np.cumsum([0] + sizes))
        total = self.starts[-1]
        self.mask = np.zeros(total, dtype=bool)
        if isinstance(fraction, (list, tuple)):
            if len(fraction) != len(sizes):
                raise ValueError(f"{len(fraction)} phase fractions for a ring of {len(sizes)} phases")
            for p, f in enumerate(fraction):
                k = min(sizes[p], int(round(float(f) * sizes[p])))
                if k:
                    self.mask[self.starts[p] + self.rng.choice(sizes[p], size=k, replace=False)] = True
            return
        k = min(total, int(round(float(fraction) * total)))
        if k:
            self.mask[self.rng.choice(total, size=k, replace=False)] = True

    def __call__(self, phase: int, arr: np.ndarray) -> list:
        m = self.mask[self.starts[phase]: self.starts[phase + 1]]
        arr[m] = 0
        idx = np.flatnonzero(m)
        return [(int(i) * 4, 4) for i in idx]


def fixed_schedule(steps: int) -> set:
    """The seed's schedule scaled to a run: "steps 1, 2, 3 and 20 of the 20"
    are the first 15 % of the steps and the last 5 %."""
    first = math.ceil(0.15 * steps)
    last = math.ceil(0.05 * steps)
    return set(range(1, first + 1)) | set(range(steps - last + 1, steps + 1))


def layer_norms(grads: Sequence, layer_of: Sequence[int], layers: int) -> list:
    """Per-layer L2 norms: the parameters of one layer (weight and bias)
    count together."""
    sq = [0.0] * layers
    for g, layer in zip(grads, layer_of):
        sq[layer] += float(g.double().pow(2).sum())
    return [math.sqrt(s) for s in sq]


class ForgiveHook:
    """The hook's state: the ring, how steps are classified, and a record
    of every step.

    mode: "detector" (begin_step carries per-layer norms), "fixed"
    (begin_step carries the fixed schedule's critical), or "uniform" (the
    control: the ring runs over gloo and zeroes the given per-step
    fraction uniformly; nothing is declared to any daemon).

    DDP hands the hook its gradients in buckets, in index order, one call
    each (torch 1.13 gives the first step one bucket and rebuilds them
    after it, at bucket_cap_mb). The hook keeps each bucket's future open
    until the step's last bucket, then runs one ring over all of them as
    one flat buffer and completes every future: one budget per step,
    whose expected bytes depend only on the model's size, so the step can
    be opened before any of its buckets exists. steps: the last step the
    training runs (no step after it is opened); None opens one more."""

    def __init__(self, ring, model, mode: str = "detector", schedule: Optional[set] = None,
                 lr_decay_steps: Sequence[int] = (), uniform_fractions: Optional[dict] = None,
                 seed: int = 0, record_positions: bool = False, verify: bool = False, timeout: float = 60.0,
                 steps: Optional[int] = None, pattern_loss=None):
        if mode not in ("detector", "fixed", "uniform"):
            raise ValueError(f"mode {mode!r}: want detector, fixed or uniform")
        if mode == "fixed" and schedule is None:
            raise ValueError("mode fixed needs a schedule")
        if mode == "uniform" and uniform_fractions is None and pattern_loss is None:
            raise ValueError("mode uniform needs the per-step fractions to zero, or a loss pattern")
        self.ring, self.mode, self.schedule = ring, mode, schedule or set()
        self.lr_decay_steps = set(lr_decay_steps)
        self.uniform_fractions = uniform_fractions or {}
        self.uniform = UniformLoss(ring, np.random.default_rng(seed)) if mode == "uniform" else None
        # A loss pattern (forgive.patterns.PatternLoss) in place of the
        # uniform draw: it zeroes where the pattern forgave.
        self.pattern_loss = pattern_loss if mode == "uniform" else None
        if self.pattern_loss is not None:
            self.uniform = pattern_loss
        self.client = getattr(ring, "client", None)
        self.timeout = timeout
        self.last_step = steps
        self.record_positions = record_positions
        self.verify = verify  # compare every sum with gloo's all_reduce (a test of the ring)
        # Layers: the modules that own parameters, in model order.
        owners = {}
        for name, p in model.named_parameters():
            if p.requires_grad:
                owners[id(p)] = name.rsplit(".", 1)[0] if "." in name else name
        names = list(dict.fromkeys(owners.values()))
        self.layer_names = names
        self._layer_index = {pid: names.index(mod) for pid, mod in owners.items()}
        numel = sum(p.numel() for p in model.parameters() if p.requires_grad)
        if numel != ring.numel:
            raise ValueError(f"the ring was built for {ring.numel} elements, the model has {numel} to all-reduce")
        self.step = 0
        self.records: list = []  # one dict per step
        self.zeroed: Optional[np.ndarray] = None  # last step: elements forgiven in the all-gather
        self.bucket_params: list = []  # the last step's parameters, in the order of its flat buffer
        self.daemon_steps: dict = {}  # step -> hostapi.StepRecord, read back from the daemon
        self.counters: dict = {}  # the daemon's counters of this rank's flows, read at close
        self._buckets: list = []  # this step's (buffer, future, gradients), in index order
        self._t0 = 0.0
        self._open(1)

    def _open(self, step: int) -> None:
        if self.last_step is None or step <= self.last_step:
            self.ring.open_step(step)

    def __call__(self, bucket):
        import torch

        if bucket.index() == 0:
            if self._buckets:
                raise RuntimeError(f"step {self.step + 1}: DDP began a new step after {len(self._buckets)} buckets "
                                   "without the last one")
            self._t0 = time.monotonic()
            self.bucket_params = []
        elif bucket.index() != len(self._buckets):
            raise RuntimeError(f"bucket {bucket.index()} after {len(self._buckets)} buckets: DDP hands buckets in order")
        buf = bucket.buffer()
        if buf.dtype != torch.float32:
            raise RuntimeError(f"bucket of {buf.dtype} gradients: the ring all-reduces float32")
        fut = torch.futures.Future()
        self._buckets.append((buf, fut, bucket.gradients()))
        self.bucket_params += bucket.parameters()  # the bucket's order, which DDP changes after step 1
        if not bucket.is_last():
            return fut  # completed with the step's last bucket
        buckets, self._buckets = self._buckets, []
        try:
            self._allreduce(buckets)
        except BaseException as e:
            for _, f, _ in buckets[:-1]:
                f.set_exception(e)
            raise
        for b, f, _ in buckets:
            f.set_result(b)
        return fut

    def _allreduce(self, buckets: list) -> None:
        import torch

        sizes = [b.numel() for b, _, _ in buckets]
        if sum(sizes) != self.ring.numel:
            raise RuntimeError(f"{len(buckets)} buckets of {sum(sizes)} elements in all, the ring was built for "
                               f"{self.ring.numel}")
        self.step += 1
        step = self.step
        grads = [g for _, _, gs in buckets for g in gs]
        norms = layer_norms(grads, [self._layer_index[id(p)] for p in self.bucket_params], len(self.layer_names))
        expected = self.ring.expected_bytes()
        rec = {"step": step, "norms": norms, "expected": expected, "buckets": sizes}
        if self.mode == "detector":
            self.ring.classify(step, norms=norms, lr_decay=step in self.lr_decay_steps)
        elif self.mode == "fixed":
            critical = step in self.schedule
            self.ring.classify(step, critical=critical)
            rec["declared_critical"] = critical
        elif self.pattern_loss is not None:
            self.pattern_loss.begin_step(step)
            rec["fraction_target"] = self.pattern_loss.fraction
        else:
            fraction = self.uniform_fractions.get(step, 0.0)
            self.uniform.begin(fraction)
            rec["fraction_target"] = fraction
        acc = self.ring.acc
        offs = np.cumsum([0] + sizes)
        for (b, _, _), a, z in zip(buckets, offs, offs[1:]):
            acc[a:z] = b.detach().numpy()
        local = torch.from_numpy(acc.copy()) if self.verify else None
        phases = ring_allreduce(self.ring, step, lose=self.uniform, timeout=self.timeout,
                                reduced=lambda: self._open(step + 1))
        if self.client is not None:
            self.client.end_step(step)
        owner_zeroed = self.ring.owner_zeroes(step, self.timeout)
        acc /= self.ring.world
        if local is not None:
            torch.distributed.all_reduce(local)
            rec["sum_error"] = float((local / self.ring.world - torch.from_numpy(acc)).abs().max())
        if self.record_positions:
            self.zeroed = self._all_gather_losses(phases, owner_zeroed)
        for (b, _, _), a, z in zip(buckets, offs, offs[1:]):
            b.copy_(torch.from_numpy(acc[a:z]))
        n = self.ring.world
        rec["forgiven"] = sum(p.forgiven_bytes for p in phases)
        rec["forgiven_by_phase"] = [p.forgiven_bytes for p in phases]
        rec["forgiven_gather"] = sum(p.forgiven_bytes for p in phases if p.phase >= n - 1)
        rec["forgiven_nonzero"] = sum(p.nonzero for p in phases)
        rec["owner_zeroed"] = sum(length for _, length in owner_zeroed)
        rec["allreduce_s"] = time.monotonic() - self._t0
        self.records.append(rec)
        if self.client is not None and step % 32 == 0:
            self.read_steps()

    def _all_gather_losses(self, phases: list, owner_zeroed: Sequence = ()) -> np.ndarray:
        """The elements of the flat gradient that an all-gather receive
        left as forgiven zeros, or that an owner notice zeroed (what the
        model applies unchanged)."""
        mask = np.zeros(self.ring.numel, dtype=bool)
        lost = [(self.ring.bounds[p.chunk][0], p.forgiven) for p in phases if p.phase >= self.ring.world - 1]
        lost.append((self.ring.bounds[(self.ring.rank + 1) % self.ring.world][0], owner_zeroed))
        for start, ranges in lost:
            for off, n in ranges:
                mask[start + off // 4: start + (off + n + 3) // 4] = True
        return mask

    def read_steps(self) -> None:
        """Keeps the daemon's records of this run's steps (the daemon keeps
        the last 64)."""
        for s in self.client.steps(limit=64):
            if 1 <= s.step <= self.step:
                self.daemon_steps[s.step] = s

    def close(self) -> None:
        if self.client is not None and not self.client.closed:
            self.read_steps()
            self.counters = self.client.counters()
        self.ring.close()


def forgive_hook(state: ForgiveHook, bucket):
    """The function to give DistributedDataParallel.register_comm_hook."""
    return state(bucket)
