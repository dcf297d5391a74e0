"""The tolerance experiment (docs/tolerance.md): does trimming's bursty
loss cost a model more accuracy than uniform loss at the same rate, and
how does the daemon's real detector compare with the fixed schedule?

A small CNN on Fashion-MNIST trains data-parallel over --ranks ranks for
--steps steps, its gradients all-reduced by forgive.ddp's hook through
each rank's forgived, on a fabric started by forgivectl, under:

  dcqcn          every forgived with the lab's dcqcn policy (no loss); the
                 daemons' detector still classifies every step
  forgive        FORGIVE; the daemon's detector classifies each step from
                 the per-layer gradient norms the hook declares
  forgive-fixed  FORGIVE; the hook declares the seed's fixed schedule
  forgive-phase  FORGIVE with the daemons' gather policy `repair`: no
                 finished value of the all-gather is forgiven (its trims
                 are retransmitted), so the replicas stay identical
  forgive-owner  FORGIVE with the gather policy `owner`: a finished value
                 is forgiven only where its owner hears of it, and the
                 hook zeroes it there too, so the replicas stay identical
  uniform        no network loss (the ring over gloo); each rank zeroes, on
                 every step, the fraction of its received gradient bytes
                 that forgave it in the forgive run of the same seed,
                 chosen uniformly at random
  uniform-phase  the same, with the forgive run's fraction of each ring
                 phase's message: the loss lands in the same phases
                 (reduce-scatter or all-gather), scattered within each
  uniform-flat   the same, with one fraction for every step and rank: the
                 forgive run's overall mean (the literature's loss)
  pattern        no network loss; each rank zeroes where a loss pattern
                 exported by a lab run (--pattern, e.g. the seed's
                 experiment at the seed's scale) forgave, mapped onto this
                 ring (forgive.patterns.PatternLoss: rank r takes the
                 pattern's rank (--pattern-first-rank +
                 --pattern-rank-stride * r) mod R, steps map so that
                 critical steps align, offsets scale with the chunks)
  pattern-uniform  the same with the pattern's uniform control: its bytes
                 per step and rank, placed uniformly at random

    forgive-tolerance --out docs/tolerance

(installed, or `python3 -m forgive.tolerance` from python/; as root, for
the network namespaces). It writes results.json, steps.csv, table.md and
the plots into --out.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from . import fabric, prog

try:
    import numpy as np

    from . import ddp, launch, train
except ImportError as e:  # the [train] extra is missing: --help still works, main says what to install
    _missing = e
else:
    _missing = None

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROFILE = os.path.join(HERE, "tolerance-profile.yaml")
# The runs whose policy promises identical replicas after every step.
IDENTICAL = ("dcqcn", "forgive-phase", "forgive-owner")
RUNS = (
    # name, daemons' policy (None: no fabric), hook mode
    ("dcqcn", "dcqcn", "detector"),
    ("forgive", "forgive", "detector"),
    ("forgive-fixed", "forgive", "fixed"),
    ("forgive-phase", "forgive-phase", "detector"),
    ("forgive-owner", "forgive-owner", "detector"),
    ("uniform", None, "uniform"),
    ("uniform-phase", None, "uniform"),
    ("uniform-flat", None, "uniform"),
    ("pattern", None, "uniform"),
    ("pattern-uniform", None, "uniform"),
)
# The runs that replay a lab run's loss pattern (--pattern), and which of
# its arrays each applies.
PATTERN_RUNS = {"pattern": "ranges", "pattern-uniform": "control"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog=prog("forgive.tolerance"), description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--out", default="tolerance-out", help="directory of the results")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--runs", help="which runs, of " + ", ".join(r[0] for r in RUNS) +
                   " (default: all, the pattern runs only with --pattern)")
    p.add_argument("--topology", default="leaf-spine-2x4-4to1")
    p.add_argument("--profile", default=DEFAULT_PROFILE)
    p.add_argument("--model", choices=("cnn", "resnet18"), default="cnn")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--train-subset", type=int, default=16000)
    p.add_argument("--test-subset", type=int, default=2000)
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--work", help="directory of every rank's raw results (default: a temporary one, removed)")
    p.add_argument("--pattern", help="the pattern and pattern-uniform runs: a lab run's loss-pattern-*.npz "
                   "(docs/loss-patterns.md)")
    p.add_argument("--pattern-first-rank", type=int, default=0,
                   help="the pattern runs: model rank r replays the pattern's rank (this + r) mod its ranks "
                   "(default 0: ranks 0 to --ranks - 1 of the pattern's ring)")
    p.add_argument("--pattern-rank-stride", type=int, default=1,
                   help="the pattern runs: model rank r replays the pattern's rank (--pattern-first-rank + this * r) "
                   "mod its ranks (default 1)")
    p.add_argument("--analyze", action="store_true", help="only rebuild the outputs from --work")
    p.add_argument("--resume", action="store_true", help="skip the runs whose results --work already holds")
    return p.parse_args(argv)


# --- running ---------------------------------------------------------------------


def fractions_of(results: list) -> dict:
    """{rank: {step: forgiven / expected}} of one run."""
    out = {}
    for r in results:
        out[str(r["rank"])] = {str(rec["step"]): rec["forgiven"] / rec["expected"] for rec in r["records"]}
    return out


def phase_fractions_of(results: list) -> dict:
    """{rank: {step: [forgiven / message bytes of each ring phase]}}."""
    out = {}
    for r in results:
        n, rank = r["world"], r["rank"]
        bounds = ddp.chunk_bounds(r["numel"], n)
        sizes = []
        for p in range(2 * (n - 1)):
            c = (rank - p - 1) % n if p < n - 1 else (rank - (p - (n - 1))) % n
            sizes.append(4 * (bounds[c][1] - bounds[c][0]))
        out[str(rank)] = {str(rec["step"]): [b / sz for b, sz in zip(rec["forgiven_by_phase"], sizes)]
                          for rec in r["records"]}
    return out


def run_all(args, seeds, runs, work, argv=None) -> None:
    now = {"commit": commit(), "command": command(argv), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    run_log = dict(now, seconds={})
    run_path = os.path.join(work, "run.json")
    if args.resume and os.path.exists(run_path):
        with open(run_path) as f:
            run_log = json.load(f)  # the first run's provenance stays; this one is added
        run_log.setdefault("resumed", []).append(now)
    write_json(run_path, run_log)
    extra_common = ["--batch", str(args.batch), "--lr", str(args.lr), "--eval-every", str(args.eval_every),
                    "--model", args.model, "--check-replicas"]
    for seed in seeds:
        data = os.path.join(work, f"data-seed{seed}.npz")
        if not os.path.exists(data):
            train.prepare_data(data, args.train_subset, args.test_subset, seed)
        extra = extra_common + ["--data-npz", data]
        for name, policy, mode in RUNS:
            if name not in runs:
                continue
            out = os.path.join(work, f"seed{seed}", name)
            if args.resume and os.path.exists(os.path.join(out, f"rank{args.ranks - 1}.json")):
                continue
            t0 = time.monotonic()
            if name in PATTERN_RUNS:
                os.makedirs(out, exist_ok=True)
                launch.run_ranks(args.ranks, out, mode, args.steps, seed,
                                 extra=extra + ["--pattern", os.path.abspath(args.pattern),
                                                "--pattern-array", PATTERN_RUNS[name],
                                                "--pattern-first-rank", str(args.pattern_first_rank),
                                                "--pattern-rank-stride", str(args.pattern_rank_stride)])
            elif policy is None:
                src = os.path.join(work, f"seed{seed}", "forgive")
                fr = fractions_of(load_ranks(src))
                if name == "uniform-phase":
                    fr = phase_fractions_of(load_ranks(src))
                if name == "uniform-flat":
                    mean = overall_fraction(load_ranks(src))
                    fr = {rank: {s: mean for s in steps} for rank, steps in fr.items()}
                os.makedirs(out, exist_ok=True)
                fractions = os.path.join(out, "fractions.json")
                write_json(fractions, fr)
                launch.run_ranks(args.ranks, out, mode, args.steps, seed, fractions=fractions, extra=extra)
            else:
                fabric_log = os.path.join(work, f"seed{seed}-{name}-fabric.log")
                with fabric.Fabric(args.topology, ranks=args.ranks, policy=policy, profile=args.profile,
                                   log_path=fabric_log) as fab:
                    launch.run_ranks(args.ranks, out, mode, args.steps, seed, hosts=fab.hosts,
                                     extra=extra)
                    if not fab.alive():
                        raise fabric.FabricError(f"a daemon died during {name} seed {seed}:\n{fab.log_tail()}")
            took = time.monotonic() - t0
            run_log["seconds"][f"seed{seed}/{name}"] = round(took, 1)
            write_json(run_path, run_log)
            print(f"seed {seed} {name}: {took:.0f} s", flush=True)


def write_json(path: str, obj) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)


def command(argv=None) -> str:
    """The command line of this run, as it can be typed again: the
    interpreter and module (or the console script), with the arguments
    and FORGIVE_BIN_DIR when set."""
    args = sys.argv[1:] if argv is None else list(argv)
    prog = os.path.basename(sys.argv[0] or "")
    if argv is None and prog and not prog.endswith(".py"):
        head = [prog]  # a console script, e.g. forgive-tolerance
    else:
        head = [sys.executable, "-m", "forgive.tolerance"]
    env = [f"FORGIVE_BIN_DIR={os.environ['FORGIVE_BIN_DIR']}"] if os.environ.get("FORGIVE_BIN_DIR") else []
    return " ".join(shlex.quote(w) for w in env + head + args)


def load_ranks(d: str) -> list:
    out = []
    rank = 0
    while os.path.exists(os.path.join(d, f"rank{rank}.json")):
        with open(os.path.join(d, f"rank{rank}.json")) as f:
            out.append(json.load(f))
        rank += 1
    if not out:
        raise FileNotFoundError(f"no rank results in {d}")
    return out


def overall_fraction(results: list) -> float:
    forgiven = sum(rec["forgiven"] for r in results for rec in r["records"])
    expected = sum(rec["expected"] for r in results for rec in r["records"])
    return forgiven / expected


# --- analysis ----------------------------------------------------------------------


def summarize(d: str) -> dict:
    """One run: per-step curves and the final figures."""
    res = load_ranks(d)
    steps = res[0]["steps"]
    world = len(res)
    schedule = set(res[0]["schedule"])
    per_step = []
    for i in range(steps):
        recs = [r["records"][i] for r in res]
        daemon = []
        for r in res:
            ds = {x["step"]: x for x in r["daemon_steps"]}
            if i + 1 in ds:
                daemon.append(ds[i + 1])
        per_step.append({
            "step": i + 1,
            "loss": float(np.mean([x["loss"] for x in recs])),
            "forgiven_fraction": sum(x["forgiven"] for x in recs) / sum(x["expected"] for x in recs),
            "forgiven_fraction_max_rank": max(x["forgiven"] / x["expected"] for x in recs),
            "schedule_critical": (i + 1) in schedule,
            "critical_ranks": sum(1 for x in daemon if x["critical"]) if len(daemon) == world else None,
            "trims": sum(x["trims"] for x in daemon) if daemon else 0,
            "trimmed_bytes": sum(x["trimmed_bytes"] for x in daemon) if daemon else 0,
            "allreduce_s": float(np.mean([x["allreduce_s"] for x in recs])),
            # The largest difference of any parameter between the ranks after
            # the step (every rank records the same; None: not measured).
            "replica_max_abs_diff": recs[0].get("replica_max_abs_diff"),
            "unbudgeted_bytes": sum(x.get("unbudgeted_bytes") or 0 for x in daemon),
        })
    params = [np.load(os.path.join(d, f"rank{r}-params.npy")) for r in range(world)]
    broken = []
    for r in res:
        for x in r["daemon_steps"]:
            broken += invariant_breaks(x)
    by_phase = np.sum([[rec["forgiven_by_phase"] for rec in r["records"]] for r in res], axis=(0, 1))
    exp_total = sum(rec["expected"] for r in res for rec in r["records"])
    crit = [s for s in per_step if s["schedule_critical"]]
    noncrit = [s for s in per_step if not s["schedule_critical"]]
    return {
        "mode": res[0]["mode"], "world": world, "steps": steps, "numel": res[0]["numel"],
        "layers": res[0]["layers"], "decay_at": res[0]["decay_at"], "schedule": sorted(schedule),
        "per_step": per_step,
        "evals": res[0]["evals"],
        "final_accuracy": [r["final"]["accuracy"] for r in res],
        "final_loss": [r["final"]["loss"] for r in res],
        "replica_max_abs_diff": float(max(np.max(np.abs(p - params[0])) for p in params)),
        "replica_max_abs_diff_any_step": replica_any_step(per_step),
        "replica_steps_diverged": sum(1 for p in per_step if p["replica_max_abs_diff"]),
        "forgiven_gather_fraction": sum(rec.get("forgiven_gather", 0) for r in res for rec in r["records"]) / exp_total,
        "retx_fraction": counter_fraction(res, "retx_bytes", exp_total),
        # Bytes that reached a rank for a step before it opened the step:
        # over every rank-step, and how many rank-steps had any (None: the
        # daemons do not count them).
        "unbudgeted_bytes": unbudgeted(res)[0],
        "unbudgeted_rank_steps": unbudgeted(res)[1],
        "gather_repair_fraction": (None if unbudgeted(res)[0] is None else
                                   sum(x.get("gather_repair_bytes", 0) for r in res for x in r["daemon_steps"]) / exp_total),
        "forgiven_fraction": overall_fraction(res),
        # Trimmed bytes: the flows' own counters where the run read them (every
        # policy), else the ledgers' (which count only while FORGIVE keeps a
        # budget); None when neither saw any.
        "trimmed_fraction": trimmed_fraction(res, exp_total),
        "forgiven_fraction_schedule_critical": float(np.mean([s["forgiven_fraction"] for s in crit])) if crit else 0.0,
        "forgiven_fraction_schedule_noncritical": float(np.mean([s["forgiven_fraction"] for s in noncrit])) if noncrit else 0.0,
        "forgiven_by_phase_fraction": [float(b) / exp_total for b in by_phase],
        "steps_recorded": min(len(r["daemon_steps"]) for r in res),
        "invariant_breaks": broken,
        "applied_nonzero": sum(r["applied_nonzero"] for r in res),
        "forgiven_nonzero": sum(rec.get("forgiven_nonzero", 0) for r in res for rec in r["records"]),
        "elapsed_s": float(np.mean([r["elapsed_s"] for r in res])),
        "allreduce_ms": 1000 * float(np.mean([s["allreduce_s"] for s in per_step])),
        "detector": detector_vs_schedule(res, schedule),
        "norms_rank0": [rec["norms"] for rec in res[0]["records"]],
        # The pattern runs: the pattern's rank each rank replayed (None: not
        # a pattern run, or results from before the ranks recorded it).
        "pattern_ranks": [r.get("pattern_source_rank") for r in res],
    }


def replica_any_step(per_step: list):
    """The largest replica difference after any step; None when not measured."""
    xs = [p["replica_max_abs_diff"] for p in per_step if p["replica_max_abs_diff"] is not None]
    return float(max(xs)) if len(xs) == len(per_step) and xs else None


def counter_fraction(res: list, name: str, expected: int):
    """A flow counter summed over every rank's flows, as a share of the
    run's gradient bytes; None when the run read no counters."""
    from .hostapi import sum_counter

    if not all(r.get("counters") for r in res):
        return None
    return sum(sum_counter(r["counters"], name) for r in res) / expected


