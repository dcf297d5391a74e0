package report

import (
	"math"
	"slices"

	"gonum.org/v1/plot/plotter"

	"github.com/forgive-emu/forgive/lab/results"
)

// This file turns runs into the points the plots draw. It knows nothing of
// drawing, so what each plot shows can be tested on numbers.

// interval is a closed range of an axis, [lo, hi].
type interval struct{ lo, hi float64 }

// meanStepTimes returns, for every step number any run recorded, the mean
// step time over the runs that recorded it, in step order.
func meanStepTimes(runs []*results.Run) plotter.XYs {
	sum := map[int]float64{}
	n := map[int]int{}
	for _, r := range runs {
		for _, s := range r.Steps {
			if finite(s.TimeS) {
				sum[s.Step] += s.TimeS
				n[s.Step]++
			}
		}
	}
	steps := make([]int, 0, len(n))
	for s := range n {
		steps = append(steps, s)
	}
	slices.Sort(steps)
	xys := make(plotter.XYs, len(steps))
	for i, s := range steps {
		xys[i] = plotter.XY{X: float64(s), Y: sum[s] / float64(n[s])}
	}
	return xys
}

// criticalSpans returns the steps any run marked critical as shaded
// intervals one step wide centred on each step, consecutive steps merged.
func criticalSpans(runs []results.Run) []interval {
	var critical []int
	for _, r := range runs {
		for _, s := range r.Steps {
			if s.Critical && !slices.Contains(critical, s.Step) {
				critical = append(critical, s.Step)
			}
		}
	}
	slices.Sort(critical)
	var out []interval
	for _, s := range critical {
		lo, hi := float64(s)-0.5, float64(s)+0.5
		if n := len(out); n > 0 && out[n-1].hi == lo {
			out[n-1].hi = hi
			continue
		}
		out = append(out, interval{lo, hi})
	}
	return out
}

// allReduceTimes returns every rank's all-reduce completion time, in
// seconds, over all steps of one class (critical or not) of the runs.
// Times that are not positive and finite are dropped: they are not
// measurements, and the CDF may be drawn on a log axis.
func allReduceTimes(runs []*results.Run, critical bool) []float64 {
	var out []float64
	for _, r := range runs {
		for _, s := range r.Steps {
			if s.Critical != critical {
				continue
			}
			for _, t := range s.AllReduceS {
				if t > 0 && finite(t) {
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// ecdf returns the empirical CDF of xs as the corners of a post-step line:
// it starts at (x_min, 0) and rises by 1/n at each sorted sample.
func ecdf(xs []float64) plotter.XYs {
	if len(xs) == 0 {
		return nil
	}
	sorted := slices.Sorted(slices.Values(xs))
	out := make(plotter.XYs, 0, len(sorted)+1)
	out = append(out, plotter.XY{X: sorted[0], Y: 0})
	for i, x := range sorted {
		out = append(out, plotter.XY{X: x, Y: float64(i+1) / float64(len(sorted))})
	}
	return out
}

// exemptSpans returns the periods in which the sampled sender was exempt:
// each starts at the first exempt sample and ends at the next sample that
// is not exempt, or at the last sample if the series ends exempt.
func exemptSpans(points []results.RatePoint) []interval {
	var out []interval
	open := false
	for _, p := range points {
		switch {
		case p.Exempt && !open:
			out = append(out, interval{p.TS, p.TS})
			open = true
		case !p.Exempt && open:
			out[len(out)-1].hi = p.TS
			open = false
		}
	}
	if open && len(points) > 0 {
		out[len(out)-1].hi = points[len(points)-1].TS
	}
	return out
}

// ratePoints and queuePoints keep the finite samples of a series.
func ratePoints(points []results.RatePoint) plotter.XYs {
	out := make(plotter.XYs, 0, len(points))
	for _, p := range points {
		if finite(p.TS) && finite(p.BPS) {
			out = append(out, plotter.XY{X: p.TS, Y: p.BPS})
		}
	}
	return out
}

func queuePoints(points []results.QueuePoint) plotter.XYs {
	out := make(plotter.XYs, 0, len(points))
	for _, p := range points {
		if finite(p.TS) && finite(p.Bytes) {
			out = append(out, plotter.XY{X: p.TS, Y: p.Bytes})
		}
	}
	return out
}

// firstSeed is the seed the time-series plots show: the first one listed,
// or the first run's when the file lists none.
func firstSeed(f *results.File) (uint64, bool) {
	if len(f.Seeds) > 0 {
		return f.Seeds[0], true
	}
	if len(f.Runs) > 0 {
		return f.Runs[0].Seed, true
	}
	return 0, false
}

// bounds returns the smallest interval holding every point of the series.
func bounds(series ...plotter.XYs) (x, y interval, ok bool) {
	x = interval{math.Inf(1), math.Inf(-1)}
	y = x
	for _, s := range series {
		for _, p := range s {
			x = interval{min(x.lo, p.X), max(x.hi, p.X)}
			y = interval{min(y.lo, p.Y), max(y.hi, p.Y)}
			ok = true
		}
	}
	return x, y, ok
}

// unit picks the scale a quantity of magnitude max reads best in, from
// candidates ordered from the largest factor down; the last is the
// fallback.
type unit struct {
	name   string
	factor float64 // divide by it
}

var (
	timeUnits  = []unit{{"s", 1}, {"ms", 1e-3}, {"µs", 1e-6}}
	rateUnits  = []unit{{"Gb/s", 1e9}, {"Mb/s", 1e6}, {"kb/s", 1e3}, {"b/s", 1}}
	bytesUnits = []unit{{"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
)

func pickUnit(units []unit, max float64) unit {
	for _, u := range units {
		if max >= u.factor {
			return u
		}
	}
	return units[len(units)-1]
}

// scaled divides the ys (or xs) of a series by a unit's factor.
func scaled(xys plotter.XYs, xf, yf float64) plotter.XYs {
	out := make(plotter.XYs, len(xys))
	for i, p := range xys {
		out[i] = plotter.XY{X: p.X / xf, Y: p.Y / yf}
	}
	return out
}
