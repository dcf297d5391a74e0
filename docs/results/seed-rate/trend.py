#!/usr/bin/env python3
"""The trend of the headline rows toward the seed's rate: one table row
per figure, one column per profile, and a plot (trend.png).

    python3 trend.py [--plot trend.png] DIR/results.json[.gz] ...

Each file is one lab run of dcqcn, shed-tight and forgive (one seed) on
one rate-scaled seed profile; files of shards merged by
`forgivectl report merge` work as well. Changes are (policy - base) /
base of the training time, as the lab's report computes them.
"""
import gzip
import json
import sys

SCALE = {"seed-6.25g": 1 / 64, "seed-25g": 1 / 16, "seed-50g": 1 / 8, "seed-100g": 1 / 4, "seed-400g": 1}


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def rate_bps(text):
    """A derived rate such as "400Gbps" or "6250Mbps" in bits/s."""
    for unit, mul in (("Gbps", 1e9), ("Mbps", 1e6), ("Kbps", 1e3), ("bps", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * mul
    raise ValueError("rate %r" % text)


def floor_ms(doc):
    """The ring's time at a rank's share of its leaf's uplinks (a quarter
    of its line rate on the 4:1 fabric): every rank's 2(N-1)/N of the
    gradient per step crosses them."""
    r = doc["runs"][0]
    per_rank_step = r["gradient_bytes"] / (doc["ranks"] * doc["steps"])
    return 1e3 * per_rank_step * 8 / (rate_bps(doc["profile"]["derived"]["line_rate"]) / 4)


def main(argv):
    plot = None
    if len(argv) >= 2 and argv[0] == "--plot":
        plot, argv = argv[1], argv[2:]
    by_profile, floors = {}, {}
    for path in argv:
        doc = load(path)
        floors[doc["profile"]["name"]] = floor_ms(doc)
        runs = by_profile.setdefault(doc["profile"]["name"], {})
        for r in doc["runs"]:
            runs.setdefault(r["policy"], []).append(r)
    profiles = sorted(by_profile, key=lambda p: SCALE.get(p, 0))

    def first(p, pol):
        rs = by_profile[p].get(pol) or []
        return rs[0] if rs else None

    def change(p, pol, base="dcqcn"):
        r, b = first(p, pol), first(p, base)
        if not r or not b:
            return None
        return 100 * (r["training_time_s"] - b["training_time_s"]) / b["training_time_s"]

    def field(p, pol, key, mul=1.0):
        r = first(p, pol)
        return None if r is None else mul * r[key]

    rows = [
        ("forgive vs dcqcn, training time %", "−16.1 to −16.7 (vs tight)", lambda p: change(p, "forgive")),
        ("forgive vs shed-tight, training time %", "−16.1 to −16.7", lambda p: change(p, "forgive", "shed-tight")),
        ("non-critical all-reduce, dcqcn ms", "32.3 (tight)", lambda p: field(p, "dcqcn", "allreduce_median_noncritical_s", 1e3)),
        ("non-critical all-reduce, forgive ms", "17.4", lambda p: field(p, "forgive", "allreduce_median_noncritical_s", 1e3)),
        ("the ring at the uplinks' rate ms", "", lambda p: floors[p]),
        ("trimmed, dcqcn %", "~3", lambda p: field(p, "dcqcn", "trimmed_bytes_frac", 100)),
        ("trimmed, forgive %", "6.7 – 7.4", lambda p: field(p, "forgive", "trimmed_bytes_frac", 100)),
        ("retransmitted, forgive %", "5.2 – 5.9", lambda p: field(p, "forgive", "retransmitted_bytes_frac", 100)),
        ("gradient bytes given up, forgive %", "7.55 – 7.57", lambda p: field(p, "forgive", "gradient_bytes_given_up_frac", 100)),
        ("flag changes per exempt flow", "~0.5", lambda p: field(p, "forgive", "flag_changes_per_exempt_flow")),
        ("RTOs, dcqcn", "", lambda p: field(p, "dcqcn", "rtos")),
        ("RTOs, forgive", "fell by more than half", lambda p: field(p, "forgive", "rtos")),
        ("TP median, forgive ms", "within 4.4 % of the baseline", lambda p: field(p, "forgive", "tp_completion_median_s", 1e3)),
    ]
    head = ["figure", "seed"] + ["%s (1/%d)" % (p, round(1 / SCALE[p])) if SCALE.get(p, 1) < 1 else p for p in profiles]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, seed, fn in rows:
        cells = []
        for p in profiles:
            v = fn(p)
            if v is None:
                cells.append("not run")
            elif float(v).is_integer() and "RTOs" in name:
                cells.append("%d" % v)
            else:
                cells.append("%.0f" % v if abs(v) >= 100 else "%.2f" % v if abs(v) < 10 else "%.1f" % v)
        print("| " + " | ".join([name, seed] + cells) + " |")
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        xs = [SCALE[p] for p in profiles]
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
        for ax, (title, series, ref) in zip(axes, [
            ("training time, forgive vs dcqcn (%)", [("forgive", lambda p: change(p, "forgive"))], -16.4),
            ("non-critical all-reduce (ms)", [("dcqcn", lambda p: field(p, "dcqcn", "allreduce_median_noncritical_s", 1e3)),
                                              ("forgive", lambda p: field(p, "forgive", "allreduce_median_noncritical_s", 1e3))], None),
            ("trimmed bytes (%)", [("dcqcn", lambda p: field(p, "dcqcn", "trimmed_bytes_frac", 100)),
                                   ("forgive", lambda p: field(p, "forgive", "trimmed_bytes_frac", 100))], None),
        ]):
            for label, fn in series:
                ax.plot(xs, [fn(p) for p in profiles], marker="o", label=label)
            if ref is not None:
                ax.axhline(ref, color="grey", linestyle="--", label="the seed")
            if title.startswith("non-critical"):
                ax.axhline(32.3, color="C0", linestyle=":", label="the seed, tight baseline")
                ax.axhline(17.4, color="C1", linestyle=":", label="the seed, forgive")
                ax.plot(xs, [floors[p] for p in profiles], color="grey", linestyle="--", label="the ring at the uplinks' rate")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("fraction of the seed's rate")
            ax.set_title(title)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(plot, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1:])
