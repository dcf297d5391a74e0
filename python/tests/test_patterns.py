"""forgive.patterns: loading a lab run's loss pattern, applying it as a
mask to a flat gradient, and mapping it onto a smaller ring for the
tolerance experiment. The files here are written with numpy's own savez
in the layout `forgivectl lab` writes (docs/loss-patterns.md); the lab's
Go test (TestLossPatternLoadsInNumpy) loads the lab's own files."""

import json
import os

import pytest

np = pytest.importorskip("numpy")

from forgive import patterns  # noqa: E402  (needs numpy)

DTYPE = [("step", "<i4"), ("receiver", "<i4"), ("sender", "<i4"), ("flow", "<u4"), ("phase", "|u1"),
         ("round", "<i4"), ("offset", "<i8"), ("length", "<i8"), ("time_s", "<f8")]
R, CHUNK = 4, 400  # 4 ranks, 400-byte chunks: a 1600-byte (400-element) tensor


def rec(step, rank, phase, rnd, off, length):
    return (step, rank, (rank - 1) % R, 1000 + (rank - 1) % R, phase, rnd, off, length, 0.5)


def write(path, ranges, control=None, critical=(1, 0, 0, 1)):
    r = np.array(ranges, dtype=DTYPE)
    c = np.array(control if control is not None else ranges, dtype=DTYPE)
    st = np.array([(i + 1, c_, 0, 0.0, 0.0) for i, c_ in enumerate(critical)],
                  dtype=[("step", "<i4"), ("critical", "|u1"), ("forgiven", "<i8"), ("start_s", "<f8"), ("end_s", "<f8")])
    meta = {"ranks": R, "chunk_bytes": CHUNK, "tensor_bytes": R * CHUNK, "steps": len(critical)}
    np.savez_compressed(path, ranges=r, control=c, steps=st, meta=np.array(json.dumps(meta)))
    return str(path)


def test_load_and_apply_mask(tmp_path):
    # step 2, rank 1: bytes [8, 16) and [400, 404) (chunk 1's first element)
    p = patterns.load(write(tmp_path / "p.npz", [rec(2, 1, 0, 0, 8, 8), rec(2, 1, 1, 2, 400, 4), rec(3, 1, 0, 0, 0, 4)]))
    assert (p.ranks, p.chunk_bytes, p.tensor_bytes) == (R, CHUNK, R * CHUNK)
    grad = np.arange(1, 401, dtype=np.float32)
    m = patterns.apply_mask(grad, p.ranges, step=2, rank=1)
    assert np.flatnonzero(m).tolist() == [2, 3, 100]
    assert (grad[[2, 3, 100]] == 0).all() and np.count_nonzero(grad) == 397
    # another rank, another step: untouched
    assert not patterns.mask(p.ranges, 2, 0, 400).any()
    # a tensor half the size: offsets and lengths scale
    small = patterns.mask(p.ranges, 2, 1, 200, tensor_bytes=p.tensor_bytes)
    assert np.flatnonzero(small).tolist() == [1, 50]


def test_load_refuses_what_is_no_pattern(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, ranges=np.zeros(3))
    with pytest.raises(ValueError, match="not a loss pattern"):
        patterns.load(str(bad))
    with pytest.raises(ValueError, match="flat"):
        patterns.apply_mask(np.zeros((2, 2), dtype=np.float32), np.array([], dtype=DTYPE), 1, 0)


def test_step_map_aligns_critical_steps():
    # pattern: steps 1-3 and 20 critical of 20; model: 1-30 and 191-200 of 200
    pat = [s in (1, 2, 3, 20) for s in range(1, 21)]
    model = [s <= 30 or s >= 191 for s in range(1, 201)]
    m = patterns.step_map(pat, model)
    assert sorted(m) == list(range(1, 201))
    assert [m[s] for s in (1, 2, 3, 4, 30)] == [1, 2, 3, 1, 3]
    assert {m[s] for s in range(31, 191)} == set(range(4, 20))
    assert {m[s] for s in range(191, 201)} == {20}
    for s in range(1, 201):
        assert pat[m[s] - 1] == model[s - 1], s


