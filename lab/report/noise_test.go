package report

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/lab/results"
)

// noiseFile is a baseline whose three seeds took 96, 100 and 104 s (mean
// 100 s, standard deviation 4 s: a noise of 4 %) and policies with the
// given training times per seed 1, 2, 3 (a 0 leaves that seed out). TP
// medians are the times over a thousand unless tp is set.
func noiseFile(policies map[string][3]float64, order []string) *results.File {
	f := &results.File{Version: 1, Profile: results.Profile{Name: "tiny"}, Topology: "star", Ranks: 4, Steps: 20,
		Seeds: []uint64{1, 2, 3}, Policies: append([]string{"base"}, order...)}
	add := func(policy string, times [3]float64) {
		for i, s := range times {
			if s == 0 {
				continue
			}
			f.Runs = append(f.Runs, results.Run{Policy: policy, Seed: uint64(i + 1), TrainingTimeS: s,
				TPCompletionMedianS: s / 1000, AllReduceMedianCriticalS: 0.03, AllReduceMedianNonCriticalS: 0.02,
				BudgetInvariantHeld: true, NonGradientBytesExact: true, GradientSumsExact: true})
		}
	}
	add("base", [3]float64{96, 100, 104})
	for _, p := range order {
		add(p, policies[p])
	}
	return f
}

// A change is marked within noise when its mean over seeds is no larger
// than two standard errors: the square root of the baseline's variance
// plus the policy's (at least the baseline's), over the number of seeds,
// relative to the baseline's mean.
func TestNoiseMarksChangesWithinTheMargin(t *testing.T) {
	policies := map[string][3]float64{
		// -16.7, -20, -23.1 %: far beyond a margin of 2 sqrt(16+16) / (100 sqrt 3).
		"fast": {80, 80, 80},
		// +1.0, -1.0, 0 %: inside it (a deviation of sqrt(13) s, less
		// than the baseline's).
		"same": {97, 99, 104},
		// -1.6, -5.5, -9.1 %, mean -5.4 %: inside the margin of 6.5 %
		// only because the policy's deviation of 0 counts as the
		// baseline's 4 s (with its own, the margin would be 4.6 %).
		"floor": {94.5, 94.5, 94.5},
		// -27.1, +10, -13.5 %, mean -10.2 %: its own deviation of 20 s
		// makes the margin 2 sqrt(16+400) / (100 sqrt 3) = 23.6 %; the
		// baseline's alone would make it 6.5 % and the change real.
		"noisy": {70, 110, 90},
		// -37.5, -20, -32.7 %, mean -30.1 %: beyond 2 sqrt(16+100) / (100 sqrt 3).
		"noisy-fast": {60, 80, 70},
		// One seed: -20 % against a margin of 2 sqrt(16+16) / 100.
		"single": {0, 80, 0},
		// One seed: -5 %, inside that margin.
		"single-close": {0, 95, 0},
	}
	order := []string{"fast", "same", "floor", "noisy", "noisy-fast", "single", "single-close"}
	f := noiseFile(policies, order)
	Summarize(f)
	want := map[string]struct {
		mean, margin float64
		within       bool
	}{
		"fast":         {(-16.0/96 - 20.0/100 - 24.0/104) / 3, 2 * math.Sqrt(32) / (100 * math.Sqrt(3)), false},
		"same":         {(1.0/96 - 1.0/100) / 3, 2 * math.Sqrt(32) / (100 * math.Sqrt(3)), true},
		"floor":        {(-1.5/96 - 5.5/100 - 9.5/104) / 3, 2 * math.Sqrt(32) / (100 * math.Sqrt(3)), true},
		"noisy":        {(-26.0/96 + 10.0/100 - 14.0/104) / 3, 2 * math.Sqrt(416) / (100 * math.Sqrt(3)), true},
		"noisy-fast":   {(-36.0/96 - 20.0/100 - 34.0/104) / 3, 2 * math.Sqrt(116) / (100 * math.Sqrt(3)), false},
		"single":       {-0.2, 2 * math.Sqrt(32) / 100, false},
		"single-close": {-0.05, 2 * math.Sqrt(32) / 100, true},
	}
	base := f.Summary[0]
	if math.Abs(base.TrainingTimeNoise-0.04) > 1e-12 || base.TrainingTimeNoiseRuns != 3 {
		t.Errorf("baseline noise %v over %d runs, want 0.04 over 3", base.TrainingTimeNoise, base.TrainingTimeNoiseRuns)
	}
	for _, s := range f.Summary[1:] {
		w := want[s.Policy]
		if math.Abs(s.TrainingTimeChangeMean-w.mean) > 1e-12 || math.Abs(s.TrainingTimeChangeMargin-w.margin) > 1e-12 ||
			s.TrainingTimeWithinNoise != w.within {
			t.Errorf("%s: mean %v, margin %v, within %v; want %v, %v, %v", s.Policy,
				s.TrainingTimeChangeMean, s.TrainingTimeChangeMargin, s.TrainingTimeWithinNoise, w.mean, w.margin, w.within)
		}
		// The TP medians are the times scaled: the same changes and marks.
		if math.Abs(s.TPCompletionChangeMean-w.mean) > 1e-12 || math.Abs(s.TPCompletionChangeMargin-w.margin) > 1e-12 ||
			s.TPCompletionWithinNoise != w.within {
			t.Errorf("%s TP: mean %v, margin %v, within %v; want %v, %v, %v", s.Policy,
				s.TPCompletionChangeMean, s.TPCompletionChangeMargin, s.TPCompletionWithinNoise, w.mean, w.margin, w.within)
		}
	}

	out := tableOf(t, f)
	cells := map[string][]string{
		"base":         {"base", "100", "noise", "±4.0"},
		"fast":         {"fast", "80.0", "-19.9", "±6.5", "(-23.1..-16.7)"},
		"same":         {"same", "100", "0.0", "±6.5", "(-1.0..+1.0)", "~"},
		"floor":        {"floor", "94.5", "-5.4", "±6.5", "(-9.1..-1.6)", "~"},
		"noisy":        {"noisy", "90.0", "-10.2", "±23.6", "(-27.1..+10.0)", "~"},
		"noisy-fast":   {"noisy-fast", "70.0", "-30.1", "±12.4", "(-37.5..-20.0)"},
		"single":       {"single", "80.0", "-20.0", "±11.3"},
		"single-close": {"single-close", "95.0", "-5.0", "±11.3", "~"},
	}
	for policy, want := range cells {
		got := rowCells(t, out, "min..max %", policy)
		if len(got) < len(want) || !reflect.DeepEqual(got[:len(want)], want) || (len(got) > len(want) && got[len(want)] == "~") {
			t.Errorf("%s row %q, want it to start %q (and no ~ after)", policy, got, want)
		}
	}
	if !strings.Contains(out, "\n  ~  ") || strings.Contains(out, "±?") {
		t.Errorf("the legend must explain ~ and nothing is unknown:\n%s", out)
	}
}

