"""The tolerance experiment's driver (forgive.tolerance, docs/tolerance.md)
end to end at the smallest size that still runs every part of it: one
seed, two ranks, three steps, the dcqcn and forgive runs on real fabrics
and the uniform control over gloo, then --resume and --analyze on the
same work directory."""

import csv
import json
import os

import pytest

from forgive import train
from forgive.hostapi import StepRecord

torch = pytest.importorskip("torch")
pytest.importorskip("matplotlib")
np = pytest.importorskip("numpy")

from forgive import tolerance  # noqa: E402  (needs numpy)

RANKS, STEPS = 2, 3
RUNS = ("dcqcn", "forgive", "uniform")
PLOTS = ("curves.png", "forgiven.png", "detector.png", "phases.png", "replicas.png")


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root: the experiment's fabrics run in network namespaces (forgivectl topo up)")
    if not os.path.isdir(train.DATA_DIR):
        pytest.fail(f"{train.DATA_DIR} is missing: install Debian's dataset-fashion-mnist")
    base = tmp_path_factory.mktemp("tolerance")
    out, work = str(base / "out"), str(base / "work")
    argv = ["--out", out, "--work", work, "--seeds", "1", "--steps", str(STEPS), "--ranks", str(RANKS),
            "--runs", ",".join(RUNS), "--batch", "16", "--train-subset", "512", "--test-subset", "200",
            "--eval-every", "2"]
    assert tolerance.main(argv) == 0
    return argv, out, work


def load(out):
    with open(os.path.join(out, "results.json")) as f:
        return json.load(f)


def test_every_run_is_recorded_with_its_duration(experiment):
    argv, out, work = experiment
    meta = load(out)["meta"]
    assert meta["runs"] == list(RUNS) and meta["seeds"] == [1] and meta["steps"] == STEPS
    assert sorted(meta["seconds"]) == sorted(f"seed1/{r}" for r in RUNS)
    assert all(s > 0 for s in meta["seconds"].values())
    # The recorded command runs this experiment again: its own arguments.
    assert meta["command"].split()[-len(argv):] == argv
    assert "sudo" not in meta["command"]


def test_the_summary_holds_every_run_with_sane_figures(experiment):
    _, out, _ = experiment
    summary = load(out)["summary"]["1"]
    assert sorted(summary) == sorted(RUNS)
    for name, r in summary.items():
        assert r["world"] == RANKS and r["steps"] == STEPS, name
        assert len(r["final_accuracy"]) == RANKS
        assert all(0.0 <= a <= 1.0 for a in r["final_accuracy"]), (name, r["final_accuracy"])
        assert all(np.isfinite(x) and x > 0 for x in r["final_loss"]), (name, r["final_loss"])
        assert 0.0 <= r["forgiven_fraction"] < 1.0
        assert r["invariant_breaks"] == []
        assert [e["step"] for e in r["evals"]] == [2, 3]
    assert summary["dcqcn"]["forgiven_fraction"] == 0.0
    assert summary["dcqcn"]["replica_max_abs_diff"] == 0.0, "replicas diverged without any loss"
    # The replicas are compared after every step, and every step was
    # opened before any of its bytes arrived.
    assert summary["dcqcn"]["replica_max_abs_diff_any_step"] == 0.0
    assert summary["dcqcn"]["replica_steps_diverged"] == 0
    assert summary["uniform"]["replica_max_abs_diff_any_step"] is not None
    for name in ("dcqcn", "forgive"):
        assert summary[name]["unbudgeted_bytes"] == 0 and summary[name]["unbudgeted_rank_steps"] == 0, name
    assert summary["uniform"]["unbudgeted_bytes"] is None, "the control has no daemons to count"
    # The daemons recorded every step of the runs on a fabric.
    for name in ("dcqcn", "forgive"):
        assert summary[name]["steps_recorded"] == STEPS, name
        assert summary[name]["detector"]["ranks"] == RANKS
    # The control zeroes, step by step, the fractions the forgive run forgave.
    assert summary["uniform"]["forgiven_fraction"] == pytest.approx(summary["forgive"]["forgiven_fraction"], abs=1e-4)


def test_the_budget_invariants_held_on_every_step(experiment):
    """forgiven <= budget, forgiven <= p/(1-p) x received, and the daemon's
    own check (no range charged twice), from every rank's raw results."""
    _, _, work = experiment
    for name in ("dcqcn", "forgive"):
        for rank in range(RANKS):
            with open(os.path.join(work, "seed1", name, f"rank{rank}.json")) as f:
                res = json.load(f)
            recs = [StepRecord.from_json(x) for x in res["daemon_steps"]]
            assert [r.step for r in recs] == list(range(1, STEPS + 1))
            for r in recs:
                assert r.invariants() == [], (name, rank)
                assert r.forgiven <= r.budget
                assert r.p == 1 or r.forgiven * (1 - r.p) <= r.p * r.received + 1e-6 * max(1, r.received)
            hook = {x["step"]: x["forgiven"] for x in res["records"]}
            assert {r.step: r.forgiven for r in recs} == hook, "completions and ledger disagree"


def test_the_outputs_are_written(experiment):
    _, out, _ = experiment
    with open(os.path.join(out, "steps.csv")) as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["run"], int(r["step"])) for r in rows) == sorted((n, s) for n in RUNS for s in range(1, STEPS + 1))
    with open(os.path.join(out, "table.md")) as f:
        table = f.read()
    for name in RUNS:
        assert f"\n| {name} | " in table
    assert "| forgive − dcqcn |" in table
    assert "| dcqcn | yes | 0 | 0 |" in table, "the replica table lacks the lossless run's zero difference"
    assert all(r["replica_max_abs_diff"] == "0.0" and r["unbudgeted_bytes"] == "0" for r in rows if r["run"] == "dcqcn")
    for p in PLOTS:
        assert os.path.getsize(os.path.join(out, p)) > 0, p
    with open(os.path.join(out, "norms-seed1-rank0.txt")) as f:
        norms = [ln for ln in f if not ln.startswith("#")]
    assert len(norms) == STEPS and all(len(ln.split()) == 4 for ln in norms)


def test_resume_runs_nothing_again_and_analyze_rebuilds(experiment, tmp_path):
    argv, out, work = experiment
    before = load(out)["meta"]["seconds"]
    assert tolerance.main(argv + ["--resume"]) == 0
    meta = load(out)["meta"]
    assert meta["seconds"] == before, "--resume ran a run again"
    assert len(meta["resumed"]) == 1
    again = str(tmp_path / "again")
    i = argv.index("--out")
    assert tolerance.main(argv[:i] + ["--out", again] + argv[i + 2:] + ["--analyze"]) == 0
    assert load(again)["summary"] == load(out)["summary"]


def test_bad_runs_are_refused(capsys):
    assert tolerance.main(["--runs", "dcqcn,nosuch"]) == 2
    assert "unknown run 'nosuch'" in capsys.readouterr().err
    assert tolerance.main(["--runs", "uniform"]) == 2
    assert "run forgive too" in capsys.readouterr().err