class FakeRing:
    """What PatternLoss reads of a ring: ddp's chunking and schedule."""

    def __init__(self, rank, world, numel):
        from forgive import ddp

        self.rank, self.world = rank, world
        self.bounds = ddp.chunk_bounds(numel, world)

    def size(self, c):
        a, b = self.bounds[c % self.world]
        return b - a

    def recv_chunk(self, phase):
        n, r = self.world, self.rank
        return (r - phase - 1) % n if phase < n - 1 else (r - (phase - (n - 1))) % n


def test_pattern_loss_keeps_each_phases_position_and_fraction(tmp_path):
    # Rank 1 of the pattern's 4-rank ring: reduce-scatter round 2 (chunk
    # 1-2-1 = 2), bytes 100-200 of the message: bytes 900-1000 of the
    # phase's 1200; all-gather round 0 (chunk 1), its first 4 bytes.
    ranges = [rec(2, 1, 0, 2, 2 * CHUNK + 100, 100), rec(2, 1, 1, 0, CHUNK, 4)]
    p = patterns.load(write(tmp_path / "p.npz", ranges))
    # the model: 2 ranks, 4 steps with the same schedule, 40 elements
    # (two chunks of 20): one message of 20 elements per phase
    ring = FakeRing(1, 2, 40)
    loss = patterns.PatternLoss(ring, p, "ranges", 4, {1, 4})
    loss.begin_step(2)
    # [0.75, 0.833) of 20 elements: 15 to 16.7, 1.7 elements: 15 and 16
    got0 = np.ones(20, dtype=np.float32)
    lost0 = loss(0, got0)
    assert np.flatnonzero(got0 == 0).tolist() == [15, 16]
    assert [o for o, _ in lost0] == [60, 64]
    # the all-gather's 4 bytes of 1200 are 0.07 of an element: none lost
    got1 = np.ones(20, dtype=np.float32)
    loss(1, got1)
    assert not (got1 == 0).any()
    assert loss.fraction == pytest.approx(2 / 40)
    # a step whose pattern step forgave nothing loses nothing
    loss.begin_step(3)
    assert loss.fraction == 0.0
    # rank 3 of a 4-rank model takes the pattern's rank 3: nothing there
    other = patterns.PatternLoss(FakeRing(3, 4, 40), p, "control", 4, {1, 4})
    other.begin_step(2)
    assert other.fraction == 0.0


def test_pattern_loss_keeps_a_dense_patterns_fraction(tmp_path):
    # Every fourth 4-byte element of every message of rank 0, step 1, in
    # the pattern's 4-rank ring: a quarter of its receives. On a 2-rank
    # ring of 400 elements the step still loses a quarter.
    ranges = []
    for phase in (0, 1):
        for rnd in range(R - 1):
            c = (0 - rnd - 1) % R if phase == 0 else (0 - rnd) % R
            ranges += [rec(1, 0, phase, rnd, c * CHUNK + off, 4) for off in range(0, CHUNK, 16)]
    p = patterns.load(write(tmp_path / "p.npz", ranges))
    loss = patterns.PatternLoss(FakeRing(0, 2, 400), p, "ranges", 4, {1, 4})
    loss.begin_step(1)
    assert loss.fraction == pytest.approx(0.25, abs=1 / 400)
    # spread: every stretch of 40 elements loses about a quarter
    m = loss.mask.reshape(-1, 40)
    assert (np.abs(m.mean(axis=1) - 0.25) <= 0.05).all(), m.mean(axis=1)


def test_phase_mask_counts_covered_elements():
    # [0.1, 0.3) and an overlapping [0.2, 0.4) of 10 elements: 3 elements, 1 to 3
    m = patterns.phase_mask(np.array([0.2, 0.1]), np.array([0.4, 0.3]), 10)
    assert np.flatnonzero(m).tolist() == [1, 2, 3]


