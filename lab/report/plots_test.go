package report

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/forgive-emu/forgive/lab/results"
)

// decodePNG reads a written plot and fails the test unless it is a PNG.
func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		t.Fatalf("%s is empty", path)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return img
}

// hasColor reports whether some pixel is within tol of c in every channel.
func hasColor(img image.Image, c color.Color, tol int) bool {
	want := color.NRGBAModel.Convert(c).(color.NRGBA)
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			got := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			if near(got.R, want.R, tol) && near(got.G, want.G, tol) && near(got.B, want.B, tol) {
				return true
			}
		}
	}
	return false
}

func near(a, b uint8, tol int) bool { return abs(float64(a)-float64(b)) <= float64(tol) }

// overWhite is the colour a translucent shade takes on a white background.
func overWhite(c color.NRGBA) color.NRGBA {
	a := float64(c.A) / 255
	blend := func(v uint8) uint8 { return uint8(math.Round(255*(1-a) + float64(v)*a)) }
	return color.NRGBA{blend(c.R), blend(c.G), blend(c.B), 0xff}
}

func TestPlotsWritesEveryPlot(t *testing.T) {
	policies := []string{"dcqcn", "shed-tight", "shed-loose", "shed-schedule", "forgive"}
	f := synthFile(policies, []uint64{1, 2}, 4)
	dir := t.TempDir()
	paths, err := Plots(dir, f)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	if want := []string{StepTimePNG, AllReduceCDFPNG, RatePNG, OccupancyPNG}; !reflect.DeepEqual(names, want) {
		t.Fatalf("wrote %v, want %v", names, want)
	}

	// 13 in by 5.5 in at 100 dpi with the side legend; the small
	// multiples are 11 in wide, and five panels take two columns and
	// three rows of 2.2 in under a 0.45 in heading.
	wantSize := map[string]image.Point{
		StepTimePNG:     {1300, 550},
		AllReduceCDFPNG: {1300, 500},
		RatePNG:         {1100, 705},
		OccupancyPNG:    {1100, 705},
	}
	images := map[string]image.Image{}
	for _, p := range paths {
		img := decodePNG(t, p)
		name := filepath.Base(p)
		if got := img.Bounds().Size(); got != wantSize[name] {
			t.Errorf("%s is %v pixels, want %v", name, got, wantSize[name])
		}
		images[name] = img
	}

	// Every policy's line is drawn in its own colour.
	for i, policy := range policies {
		if !hasColor(images[StepTimePNG], colorOf(i), 0) {
			t.Errorf("step-time.png has no pixel of %s's colour %v", policy, colorOf(i))
		}
	}
	// The critical steps are shaded, and so are the exempt periods (only
	// forgive, the fifth policy, has any in synthFile).
	if !hasColor(images[StepTimePNG], overWhite(criticalShade), 2) {
		t.Error("step-time.png: no critical-step shading")
	}
	if !hasColor(images[RatePNG], overWhite(exemptShade), 2) {
		t.Error("rate.png: no exempt shading")
	}
	// The queue's thresholds are drawn.
	if !hasColor(images[OccupancyPNG], limitColor, 0) || !hasColor(images[OccupancyPNG], markColor, 0) {
		t.Error("occupancy.png: thresholds missing")
	}
	if notes := SkippedPlots(f); len(notes) != 0 {
		t.Errorf("SkippedPlots = %v for a full file", notes)
	}
}

// Without an exempt sample nothing is shaded in rate.png: the shading
// follows the data, it is not decoration.
func TestRatePlotShadesOnlyExemptPeriods(t *testing.T) {
	f := synthFile([]string{"dcqcn", "shed-tight"}, []uint64{1}, 2)
	paths, err := Plots(t.TempDir(), f)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if filepath.Base(p) == RatePNG && hasColor(decodePNG(t, p), overWhite(exemptShade), 2) {
			t.Error("rate.png shades a run that was never exempt")
		}
	}
}

