#!/usr/bin/env python3
"""Summarize the sampled series of the lab's results.json files: the
bottleneck queue's occupancy (mean, median, share of samples above the
ECN threshold and within one packet of the limit, where it trims) and the
sampled ring flow's rate (mean over all samples, over those taken while
it was exempt, and while it obeyed DCQCN), as fractions of the line rate;
and each run's critical path: over the non-critical steps, the mean step
time, compute phase, slowest all-reduce and slowest tensor-parallel
completion, and on how many steps the tensor-parallel traffic finished
last.

    python3 samples.py DIR/results.json ...
"""
import json
import statistics
import sys

for path in sys.argv[1:]:
    with open(path) as f:
        doc = json.load(f)
    line = float(doc["profile"]["derived"]["line_rate"].removesuffix("Mbps")) * 1e6
    compute = None
    for r in doc["runs"]:
        steps = [st for st in r["steps"] if not st["critical"]]
        ar = [max(st["allreduce_s"]) for st in steps]
        tp = [max(st.get("tp_s") or [0]) for st in steps]
        tm = [st["time_s"] for st in steps]
        print(f"{r['topology']} {r['policy']} seed {r['seed']}: non-critical steps: time {1e3*statistics.fmean(tm):.2f} ms, "
              f"slowest all-reduce {1e3*statistics.fmean(ar):.2f} ms, slowest tensor-parallel {1e3*statistics.fmean(tp):.2f} ms, "
              f"time - slowest tensor-parallel {1e3*statistics.fmean(t - x for t, x in zip(tm, tp)):.2f} ms, "
              f"tensor-parallel last on {sum(x > a for x, a in zip(tp, ar))} of {len(steps)}")
        occ = [p["bytes"] for p in r.get("occupancy", [])]
        rate = r.get("rate", [])
        mark, limit = r.get("queue_mark_bytes", 0), r.get("queue_limit_bytes", 0)
        ex = [p["bps"] for p in rate if p["exempt"]]
        ob = [p["bps"] for p in rate if not p["exempt"]]
        def mean(v):
            return statistics.fmean(v) / line if v else float("nan")
        print(f"{r['topology']} {r['policy']} seed {r['seed']}: queue {r['occupancy_port']} "
              f"mean {statistics.fmean(occ)/1e3:.1f} KB, median {statistics.median(occ)/1e3:.1f} KB, "
              f"above ECN {100*sum(o > mark for o in occ)/len(occ):.1f} %, "
              f"trimming {100*sum(o >= limit - 4194 for o in occ)/len(occ):.1f} % of {len(occ)} samples; "
              f"{r['rate_flow']} rate {mean([p['bps'] for p in rate]):.3f} of line, "
              f"exempt {mean(ex):.3f} ({len(ex)} samples), obeying {mean(ob):.3f} ({len(ob)} samples)")
