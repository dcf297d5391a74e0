package report

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/forgive-emu/forgive/lab/results"
)

// labPolicies are the policies forgivectl lab runs, baseline first.
var labPolicies = []string{
	"dcqcn", "shed-tight", "shed-loose", "shed-schedule", "forgive", "forgive-p0.25",
	"forgive-p0", "forgive-novest", "forgive-noexempt", "trim-nocc", "gbn",
}

// synthFile is a lab-shaped file with every series filled: 20 steps with
// the seed's critical steps, per-rank all-reduce times, a rate series that
// is exempt part of the time and a queue series. The numbers are made up
// (deterministically from the seeds) and only need to look like a run.
func synthFile(policies []string, seeds []uint64, ranks int) *results.File {
	f := &results.File{
		Version:  1,
		Created:  time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		Profile:  results.Profile{Name: "synthetic", Derived: map[string]string{"link": "1Gb/s", "buffer": "64KiB"}},
		Topology: "leaf-spine-2x4",
		Ranks:    ranks,
		Steps:    20,
		Seeds:    seeds,
		Policies: policies,
	}
	for pi, policy := range policies {
		for _, seed := range seeds {
			f.Runs = append(f.Runs, synthRun(policy, pi, seed, ranks))
		}
	}
	return f
}

func synthRun(policy string, pi int, seed uint64, ranks int) results.Run {
	rng := rand.New(rand.NewPCG(seed, uint64(pi)))
	speed := 1 - 0.015*float64(pi) // later policies a little faster
	r := results.Run{
		Policy: policy, Seed: seed, Profile: "synthetic", Topology: "leaf-spine-2x4",
		RateFlow: "rank 3 to rank 5", OccupancyPort: "leaf0 uplink",
		QueueMarkBytes: 16 << 10, QueueLimitBytes: 64 << 10,
		BudgetInvariantHeld: true, NonGradientBytesExact: true, GradientSumsExact: true,
	}
	for step := 1; step <= 20; step++ {
		critical := step <= 3 || step == 20
		s := results.Step{Step: step, Critical: critical, Invariant: true}
		for range ranks {
			ar := 0.032 * speed * (0.8 + 0.4*rng.Float64())
			if critical {
				ar = 0.033 * (0.8 + 0.4*rng.Float64())
			}
			s.AllReduceS = append(s.AllReduceS, ar)
		}
		s.TimeS = 0.1 + s.AllReduceS[0]
		r.TrainingTimeS += s.TimeS
		r.Steps = append(r.Steps, s)
	}
	for i := range 400 {
		t := float64(i) * 0.005
		exempt := pi >= 4 && math.Mod(t, 0.4) < 0.25
		bps := 1e9 * (0.3 + 0.2*math.Sin(t*7) + 0.1*rng.Float64())
		if exempt {
			bps = 1e9 * (0.85 + 0.1*rng.Float64())
		}
		r.Rate = append(r.Rate, results.RatePoint{TS: t, BPS: bps, Exempt: exempt})
		r.Occupancy = append(r.Occupancy, results.QueuePoint{TS: t, Bytes: float64(60<<10) * rng.Float64() * (0.5 + 0.5*math.Sin(t*3))})
	}
	// The run's medians, as the recorder takes them: over every rank of
	// every step of the class.
	var crit, nonCrit []float64
	for _, s := range r.Steps {
		if s.Critical {
			crit = append(crit, s.AllReduceS...)
		} else {
			nonCrit = append(nonCrit, s.AllReduceS...)
		}
	}
	r.AllReduceMedianCriticalS, r.AllReduceMedianNonCriticalS = median(crit), median(nonCrit)
	r.TPCompletionMedianS = 0.002 * speed * (0.9 + 0.2*rng.Float64())
	return r
}