// "Handle empty series gracefully": a plot with nothing to draw is skipped
// with a note, and the others are still written.
func TestPlotsSkipEmptySeries(t *testing.T) {
	f := handFile() // summary numbers only: no steps, no series
	dir := t.TempDir()
	paths, err := Plots(dir, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 0 {
		t.Errorf("wrote %v from a file without series", paths)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("dir holds %d entries, want none", len(entries))
	}
	notes := SkippedPlots(f)
	if len(notes) != 4 {
		t.Fatalf("notes %q, want one per plot", notes)
	}
	for i, file := range []string{StepTimePNG, AllReduceCDFPNG, RatePNG, OccupancyPNG} {
		if !strings.HasPrefix(notes[i], file+": ") {
			t.Errorf("note %d = %q, want it to start with %s", i, notes[i], file)
		}
	}

	// Steps but no sampled series: the step plots only.
	f = synthFile([]string{"dcqcn", "forgive"}, []uint64{1}, 2)
	for i := range f.Runs {
		f.Runs[i].Rate, f.Runs[i].Occupancy = nil, nil
	}
	paths, err = Plots(t.TempDir(), f)
	if err != nil || len(paths) != 2 {
		t.Fatalf("Plots = %v, %v; want step-time and allreduce-cdf", paths, err)
	}
	if notes := SkippedPlots(f); len(notes) != 2 || !strings.Contains(notes[0], "seed 1") {
		t.Errorf("notes %q, want rate and occupancy skipped for seed 1", notes)
	}

	// No runs at all.
	if paths, err := Plots(t.TempDir(), &results.File{}); err != nil || len(paths) != 0 {
		t.Errorf("empty file: %v, %v", paths, err)
	}
	if notes := SkippedPlots(&results.File{}); len(notes) != 4 || notes[2] != RatePNG+": no runs" {
		t.Errorf("empty file notes %q", notes)
	}
}

// Data a real run can produce at the edges: one sample, a flat zero queue,
// NaN samples, a single step, all-reduce times spanning decades (a log
// axis), a policy with no runs. None of it may fail or panic.
func TestPlotsOddData(t *testing.T) {
	f := synthFile([]string{"dcqcn", "gbn"}, []uint64{7}, 2)
	f.Policies = append(f.Policies, "never-ran")
	f.Runs[0].Rate = []results.RatePoint{{TS: 1, BPS: 5e8, Exempt: true}}
	f.Runs[0].Occupancy = []results.QueuePoint{{TS: 0}, {TS: 1}, {TS: math.NaN(), Bytes: 3}}
	f.Runs[0].QueueMarkBytes, f.Runs[0].QueueLimitBytes = 0, math.Inf(1)
	f.Runs[1].Steps = f.Runs[1].Steps[:1]
	f.Runs[1].Steps[0].AllReduceS = []float64{1.8, 0.029, math.NaN(), -1, 0}
	f.Runs[1].Rate = []results.RatePoint{{TS: math.Inf(1), BPS: 1}, {TS: 2, BPS: math.NaN()}}
	paths, err := Plots(t.TempDir(), f)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 4 {
		t.Errorf("wrote %v, want all four", paths)
	}
	for _, p := range paths {
		decodePNG(t, p)
	}
}

func TestMeanStepTimes(t *testing.T) {
	a := &results.Run{Steps: []results.Step{{Step: 2, TimeS: 3}, {Step: 1, TimeS: 1}}}
	b := &results.Run{Steps: []results.Step{{Step: 1, TimeS: 2}, {Step: 3, TimeS: math.NaN()}, {Step: 3, TimeS: 4}}}
	got := meanStepTimes([]*results.Run{a, b})
	want := plotter.XYs{{X: 1, Y: 1.5}, {X: 2, Y: 3}, {X: 3, Y: 4}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("meanStepTimes = %v, want %v", got, want)
	}
}

// "I treat steps 1, 2, 3 and 20 of the 20 as critical": two shaded spans.
func TestCriticalSpans(t *testing.T) {
	var steps []results.Step
	for s := 1; s <= 20; s++ {
		steps = append(steps, results.Step{Step: s, Critical: s <= 3 || s == 20})
	}
	got := criticalSpans([]results.Run{{Steps: steps}, {Steps: steps[:5]}})
	want := []interval{{0.5, 3.5}, {19.5, 20.5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("criticalSpans = %v, want %v", got, want)
	}
}

func TestAllReduceTimesSplitsByClass(t *testing.T) {
	r := &results.Run{Steps: []results.Step{
		{Critical: true, AllReduceS: []float64{0.03, 0.04}},
		{AllReduceS: []float64{0.02, 0, math.Inf(1)}},
		{AllReduceS: []float64{0.01}},
	}}
	if got := allReduceTimes([]*results.Run{r}, true); !reflect.DeepEqual(got, []float64{0.03, 0.04}) {
		t.Errorf("critical = %v", got)
	}
	if got := allReduceTimes([]*results.Run{r}, false); !reflect.DeepEqual(got, []float64{0.02, 0.01}) {
		t.Errorf("non-critical = %v, want the positive finite times", got)
	}
}

func TestECDF(t *testing.T) {
	got := ecdf([]float64{3, 1, 2, 2})
	want := plotter.XYs{{X: 1, Y: 0}, {X: 1, Y: 0.25}, {X: 2, Y: 0.5}, {X: 2, Y: 0.75}, {X: 3, Y: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ecdf = %v, want %v", got, want)
	}
	if ecdf(nil) != nil {
		t.Error("ecdf of nothing must be empty")
	}
}

// An exempt period runs from the first exempt sample to the next sample
// that obeys again, or to the end of the series.
func TestExemptSpans(t *testing.T) {
	pts := []results.RatePoint{
		{TS: 0}, {TS: 1, Exempt: true}, {TS: 2, Exempt: true}, {TS: 3},
		{TS: 4, Exempt: true}, {TS: 5},
		{TS: 6, Exempt: true}, {TS: 7, Exempt: true},
	}
	want := []interval{{1, 3}, {4, 5}, {6, 7}}
	if got := exemptSpans(pts); !reflect.DeepEqual(got, want) {
		t.Errorf("exemptSpans = %v, want %v", got, want)
	}
	if got := exemptSpans(pts[:1]); got != nil {
		t.Errorf("never exempt: %v", got)
	}
}

func TestPickUnit(t *testing.T) {
	for _, tc := range []struct {
		units []unit
		max   float64
		want  string
	}{
		{timeUnits, 2.5, "s"}, {timeUnits, 0.0323, "ms"}, {timeUnits, 5e-5, "µs"}, {timeUnits, 0, "µs"},
		{rateUnits, 4e11, "Gb/s"}, {rateUnits, 9.5e8, "Mb/s"},
		{bytesUnits, 4 << 20, "MiB"}, {bytesUnits, 800 << 10, "KiB"},
	} {
		if got := pickUnit(tc.units, tc.max).name; got != tc.want {
			t.Errorf("pickUnit(%v) = %s, want %s", tc.max, got, tc.want)
		}
	}
}

func TestIntegerTicks(t *testing.T) {
	ticks := integerTicks(0.4, 20.6)
	if len(ticks) != 20 || ticks[0].Value != 1 || ticks[19].Value != 20 || ticks[0].Label != "1" {
		t.Errorf("steps 1..20: %v", ticks)
	}
	ticks = integerTicks(0, 400)
	var labels int
	for _, tk := range ticks {
		if tk.Label != "" {
			labels++
		}
	}
	if labels < 15 || labels > 21 {
		t.Errorf("%d labels over 401 steps, want about 20", labels)
	}
	// Step numbers a run would never use must not loop for long.
	if ticks := integerTicks(1, 9e18); len(ticks) == 0 || len(ticks) > 100 {
		t.Errorf("%d ticks over 9e18 steps", len(ticks))
	}
	if ticks := integerTicks(2, 1); ticks != nil {
		t.Errorf("empty range: %v", ticks)
	}
}

// A file with absurd step numbers still draws.
func TestPlotsHugeStepNumbers(t *testing.T) {
	f := synthFile([]string{"dcqcn"}, []uint64{1}, 1)
	f.Runs[0].Steps[0].Step = math.MaxInt64
	f.Runs[0].Steps[1].Step = math.MinInt64
	if _, err := Plots(t.TempDir(), f); err != nil {
		t.Fatal(err)
	}
}
