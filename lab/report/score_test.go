package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/lab/results"
)

// seedRuns builds a reading whose runs measure exactly the seed's
// figures, seed by seed (three seeds): policy -> the run of seed 1, the
// others alike.
func seedRuns(policies ...string) (worst, nonBlocking *results.File) {
	run := func(policy string, time, givenUp float64) results.Run {
		return results.Run{Policy: policy, TrainingTimeS: time, GradientBytesGivenUpFrac: givenUp / 100,
			AllReduceMedianNonCriticalS: 32.3e-3, AllReduceMedianCriticalS: 30e-3, TPCompletionMedianS: 40e-3,
			TrimmedBytesFrac: 0.03, RTOs: 100, CNPs: 300, BudgetInvariantHeld: true, RetransmittedBytesFrac: 0.03}
	}
	all := map[string]results.Run{
		"shed-tight": run("shed-tight", 1, 0.5), "dcqcn": run("dcqcn", 1, 0),
		"forgive-novest": run("forgive-novest", 1-0.0965, 8.0), "forgive-p0.25": run("forgive-p0.25", 1-0.1635, 5.5),
		"shed-schedule": run("shed-schedule", 1-0.0285, 8.1), "shed-loose": run("shed-loose", 1-0.0325, 10.1),
	}
	f := run("forgive", 1-0.164, 7.56)
	f.AllReduceMedianNonCriticalS, f.TrimmedBytesFrac, f.RetransmittedBytesFrac = 17.4e-3, 0.07, 0.055
	f.RTOs, f.CNPs, f.FlagChangesPerExemptFlow, f.ReObeyedFrac, f.ReObeyMeanS = 40, 100, 0.5, 0.19, 0.17e-3
	f.TrafficFirstFifthTrimmedBytes, f.TrafficLastFifthTrimmedBytes = 12_300, 1_800
	f.TrafficFirstFifthForgivenFrac, f.TrafficLastFifthForgivenFrac = 0.18, 0.60
	all["forgive"] = f
	z := run("forgive-p0", 1-0.1535, 0)
	z.RetransmittedBytesFrac = 0.10
	all["forgive-p0"] = z
	worst, nonBlocking = &results.File{}, &results.File{}
	for _, p := range policies {
		for seed := uint64(1); seed <= 3; seed++ {
			r := all[p]
			r.Seed = seed
			worst.Runs = append(worst.Runs, r)
		}
	}
	nb := map[string]results.Run{"shed-tight": run("shed-tight", 1, 0.5), "forgive": run("forgive", 0.94, 1.15)}
	nbt := nb["shed-tight"]
	nbt.TrimmedBytesFrac, nbt.TrimmedBytes = 0.0003, 1000
	nb["shed-tight"] = nbt
	nbf := nb["forgive"]
	nbf.TrimmedBytes = 10_000
	nb["forgive"] = nbf
	for _, p := range []string{"shed-tight", "forgive"} {
		for seed := uint64(1); seed <= 3; seed++ {
			r := nb[p]
			r.Seed = seed
			nonBlocking.Runs = append(nonBlocking.Runs, r)
		}
	}
	return worst, nonBlocking
}

var everyPolicy = []string{"shed-tight", "dcqcn", "forgive", "forgive-novest", "forgive-p0.25", "forgive-p0", "shed-schedule", "shed-loose"}

// A reading that measures the seed's own figures scores every one of the
// 25 inside the seed's spread.
func TestScoreOfTheSeedsOwnFiguresIsAllInside(t *testing.T) {
	w, nb := seedRuns(everyPolicy...)
	sc := Score([]*results.File{w}, []*results.File{nb})
	if len(sc.Figures) != 25 || sc.Inside != 25 || sc.Baseline != "shed-tight" {
		var b bytes.Buffer
		_ = WriteScore(&b, sc)
		t.Fatalf("%d figures, %d inside, baseline %s:\n%s", len(sc.Figures), sc.Inside, sc.Baseline, b.String())
	}
}

// The verdict follows the figure: FORGIVE's cut within a factor of two
// of the seed's is the same sign and order, a slowdown is different.
func TestScoreVerdictFollowsTheCut(t *testing.T) {
	for _, tc := range []struct {
		time float64
		want Verdict
	}{{1 - 0.164, Inside}, {1 - 0.10, SameOrder}, {1 - 0.004, Different}, {1.01, Different}, {1 - 0.40, Different}} {
		w, nb := seedRuns(everyPolicy...)
		for i := range w.Runs {
			if w.Runs[i].Policy == "forgive" {
				w.Runs[i].TrainingTimeS = tc.time
			}
		}
		sc := Score([]*results.File{w}, []*results.File{nb})
		if got := sc.Figures[0].Verdict; got != tc.want {
			t.Errorf("training time %v: row 1 %q, want %q", tc.time, got, tc.want)
		}
	}
}

// A screening cell runs only dcqcn and forgive: the changes are measured
// against dcqcn, and the rows that need other policies or the
// non-blocking fabric are not run.
func TestScoreOfAScreeningCell(t *testing.T) {
	w, _ := seedRuns("dcqcn", "forgive")
	sc := Score([]*results.File{w}, nil)
	if sc.Baseline != "dcqcn" {
		t.Fatalf("baseline %s, want dcqcn", sc.Baseline)
	}
	notRun := map[int]bool{5: true, 6: true, 7: true, 9: true, 10: true, 11: true, 12: true, 13: true, 14: true, 15: true, 23: true, 24: true, 25: true}
	for _, f := range sc.Figures {
		if (f.Verdict == NotRun) != notRun[f.Row] {
			t.Errorf("row %d (%s): %s", f.Row, f.What, f.Verdict)
		}
	}
	if sc.NotRun != len(notRun) || sc.Inside+sc.SameOrder+sc.Different != 25-len(notRun) {
		t.Fatalf("counts %+v", sc)
	}
	var b bytes.Buffer
	if err := WriteScore(&b, sc); err != nil || !strings.Contains(b.String(), "| 1 | training-time cut, forgive vs dcqcn |") {
		t.Fatalf("table: %v\n%s", err, b.String())
	}
}

func TestInRangeAndAbout(t *testing.T) {
	lo, hi := about(0.17, 2)
	if lo != 0.165 || hi < 0.175-1e-12 || hi > 0.175+1e-12 {
		t.Fatalf("about(0.17, 2) = [%v, %v]", lo, hi)
	}
	for _, tc := range []struct {
		vals   []float64
		lo, hi float64
		want   Verdict
	}{
		{[]float64{-16.2, -16.5}, -16.7, -16.1, Inside},
		{[]float64{-16.2, -16.9}, -16.7, -16.1, SameOrder},
		{[]float64{-9}, -16.7, -16.1, SameOrder},
		{[]float64{-8}, -16.7, -16.1, Different},
		{[]float64{2}, -16.7, -16.1, Different},
		{[]float64{1.5}, -1.1, 0.8, Different},
		{nil, 1, 2, NotRun},
	} {
		if got := inRange(tc.vals, tc.lo, tc.hi); got != tc.want {
			t.Errorf("inRange(%v, %v, %v) = %s, want %s", tc.vals, tc.lo, tc.hi, got, tc.want)
		}
	}
}
