package report

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/forgive-emu/forgive/lab/results"
)

// A Verdict says how a measured figure compares with the seed's.
type Verdict string

// The verdicts, from the seed-rate and sim-seed-scale tables: inside the
// seed's spread; the same sign and order (the same direction, within a
// factor of two); different; or not run (the cell lacks the policy or the
// fabric the figure needs).
const (
	Inside    Verdict = "inside"
	SameOrder Verdict = "same sign and order"
	Different Verdict = "different"
	NotRun    Verdict = "not run"
)

// rank orders verdicts from best to worst; a row of several parts takes
// its worst part's.
func (v Verdict) rank() int { return slices.Index([]Verdict{Inside, SameOrder, Different, NotRun}, v) }

// ScoredFigure is one of the seed's 25 figures beside the cell's.
type ScoredFigure struct {
	Row     int     `json:"row"`
	What    string  `json:"what"`
	Seed    string  `json:"seed"`
	Ours    string  `json:"ours"`
	Verdict Verdict `json:"verdict"`
}

// Scorecard is a cell's score against the seed's 25 figures (the rows of
// docs/results/seed-rate/README.md's side-by-side table).
type Scorecard struct {
	// Baseline is the policy the changes are measured against: shed-tight,
	// the seed's tight baseline, or dcqcn where a cell did not run it
	// (the seed: plain DCQCN stays within -1.1 to +0.8 % of it).
	Baseline string         `json:"baseline"`
	Figures  []ScoredFigure `json:"figures"`
	// Counts by verdict.
	Inside, SameOrder, Different, NotRun int
}

// cell is the runs of one reading: policy -> seed -> run.
type cell map[string]map[uint64]*results.Run

func newCell(files []*results.File) cell {
	c := cell{}
	for _, f := range files {
		for i := range f.Runs {
			r := &f.Runs[i]
			if c[r.Policy] == nil {
				c[r.Policy] = map[uint64]*results.Run{}
			}
			c[r.Policy][r.Seed] = r
		}
	}
	return c
}

// values is a figure of every seed of policy, in seed order.
func (c cell) values(policy string, v func(*results.Run) float64) []float64 {
	var out []float64
	for _, s := range slices.Sorted(maps.Keys(c[policy])) {
		out = append(out, v(c[policy][s]))
	}
	return out
}

// change is (policy - base) / base of v in percent, seed by seed over the
// seeds both ran.
func (c cell) change(policy, base string, v func(*results.Run) float64) []float64 {
	var out []float64
	for _, s := range slices.Sorted(maps.Keys(c[policy])) {
		if b, ok := c[base][s]; ok && v(b) != 0 {
			out = append(out, 100*(v(c[policy][s])-v(b))/v(b))
		}
	}
	return out
}

// ratio is policy's v over base's, seed by seed; NaN where base's is 0.
func (c cell) ratio(policy, base string, v func(*results.Run) float64) []float64 {
	var out []float64
	for _, s := range slices.Sorted(maps.Keys(c[policy])) {
		if b, ok := c[base][s]; ok {
			out = append(out, v(c[policy][s])/v(b))
		}
	}
	return out
}

// inRange is the verdict of values against the seed's [lo, hi]: inside
// when every seed's value lies in it; the same sign and order when every
// value has the range's sign and lies within a factor of two of it; else
// different. A range that straddles zero has no sign to share.
func inRange(vals []float64, lo, hi float64) Verdict {
	if len(vals) == 0 {
		return NotRun
	}
	if every(vals, func(v float64) bool { return v >= lo && v <= hi }) {
		return Inside
	}
	if lo*hi > 0 {
		sign := math.Copysign(1, lo)
		small, large := math.Min(math.Abs(lo), math.Abs(hi)), math.Max(math.Abs(lo), math.Abs(hi))
		if every(vals, func(v float64) bool { return v*sign > 0 && math.Abs(v) >= small/2 && math.Abs(v) <= 2*large }) {
			return SameOrder
		}
	}
	return Different
}

