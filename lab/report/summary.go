package report

import (
	"slices"

	"github.com/forgive-emu/forgive/lab/results"
)

// Summarize fills f.Summary from f.Runs, one entry per policy in the order
// of f.Policies (policies that ran but are not listed follow, in the order
// of their first run). The first policy is the baseline: a policy's change
// in training time is, for each seed it shares with the baseline,
// (policy_seed - baseline_seed) / baseline_seed, so a cut is negative.
//
// A policy listed without runs gets an entry with Seeds 0 and every figure
// zero, so a table shows it missing rather than dropping it. Summarize
// never produces NaN or infinity: results.json must stay encodable.
func Summarize(f *results.File) {
	f.Summary = summaries(f)
}

// summaries computes what Summarize stores, leaving f alone.
func summaries(f *results.File) []results.Summary {
	order := policyOrder(f)
	if len(order) == 0 {
		return nil
	}
	baseline := runsOf(f.Runs, order[0])
	out := make([]results.Summary, 0, len(order))
	for _, policy := range order {
		out = append(out, summarize(policy, runsOf(f.Runs, policy), baseline))
	}
	return out
}

// policyOrder is f.Policies followed by any policy that only appears in
// the runs.
func policyOrder(f *results.File) []string {
	order := make([]string, 0, len(f.Policies))
	for _, p := range f.Policies {
		if !slices.Contains(order, p) {
			order = append(order, p)
		}
	}
	for _, r := range f.Runs {
		if !slices.Contains(order, r.Policy) {
			order = append(order, r.Policy)
		}
	}
	return order
}

// runsOf returns the runs of one policy in file order.
func runsOf(runs []results.Run, policy string) []*results.Run {
	var out []*results.Run
	for i := range runs {
		if runs[i].Policy == policy {
			out = append(out, &runs[i])
		}
	}
	return out
}

func summarize(policy string, runs, baseline []*results.Run) results.Summary {
	s := results.Summary{Policy: policy, Seeds: len(runs)}
	if len(runs) == 0 {
		return s
	}
	training := func(r *results.Run) float64 { return r.TrainingTimeS }
	s.TrainingTimeChange, s.TrainingTimeChangeSeeds = changes(runs, baseline, training)
	s.TrainingTimeChangeMin, s.TrainingTimeChangeMax = minMax(s.TrainingTimeChange)
	s.TrainingTimeMeanS = mean(runs, training)

	tp := func(r *results.Run) float64 { return r.TPCompletionMedianS }
	s.TPCompletionChange, _ = changes(runs, baseline, tp)
	s.TPCompletionChangeMin, s.TPCompletionChangeMax = minMax(s.TPCompletionChange)
	s.TPCompletionMedianS = median(collect(runs, tp))

	s.GivenUpMin, s.GivenUpMax = minMax(collect(runs, func(r *results.Run) float64 { return r.GradientBytesGivenUpFrac }))
	s.AllReduceNonCritical = median(collect(runs, func(r *results.Run) float64 { return r.AllReduceMedianNonCriticalS }))
	s.AllReduceCritical = median(collect(runs, func(r *results.Run) float64 { return r.AllReduceMedianCriticalS }))

	retx := func(r *results.Run) float64 { return r.RetransmittedBytesFrac }
	s.RetransmittedFrac = mean(runs, retx)
	s.RetransmittedFracMin, s.RetransmittedFracMax = minMax(collect(runs, retx))
	trimmed := func(r *results.Run) float64 { return r.TrimmedBytesFrac }
	s.TrimmedFrac = mean(runs, trimmed)
	s.TrimmedFracMin, s.TrimmedFracMax = minMax(collect(runs, trimmed))

	s.CNPs = mean(runs, func(r *results.Run) float64 { return float64(r.CNPs) })
	s.RateCuts = mean(runs, func(r *results.Run) float64 { return float64(r.RateCuts) })
	s.RTOs = mean(runs, func(r *results.Run) float64 { return float64(r.RTOs) })
	summarizeExemption(&s, runs)

	s.InvariantHeld = all(runs, func(r *results.Run) bool { return r.BudgetInvariantHeld })
	s.NonGradientExact = all(runs, func(r *results.Run) bool { return r.NonGradientBytesExact })
	s.GradientSumsExact = all(runs, func(r *results.Run) bool { return r.GradientSumsExact })
	return s
}

// summarizeExemption averages the exemption figures over seeds. The mean
// length of a re-obey period exists only in runs where some flow obeyed
// again, so it is averaged over those runs alone: a run without any would
// otherwise pull the mean towards a period length of zero.
func summarizeExemption(s *results.Summary, runs []*results.Run) {
	s.ExemptFlows = mean(runs, func(r *results.Run) float64 { return float64(r.ExemptFlows) })
	s.FlagChangesPerExemptFlow = mean(runs, func(r *results.Run) float64 { return r.FlagChangesPerExemptFlow })
	s.ReObeyedFrac = mean(runs, func(r *results.Run) float64 { return r.ReObeyedFrac })
	var reobeying []*results.Run
	for _, r := range runs {
		if r.ReObeyedFrac > 0 {
			reobeying = append(reobeying, r)
		}
	}
	s.ReObeyMeanS = mean(reobeying, func(r *results.Run) float64 { return r.ReObeyMeanS })
}

// changes returns (v(run) - v(base)) / v(base) for every run whose seed the
// baseline also ran, with that seed; the first baseline run of a seed is
// the one compared against. A baseline value of zero or less has no
// relative change and is left out, as is any non-finite result.
func changes(runs, baseline []*results.Run, v func(*results.Run) float64) ([]float64, []uint64) {
	var (
		out   []float64
		seeds []uint64
	)
	for _, r := range runs {
		base := firstWithSeed(baseline, r.Seed)
		if base == nil || !(v(base) > 0) {
			continue
		}
		c := (v(r) - v(base)) / v(base)
		if !finite(c) {
			continue
		}
		out = append(out, c)
		seeds = append(seeds, r.Seed)
	}
	return out, seeds
}

func firstWithSeed(runs []*results.Run, seed uint64) *results.Run {
	for _, r := range runs {
		if r.Seed == seed {
			return r
		}
	}
	return nil
}

// FillFractions sets a run's three byte fractions from its counters, as
// docs/results.md defines them:
//
//	given up      = (forgiven + shed) / expected gradient bytes
//	retransmitted = retransmitted payload / payload put on the wire
//	trimmed       = payload trimmed by switches / payload put on the wire
//
// A fraction whose denominator is zero is zero: nothing was expected or
// nothing was sent, so nothing was given up, resent or trimmed.
func FillFractions(r *results.Run) {
	r.GradientBytesGivenUpFrac = ratio(r.ForgivenBytes+r.ShedBytes, r.GradientBytes)
	r.RetransmittedBytesFrac = ratio(r.RetxBytes, r.DataBytes)
	r.TrimmedBytesFrac = ratio(r.TrimmedBytes, r.DataBytes)
}

func ratio(num, den int64) float64 {
	if den <= 0 {
		return 0
	}
	return float64(num) / float64(den)
}
