package report

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/forgive-emu/forgive/lab/results"
)

// StepPhasesPNG is the plot of one step's phases: the bottleneck queue,
// the rate cuts and the trims over the step, per policy, with the compute
// phase and the all-reduce shaded (a run that sampled its signals: the
// simulator's).
const StepPhasesPNG = "step-phases.png"

// ErrNoPhases is returned when a results file holds no run with the
// per-phase samples, or no step to show.
var ErrNoPhases = errors.New("report: no step with per-phase samples")

// signalPer is the width the per-phase plot's rates are counted over.
const signalPer = 100e-6

// Phase names, in a step's order.
const (
	PhaseCompute   = "compute"    // the compute phase, the model-parallel exchanges overlapping it
	PhaseTail      = "mp-tail"    // after it, until the first rank began its all-reduce
	PhaseAllReduce = "all-reduce" // from the first rank's all-reduce to the step's end
)

// PhaseRow is one phase of one step of one run: its length, the
// bottleneck queue over it and the signals in it. A sample belongs to the
// phase its instant falls in; its counts are those since the sample
// before.
type PhaseRow struct {
	Policy string
	Step   int
	Phase  string
	// Seconds is the phase's length; Samples the samples in it.
	Seconds float64
	Samples int
	// QueueMean and QueueMax are the bottleneck queue's bytes over the
	// samples.
	QueueMean, QueueMax float64
	CNPs, RateCuts      uint64
	// Trimmed are the payload bytes the switches trimmed, by the role of
	// the trimming port.
	TrimmedHost, TrimmedUplink, TrimmedDownlink int64
}

// PhaseStep is the step the phase plot shows when none is asked for: the
// first non-critical step that the first seed's sampled runs all recorded
// with phases, or the first such step of any kind; 0 when there is none.
func PhaseStep(f *results.File) int {
	runs := phaseRuns(f)
	if len(runs) == 0 {
		return 0
	}
	first := 0
	for _, s := range runs[0].Steps {
		if !everyRunHasStep(runs, s.Step) {
			continue
		}
		if !s.Critical {
			return s.Step
		}
		if first == 0 {
			first = s.Step
		}
	}
	return first
}

// phaseRuns are the first seed's runs that sampled their signals, in
// policy order.
func phaseRuns(f *results.File) []*results.Run {
	seed, ok := firstSeed(f)
	if !ok {
		return nil
	}
	var out []*results.Run
	for _, policy := range policyOrder(f) {
		if r := runWithSeed(f.Runs, policy, seed); r != nil && len(r.Signals) > 0 {
			out = append(out, r)
		}
	}
	return out
}

func everyRunHasStep(runs []*results.Run, step int) bool {
	for _, r := range runs {
		if s := stepOf(r, step); s == nil || !s.HasPhases() {
			return false
		}
	}
	return true
}

func stepOf(r *results.Run, step int) *results.Step {
	for i := range r.Steps {
		if r.Steps[i].Step == step {
			return &r.Steps[i]
		}
	}
	return nil
}

// phaseOf names the phase of step s that the instant t falls in, or ""
// outside the step.
func phaseOf(s *results.Step, t float64) string {
	switch {
	case t < s.StartS || t > s.EndS:
		return ""
	case t < s.ComputeEndS:
		return PhaseCompute
	case t < s.AllReduceFirstS:
		return PhaseTail
	}
	return PhaseAllReduce
}

// PhaseRows tabulates the phases of every step of the first seed's
// sampled runs (steps: only those; none: every step), in policy, step
// and phase order. A phase of no length is left out.
func PhaseRows(f *results.File, steps ...int) []PhaseRow {
	var rows []PhaseRow
	for _, r := range phaseRuns(f) {
		for i := range r.Steps {
			s := &r.Steps[i]
			if !s.HasPhases() || len(steps) > 0 && !slices.Contains(steps, s.Step) {
				continue
			}
			rows = append(rows, stepPhaseRows(r, s)...)
		}
	}
	return rows
}