// With one seed the noise is unknown, and the table says so rather than
// marking anything.
func TestNoiseUnknownWithOneSeed(t *testing.T) {
	f := handFile()
	f.Seeds = []uint64{1}
	f.Runs = slicesFilter(f.Runs, func(r results.Run) bool { return r.Seed == 1 })
	Summarize(f)
	for _, s := range f.Summary {
		if s.TrainingTimeNoiseRuns != 1 || s.TrainingTimeNoise != 0 || s.TrainingTimeWithinNoise ||
			s.TrainingTimeChangeMargin != 0 || s.TPCompletionWithinNoise || s.TPCompletionChangeMargin != 0 {
			t.Errorf("%s: noise %v over %d runs, margin %v, within %v; want unknown and unmarked", s.Policy,
				s.TrainingTimeNoise, s.TrainingTimeNoiseRuns, s.TrainingTimeChangeMargin, s.TrainingTimeWithinNoise)
		}
	}
	out := tableOf(t, f)
	// 84 s against 100 s; TP 0.5625 s against 0.5 s.
	if got, want := rowCells(t, out, "min..max %", "forgive")[:3], []string{"forgive", "84.0", "-16.0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("forgive row starts %q, want %q", got, want)
	}
	for _, want := range []string{"noise ±?", "-16.0 ±?  ", "+12.5 ±?  ", "\n  ±?  "} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, " ~") {
		t.Errorf("a change is marked with the noise unknown:\n%s", out)
	}
}

