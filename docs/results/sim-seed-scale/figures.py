#!/usr/bin/env python3
"""Print the figures the side-by-side table compares, from the lab's
results.json files (any number; runs are matched by topology, policy and
seed). Changes are (policy - base) / base of the training time, seed by
seed, as the lab's own report computes them.

    python3 figures.py [LABEL=]DIR/results.json ...

A LABEL names the experiment a file belongs to (runs of the same
topology and policy under another label are another experiment).
"""
import json
import sys
from collections import defaultdict

runs = defaultdict(dict)  # (topology, policy) -> seed -> run
for arg in sys.argv[1:]:
    label, _, path = arg.rpartition("=")
    with open(path) as f:
        doc = json.load(f)
    # Runs with the model-parallel exchanges during the compute phase, or
    # with a gradient size of their own, are another experiment.
    mp = doc.get("model_parallel", "after-compute")
    for r in doc["runs"]:
        topo = r["topology"] + " " + doc["profile"]["name"]
        if mp != "after-compute":
            topo += " (" + mp + ", gradient " + str(r["gradient_bytes"] // (doc["ranks"] * doc["steps"])) + " B)"
        if label:
            topo += " [" + label + "]"
        runs[(topo, r["policy"])][r["seed"]] = r


def rng(vals, fmt="{:.1f}"):
    vals = sorted(vals)
    if not vals:
        return "not run"
    if len(vals) == 1 or fmt.format(vals[0]) == fmt.format(vals[-1]):
        return fmt.format(vals[0])
    return fmt.format(vals[0]) + ".." + fmt.format(vals[-1])


def change(topo, pol, base):
    a, b = runs.get((topo, pol), {}), runs.get((topo, base), {})
    return [100 * (a[s]["training_time_s"] - b[s]["training_time_s"]) / b[s]["training_time_s"] for s in a if s in b]


def field(topo, pol, key, scale=1.0):
    return [scale * r[key] for r in runs.get((topo, pol), {}).values()]


for topo in sorted({t for t, _ in runs}):
    print(f"== {topo}")
    for pol in ["dcqcn", "shed-tight", "forgive", "forgive-novest", "forgive-p0.25", "forgive-p0",
                "shed-schedule", "shed-loose", "forgive-noexempt", "trim-nocc", "gbn"]:
        if (topo, pol) not in runs:
            continue
        print(f"{pol:17s} seeds {sorted(runs[(topo, pol)])}"
              f"  time s {rng(field(topo, pol, 'training_time_s'), '{:.4f}')}"
              f"  vs dcqcn {rng(change(topo, pol, 'dcqcn'))} %"
              f"  vs shed-tight {rng(change(topo, pol, 'shed-tight'))} %"
              f"  given up {rng(field(topo, pol, 'gradient_bytes_given_up_frac', 100), '{:.2f}')} %")
        print(f"{'':17s} all-reduce ms non-crit {rng(field(topo, pol, 'allreduce_median_noncritical_s', 1e3))}"
              f" crit {rng(field(topo, pol, 'allreduce_median_critical_s', 1e3))}"
              f"  retx {rng(field(topo, pol, 'retransmitted_bytes_frac', 100), '{:.2f}')} %"
              f"  trimmed {rng(field(topo, pol, 'trimmed_bytes_frac', 100), '{:.2f}')} %"
              f"  CNPs {rng(field(topo, pol, 'cnps'), '{:.0f}')}  RTOs {rng(field(topo, pol, 'rtos'), '{:.0f}')}"
              f"  TP median ms {rng(field(topo, pol, 'tp_completion_median_s', 1e3), '{:.2f}')}")
        print(f"{'':17s} exempt flows {rng(field(topo, pol, 'exempt_flows'), '{:.0f}')}"
              f"  flag changes/flow {rng(field(topo, pol, 'flag_changes_per_exempt_flow'), '{:.2f}')}"
              f"  re-obeyed {rng(field(topo, pol, 'reobeyed_frac', 100))} %"
              f"  re-obey ms {rng(field(topo, pol, 'reobey_mean_s', 1e3), '{:.3f}')}"
              f"  invariant {all(r['budget_invariant_held'] for r in runs[(topo, pol)].values())}")
        print(f"{'':17s} first fifth trimmed MB {rng(field(topo, pol, 'first_fifth_trimmed_bytes', 1e-6), '{:.2f}')}"
              f" forgiven {rng(field(topo, pol, 'first_fifth_forgiven_frac', 100))} %"
              f"  last fifth trimmed MB {rng(field(topo, pol, 'last_fifth_trimmed_bytes', 1e-6), '{:.2f}')}"
              f" forgiven {rng(field(topo, pol, 'last_fifth_forgiven_frac', 100))} %")
        print(f"{'':17s} traffic first fifth trimmed MB {rng(field(topo, pol, 'traffic_first_fifth_trimmed_bytes', 1e-6), '{:.2f}')}"
              f" forgiven {rng(field(topo, pol, 'traffic_first_fifth_forgiven_frac', 100))} %"
              f"  last fifth trimmed MB {rng(field(topo, pol, 'traffic_last_fifth_trimmed_bytes', 1e-6), '{:.2f}')}"
              f" forgiven {rng(field(topo, pol, 'traffic_last_fifth_forgiven_frac', 100))} %")
        rs = list(runs[(topo, pol)].values())
        if any("decisions" in r for r in rs):
            d = [r.get("decisions", {}) for r in rs]
            keys = ["trims", "forgives", "vesting_refusals", "budget_refusals", "draw_refusals", "late_trims"]
            print(f"{'':17s} decisions " + "  ".join(f"{k} {rng([x.get(k, 0) for x in d], '{:.0f}')}" for k in keys))
        if any("trimmed_bytes_by_role" in r for r in rs):
            roles = sorted({k for r in rs for k in r.get("trimmed_bytes_by_role", {})})
            print(f"{'':17s} trimmed MB by port role " + "  ".join(
                f"{k} {rng([r.get('trimmed_bytes_by_role', {}).get(k, 0) * 1e-6 for r in rs], '{:.2f}')}" for k in roles))
