package report

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/forgive-emu/forgive/lab/results"
)

// TwoJobsPNG is the plot of a sweep of two jobs on one fabric: each job's
// training-time change beside the other job against itself alone.
const TwoJobsPNG = "two-jobs.png"

// TwoJobRow is one job of one policy pair across seeds: the job beside
// the other against the same job alone on the fabric (the pair's
// reference run A+idle or idle+B with the same seed). Each change is
// (beside - alone) / alone, one per seed that has both runs.
type TwoJobRow struct {
	Pair   string // "forgive+dcqcn"
	Job    string // "a"
	Policy string // the job's policy
	// Alone is the reference's policy name: "forgive+idle".
	Alone string
	Seeds []uint64
	// Means over those seeds of the job's training time beside the other
	// and alone, in seconds.
	TimeBesideS, TimeAloneS float64
	// Per seed: the changes of the training time, of the all-reduce p99
	// and of the tensor-parallel median.
	TimeChange, AllReduceP99Change, TPMedianChange []float64
	// Means over the seeds of the job's RTOs beside the other and alone.
	RTOsBeside, RTOsAlone float64
	// ChecksHeld: every check of the job held in every run, beside and
	// alone, the budget's invariants included.
	ChecksHeld bool
}

// TwoJobs returns a row per job of every pair of f whose jobs both run,
// in the file's policy order, then the job order. A file of one job has
// none.
func TwoJobs(f *results.File) []TwoJobRow {
	var out []TwoJobRow
	for _, pair := range policyOrder(f) {
		runs := runsOf(f.Runs, pair)
		if len(runs) == 0 || len(runs[0].Jobs) != 2 {
			continue
		}
		a, b, ok := strings.Cut(pair, "+")
		if !ok || a == "idle" || b == "idle" {
			continue
		}
		for j := range 2 {
			alone := a + "+idle"
			if j == 1 {
				alone = "idle+" + b
			}
			row := TwoJobRow{Pair: pair, Job: runs[0].Jobs[j].Job, Policy: runs[0].Jobs[j].Policy, Alone: alone, ChecksHeld: true}
			var n float64
			for _, r := range runs {
				ref := runWithSeed(f.Runs, alone, r.Seed)
				if ref == nil || len(ref.Jobs) != 2 || len(r.Jobs) != 2 {
					continue
				}
				bj, aj := r.Jobs[j], ref.Jobs[j]
				row.Seeds = append(row.Seeds, r.Seed)
				row.TimeBesideS += bj.TrainingTimeS
				row.TimeAloneS += aj.TrainingTimeS
				row.RTOsBeside += float64(bj.RTOs)
				row.RTOsAlone += float64(aj.RTOs)
				row.TimeChange = append(row.TimeChange, relChange(bj.TrainingTimeS, aj.TrainingTimeS))
				row.AllReduceP99Change = append(row.AllReduceP99Change, relChange(bj.AllReduceP99S, aj.AllReduceP99S))
				row.TPMedianChange = append(row.TPMedianChange, relChange(bj.TPMedianS, aj.TPMedianS))
				row.ChecksHeld = row.ChecksHeld && bj.ChecksHeld && aj.ChecksHeld && bj.BudgetInvariantHeld && aj.BudgetInvariantHeld
				n++
			}
			if n > 0 {
				row.TimeBesideS /= n
				row.TimeAloneS /= n
				row.RTOsBeside /= n
				row.RTOsAlone /= n
			}
			out = append(out, row)
		}
	}
	return out
}

// relChange is (x - ref) / ref, 0 when ref is 0.
func relChange(x, ref float64) float64 {
	if ref == 0 {
		return 0
	}
	return (x - ref) / ref
}

func meanOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// changeMeanRange prints a change's mean over seeds and its range.
func changeMeanRange(xs []float64) string {
	if len(xs) == 0 {
		return "n/a"
	}
	lo, hi := minMax(xs)
	if len(xs) == 1 || signedPct(lo) == signedPct(hi) {
		return signedPct(meanOf(xs))
	}
	return signedPct(meanOf(xs)) + " (" + signedPctRange(lo, hi) + ")"
}

// writeTwoJobsTable prints the two-job section when f has pairs.
func writeTwoJobsTable(b *strings.Builder, f *results.File) {
	rows := TwoJobs(f)
	if len(rows) == 0 {
		return
	}
	b.WriteString("\ntwo jobs: each job beside the other against the same job alone on the fabric, seed by seed;\n")
	b.WriteString("changes are (beside - alone) / alone, mean over seeds (min..max) %\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	row(tw, "pair", "job", "policy", "time s", "time", "all-reduce", "TP median", "RTOs", "checks")
	row(tw, "", "", "", "beside / alone", "change %", "p99 change %", "change %", "beside / alone", "held")
	for _, r := range rows {
		if len(r.Seeds) == 0 {
			row(tw, r.Pair, r.Job, r.Policy, "no reference run "+r.Alone)
			continue
		}
		row(tw, r.Pair, r.Job, r.Policy,
			sig3(r.TimeBesideS)+" / "+sig3(r.TimeAloneS),
			changeMeanRange(r.TimeChange),
			changeMeanRange(r.AllReduceP99Change),
			changeMeanRange(r.TPMedianChange),
			count(r.RTOsBeside)+" / "+count(r.RTOsAlone),
			yesNo(r.ChecksHeld))
	}
	_ = tw.Flush()
}

// twoJobsFigure: per pair, a bar per job of its mean training-time
// change beside the other job against itself alone, and of its
// all-reduce p99 change, in two panels.
func twoJobsFigure(f *results.File) (figure, string) {
	rows := TwoJobs(f)
	var kept []TwoJobRow
	for _, r := range rows {
		if len(r.Seeds) > 0 {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		return figure{}, "no pair of two jobs with its references alone"
	}
	panel := func(title string, v func(TwoJobRow) []float64) *plot.Plot {
		p := newPlot(title, "", "change vs alone (%)", 12)
		vals := make(plotter.Values, len(kept))
		var names []string
		for i, r := range kept {
			vals[i] = meanOf(v(r)) * 100
			names = append(names, fmt.Sprintf("%s\njob %s (%s)", r.Pair, r.Job, r.Policy))
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(28))
		if err != nil {
			panic(err) // only for negative widths
		}
		bars.Color = colorOf(1)
		bars.LineStyle.Width = 0
		p.Add(bars)
		// Every seed's change as a point over its bar.
		var pts plotter.XYs
		for i, r := range kept {
			for _, c := range v(r) {
				pts = append(pts, plotter.XY{X: float64(i), Y: c * 100})
			}
		}
		if sc, err := plotter.NewScatter(pts); err == nil {
			sc.GlyphStyle.Color = colorOf(0)
			sc.GlyphStyle.Radius = vg.Points(2.5)
			p.Add(sc)
		}
		p.NominalX(names...)
		p.X.Tick.Label.Font.Size = 9
		return p
	}
	p1 := panel("Training time beside the other job", func(r TwoJobRow) []float64 { return r.TimeChange })
	p2 := panel("All-reduce p99 beside the other job", func(r TwoJobRow) []float64 { return r.AllReduceP99Change })
	fig := gridFigure("Two jobs on one fabric: each job against itself alone (bar: mean over seeds; dots: seeds)",
		[]*plot.Plot{p1, p2})
	fig.h = headingHeight + 2*3.2*vg.Inch // room for two-line labels
	return fig, ""
}