def unbudgeted(res: list) -> tuple:
    """(bytes, rank-steps with any) received before their step opened,
    from the daemons' step records; (None, None) when they lack the count."""
    xs = [x.get("unbudgeted_bytes") for r in res for x in r["daemon_steps"]]
    if not xs or any(v is None for v in xs):
        return None, None
    return int(sum(xs)), sum(1 for v in xs if v)


def trimmed_fraction(res: list, expected: int):
    from .hostapi import sum_counter

    if all(r.get("counters") for r in res):
        return sum(sum_counter(r["counters"], "trimmed_bytes") for r in res) / expected
    ledger = sum(x["trimmed_bytes"] for r in res for x in r["daemon_steps"])
    return ledger / expected if ledger else None


def invariant_breaks(x: dict) -> list:
    from .hostapi import StepRecord

    return StepRecord.from_json(x).invariants()


def detector_vs_schedule(res: list, schedule: set) -> dict:
    """How each rank's daemon classified the steps against the fixed
    schedule: steps called critical, schedule-critical steps missed, and
    steps called critical that the schedule calls non-critical."""
    called, missed, extra, n = [], [], [], 0
    for r in res:
        ds = {x["step"]: x["critical"] for x in r["daemon_steps"]}
        if len(ds) < r["steps"]:
            continue
        n += 1
        c = {s for s, v in ds.items() if v}
        called.append(len(c))
        missed.append(len(schedule - c))
        extra.append(len(c - schedule))
    if not n:
        return {}
    return {"ranks": n, "schedule_critical": len(schedule), "called_critical": float(np.mean(called)),
            "missed": float(np.mean(missed)), "extra": float(np.mean(extra)),
            "missed_max": int(max(missed)), "called_min": int(min(called)), "called_max": int(max(called))}


