"""One data-parallel rank: a small CNN (or ResNet-18, --model) on Fashion-MNIST under DDP, its
gradients all-reduced by forgive_hook through this rank's forgived (or,
for the uniform-loss control, over gloo). Started by the experiment
(forgive.tolerance) and the CI test, one process per rank:

    /usr/bin/python3 -m forgive.train --rank 0 --world 8 --socket /run/.../host1.sock \\
        --host-ids 1,2,3,4,5,6,7,8 --mode detector --steps 200 --seed 1 --out DIR

It writes DIR/rank<R>.json: per step the training loss, the norms it
declared, DDP's buckets, the bytes forgiven (in total, per ring phase and
in the all-gather), with --check-replicas the largest difference of any
parameter between the ranks after the step, and, read back from the
daemon, the ledger's record of the step; the test accuracy of
this rank's model at the end (rank 0 also every --eval-every steps); and
DIR/rank<R>-params.npy, the final parameters.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import sys
import time

import numpy as np

# Debian's dataset-fashion-mnist, or wherever FASHION_MNIST_DIR says the
# four IDX files are (torchvision's download puts them in FashionMNIST/raw).
DATA_DIR = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def load_idx(path: str) -> np.ndarray:
    """An IDX file (the MNIST format), gzipped or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_fashion_mnist(data_dir: str = DATA_DIR):
    """(train images, train labels, test images, test labels); images as
    float32 in [0, 1], normalised to Fashion-MNIST's mean and deviation."""
    def images(name):
        x = load_idx(os.path.join(data_dir, name)).astype(np.float32) / 255.0
        return ((x - 0.2860) / 0.3530)[:, None, :, :]

    def labels(name):
        return load_idx(os.path.join(data_dir, name)).astype(np.int64)

    return (images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz"),
            images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz"))


def prepare_data(path: str, train_subset: int, test_subset: int, seed: int, data_dir: str = DATA_DIR) -> str:
    """Writes the run's data to one .npz (a random training subset of
    train_subset images, the first test_subset test images), so that the
    ranks load it in milliseconds instead of each decompressing the set."""
    xtr, ytr, xte, yte = load_fashion_mnist(data_dir)
    subset = np.random.default_rng(seed).permutation(len(xtr))[:train_subset]
    np.savez(path, xtr=xtr[subset], ytr=ytr[subset], xte=xte[:test_subset], yte=yte[:test_subset])
    return path


MODELS = ("cnn", "resnet18")


def make_model(name: str = "cnn"):
    """cnn: the tolerance experiment's small CNN (52,138 parameters, one
    DDP bucket). resnet18: torchvision's ResNet-18 from random weights,
    with a one-channel first convolution and ten classes for
    Fashion-MNIST (11,175,370 parameters, 44.7 MB of gradients: torch
    1.13's DDP hands the first step over in one bucket and the later ones
    in three at its default 25 MB, 9.5, 26.5 and 8.7 MB)."""
    import torch.nn as nn

    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(16 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, 10),
        )
    if name == "resnet18":
        import torchvision

        m = torchvision.models.resnet18(weights=None, num_classes=10)
        m.conv1 = nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
        return m
    raise ValueError(f"model {name!r}: want one of {', '.join(MODELS)}")


class ReplicaCheck:
    """The largest absolute difference of any parameter between the
    ranks, after every step: one gloo all_reduce (MAX) of [p, -p] gives
    each element's largest and smallest value over the ranks; their
    difference is exactly 0.0 when every replica holds the same number.
    The collective runs in the background and is read one step later (or
    at the end), so it adds no wait to the step it measures."""

    def __init__(self, params):
        self.params = list(params)
        self.pending = None

    def start(self, step: int) -> None:
        import torch
        import torch.distributed as dist

        with torch.no_grad():
            flat = torch.cat([p.detach().reshape(-1) for p in self.params])
            both = torch.cat([flat, -flat])
        self.pending = (step, both, dist.all_reduce(both, op=dist.ReduceOp.MAX, async_op=True))

    def finish(self):
        """(step, max abs difference) of the check started last, or None."""
        if self.pending is None:
            return None
        step, both, work = self.pending
        self.pending = None
        work.wait()
        n = both.numel() // 2
        return step, float((both[:n] + both[n:]).max())


