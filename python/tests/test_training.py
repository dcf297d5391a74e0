"""Training through the fabric at CI size: four ranks of the CNN on a
Fashion-MNIST subset, DDP with forgive_hook, each rank on its own forgived
of a leaf-spine fabric started by forgivectl (the tolerance experiment's
topology and shallow-buffer profile, so the switches trim), under each
gather policy; and ResNet-18, whose gradients DDP hands over in several
buckets, for a few steps."""

import json
import os

import numpy as np
import pytest

from forgive import ddp, fabric, launch, train
from forgive.hostapi import StepRecord

from conftest import start_fabric

torch = pytest.importorskip("torch")

TOPOLOGY = "leaf-spine-2x4-4to1"
PROFILE = os.path.join(os.path.dirname(ddp.__file__), "tolerance-profile.yaml")
RANKS = 4


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    if not os.path.isdir(train.DATA_DIR):
        pytest.fail(f"{train.DATA_DIR} is missing: install Debian's dataset-fashion-mnist")
    path = tmp_path_factory.mktemp("data") / "fmnist.npz"
    return train.prepare_data(str(path), train_subset=4000, test_subset=1000, seed=1)


def run(tmp_path_factory, policy, mode, steps, data, *flags, topology=TOPOLOGY, profile=PROFILE, ranks=RANKS):
    fab = start_fabric(tmp_path_factory, topology, ranks, policy, profile=profile)
    out = str(tmp_path_factory.mktemp(f"{policy}-{mode}"))
    try:
        res = launch.run_ranks(ranks, out, mode, steps, seed=1, hosts=fab.hosts,
                               extra=["--data-npz", data, "--eval-every", str(steps), "--lr", "0.02",
                                      "--check-replicas", *flags],
                               timeout=600)
        assert fab.alive(), "a daemon died during the run:\n" + fab.log_tail()
    finally:
        fab.stop()
    return res, out


def check_ledgers(res, steps):
    """Every step of every rank is in its daemon's ledger, and the FORGIVE
    invariants held on each: forgiven <= budget, forgiven <= p/(1-p) x
    received, no range charged twice (the daemon's own check). The hook's
    count of forgiven bytes (from the completions) is the ledger's."""
    for r in res:
        recs = {x["step"]: StepRecord.from_json(x) for x in r["daemon_steps"]}
        assert sorted(recs) == list(range(1, steps + 1)), f"rank {r['rank']}: steps missing from the daemon's records"
        for hook_rec in r["records"]:
            d = recs[hook_rec["step"]]
            assert d.invariants() == []
            assert not d.open
            assert d.classified, f"rank {r['rank']} step {d.step}: opened but never classified"
            assert d.expected == hook_rec["expected"]
            assert d.received + d.forgiven <= d.expected
            assert d.forgiven == hook_rec["forgiven"], f"rank {r['rank']} step {d.step}: completions and ledger disagree"
            assert d.gathered_forgiven == hook_rec["forgiven_gather"]
            # The hook opens every step before any rank can send into it.
            assert d.unbudgeted_bytes == 0, f"rank {r['rank']} step {d.step}: {d.unbudgeted_bytes} bytes before the step opened"


def replica_diffs(res, steps):
    """The largest difference of any parameter between the ranks after
    each step, as every rank measured it (the same collective)."""
    diffs = [[rec["replica_max_abs_diff"] for rec in r["records"]] for r in res]
    assert all(len(d) == steps for d in diffs)
    assert all(d == diffs[0] for d in diffs), "the ranks measured different replica differences"
    return diffs[0]


def check_identical(res, out, steps):
    """Bit-identical replicas after every step, and at the end."""
    diffs = replica_diffs(res, steps)
    assert diffs == [0.0] * steps, f"replicas differ after steps {[i + 1 for i, d in enumerate(diffs) if d]}: {diffs}"
    params = [np.load(os.path.join(out, f"rank{k}-params.npy")) for k in range(len(res))]
    for p in params[1:]:
        assert p.tobytes() == params[0].tobytes(), "the final replicas differ"


def test_the_ring_sums_exactly_through_a_lossless_fabric(tmp_path_factory, data):
    """Under dcqcn nothing is forgiven: every all-reduce equals gloo's,
    and every replica ends with the same parameters."""
    steps = 6
    res, out = run(tmp_path_factory, "dcqcn", "detector", steps, data, "--verify-sum")
    check_ledgers(res, steps)
    for r in res:
        assert len(r["records"]) == steps
        for rec in r["records"]:
            assert rec["forgiven"] == 0
            assert rec["sum_error"] < 1e-6, f"rank {r['rank']} step {rec['step']}: the ring's sum is wrong"
    check_identical(res, out, steps)
    # The daemons' detector classified every step from the declared norms
    # (the first, with no earlier interval, is critical), and without
    # FORGIVE no step has a loss budget.
    for r in res:
        first = [x for x in r["daemon_steps"] if x["step"] == 1][0]
        assert first["critical"]
        assert all(x["p"] == 0 and x["budget"] == 0 for x in r["daemon_steps"])
        assert len(r["records"][0]["norms"]) == len(r["layers"]) == 4