def per_seed(xs: list, whole: str) -> str:
    """One figure for several seeds, with each seed's in brackets."""
    return xs[0] if len(xs) == 1 else f"{whole} ({', '.join(xs)})"


def mean_sd(xs, fmt: str = ".2f") -> str:
    """Mean ± sample standard deviation over seeds."""
    xs = list(xs)
    if len(xs) == 1:
        return f"{xs[0]:{fmt}}"
    return f"{np.mean(xs):{fmt}} ± {np.std(xs, ddof=1):{fmt}}"


def commit() -> str:
    """The commit of the checkout this runs from: the package's own when it
    runs from python/, else the working directory's (an installed package
    run from the repository); "-dirty" when tracked files changed."""
    where = fabric.source_tree() or os.getcwd()
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=where, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def table(summary: dict, runs: list, seeds: list) -> str:
    lines = [
        "| run | test accuracy %, mean of ranks | rank 0 | spread across ranks | test loss | trimmed % of gradient bytes | forgiven % | forgiven % on schedule-critical steps | ms per all-reduce | invariant breaks |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in runs:
        rs = [summary[str(s)][name] for s in seeds if name in summary[str(s)]]
        if not rs:
            continue
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            name,
            mean_sd(100 * np.mean(r["final_accuracy"]) for r in rs),
            mean_sd(100 * r["final_accuracy"][0] for r in rs),
            mean_sd(100 * (max(r["final_accuracy"]) - min(r["final_accuracy"])) for r in rs),
            mean_sd((np.mean(r["final_loss"]) for r in rs), ".3f"),
            "–" if any(r["trimmed_fraction"] is None for r in rs) else mean_sd(100 * r["trimmed_fraction"] for r in rs),
            mean_sd(100 * r["forgiven_fraction"] for r in rs),
            mean_sd(100 * r["forgiven_fraction_schedule_critical"] for r in rs),
            mean_sd((r["allreduce_ms"] for r in rs), ".0f"),
            sum(len(r["invariant_breaks"]) for r in rs)))
    lines += ["", "| run | replicas promised identical | replicas: largest difference of any parameter between ranks, after any step | steps after which replicas differed | forgiven % in the all-gather | gathered trims repaired, % of gradient bytes | retransmitted % of gradient bytes | rank-steps with bytes before their step opened | those bytes |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name in runs:
        rs = [summary[str(s)][name] for s in seeds if name in summary[str(s)]]
        if not rs:
            continue
        dev = [r["replica_max_abs_diff_any_step"] for r in rs]
        ub = [r["unbudgeted_rank_steps"] for r in rs]
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            name, "yes" if name in IDENTICAL else "no",
            "–" if any(d is None for d in dev) else per_seed([f"{d:.3g}" for d in dev], f"{max(dev):.3g}"),
            "–" if any(d is None for d in dev) else ", ".join(str(r["replica_steps_diverged"]) for r in rs),
            mean_sd(100 * r["forgiven_gather_fraction"] for r in rs),
            "–" if any(r.get("gather_repair_fraction") is None for r in rs) else mean_sd(100 * r["gather_repair_fraction"] for r in rs),
            "–" if any(r["retx_fraction"] is None for r in rs) else mean_sd(100 * r["retx_fraction"] for r in rs),
            "–" if any(u is None for u in ub) else f"{sum(ub)} of {sum(r['world'] * r['steps'] for r in rs)}",
            "–" if any(u is None for u in ub) else str(sum(r["unbudgeted_bytes"] for r in rs))))
    pairs = [("forgive", "dcqcn"), ("forgive-fixed", "dcqcn"), ("forgive-phase", "dcqcn"), ("forgive-owner", "dcqcn"),
             ("uniform", "dcqcn"), ("uniform-flat", "dcqcn"),
             ("uniform-phase", "dcqcn"), ("forgive", "uniform"), ("forgive", "uniform-phase"),
             ("uniform-phase", "uniform"), ("forgive", "uniform-flat"), ("forgive-fixed", "forgive"),
             ("forgive-phase", "forgive"), ("forgive-owner", "forgive"), ("forgive-owner", "forgive-phase"),
             ("pattern", "dcqcn"), ("pattern-uniform", "dcqcn"), ("pattern", "pattern-uniform")]
    lines += ["", "| difference, paired by seed | test accuracy points (mean of ranks) | per seed |", "|---|---|---|"]
    for a, b in pairs:
        ds = [100 * (np.mean(summary[str(s)][a]["final_accuracy"]) - np.mean(summary[str(s)][b]["final_accuracy"]))
              for s in seeds if a in summary[str(s)] and b in summary[str(s)]]
        if ds:
            lines.append(f"| {a} − {b} | {mean_sd(ds)} | {', '.join(f'{d:+.2f}' for d in ds)} |")
    lines += ["", "| run (detector on) | steps | schedule | ranks' daemons calling a step critical (mean of seeds) |",
              "|---|---|---|---|"]
    for name in runs:
        rs = [summary[str(s)][name] for s in seeds if name in summary[str(s)]]
        rs = [r for r in rs if r["mode"] == "detector" and all(p["critical_ranks"] is not None for p in r["per_step"])]
        if not rs:
            continue
        steps, sched = rs[0]["steps"], set(rs[0]["schedule"])
        # The schedule's first block, the steps between, and its last block
        # (a short run may lack some: a segment with no steps has no row).
        first = [s for s in range(1, steps + 1) if s in sched and s <= steps // 2]
        last = [s for s in range(1, steps + 1) if s in sched and s > steps // 2]
        middle = [s for s in range(1, steps + 1) if s not in sched]
        for seg, verdict in ((first, "critical"), (middle, "not critical"),
                             (last, "critical (learning rate decays at step %d)" % rs[0]["decay_at"])):
            if not seg:
                continue
            label = f"{seg[0]}–{seg[-1]}"
            frac = np.mean([[r["per_step"][s - 1]["critical_ranks"] / r["world"] for s in seg] for r in rs])
            lines.append(f"| {name} | {label} | {verdict} | {100 * frac:.1f} % |")
    lines += ["", "| run (detector on) | seed | steps called critical (mean of ranks) | of the schedule's | missed (mean / worst rank) | called critical outside the schedule |",
              "|---|---|---|---|---|---|"]
    for name in runs:
        for s in seeds:
            r = summary[str(s)].get(name)
            if not r or r["mode"] != "detector" or not r["detector"]:
                continue
            d = r["detector"]
            lines.append(f"| {name} | {s} | {d['called_critical']:.1f} ({d['called_min']}–{d['called_max']}) | "
                         f"{d['schedule_critical']} | {d['missed']:.1f} / {d['missed_max']} | {d['extra']:.1f} |")
    return "\n".join(lines) + "\n"


def write_csv(path: str, summary: dict, runs: list, seeds: list) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["seed", "run", "step", "train_loss", "forgiven_fraction", "schedule_critical",
                    "detector_critical_ranks", "trims", "allreduce_ms", "replica_max_abs_diff", "unbudgeted_bytes"])
        for s in seeds:
            for name in runs:
                r = summary[str(s)].get(name)
                if not r:
                    continue
                for x in r["per_step"]:
                    w.writerow([s, name, x["step"], f"{x['loss']:.5f}", f"{x['forgiven_fraction']:.6f}",
                                int(x["schedule_critical"]), "" if x["critical_ranks"] is None else x["critical_ranks"],
                                x["trims"], f"{1000 * x['allreduce_s']:.2f}",
                                "" if x["replica_max_abs_diff"] is None else repr(x["replica_max_abs_diff"]),
                                x["unbudgeted_bytes"]])


COLORS = {"dcqcn": "#444444", "forgive": "#d62728", "forgive-fixed": "#1f77b4", "uniform": "#2ca02c",
          "uniform-phase": "#ff7f0e", "uniform-flat": "#9467bd", "forgive-phase": "#8c564b",
          "forgive-owner": "#e377c2", "pattern": "#17becf", "pattern-uniform": "#bcbd22"}


def smooth(y, k=10):
    y = np.asarray(y, dtype=float)
    if len(y) < k:
        return y
    c = np.cumsum(np.insert(y, 0, 0.0))
    out = (c[k:] - c[:-k]) / k
    return np.concatenate([y[: k - 1] * 0 + out[0], out])


def plots(out: str, summary: dict, runs: list, seeds: list, caption: str) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []

    def shade(ax, sched, steps):
        for s in sched:
            ax.axvspan(s - 0.5, s + 0.5, color="#f2d0a4", lw=0, zorder=0)

    first = summary[str(seeds[0])]
    anyrun = next(iter(first.values()))
    steps, sched = anyrun["steps"], anyrun["schedule"]
    x = np.arange(1, steps + 1)

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for name in runs:
        rs = [summary[str(s)][name] for s in seeds if name in summary[str(s)]]
        if not rs:
            continue
        loss = np.mean([[p["loss"] for p in r["per_step"]] for r in rs], axis=0)
        a1.plot(x, smooth(loss), label=name, color=COLORS.get(name), lw=1.2)
        ev_steps = [e["step"] for e in rs[0]["evals"]]
        acc = np.mean([[e["accuracy"] for e in r["evals"]] for r in rs], axis=0)
        a2.plot(ev_steps, 100 * acc, marker=".", label=name, color=COLORS.get(name), lw=1.2)
    a1.set(xlabel="step", ylabel="training loss (mean of ranks, 10-step mean)", title="training loss")
    a2.set(xlabel="step", ylabel="test accuracy of rank 0's model (%)", title="test accuracy")
    for a in (a1, a2):
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle(f"mean of seeds {','.join(map(str, seeds))}", fontsize=9)
    fig.text(0.01, 0.01, caption, fontsize=7)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(os.path.join(out, "curves.png"), dpi=110)
    plt.close(fig)
    made.append("curves.png")

    fig, ax = plt.subplots(figsize=(11, 3.6))
    shade(ax, sched, steps)
    for name in ("forgive", "forgive-fixed", "forgive-phase", "forgive-owner", "uniform", "pattern", "pattern-uniform"):
        rs = [summary[str(s)][name] for s in seeds if name in summary[str(s)]]
        if not rs:
            continue
        fr = np.mean([[p["forgiven_fraction"] for p in r["per_step"]] for r in rs], axis=0)
        ax.plot(x, 100 * fr, label=name, color=COLORS.get(name), lw=1.0, ls="--" if name == "uniform" else "-")
    ax.set(xlabel="step (shaded: the fixed schedule's critical steps)",
           ylabel="forgiven % of the step's gradient bytes", title="forgiven fraction per step (mean of ranks and seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.text(0.01, 0.01, caption, fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "forgiven.png"), dpi=110)
    plt.close(fig)
    made.append("forgiven.png")

    fig, ax = plt.subplots(figsize=(11, 3.6))
    shade(ax, sched, steps)
    for name, off in (("forgive", -0.2), ("dcqcn", 0.2)):
        rs = [summary[str(s)][name] for s in seeds if name in summary[str(s)]]
        rs = [r for r in rs if all(p["critical_ranks"] is not None for p in r["per_step"])]
        if not rs:
            continue
        frac = np.mean([[p["critical_ranks"] / r["world"] for p in r["per_step"]] for r in rs], axis=0)
        ax.bar(x + off, 100 * frac, width=0.4, color=COLORS[name], label=f"{name} run: ranks whose daemon called the step critical")
    ax.set(xlabel="step (shaded: the fixed schedule's critical steps)", ylabel="% of ranks (mean of seeds)",
           title="the daemons' Accordion detector (eta 0.5) against the fixed schedule")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.text(0.01, 0.01, caption, fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "detector.png"), dpi=110)
    plt.close(fig)
    made.append("detector.png")

    fig, ax = plt.subplots(figsize=(7, 3.4))
    shown = [name for name in ("forgive", "forgive-fixed", "forgive-phase", "forgive-owner", "pattern", "pattern-uniform")
             if any(name in summary[str(s)] for s in seeds)]
    width = 0.8 / max(1, len(shown))
    for i, name in enumerate(shown):
        rs = [summary[str(s)][name] for s in seeds if name in summary[str(s)]]
        ph = np.mean([r["forgiven_by_phase_fraction"] for r in rs], axis=0)
        ax.bar(np.arange(len(ph)) + (i - (len(shown) - 1) / 2) * width, 100 * ph, width=width,
               color=COLORS[name], label=name)
    n = anyrun["world"]
    ax.axvline(n - 1.5, color="k", lw=0.8)
    ax.set(xlabel=f"ring phase (0-{n - 2}: reduce-scatter, {n - 1}-{2 * n - 3}: all-gather)",
           ylabel="forgiven % of all gradient bytes", title="where in the ring the bytes were forgiven")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "phases.png"), dpi=110)
    plt.close(fig)
    made.append("phases.png")

    fig, ax = plt.subplots(figsize=(11, 3.6))
    drawn = False
    for name in runs:
        rs = [summary[str(s)][name] for s in seeds if name in summary[str(s)]]
        rs = [r for r in rs if all(p["replica_max_abs_diff"] is not None for p in r["per_step"])]
        if not rs:
            continue
        d = np.max([[p["replica_max_abs_diff"] for p in r["per_step"]] for r in rs], axis=0)
        if not d.any():
            ax.plot([], [], color=COLORS.get(name), label=f"{name}: 0.0 after every step (not drawn on a log scale)")
            continue
        ax.plot(x, d, label=name, color=COLORS.get(name), lw=1.0)
        drawn = True
    if drawn:
        ax.set_yscale("log")
    ax.set(xlabel="step", ylabel="largest |difference| of a\nparameter between ranks",
           title="how far the replicas are apart after each step (the largest over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.text(0.01, 0.01, caption, fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "replicas.png"), dpi=110)
    plt.close(fig)
    made.append("replicas.png")
    return made


def analyze(args, seeds, runs, work, argv=None) -> dict:
    os.makedirs(args.out, exist_ok=True)
    summary = {}
    for s in seeds:
        summary[str(s)] = {}
        for name in runs:
            d = os.path.join(work, f"seed{s}", name)
            if os.path.exists(os.path.join(d, "rank0.json")):
                summary[str(s)][name] = summarize(d)
    try:
        with open(os.path.join(work, "run.json")) as f:
            run = json.load(f)
    except FileNotFoundError:
        run = {"commit": commit(), "command": command(argv)}
    cmd = run["command"]
    meta = {"command": cmd, "commit": run["commit"], "analysis_commit": commit(),
            "started": run.get("started"), "seconds": run.get("seconds"), "resumed": run.get("resumed", []),
            "topology": args.topology, "pattern": args.pattern,
            "profile": os.path.basename(args.profile), "seeds": seeds, "runs": runs, "ranks": args.ranks,
            "steps": args.steps, "batch_per_rank": args.batch, "lr": args.lr, "train_subset": args.train_subset,
            "test_subset": args.test_subset}
    caption = f"commit {meta['commit']}; {cmd}"
    for r in meta["resumed"]:
        caption += f"; resumed at {r['commit']}"
    if meta["analysis_commit"] != meta["commit"]:
        caption += f" (analysed at {meta['analysis_commit']})"
    # The per-step curves are in steps.csv; results.json keeps the rest.
    slim = {s: {name: {k: v for k, v in r.items() if k not in ("per_step", "norms_rank0")}
                for name, r in runs_.items()} for s, runs_ in summary.items()}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "summary": slim}, f, indent=1)
    write_csv(os.path.join(args.out, "steps.csv"), summary, runs, seeds)
    tab = table(summary, runs, seeds)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(f"<!-- {caption} -->\n" + tab)
    made = plots(args.out, summary, runs, seeds, caption)
    # The rank-0 norm trace of the first seed's forgive run, in the format
    # of `forgivectl lab --norms`, for replaying the detector offline.
    r = summary[str(seeds[0])].get("forgive")
    if r:
        with open(os.path.join(args.out, f"norms-seed{seeds[0]}-rank0.txt"), "w") as f:
            f.write(f"# per-layer gradient norms of rank 0, seed {seeds[0]}, forgive run; layers {' '.join(r['layers'])}\n"
                    f"# {caption}\n")
            for n in r["norms_rank0"]:
                f.write(" ".join(f"{v:.6g}" for v in n) + "\n")
    print(tab)
    print("wrote", ", ".join(["results.json", "steps.csv", "table.md"] + made), "to", args.out)
    return summary