// about is the spread of a figure the seed states without one ("about 3
// percent", "0.5 times"): every value that rounds to it at the digits it
// is written with. 3 is [2.5, 3.5], 0.17 is [0.165, 0.175].
func about(v float64, decimals int) (lo, hi float64) {
	h := 0.5 * math.Pow(10, -float64(decimals))
	return v - h, v + h
}

func every(vals []float64, ok func(float64) bool) bool {
	for _, v := range vals {
		if !ok(v) || math.IsNaN(v) {
			return false
		}
	}
	return true
}

// worst is the verdict of a row of several parts.
func worst(vs ...Verdict) Verdict {
	w := Inside
	for _, v := range vs {
		if v.rank() > w.rank() {
			w = v
		}
	}
	return w
}

func show(vals []float64, format string) string {
	if len(vals) == 0 {
		return "not run"
	}
	lo, hi := slices.Min(vals), slices.Max(vals)
	if fmt.Sprintf(format, lo) == fmt.Sprintf(format, hi) {
		return fmt.Sprintf(format, lo)
	}
	return fmt.Sprintf(format, lo) + ".." + fmt.Sprintf(format, hi)
}

// Fields, in the units the seed writes them in.
var (
	timeS        = func(r *results.Run) float64 { return r.TrainingTimeS }
	givenUpPct   = func(r *results.Run) float64 { return 100 * r.GradientBytesGivenUpFrac }
	retxPct      = func(r *results.Run) float64 { return 100 * r.RetransmittedBytesFrac }
	trimPct      = func(r *results.Run) float64 { return 100 * r.TrimmedBytesFrac }
	nonCritical  = func(r *results.Run) float64 { return r.AllReduceMedianNonCriticalS }
	critical     = func(r *results.Run) float64 { return r.AllReduceMedianCriticalS }
	rtos         = func(r *results.Run) float64 { return float64(r.RTOs) }
	cnps         = func(r *results.Run) float64 { return float64(r.CNPs) }
	tpCompletion = func(r *results.Run) float64 { return r.TPCompletionMedianS }
	flagChanges  = func(r *results.Run) float64 { return r.FlagChangesPerExemptFlow }
	reobeyedPct  = func(r *results.Run) float64 { return 100 * r.ReObeyedFrac }
	reobeyMeanMS = func(r *results.Run) float64 { return 1e3 * r.ReObeyMeanS }
	trimmedBytes = func(r *results.Run) float64 { return float64(r.TrimmedBytes) }
	fifthsRatio  = func(r *results.Run) float64 {
		return float64(r.TrafficFirstFifthTrimmedBytes) / float64(r.TrafficLastFifthTrimmedBytes)
	}
	firstForgivenPct = func(r *results.Run) float64 { return 100 * r.TrafficFirstFifthForgivenFrac }
	lastForgivenPct  = func(r *results.Run) float64 { return 100 * r.TrafficLastFifthForgivenFrac }
	held             = func(r *results.Run) float64 { return b2f(r.BudgetInvariantHeld) }
)

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Score scores a reading: worstFabric holds its runs on the seed's worst
// fabric (4:1), nonBlocking those on the non-blocking one (rows 23 to 25;
// none: not run). The rules are the seed-rate table's, written down:
// a range the seed gives is inside when every seed's value lies in it; a
// figure it gives without a spread has the spread of its last digit
// (about); "fell by more than half", "a third as many", "stayed at the
// baseline's", "within 4.4 %" and "ten times" are read as the rows below
// say.
func Score(worstFabric, nonBlocking []*results.File) Scorecard {
	c, nb := newCell(worstFabric), newCell(nonBlocking)
	base := "shed-tight"
	if c[base] == nil {
		base = "dcqcn"
	}
	nbBase := "shed-tight"
	if nb[nbBase] == nil {
		nbBase = "dcqcn"
	}
	sc := Scorecard{Baseline: base}
	add := func(row int, what, seed, ours string, v Verdict) {
		sc.Figures = append(sc.Figures, ScoredFigure{Row: row, What: what, Seed: seed, Ours: ours, Verdict: v})
	}
	cut := func(policy string) []float64 { return c.change(policy, base, timeS) }
	part := func(vals []float64, lo, hi float64) Verdict { return inRange(vals, lo, hi) }

	fc := cut("forgive")
	add(1, "training-time cut, forgive vs "+base, "−16.1 to −16.7 %", show(fc, "%+.2f %%"), part(fc, -16.7, -16.1))
	gu := c.values("forgive", givenUpPct)
	add(2, "gradient bytes given up, forgive", "7.55 – 7.57 %", show(gu, "%.3f %%"), part(gu, 7.55, 7.57))
	nc := c.change("forgive", base, nonCritical)
	lo, hi := about(-46, 0)
	add(3, "median non-critical all-reduce, forgive vs "+base, "32.3 → 17.4 ms (−46 %)",
		show(c.values(base, func(r *results.Run) float64 { return 1e3 * nonCritical(r) }), "%.2f")+" → "+
			show(c.values("forgive", func(r *results.Run) float64 { return 1e3 * nonCritical(r) }), "%.2f ms")+" ("+show(nc, "%+.1f %%")+")",
		part(nc, lo, hi))
	cc := c.change("forgive", base, critical)
	add(4, "median critical all-reduce, forgive vs "+base, "stays at the baseline's (read: within plain DCQCN's −1.1 to +0.8 %)",
		show(cc, "%+.2f %%"), noSign(part(cc, -1.1, 0.8)))
	dc := c.change("dcqcn", "shed-tight", timeS)
	add(5, "plain DCQCN vs the tight baseline", "−1.1 to +0.8 %", show(dc, "%+.2f %%"), part(dc, -1.1, 0.8))
	nv, nvg := cut("forgive-novest"), c.values("forgive-novest", givenUpPct)
	add(6, "no vesting: cut, bytes given up", "−9.1 to −10.2 %, 7.9 – 8.1 %", show(nv, "%+.2f %%")+", "+show(nvg, "%.3f %%"),
		worst(part(nv, -10.2, -9.1), part(nvg, 7.9, 8.1)))
	add(7, "no vesting cuts less than vesting", "9.1–10.2 % against 16.1–16.7 %", show(nv, "%+.2f %%")+" against "+show(fc, "%+.2f %%"), lessCut(nv, fc))
	fr, ff, lf := c.values("forgive", fifthsRatio), c.values("forgive", firstForgivenPct), c.values("forgive", lastForgivenPct)
	l1, h1 := about(6.8, 1)
	l2, h2 := about(18, 0)
	l3, h3 := about(60, 0)
	add(8, "trim-level accounting, first vs last fifth of a step: trimmed ratio, forgiven %", "6.8 times (12.3 vs 1.8 GB); 18 % vs 60 %",
		show(fr, "%.2f")+" times; "+show(ff, "%.1f %%")+" vs "+show(lf, "%.1f %%"), worst(part(fr, l1, h1), part(ff, l2, h2), part(lf, l3, h3)))
	q, qg := cut("forgive-p0.25"), c.values("forgive-p0.25", givenUpPct)
	l1, h1 = about(5.5, 1)
	add(9, "P = 0.25: cut, bytes", "−15.8 to −16.9 %, 5.5 %", show(q, "%+.2f %%")+", "+show(qg, "%.3f %%"), worst(part(q, -16.9, -15.8), part(qg, l1, h1)))
	z, zg := cut("forgive-p0"), c.values("forgive-p0", givenUpPct)
	add(10, "P = 0: cut at zero loss", "−15.0 to −15.7 %, 0 %", show(z, "%+.2f %%")+", "+show(zg, "%.3f %%"), worst(part(z, -15.7, -15.0), part(zg, 0, 0)))
	zr, fr1 := c.values("forgive-p0", retxPct), c.values("forgive", retxPct)
	add(11, "P = 0 vs P = 1 retransmitted bytes", "9.5 – 10.5 % vs 5.2 – 5.9 %", show(zr, "%.2f %%")+" vs "+show(fr1, "%.2f %%"),
		worst(part(zr, 9.5, 10.5), part(fr1, 5.2, 5.9)))
	share := shareOf(z, fc)
	add(12, "the exemption's share of the cut (P = 0 cut / P = 1 cut)", "15.0–15.7 of 16.1–16.7 points (0.90 – 0.98)", show(share, "%.2f"),
		part(share, 15.0/16.7, 15.7/16.1))
	ss, ssg := cut("shed-schedule"), c.values("shed-schedule", givenUpPct)
	l1, h1 = about(8.1, 1)
	add(13, "sender-side shedding on the same schedule: cut, bytes", "−2.4 to −3.3 %, 8.1 %", show(ss, "%+.2f %%")+", "+show(ssg, "%.3f %%"),
		worst(part(ss, -3.3, -2.4), part(ssg, l1, h1)))
	sl, slg := cut("shed-loose"), c.values("shed-loose", givenUpPct)
	add(14, "loose baseline: cut, bytes", "−2.6 to −3.9 %, 10.0 – 10.2 %", show(sl, "%+.2f %%")+", "+show(slg, "%.3f %%"),
		worst(part(sl, -3.9, -2.6), part(slg, 10.0, 10.2)))
	add(15, "shedding gives up slightly more than forgiveness", "8.1 % vs 7.55 – 7.57 %", show(ssg, "%.3f %%")+" vs "+show(gu, "%.3f %%"), moreThan(ssg, gu, l1, h1, 7.55, 7.57))
	bt, ft := c.values(base, trimPct), c.values("forgive", trimPct)
	l1, h1 = about(3, 0)
	add(16, "trim rate, baseline → with exemption", "~3 % → 6.7 – 7.4 %", show(bt, "%.2f %%")+" → "+show(ft, "%.2f %%"), worst(part(bt, l1, h1), part(ft, 6.7, 7.4)))
	fl := c.values("forgive", flagChanges)
	l1, h1 = about(0.5, 1)
	add(17, "flag changes per exempt flow", "~0.5", show(fl, "%.2f"), part(fl, l1, h1))
	ro, rm := c.values("forgive", reobeyedPct), c.values("forgive", reobeyMeanMS)
	l1, h1 = about(19, 0)
	l2, h2 = about(0.17, 2)
	add(18, "exempt flows that obeyed again, mean period", "19 %, 0.17 ms", show(ro, "%.1f %%")+", "+show(rm, "%.3f ms"), worst(part(ro, l1, h1), part(rm, l2, h2)))
	rt := c.ratio("forgive", base, rtos)
	add(19, "RTOs, forgive vs baseline", "fell by more than half (a ratio below 0.5)", show(rt, "%.2f")+" times", fraction(rt, 0, 0.5))
	cn := c.ratio("forgive", base, cnps)
	add(20, "CNPs received by senders", "a third as many (read: nearer a third than a quarter or a half, 0.29 – 0.42)", show(cn, "%.2f")+" times", fraction(cn, 0.29, 0.42))
	tp := c.change("forgive", base, tpCompletion)
	add(21, "tensor-parallel completion vs baseline", "within 4.4 %", show(tp, "%+.2f %%"), noSign(part(tp, -4.4, 4.4)))
	var hv []float64
	for p := range c {
		hv = append(hv, c.values(p, held)...)
	}
	add(22, "loss-budget invariant on every step", "held", show(hv, "%.0f")+" (1: held in every run)", part(hv, 1, 1))
	nt := nb.values(nbBase, trimPct)
	add(23, "non-blocking: baseline trim rate", "0.02 – 0.04 %", show(nt, "%.4f %%"), part(nt, 0.02, 0.04))
	nc2, ng := nb.change("forgive", nbBase, timeS), nb.values("forgive", givenUpPct)
	add(24, "non-blocking: cut, bytes given up", "−4.5 to −7.5 %, 1.0 – 1.3 %", show(nc2, "%+.2f %%")+", "+show(ng, "%.3f %%"), worst(part(nc2, -7.5, -4.5), part(ng, 1.0, 1.3)))
	ntr := nb.ratio("forgive", nbBase, trimmedBytes)
	l1, h1 = about(10, 0)
	add(25, "non-blocking: bytes trimmed under exemption vs baseline", "ten times", show(ntr, "%.2f")+" times", part(ntr, l1, h1))

	for _, f := range sc.Figures {
		switch f.Verdict {
		case Inside:
			sc.Inside++
		case SameOrder:
			sc.SameOrder++
		case Different:
			sc.Different++
		default:
			sc.NotRun++
		}
	}
	return sc
}