def test_training_through_forgive_learns_and_applies_forgiven_bytes_as_zeros(tmp_path_factory, data):
    steps = 40
    res, _ = run(tmp_path_factory, "forgive", "detector", steps, data, "--record-positions")
    check_ledgers(res, steps)
    # The seed's gather policy forgives finished values too, and the
    # replica check sees what that does: after a step whose all-gather
    # forgave bytes, the replicas differ.
    diffs = replica_diffs(res, steps)
    for i in range(steps):
        if any(r["records"][i]["forgiven_gather"] for r in res):
            assert diffs[i] > 0, f"step {i + 1}: bytes of the all-gather were forgiven, yet the replicas agree"
    losses = np.mean([[rec["loss"] for rec in r["records"]] for r in res], axis=0)
    assert losses[-10:].mean() < 0.75 * losses[:5].mean(), f"the loss did not fall: {losses.round(2).tolist()}"
    for r in res:
        assert r["final"]["accuracy"] > 0.4, f"rank {r['rank']}: test accuracy {r['final']['accuracy']}"
    forgiven = sum(rec["forgiven"] for r in res for rec in r["records"])
    assert forgiven > 0, "the fabric forgave nothing: the test shows no forgiveness"
    # Forgiven ranges read zero in the receive buffers when the ring used
    # them, and those of the all-gather are zeros in the gradients the
    # optimizer applied.
    assert sum(rec["forgiven_nonzero"] for r in res for rec in r["records"]) == 0
    checked = sum(rec.get("applied_zero_checked", 0) for r in res for rec in r["records"])
    assert checked > 0, "no all-gather range was forgiven: nothing to check in the applied gradients"
    assert sum(r["applied_nonzero"] for r in res) == 0


@pytest.mark.parametrize("policy", ["forgive-phase", "forgive-owner"])
def test_gather_policies_keep_the_replicas_identical(tmp_path_factory, data, policy):
    """Under the gather policies that promise it, the replicas are
    bit-identical after every step, although the fabric trims and FORGIVE
    forgives: under repair nothing of the all-gather is forgiven (its
    trims are retransmitted); under owner a finished value is forgiven
    only in the receive from its owner, and the hook zeroes it at the
    owner too."""
    steps = 30
    res, out = run(tmp_path_factory, policy, "detector", steps, data, "--record-positions")
    check_ledgers(res, steps)
    check_identical(res, out, steps)
    forgiven = sum(rec["forgiven"] for r in res for rec in r["records"])
    assert forgiven > 0, "the fabric forgave nothing: the test shows no forgiveness"
    gathered = sum(rec["forgiven_gather"] for r in res for rec in r["records"])
    repaired = sum(x["gather_repairs"] for r in res for x in r["daemon_steps"])
    assert repaired > 0, "no trim of the all-gather was repaired: the test does not exercise the policy"
    want = {"forgive-phase": "repair", "forgive-owner": "owner"}[policy]
    assert all(r["gather"] == want for r in res), "the hook did not learn the daemons' gather policy"
    if want == "repair":
        assert gathered == 0, "repair forgave a finished value"
    else:
        # Forgiven finished values are the owner round's only, and each
        # was zeroed at its owner too (the left neighbour).
        for r in res:
            left = res[(r["rank"] - 1) % len(res)]
            for rec, lrec in zip(r["records"], left["records"]):
                assert rec["forgiven_gather"] == rec["forgiven_by_phase"][len(res) - 1]
                assert lrec["owner_zeroed"] == rec["forgiven_gather"]
    assert sum(r["applied_nonzero"] for r in res) == 0
    assert sum(rec["forgiven_nonzero"] for r in res for rec in r["records"]) == 0


def test_resnet18_in_several_buckets_through_the_fabric(tmp_path_factory, data):
    """ResNet-18 (44.7 MB of gradients): torch 1.13's DDP hands the first
    step over in one bucket and every later one in several at its default
    25 MB; the hook makes one ring and one budget of each step, opened
    before any byte of it arrives, and under the owner policy the
    replicas stay bit-identical after every step."""
    steps = 3
    res, out = run(tmp_path_factory, "forgive-owner", "detector", steps, data, "--model", "resnet18",
                   "--batch", "4", profile="loopback-fast")
    check_ledgers(res, steps)
    check_identical(res, out, steps)
    numel = res[0]["numel"]
    assert numel == 11_175_370
    for r in res:
        buckets = [rec["buckets"] for rec in r["records"]]
        assert buckets[0] == [numel], "the first step came in more than one bucket"
        assert all(len(b) > 1 and sum(b) == numel for b in buckets[1:]), buckets
        assert all(rec["expected"] == r["records"][0]["expected"] for rec in r["records"])
        assert len(r["records"][0]["norms"]) == len(r["layers"]) > 20


