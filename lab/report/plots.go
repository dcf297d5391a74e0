package report

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/forgive-emu/forgive/lab/results"
)

// ErrPlot is returned by Plots when drawing a plot fails.
var ErrPlot = errors.New("report: plot failed")

// The plots' file names, as docs/results.md describes them.
const (
	StepTimePNG     = "step-time.png"
	AllReduceCDFPNG = "allreduce-cdf.png"
	RatePNG         = "rate.png"
	OccupancyPNG    = "occupancy.png"
)

// figure is a plot ready to render: its size and how to draw it.
type figure struct {
	w, h vg.Length
	draw func(draw.Canvas)
}

// plotSpec builds one figure from a file, or says why there is nothing to
// draw.
type plotSpec struct {
	file  string
	build func(*results.File) (fig figure, skip string)
}

var plotSpecs = []plotSpec{
	{StepTimePNG, stepTimeFigure},
	{AllReduceCDFPNG, allReduceCDFFigure},
	{RatePNG, rateFigure},
	{OccupancyPNG, occupancyFigure},
}

// Plots writes step-time.png, allreduce-cdf.png, rate.png and occupancy.png
// into dir (creating it) and returns the paths written, in that order. A
// plot whose series are all empty is skipped, not an error; SkippedPlots
// says which and why. The time-series plots (rate, occupancy) show the
// first seed.
func Plots(dir string, f *results.File) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var written []string
	for _, spec := range plotSpecs {
		data, skip, err := render(spec, f)
		if err != nil {
			return written, fmt.Errorf("%w: %s: %v", ErrPlot, spec.file, err)
		}
		if skip != "" {
			continue
		}
		path := filepath.Join(dir, spec.file)
		if err := writeAtomic(path, data); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	// A run that sampled its signals (the simulator's) adds the plot of
	// a step's phases; other sweeps have no such plot to skip.
	if step := PhaseStep(f); step > 0 {
		path := filepath.Join(dir, StepPhasesPNG)
		if err := WriteStepPhasesPNG(path, f, step); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	// A sweep of two jobs adds its own plot; other sweeps have no such
	// plot to skip.
	if len(TwoJobs(f)) > 0 {
		spec := plotSpec{TwoJobsPNG, twoJobsFigure}
		data, skip, err := render(spec, f)
		if err != nil {
			return written, fmt.Errorf("%w: %s: %v", ErrPlot, spec.file, err)
		}
		if skip == "" {
			path := filepath.Join(dir, spec.file)
			if err := writeAtomic(path, data); err != nil {
				return written, err
			}
			written = append(written, path)
		}
	}
	return written, nil
}

// SkippedPlots returns a note, "file: reason", for every plot Plots would
// skip for lack of data.
func SkippedPlots(f *results.File) []string {
	var notes []string
	for _, spec := range plotSpecs {
		if _, skip := spec.build(f); skip != "" {
			notes = append(notes, spec.file+": "+skip)
		}
	}
	return notes
}

// render draws one plot into PNG bytes. The plotting library panics on
// some inputs it cannot draw; a results file is input, so a panic is
// turned into an error rather than ending the program after a long run.
func render(spec plotSpec, f *results.File) (data []byte, skip string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	fig, skip := spec.build(f)
	if skip != "" {
		return nil, skip, nil
	}
	c := vgimg.NewWith(vgimg.UseWH(fig.w, fig.h), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	fig.draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), "", nil
}

// stepTimeFigure: the mean step time of each step per policy, as lines
// with markers over shaded critical steps.
func stepTimeFigure(f *results.File) (figure, string) {
	var lines []policySeries
	for i, policy := range policyOrder(f) {
		if xys := meanStepTimes(runsOf(f.Runs, policy)); len(xys) > 0 {
			lines = append(lines, policySeries{index: i, policy: policy, xys: xys})
		}
	}
	if len(lines) == 0 {
		return figure{}, "no run recorded any step"
	}
	x, y, _ := bounds(seriesOf(lines)...)
	u := pickUnit(timeUnits, y.hi)
	top := headroom(y.hi / u.factor)

	p := newPlot("Step time per training step, mean over seeds", "training step", "step time ("+u.name+")", 12)
	legend := sideLegend()
	if spans := criticalSpans(f.Runs); len(spans) > 0 {
		shade := shading(spans, 0, top, criticalShade)
		p.Add(shade)
		legend.Add("critical step", shade)
	}
	for _, l := range lines {
		line, marks := lineWithMarks(scaled(l.xys, 1, u.factor), l.index)
		p.Add(line, marks)
		legend.Add(l.policy, line, marks)
	}
	p.X.Min, p.X.Max = x.lo-0.6, x.hi+0.6
	p.Y.Min, p.Y.Max = 0, top
	p.X.Tick.Marker = plot.TickerFunc(integerTicks)
	return withLegend(p, legend, 5.5*vg.Inch), ""
}

// allReduceCDFFigure: the CDF of every rank's all-reduce completion time,
// one panel per class of step (non-critical solid, critical dashed), one
// line per policy, the two panels on one time axis.
func allReduceCDFFigure(f *results.File) (figure, string) {
	var classes [2][]policySeries // 0 non-critical, 1 critical
	for i, policy := range policyOrder(f) {
		runs := runsOf(f.Runs, policy)
		for class, critical := range []bool{false, true} {
			if xs := allReduceTimes(runs, critical); len(xs) > 0 {
				classes[class] = append(classes[class], policySeries{index: i, policy: policy, xys: ecdf(xs)})
			}
		}
	}
	x, _, ok := bounds(append(seriesOf(classes[0]), seriesOf(classes[1])...)...)
	if !ok {
		return figure{}, "no step recorded an all-reduce time"
	}
	u := pickUnit(timeUnits, x.hi)
	legend := sideLegend()
	var panels [2]*plot.Plot
	for class, name := range []string{"non-critical steps", "critical steps"} {
		p := newPlot("All-reduce completion, "+name, "completion time ("+u.name+")", "fraction of all-reduces", 11)
		for _, l := range classes[class] {
			line := stepLine(scaled(l.xys, u.factor, 1), l.index)
			if class == 1 {
				line.Dashes = dashes
			}
			p.Add(line)
			if class == 0 || !hasPolicy(classes[0], l.policy) {
				legend.Add(l.policy, line)
			}
		}
		if len(classes[class]) == 0 {
			p.Title.Text += ": no samples"
		}
		setTimeAxis(p, interval{x.lo / u.factor, x.hi / u.factor}, true)
		p.Y.Min, p.Y.Max = 0, 1
		panels[class] = p
	}
	return figure{w: figureWidth + legendWidth, h: 5 * vg.Inch, draw: func(c draw.Canvas) {
		body, side := splitLegend(c)
		drawGrid(body, [][]*plot.Plot{{panels[0], panels[1]}})
		legend.Draw(side)
	}}, ""
}

// rateFigure: one sender's rate over time in the first seed, one panel per
// policy on shared axes, with the periods the flow was exempt shaded.
func rateFigure(f *results.File) (figure, string) {
	seed, runs, missing := firstSeedSeries(f, func(r *results.Run) plotter.XYs { return ratePoints(r.Rate) })
	if len(runs) == 0 {
		return figure{}, noSeries(f, seed, "rate")
	}
	x, y, _ := bounds(seriesOf(runs)...)
	tu, ru := pickUnit(timeUnits, max(abs(x.lo), abs(x.hi))), pickUnit(rateUnits, y.hi)
	top := headroom(y.hi / ru.factor)
	xs := interval{x.lo / tu.factor, x.hi / tu.factor}

	var plots []*plot.Plot
	for _, r := range runs {
		p := newPlot(panelTitle(r.policy, r.run.RateFlow), "time ("+tu.name+")", "rate ("+ru.name+")", 10)
		if spans := exemptSpans(r.run.Rate); len(spans) > 0 {
			p.Add(shading(scaledSpans(spans, tu.factor), 0, top, exemptShade))
		}
		addSeries(p, stepLine(scaled(r.xys, tu.factor, ru.factor), r.index), r.index)
		setTimeAxis(p, xs, false)
		p.Y.Min, p.Y.Max = 0, top
		plots = append(plots, p)
	}
	heading := fmt.Sprintf("Sending rate of one sender, seed %d; shaded: the flow was exempt from congestion control", seed)
	return gridFigure(withMissing(heading, missing), plots), ""
}

// occupancyFigure: the bottleneck queue's occupancy over time in the first
// seed, one panel per policy on shared axes, with the queue's ECN marking
// threshold and capacity dashed where the run recorded them.
func occupancyFigure(f *results.File) (figure, string) {
	seed, runs, missing := firstSeedSeries(f, func(r *results.Run) plotter.XYs { return queuePoints(r.Occupancy) })
	if len(runs) == 0 {
		return figure{}, noSeries(f, seed, "queue")
	}
	x, y, _ := bounds(seriesOf(runs)...)
	yMax := y.hi
	for _, r := range runs {
		for _, t := range []float64{r.run.QueueLimitBytes, r.run.QueueMarkBytes} {
			if finite(t) {
				yMax = max(yMax, t)
			}
		}
	}
	tu, bu := pickUnit(timeUnits, max(abs(x.lo), abs(x.hi))), pickUnit(bytesUnits, yMax)
	top := headroom(yMax / bu.factor)
	xs := interval{x.lo / tu.factor, x.hi / tu.factor}

	var plots []*plot.Plot
	for _, r := range runs {
		p := newPlot(panelTitle(r.policy, r.run.OccupancyPort), "time ("+tu.name+")", "queue ("+bu.name+")", 10)
		addSeries(p, plainLine(scaled(r.xys, tu.factor, bu.factor), r.index), r.index)
		for _, t := range []struct {
			bytes float64
			color color.Color
		}{{r.run.QueueMarkBytes, markColor}, {r.run.QueueLimitBytes, limitColor}} {
			if t.bytes > 0 && finite(t.bytes) {
				p.Add(threshold(xs, t.bytes/bu.factor, t.color))
			}
		}
		setTimeAxis(p, xs, false)
		p.Y.Min, p.Y.Max = 0, top
		plots = append(plots, p)
	}
	heading := fmt.Sprintf("Bottleneck queue occupancy, seed %d; dashed: ECN marking threshold (orange), capacity (red)", seed)
	return gridFigure(withMissing(heading, missing), plots), ""
}

// firstSeedSeries picks, for every policy in order, its run of the first
// seed and that run's series; policies whose run is missing or recorded
// nothing are returned as missing.
func firstSeedSeries(f *results.File, series func(*results.Run) plotter.XYs) (seed uint64, runs []policySeries, missing []string) {
	seed, ok := firstSeed(f)
	if !ok {
		return 0, nil, nil
	}
	for i, policy := range policyOrder(f) {
		r := runWithSeed(f.Runs, policy, seed)
		if r == nil {
			missing = append(missing, policy)
			continue
		}
		if xys := series(r); len(xys) > 0 {
			runs = append(runs, policySeries{index: i, policy: policy, xys: xys, run: r})
		} else {
			missing = append(missing, policy)
		}
	}
	return seed, runs, missing
}

// noSeries is the note for a time-series plot with nothing to draw.
func noSeries(f *results.File, seed uint64, what string) string {
	if len(f.Runs) == 0 {
		return "no runs"
	}
	return fmt.Sprintf("no run of seed %d recorded a %s series", seed, what)
}

func runWithSeed(runs []results.Run, policy string, seed uint64) *results.Run {
	for i := range runs {
		if runs[i].Policy == policy && runs[i].Seed == seed {
			return &runs[i]
		}
	}
	return nil
}

func hasPolicy(series []policySeries, policy string) bool {
	for _, s := range series {
		if s.policy == policy {
			return true
		}
	}
	return false
}

func panelTitle(policy, label string) string {
	if label == "" {
		return policy
	}
	return policy + " (" + label + ")"
}

func withMissing(heading string, missing []string) string {
	if len(missing) == 0 {
		return heading
	}
	return heading + " (no samples: " + strings.Join(missing, ", ") + ")"
}

func scaledSpans(spans []interval, factor float64) []interval {
	out := make([]interval, len(spans))
	for i, s := range spans {
		out[i] = interval{s.lo / factor, s.hi / factor}
	}
	return out
}

func abs(x float64) float64 { return max(x, -x) }