def main(argv=None) -> int:
    args = parse_args(argv)
    if _missing is not None:
        print(f"{prog('forgive.tolerance')} needs the [train] extra (torch, numpy, matplotlib; "
              f"pip install './python[train]'): {_missing}", file=sys.stderr)
        return 2
    seeds = [int(s) for s in args.seeds.split(",") if s]
    if args.runs is None:
        runs = [r[0] for r in RUNS if r[0] not in PATTERN_RUNS or args.pattern]
    else:
        runs = [r for r in args.runs.split(",") if r]
    known = [r[0] for r in RUNS]
    for r in runs:
        if r not in known:
            print(f"unknown run {r!r} (known: {', '.join(known)})", file=sys.stderr)
            return 2
    if any(r in PATTERN_RUNS for r in runs) and not args.analyze:
        if not args.pattern:
            print("the pattern runs need --pattern FILE (a lab run's loss-pattern-*.npz)", file=sys.stderr)
            return 2
        from . import patterns

        try:
            pat = patterns.load(args.pattern)
        except (OSError, ValueError) as e:
            print(f"--pattern {args.pattern}: {e}", file=sys.stderr)
            return 2
        if not 0 <= args.pattern_first_rank < pat.ranks:
            print(f"--pattern-first-rank {args.pattern_first_rank}: the pattern has ranks 0 to {pat.ranks - 1}",
                  file=sys.stderr)
            return 2
        if args.pattern_rank_stride < 1:
            print(f"--pattern-rank-stride {args.pattern_rank_stride}: want 1 or more", file=sys.stderr)
            return 2
        try:
            patterns.source_ranks(args.ranks, pat.ranks, args.pattern_first_rank, args.pattern_rank_stride)
        except ValueError as e:
            print(f"--pattern-rank-stride {args.pattern_rank_stride}: {e}", file=sys.stderr)
            return 2
    if any(r.startswith("uniform") for r in runs) and "forgive" not in runs and not args.analyze:
        print("the uniform controls copy the forgive run's fractions: run forgive too", file=sys.stderr)
        return 2
    work = args.work or tempfile.mkdtemp(prefix="forgive-tolerance-")
    os.makedirs(work, exist_ok=True)
    t0 = time.monotonic()
    try:
        if not args.analyze:
            fabric.need_root()
            run_all(args, seeds, runs, work, argv)
        analyze(args, seeds, runs, work, argv)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"total {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