func stepPhaseRows(r *results.Run, s *results.Step) []PhaseRow {
	bounds := []struct {
		name   string
		lo, hi float64
	}{
		{PhaseCompute, s.StartS, s.ComputeEndS},
		{PhaseTail, s.ComputeEndS, s.AllReduceFirstS},
		{PhaseAllReduce, s.AllReduceFirstS, s.EndS},
	}
	byName := map[string]*PhaseRow{}
	var rows []PhaseRow
	for _, b := range bounds {
		if b.hi > b.lo {
			rows = append(rows, PhaseRow{Policy: r.Policy, Step: s.Step, Phase: b.name, Seconds: b.hi - b.lo})
		}
	}
	for i := range rows {
		byName[rows[i].Phase] = &rows[i]
	}
	for i, q := range r.Occupancy {
		row := byName[phaseOf(s, q.TS)]
		if row == nil {
			continue
		}
		row.Samples++
		row.QueueMean += q.Bytes
		row.QueueMax = max(row.QueueMax, q.Bytes)
		if i == 0 || i >= len(r.Signals) || r.Signals[i].TS != q.TS {
			continue
		}
		p, prev := r.Signals[i], r.Signals[i-1]
		row.CNPs += sub(p.CNPs, prev.CNPs)
		row.RateCuts += sub(p.RateCuts, prev.RateCuts)
		row.TrimmedHost += max(0, p.TrimmedHost-prev.TrimmedHost)
		row.TrimmedUplink += max(0, p.TrimmedUplink-prev.TrimmedUplink)
		row.TrimmedDownlink += max(0, p.TrimmedDownlink-prev.TrimmedDownlink)
	}
	for i := range rows {
		if rows[i].Samples > 0 {
			rows[i].QueueMean /= float64(rows[i].Samples)
		}
	}
	return rows
}

// sub is a-b, or 0 when a counter went back (a flow per message whose
// flows were destroyed between two samples).
func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// WritePhaseRows prints the rows as a table.
func WritePhaseRows(w io.Writer, rows []PhaseRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tstep\tphase\tms\tsamples\tqueue mean KiB\tqueue max KiB\tCNPs\trate cuts\ttrimmed host KiB\tuplink KiB\tdownlink KiB\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%d\t%.1f\t%.1f\t%d\t%d\t%.1f\t%.1f\t%.1f\t\n", r.Policy, r.Step, r.Phase, r.Seconds*1e3, r.Samples,
			r.QueueMean/1024, r.QueueMax/1024, r.CNPs, r.RateCuts, float64(r.TrimmedHost)/1024, float64(r.TrimmedUplink)/1024, float64(r.TrimmedDownlink)/1024)
	}
	return tw.Flush()
}

// WriteStepPhasesPNG draws step (0: PhaseStep's) of the first seed's
// sampled runs into path.
func WriteStepPhasesPNG(path string, f *results.File, step int) error {
	if step == 0 {
		step = PhaseStep(f)
	}
	data, skip, err := render(plotSpec{StepPhasesPNG, func(f *results.File) (figure, string) { return stepPhasesFigure(f, step) }}, f)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s: %v", ErrPlot, StepPhasesPNG, err)
	case skip != "":
		return fmt.Errorf("%w: %s", ErrNoPhases, skip)
	}
	return writeAtomic(path, data)
}

// phaseSeries are one run's series over one step, in seconds from the
// step's start: the queue's bytes, and the rate cuts and trimmed bytes
// per signalPer.
type phaseSeries struct {
	queue, cuts, trims plotter.XYs
}

func stepSeries(r *results.Run, s *results.Step) phaseSeries {
	var out phaseSeries
	for i, q := range r.Occupancy {
		if q.TS < s.StartS || q.TS > s.EndS {
			continue
		}
		x := q.TS - s.StartS
		out.queue = append(out.queue, plotter.XY{X: x, Y: q.Bytes})
		if i == 0 || i >= len(r.Signals) || r.Signals[i].TS != q.TS {
			continue
		}
		p, prev := r.Signals[i], r.Signals[i-1]
		per := (p.TS - prev.TS) / signalPer
		if per <= 0 {
			continue
		}
		out.cuts = append(out.cuts, plotter.XY{X: x, Y: float64(sub(p.RateCuts, prev.RateCuts)) / per})
		out.trims = append(out.trims, plotter.XY{X: x, Y: float64(max(0, p.Trimmed()-prev.Trimmed())) / per})
	}
	return out
}