def evaluate(model, x, y, batch: int = 1000) -> tuple:
    import torch
    import torch.nn.functional as F

    correct, loss = 0, 0.0
    was_training = model.training
    model.eval()  # batch norm from its running statistics
    with torch.no_grad():
        for i in range(0, len(x), batch):
            xb, yb = torch.from_numpy(x[i: i + batch]), torch.from_numpy(y[i: i + batch])
            out = model(xb)
            loss += float(F.cross_entropy(out, yb, reduction="sum"))
            correct += int((out.argmax(1) == yb).sum())
    model.train(was_training)
    return correct / len(x), loss / len(x)


def parse_args(argv=None):
    from . import prog

    p = argparse.ArgumentParser(prog=prog("forgive.train"), description=__doc__.split("\n\n")[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--master-port", type=int, default=29500, help="gloo rendezvous on 127.0.0.1 (setup only)")
    p.add_argument("--socket", help="this rank's forgived socket (not with --mode uniform)")
    p.add_argument("--host-ids", help="every rank's host id, comma-separated, in rank order")
    p.add_argument("--mode", choices=("detector", "fixed", "uniform"), default="detector")
    p.add_argument("--fractions", help='--mode uniform: JSON {"rank": {"step": fraction}} of received gradient bytes '
                   "to zero (a fraction, or a list of one per ring phase)")
    p.add_argument("--pattern", help="--mode uniform: zero where this loss pattern (a lab run's loss-pattern-*.npz) forgave, "
                   "mapped onto this ring (forgive.patterns.PatternLoss), instead of --fractions")
    p.add_argument("--pattern-array", choices=("ranges", "control"), default="ranges",
                   help="--pattern: the forgiven ranges, or their uniform control")
    p.add_argument("--pattern-first-rank", type=int, default=0,
                   help="--pattern: rank r replays the pattern's rank (this + stride * r) mod its ranks (default 0)")
    p.add_argument("--pattern-rank-stride", type=int, default=1,
                   help="--pattern: the stride of --pattern-first-rank (default 1)")
    p.add_argument("--model", choices=MODELS, default="cnn")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's bucket size (its default: 25)")
    p.add_argument("--first-bucket-mb", type=float,
                   help="DDP's first bucket (torch's default: 1 MiB); smaller splits a small model into several buckets")
    p.add_argument("--check-replicas", action="store_true",
                   help="after every step, the largest difference of any parameter between the ranks (over gloo)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--train-subset", type=int, default=16000, help="training images shared out among the ranks")
    p.add_argument("--test-subset", type=int, default=2000)
    p.add_argument("--eval-every", type=int, default=25, help="rank 0 evaluates every this many steps")
    p.add_argument("--data", default=DATA_DIR, help="directory of the IDX files")
    p.add_argument("--data-npz", help="the run's data as prepare_data wrote it (instead of --data and the subsets)")
    p.add_argument("--out", required=True)
    p.add_argument("--record-positions", action="store_true",
                   help="check that all-gather-forgiven elements are zero in the gradients the optimizer applies")
    p.add_argument("--verify-sum", action="store_true",
                   help="compare every all-reduce with gloo's (a test of the ring; the sums differ where bytes were forgiven)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from . import ddp, hostapi

    torch.set_num_threads(1)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.master_port}", rank=args.rank,
                            world_size=args.world)
    torch.manual_seed(args.seed)  # the same initial model everywhere (DDP also broadcasts rank 0's)
    model = make_model(args.model)
    numel = sum(p.numel() for p in model.parameters())
    pattern_loss = None
    if args.mode == "uniform" and args.pattern:
        from . import patterns

        fractions = None
        ring = ddp.GlooRing(args.rank, args.world, numel)
        pattern_loss = patterns.PatternLoss(ring, patterns.load(args.pattern), args.pattern_array, args.steps,
                                            ddp.fixed_schedule(args.steps), first_rank=args.pattern_first_rank,
                                            rank_stride=args.pattern_rank_stride)
    elif args.mode == "uniform":
        with open(args.fractions) as f:
            fractions = {int(k): v if isinstance(v, list) else float(v)
                         for k, v in json.load(f).get(str(args.rank), {}).items()}
        ring = ddp.GlooRing(args.rank, args.world, numel)
    else:
        fractions = None
        client = hostapi.Client(args.socket, name=f"train.py[rank {args.rank}]", timeout=60)
        host_ids = [int(h) for h in args.host_ids.split(",")]
        ring = ddp.HostAPIRing(client, args.rank, args.world, host_ids, numel)  # the daemon's gather policy
    decay_at = args.steps - max(1, round(0.05 * args.steps)) + 1  # the seed's step 20 of 20
    state = ddp.ForgiveHook(ring, model, mode=args.mode, schedule=ddp.fixed_schedule(args.steps),
                            lr_decay_steps=[decay_at], uniform_fractions=fractions,
                            seed=args.seed * 1000 + args.rank, record_positions=args.record_positions,
                            verify=args.verify_sum, steps=args.steps, pattern_loss=pattern_loss)
    if args.first_bucket_mb is not None:
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(args.first_bucket_mb * 1024 * 1024)  # read by DDP's constructor
    net = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    net.register_comm_hook(state, ddp.forgive_hook)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum)

    if args.data_npz:
        with np.load(args.data_npz) as d:
            xtr, ytr, xte, yte = d["xtr"], d["ytr"], d["xte"], d["yte"]
        subset = np.arange(len(xtr))
    else:
        xtr, ytr, xte, yte = load_fashion_mnist(args.data)
        subset = np.random.default_rng(args.seed).permutation(len(xtr))[: args.train_subset]
        xte, yte = xte[: args.test_subset], yte[: args.test_subset]
    shard = subset[args.rank:: args.world]
    brng = np.random.default_rng(args.seed * 1000 + args.rank)

    check = ReplicaCheck(model.parameters()) if args.check_replicas else None

    def replicas_checked() -> None:
        done = check.finish() if check is not None else None
        if done is not None:
            state.records[done[0] - 1]["replica_max_abs_diff"] = done[1]

    evals, violations, t0 = [], 0, time.monotonic()
    for step in range(1, args.steps + 1):
        if step == decay_at:
            for g in opt.param_groups:
                g["lr"] = args.lr * 0.1
        idx = brng.choice(shard, size=args.batch, replace=False)
        xb, yb = torch.from_numpy(xtr[idx]), torch.from_numpy(ytr[idx])
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(net(xb), yb)
        loss.backward()
        rec = state.records[-1]
        rec["loss"] = float(loss)
        rec["lr"] = opt.param_groups[0]["lr"]
        if args.record_positions and state.zeroed is not None:
            flat = torch.cat([p.grad.reshape(-1) for p in state.bucket_params]).numpy()
            rec["applied_zero_checked"] = int(state.zeroed.sum())
            rec["applied_nonzero"] = int(np.count_nonzero(flat[state.zeroed]))
            violations += rec["applied_nonzero"]
        opt.step()
        replicas_checked()
        if check is not None:
            check.start(step)
        if args.rank == 0 and (step % args.eval_every == 0 or step == args.steps):
            acc, tl = evaluate(model, xte, yte)
            evals.append({"step": step, "accuracy": acc, "loss": tl})
    replicas_checked()
    elapsed = time.monotonic() - t0
    acc, tl = evaluate(model, xte, yte)
    state.close()
    os.makedirs(args.out, exist_ok=True)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()
    np.save(os.path.join(args.out, f"rank{args.rank}-params.npy"), params)
    out = {
        "rank": args.rank, "world": args.world, "mode": args.mode, "gather": getattr(ring, "gather", None), "model": args.model, "seed": args.seed,
        "steps": args.steps, "bucket_cap_mb": args.bucket_cap_mb,
        "batch": args.batch, "lr": args.lr, "numel": numel, "layers": state.layer_names,
        "decay_at": decay_at, "schedule": sorted(ddp.fixed_schedule(args.steps)),
        "elapsed_s": elapsed, "records": state.records,
        "daemon_steps": [dataclasses.asdict(state.daemon_steps[s]) for s in sorted(state.daemon_steps)],
        "evals": evals, "final": {"accuracy": acc, "loss": tl}, "applied_nonzero": violations,
        "counters": state.counters,
        # --pattern: the pattern's rank this rank replayed, and which array
        "pattern_source_rank": pattern_loss.source_rank if pattern_loss is not None else None,
        "pattern_array": args.pattern_array if pattern_loss is not None else None,
    }
    with open(os.path.join(args.out, f"rank{args.rank}.json"), "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