def test_tolerance_replays_a_pattern(tmp_path):
    """forgive.tolerance's pattern and pattern-uniform runs on 2 ranks and
    3 steps: each rank loses what the pattern (or its control) maps onto
    it, and the table compares the two."""
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    from forgive import tolerance, train

    if os.geteuid() != 0:
        pytest.skip("needs root: forgive.tolerance checks for it before any run (its fabrics run in namespaces)")
    if not os.path.isdir(train.DATA_DIR):
        pytest.fail(f"{train.DATA_DIR} is missing: install Debian's dataset-fashion-mnist")
    # a quarter of rank 0's and rank 1's reduce-scatter in steps 2 and 3 of
    # a 4-rank, 4-step pattern; the control the same bytes elsewhere
    ranges, control = [], []
    for step in (2, 3):
        for rank in (0, 1):
            for rnd in range(R - 1):
                c = (rank - rnd - 1) % R
                ranges += [rec(step, rank, 0, rnd, c * CHUNK + off, 4) for off in range(0, CHUNK // 4, 4)]
                control += [rec(step, rank, 1, rnd, ((rank - rnd) % R) * CHUNK + off, 4) for off in range(0, CHUNK, 16)]
    path = write(tmp_path / "p.npz", ranges, control, critical=(1, 0, 0, 0))
    out, work = str(tmp_path / "out"), str(tmp_path / "work")
    argv = ["--out", out, "--work", work, "--seeds", "1", "--steps", "3", "--ranks", "2", "--runs", "pattern,pattern-uniform",
            "--pattern", path, "--batch", "16", "--train-subset", "256", "--test-subset", "100", "--eval-every", "3"]
    assert tolerance.main(argv) == 0
    with open(os.path.join(out, "results.json")) as f:
        res = json.load(f)
    assert res["meta"]["pattern"] == path
    s = res["summary"]["1"]
    for name in ("pattern", "pattern-uniform"):
        ph = s[name]["forgiven_by_phase_fraction"]
        assert s[name]["forgiven_fraction"] > 0
        # the pattern loses in the reduce-scatter (phase 0), its control in the all-gather (phase 1)
        assert (ph[0] > 0, ph[1] > 0) == ((True, False) if name == "pattern" else (False, True)), (name, ph)
        assert s[name]["pattern_ranks"] == [0, 1]  # the pattern's ranks 0 and 1 (--pattern-first-rank 0)
    with open(os.path.join(out, "table.md")) as f:
        assert "| pattern − pattern-uniform |" in f.read()
    assert tolerance.main(["--out", out, "--work", work, "--runs", "pattern"]) == 2  # no --pattern
    for bad in ("-1", str(R)):  # the pattern has ranks 0 to 3
        assert tolerance.main(argv + ["--pattern-first-rank", bad]) == 2
    for bad in ("0", "4"):  # no stride; both model ranks on the pattern's rank 0
        assert tolerance.main(argv + ["--pattern-rank-stride", bad]) == 2
    # from the pattern's rank 2 on, every third: ranks 2 and 1 (5 mod 4), of which 1 forgave
    out2, work2 = str(tmp_path / "out2"), str(tmp_path / "work2")
    argv2 = [out2 if a == out else work2 if a == work else a for a in argv]
    assert tolerance.main(argv2[:argv2.index("--runs") + 1] + ["pattern"] + argv2[argv2.index("--runs") + 2:]
                          + ["--pattern-first-rank", "2", "--pattern-rank-stride", "3"]) == 0
    with open(os.path.join(out2, "results.json")) as f:
        s2 = json.load(f)["summary"]["1"]["pattern"]
    assert s2["pattern_ranks"] == [2, 1]
    assert s2["forgiven_fraction"] == pytest.approx(s["pattern"]["forgiven_fraction"] / 2, abs=1e-3)  # rank 1's, of 2 ranks


# --- the seed's fabric's own files, onto the CNN's 8-rank ring ----------------------

SEED_PATTERNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "results", "loss-patterns")
CNN_NUMEL = 52138  # forgive.train's CNN: the model of docs/tolerance.md


@pytest.mark.parametrize("name", ["seed-6.25g-single-forgive-seed1.npz", "seed-400g-single-forgive-seed1.npz"])
def test_seed_pattern_maps_onto_the_cnn(name):
    """The committed patterns of the seed's 64-rank fabric (the seed-400g
    one's chunks are 949,444 bytes, 36 times the CNN's 26 KB ring chunks
    of 8 ranks, and its ranges of a few packets cover a few elements
    there), mapped as the tolerance experiment maps them: every model
    rank's every step and phase loses the pattern rank's share of that
    phase, to the element, for the ranges and for the control."""
    path = os.path.join(SEED_PATTERNS, name)
    if not os.path.exists(path):
        pytest.skip(f"{path}: not in this checkout")
    p = patterns.load(path)
    R, chunk = p.ranks, p.chunk_bytes
    assert p.tensor_bytes == R * chunk
    stream = (R - 1) * chunk
    sched = {s for s in range(1, 201) if s <= 30 or s >= 191}
    for which in ("ranges", "control"):
        arr = p.array(which)
        # every range lies in its round's chunk (PatternLoss reads its place in the message from that)
        want_chunk = np.where(arr["phase"] == 0, arr["receiver"] - arr["round"] - 1, arr["receiver"] - arr["round"]) % R
        assert (arr["offset"] // chunk == want_chunk).all() and ((arr["offset"] + arr["length"] - 1) // chunk == want_chunk).all()
        for first, stride in ((0, 1), (8, 1), (7, 8)):
            lost_model = lost_pattern = 0.0
            want_ranks = [(first + stride * r) % R for r in range(8)]
            assert patterns.source_ranks(8, R, first, stride) == want_ranks
            for rank in range(8):
                ring = FakeRing(rank, 8, CNN_NUMEL)
                loss = patterns.PatternLoss(ring, p, which, 200, sched, first_rank=first, rank_stride=stride)
                src = want_ranks[rank]
                assert loss.source_rank == src
                mine = arr[arr["receiver"] == src]
                split, total = loss.starts[7], loss.starts[-1]
                for s in range(1, p.steps.size + 1):
                    m = loss.by_step.get(s, np.zeros(total, dtype=bool))
                    for ph, (a, b) in ((0, (0, split)), (1, (split, total))):
                        want = mine[(mine["step"] == s) & (mine["phase"] == ph)]["length"].sum() / stream * (b - a)
                        assert abs(int(m[a:b].sum()) - want) <= 0.5 + 1e-6, (which, first, stride, rank, s, ph)  # rounded
                # every model step takes its mapped pattern step's mask
                for t in (1, 31, 100, 200):
                    loss.begin_step(t)
                    want = loss.by_step.get(loss.map[t])
                    assert (loss.mask == (want if want is not None else False)).all()
                lost_pattern += mine["length"].sum() / (stream * 2 * p.steps.size)
                lost_model += np.mean([loss.by_step.get(s, np.zeros(total, dtype=bool)).mean()
                                       for s in range(1, p.steps.size + 1)])
            assert lost_model / 8 == pytest.approx(lost_pattern / 8, abs=2e-4), (which, first, stride)


def test_pattern_first_rank_and_stride_choose_the_ranks(tmp_path):
    # rank 3 of the pattern forgave; model rank 1 of 2 takes it with first_rank 2
    p = patterns.load(write(tmp_path / "p.npz", [rec(2, 3, 0, 0, 2 * CHUNK, 40)]))
    assert patterns.PatternLoss(FakeRing(1, 2, 40), p, "ranges", 4, {1, 4}).source_rank == 1
    loss = patterns.PatternLoss(FakeRing(1, 2, 40), p, "ranges", 4, {1, 4}, first_rank=2)
    assert loss.source_rank == 3
    loss.begin_step(2)
    assert loss.fraction > 0
    for bad in (-1, R):
        with pytest.raises(ValueError, match="first_rank"):
            patterns.PatternLoss(FakeRing(1, 2, 40), p, "ranges", 4, {1, 4}, first_rank=bad)
    # every second rank from 1: model rank 1 takes the pattern's rank 3
    assert patterns.PatternLoss(FakeRing(1, 2, 40), p, "ranges", 4, {1, 4}, first_rank=1, rank_stride=2).source_rank == 3
    with pytest.raises(ValueError, match="rank_stride"):
        patterns.PatternLoss(FakeRing(1, 2, 40), p, "ranges", 4, {1, 4}, rank_stride=0)
    assert patterns.source_ranks(4, R, 1, 3) == [1, 0, 3, 2]
    with pytest.raises(ValueError, match="twice"):
        patterns.source_ranks(4, R, 0, 2)  # 0, 2, 0, 2


def test_window_figures(tmp_path):
    # step 1: ranks 1 and 2 lose in the same rounds (correlation 1), rank 3
    # in other rounds (-0.5 against each: 3 messages each way), rank 0 nothing (left out)
    ranges = []
    for rank, rounds in ((1, (0,)), (2, (0,)), (3, (1, 2))):
        for rnd in rounds:
            ranges.append(rec(1, rank, 0, rnd, ((rank - rnd - 1) % R) * CHUNK, 40))
    ranges.append(rec(1, 2, 1, 0, 2 * CHUNK, 40))  # rank 2's all-gather too
    p = patterns.load(write(tmp_path / "p.npz", ranges))
    w = patterns.window(p, "ranges", 2, first_rank=1)
    assert w["ranks"] == [1, 2]
    assert w["forgiven_fraction"] == pytest.approx(3 * 40 / (4 * 2 * 6 * CHUNK))
    assert w["gather_share"] == pytest.approx(1 / 3)
    # messages of rank 1: [40, 0, 0, 0, 0, 0], rank 2: [40, 0, 0, 40, 0, 0]
    assert w["message_correlation"] == pytest.approx(np.corrcoef([1, 0, 0, 0, 0, 0], [1, 0, 0, 1, 0, 0])[0, 1])
    assert w["steps_correlated"] == 1
    whole = patterns.window(p, "ranges", R)
    c12 = np.corrcoef([1, 0, 0, 0, 0, 0], [1, 0, 0, 1, 0, 0])[0, 1]
    c13 = np.corrcoef([1, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0])[0, 1]
    c23 = np.corrcoef([1, 0, 0, 1, 0, 0], [0, 1, 1, 0, 0, 0])[0, 1]
    assert whole["message_correlation"] == pytest.approx((c12 + c13 + c23) / 3)
    assert patterns.window(p, "ranges", 1, first_rank=0)["message_correlation"] is None
    # records outside the steps, ranks or rounds count nowhere (as the lab's figures leave them out)
    odd = patterns.load(write(tmp_path / "odd.npz", ranges + [rec(9, 1, 0, 0, 0, 40), rec(1, 7, 0, 0, 0, 40),
                                                             rec(1, 1, 0, 5, 0, 40)]))
    assert patterns.window(odd, "ranges", R) == whole
    assert patterns.main([str(tmp_path / "p.npz"), "--world", "2", "--rank-stride", "2"]) == 0
    assert patterns.main([str(tmp_path / "p.npz"), "--world", "3", "--rank-stride", "2"]) == 2  # 0, 2, 0
    assert patterns.main([str(tmp_path / "p.npz"), "--first-rank", "4"]) == 2


def test_window_of_the_seed_rate_pattern():
    """The seed-400g pattern's figures over its whole ring are the lab's
    (docs/results/loss-patterns/README.md: correlation across ranks by
    round 0.121, its control 0.0002; 0.94 % forgiven); the windows the
    tolerance experiment replays (docs/tolerance.md) have theirs."""
    path = os.path.join(SEED_PATTERNS, "seed-400g-single-forgive-seed1.npz")
    if not os.path.exists(path):
        pytest.skip(f"{path}: not in this checkout")
    p = patterns.load(path)
    whole, ctl = (patterns.window(p, w, p.ranks) for w in ("ranges", "control"))
    assert whole["message_correlation"] == pytest.approx(0.121, abs=5e-4)
    assert ctl["message_correlation"] == pytest.approx(0.0002, abs=5e-5)
    assert whole["forgiven_fraction"] == pytest.approx(0.0094, abs=5e-5) == ctl["forgiven_fraction"]
    for first, stride, frac, corr in ((0, 1, 0.00243, 0.008), (8, 1, 0.01193, -0.001), (7, 8, 0.00469, 0.431)):
        w = patterns.window(p, "ranges", 8, first, stride)
        assert w["forgiven_fraction"] == pytest.approx(frac, abs=5e-6), (first, stride)
        assert w["message_correlation"] == pytest.approx(corr, abs=5e-4), (first, stride)