def test_many_buckets_sum_exactly(tmp_path):
    """The hook joins every bucket of a step into one ring: split the CNN
    into several buckets (a small first bucket and cap) and every
    all-reduce over gloo, with nothing lost, equals gloo's own."""
    steps = 4
    fr = {str(k): {str(s): 0.0 for s in range(1, steps + 1)} for k in range(2)}
    path = tmp_path / "fractions.json"
    path.write_text(json.dumps(fr))
    out = str(tmp_path / "out")
    npz = str(tmp_path / "d.npz")
    xtr = np.random.default_rng(0).normal(size=(64, 1, 28, 28)).astype(np.float32)
    ytr = np.arange(64) % 10
    np.savez(npz, xtr=xtr, ytr=ytr, xte=xtr[:16], yte=ytr[:16])
    res = launch.run_ranks(2, out, "uniform", steps, 1, fractions=str(path),
                           extra=["--data-npz", npz, "--batch", "8", "--verify-sum", "--check-replicas",
                                  "--first-bucket-mb", "0.05", "--bucket-cap-mb", "0.1"], timeout=300)
    for r in res:
        buckets = [rec["buckets"] for rec in r["records"]]
        assert all(len(b) > 1 for b in buckets[1:]), buckets
        for rec in r["records"]:
            assert rec["sum_error"] < 1e-6, f"rank {r['rank']} step {rec['step']}: the ring's sum is wrong"
    check_identical(res, out, steps)


def test_the_hook_refuses_a_ring_of_another_size():
    model = train.make_model("cnn")
    ring = ddp.GlooRing(rank=0, world=2, numel=1000)
    with pytest.raises(ValueError, match="52138"):
        ddp.ForgiveHook(ring, model, mode="uniform", uniform_fractions={})


def test_the_uniform_control_zeroes_the_given_fraction(tmp_path):
    """The control's ring runs over gloo and zeroes, on each step, the
    given fraction of each rank's received gradient elements."""
    steps = 4
    fr = {str(k): {str(s): 0.1 * s / steps for s in range(1, steps + 1)} for k in range(2)}
    path = tmp_path / "fractions.json"
    path.write_text(json.dumps(fr))
    out = str(tmp_path / "out")
    os.makedirs(out)
    xtr = np.random.default_rng(0).normal(size=(64, 1, 28, 28)).astype(np.float32)
    ytr = np.arange(64) % 10
    npz = str(tmp_path / "d.npz")
    np.savez(npz, xtr=xtr, ytr=ytr, xte=xtr[:16], yte=ytr[:16])
    res = launch.run_ranks(2, out, "uniform", steps, 1, fractions=str(path),
                           extra=["--data-npz", npz, "--batch", "8", "--record-positions"], timeout=300)
    for r in res:
        for rec in r["records"]:
            want = 0.1 * rec["step"] / steps
            assert rec["forgiven"] / rec["expected"] == pytest.approx(want, abs=1e-4)
        assert r["applied_nonzero"] == 0
        assert sum(rec["applied_zero_checked"] for rec in r["records"]) > 0


def test_the_fixed_schedule_scales_the_seeds():
    assert ddp.fixed_schedule(20) == {1, 2, 3, 20}
    s = ddp.fixed_schedule(200)
    assert s == set(range(1, 31)) | set(range(191, 201))


def test_chunks_cover_the_buffer():
    for n, w in ((10, 3), (52138, 8), (8, 8)):
        b = ddp.chunk_bounds(n, w)
        assert b[0][0] == 0 and b[-1][1] == n
        assert all(b[i][1] == b[i + 1][0] for i in range(w - 1))
        assert max(y - x for x, y in b) - min(y - x for x, y in b) <= 1


def test_a_fabric_needs_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(fabric.NeedRoot):
        fabric.need_root()


def test_the_uniform_control_can_follow_each_ring_phase():
    """Per-phase fractions zero exactly that share of each phase's message."""
    ring = ddp.GlooRing(rank=1, world=4, numel=1000)
    loss = ddp.UniformLoss(ring, np.random.default_rng(0))
    fractions = [0.0, 0.5, 0.1, 0.0, 1.0, 0.2]
    loss.begin(fractions)
    for p, f in enumerate(fractions):
        arr = np.ones(ring.size(ring.recv_chunk(p)), dtype=np.float32)
        lost = loss(p, arr)
        assert len(lost) == round(f * arr.size) == arr.size - np.count_nonzero(arr)
    with pytest.raises(ValueError):
        loss.begin([0.1])


def test_expected_bytes_are_what_the_ring_receives():
    for world, numel in ((2, 11), (4, 1000), (8, 52138)):
        for rank in range(world):
            ring = ddp.GlooRing(rank, world, numel)
            got = sum(4 * ring.size(ring.recv_chunk(p)) for p in range(2 * (world - 1)))
            assert ring.expected_bytes() == got
            # Every chunk but the rank's own is received in the reduce-scatter,
            # every chunk but the one it finishes in the all-gather.
            rs = {ring.recv_chunk(p) for p in range(world - 1)}
            ag = {ring.recv_chunk(p) for p in range(world - 1, 2 * (world - 1))}
            assert rs == set(range(world)) - {rank}
            assert ag == set(range(world)) - {(rank + 1) % world}