// stepPhasesFigure: one column per policy (the first seed's runs that
// sampled their signals), three rows on shared axes: the bottleneck
// queue, the rate cuts and the trimmed bytes per 100 µs, over one step,
// with its compute phase and its all-reduce shaded.
func stepPhasesFigure(f *results.File, step int) (figure, string) {
	runs := phaseRuns(f)
	if len(runs) == 0 {
		return figure{}, "no run sampled its signals (the simulator's runs do)"
	}
	if step == 0 || !everyRunHasStep(runs, step) {
		return figure{}, fmt.Sprintf("step %d: not recorded with its phases by every sampled run", step)
	}
	series := make([]phaseSeries, len(runs))
	var span, qMax, cMax, tMax float64
	for i, r := range runs {
		s := stepOf(r, step)
		series[i] = stepSeries(r, s)
		span = max(span, s.EndS-s.StartS)
		for _, p := range series[i].queue {
			qMax = max(qMax, p.Y)
		}
		for _, p := range series[i].cuts {
			cMax = max(cMax, p.Y)
		}
		for _, p := range series[i].trims {
			tMax = max(tMax, p.Y)
		}
	}
	tu, bu, trimU := pickUnit(timeUnits, span), pickUnit(bytesUnits, qMax), pickUnit(bytesUnits, tMax)
	xs := interval{0, span / tu.factor}
	rows := []struct {
		label string
		top   float64
		pick  func(phaseSeries) plotter.XYs
		yf    float64
	}{
		{"queue (" + bu.name + ")", headroom(qMax / bu.factor), func(p phaseSeries) plotter.XYs { return p.queue }, bu.factor},
		{"rate cuts per 100 µs", headroom(cMax), func(p phaseSeries) plotter.XYs { return p.cuts }, 1},
		{"trimmed " + trimU.name + " per 100 µs", headroom(tMax / trimU.factor), func(p phaseSeries) plotter.XYs { return p.trims }, trimU.factor},
	}
	grid := make([][]*plot.Plot, len(rows))
	for ri, row := range rows {
		grid[ri] = make([]*plot.Plot, len(runs))
		for ci, r := range runs {
			s := stepOf(r, step)
			title := ""
			if ri == 0 {
				title = fmt.Sprintf("%s, step %d: %.1f %s", r.Policy, step, (s.EndS-s.StartS)/tu.factor, tu.name)
			}
			p := newPlot(title, "time in the step ("+tu.name+")", row.label, 10)
			compute := interval{0, (s.ComputeEndS - s.StartS) / tu.factor}
			reduce := interval{(s.AllReduceFirstS - s.StartS) / tu.factor, (s.EndS - s.StartS) / tu.factor}
			p.Add(shading([]interval{compute}, 0, row.top, computeShade), shading([]interval{reduce}, 0, row.top, allReduceShade))
			idx := slices.Index(policyOrder(f), r.Policy)
			addSeries(p, stepLine(scaled(row.pick(series[ci]), tu.factor, row.yf), idx), idx)
			setTimeAxis(p, xs, false)
			p.Y.Min, p.Y.Max = 0, row.top
			grid[ri][ci] = p
		}
	}
	seed, _ := firstSeed(f)
	heading := fmt.Sprintf("Step %d, seed %d: bottleneck queue, rate cuts and trims per 100 µs; shaded: compute phase (blue), all-reduce (orange)", step, seed)
	w := max(figureWidth, vg.Length(len(runs))*4*vg.Inch)
	return figure{w: w, h: headingHeight + vg.Length(len(rows))*panelHeight, draw: func(c draw.Canvas) {
		drawGrid(drawHeading(c, heading), grid)
	}}, ""
}