func slicesFilter[T any](xs []T, keep func(T) bool) []T {
	var out []T
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// A cell whose population is empty prints n/a, not 0, and the legend
// says why: at --steps 4 or fewer every step is critical, a policy
// without exemption has no exempt flow, a run without tensor-parallel
// exchanges no TP time.
func TestTableNotApplicable(t *testing.T) {
	run := func(policy string, seed uint64, nonCrit, tp float64, exempt int, reobeyed float64) results.Run {
		return results.Run{Policy: policy, Seed: seed, TrainingTimeS: 10 + float64(seed),
			AllReduceMedianCriticalS: 0.03, AllReduceMedianNonCriticalS: nonCrit, TPCompletionMedianS: tp,
			ExemptFlows: exempt, FlagChangesPerExemptFlow: 0.5 * float64(exempt), ReObeyedFrac: reobeyed, ReObeyMeanS: 0.002,
			BudgetInvariantHeld: true, NonGradientBytesExact: true, GradientSumsExact: true,
			Steps: []results.Step{{Step: 1, Critical: true, Invariant: true}, {Step: 2, Critical: true, Invariant: true}}}
	}
	f := &results.File{Version: 1, Profile: results.Profile{Name: "tiny"}, Topology: "star", Ranks: 4, Steps: 2,
		Seeds: []uint64{1, 2}, Policies: []string{"dcqcn", "forgive"},
		Runs: []results.Run{
			run("dcqcn", 1, 0, 0, 0, 0), run("dcqcn", 2, 0, 0, 0, 0),
			// Exempt flows, but none obeyed again.
			run("forgive", 1, 0, 0, 4, 0), run("forgive", 2, 0, 0, 4, 0),
		}}
	Summarize(f)
	out := tableOf(t, f)
	for policy, want := range map[string][]string{
		// 11 and 12 s: a deviation of sqrt(1/2) s around 11.5 s, and a
		// margin of 2 sqrt(1/2 + 1/2) / (11.5 sqrt 2) for no change.
		"dcqcn":   {"dcqcn", "11.5", "noise", "±6.1", "0.00", "n/a", "/", "30.0"},
		"forgive": {"forgive", "11.5", "0.0", "±12.3", "~", "0.00", "n/a", "/", "30.0"},
	} {
		if got := rowCells(t, out, "min..max %", policy)[:len(want)]; !reflect.DeepEqual(got, want) {
			t.Errorf("main row %q, want %q", got, want)
		}
	}
	for policy, want := range map[string][]string{
		"dcqcn":   {"dcqcn", "0", "0", "0", "n/a", "n/a", "0", "n/a", "n/a", "n/a"},
		"forgive": {"forgive", "0", "0", "0", "n/a", "n/a", "4", "2.00", "0.0", "n/a"},
	} {
		if got := rowCells(t, out, "congestion and exemption", policy); !reflect.DeepEqual(got, want) {
			t.Errorf("exemption row %q, want %q", got, want)
		}
	}
	for _, want := range []string{"n/a non-crit", "--steps 4 or fewer", "n/a TP", "n/a exempt", "n/a re-obey", "n/a change"} {
		if !strings.Contains(out, want) {
			t.Errorf("legend lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "n/a crit ") {
		t.Errorf("critical all-reduce times were measured:\n%s", out)
	}

	// A median over the seeds leaves out a run that had nothing to
	// measure rather than counting it as 0.
	f.Runs[1].AllReduceMedianNonCriticalS = 0.04
	f.Runs[3].TPCompletionMedianS = 0.006
	f.Runs[2].ExemptFlows, f.Runs[2].FlagChangesPerExemptFlow = 0, 0
	Summarize(f)
	if got := f.Summary[0].AllReduceNonCritical; got != 0.04 {
		t.Errorf("dcqcn non-critical all-reduce %v, want 0.04 (seed 1 had none)", got)
	}
	if got := f.Summary[1].TPCompletionMedianS; got != 0.006 {
		t.Errorf("forgive TP median %v, want 0.006 (seed 1 had none)", got)
	}
	if got := f.Summary[1].FlagChangesPerExemptFlow; got != 2 {
		t.Errorf("forgive flag changes per exempt flow %v, want 2 (seed 1 had no exempt flow)", got)
	}
}