// noSign is a verdict for a figure whose seed's value is "no change": it
// is inside or different, with no sign to share.
func noSign(v Verdict) Verdict {
	if v == SameOrder {
		return Different
	}
	return v
}

// lessCut is row 7: the cut without vesting is smaller than with it.
func lessCut(novest, vest []float64) Verdict {
	if len(novest) == 0 || len(vest) == 0 {
		return NotRun
	}
	if inRange(novest, -10.2, -9.1) == Inside && inRange(vest, -16.7, -16.1) == Inside {
		return Inside
	}
	if slices.Max(novest) < 0 && slices.Max(vest) < 0 && -slices.Min(novest) < -slices.Max(vest) {
		return SameOrder
	}
	return Different
}

// shareOf is the P = 0 cut over the P = 1 cut, seed by seed.
func shareOf(p0, p1 []float64) []float64 {
	var out []float64
	for i := range min(len(p0), len(p1)) {
		out = append(out, p0[i]/p1[i])
	}
	return out
}

// moreThan is row 15: shedding gives up more than forgiveness.
func moreThan(shed, forgive []float64, slo, shi, flo, fhi float64) Verdict {
	if len(shed) == 0 || len(forgive) == 0 {
		return NotRun
	}
	if inRange(shed, slo, shi) == Inside && inRange(forgive, flo, fhi) == Inside {
		return Inside
	}
	if slices.Min(shed) > slices.Max(forgive) {
		return SameOrder
	}
	return Different
}

// fraction is a ratio the seed states in words: inside in [lo, hi]; the
// same sign and order when it still fell (below 1); different when it
// did not, or the baseline had none.
func fraction(vals []float64, lo, hi float64) Verdict {
	if len(vals) == 0 {
		return NotRun
	}
	if every(vals, func(v float64) bool { return v >= lo && v <= hi }) {
		return Inside
	}
	if every(vals, func(v float64) bool { return v < 1 }) {
		return SameOrder
	}
	return Different
}

// WriteScore writes the scorecard as a markdown table and its counts.
func WriteScore(w io.Writer, sc Scorecard) error {
	var b strings.Builder
	fmt.Fprintf(&b, "baseline: %s\n\n| # | seed figure | seed | ours | verdict |\n|---|---|---|---|---|\n", sc.Baseline)
	for _, f := range sc.Figures {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", f.Row, f.What, f.Seed, f.Ours, f.Verdict)
	}
	fmt.Fprintf(&b, "\nscore: %d inside, %d same sign and order, %d different, %d not run, of %d\n",
		sc.Inside, sc.SameOrder, sc.Different, sc.NotRun, len(sc.Figures))
	_, err := io.WriteString(w, b.String())
	return err
}
