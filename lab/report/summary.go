package report

import (
	"math"
	"slices"

	"github.com/forgive-emu/forgive/lab/results"
)

// Summarize fills f.Summary from f.Runs, one entry per policy in the order
// of f.Policies (policies that ran but are not listed follow, in the order
// of their first run). The first policy is the baseline: a policy's change
// in training time is, for each seed it shares with the baseline,
// (policy_seed - baseline_seed) / baseline_seed, so a cut is negative.
//
// Every change also gets its mean over seeds and a margin of two standard
// errors from the baseline's and the policy's run-to-run noise; a mean
// change within its margin is marked WithinNoise (docs/lab.md, "How many
// seeds a claim needs").
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
	for i := 1; i < len(out); i++ {
		markNoise(&out[i], runsOf(f.Runs, order[i]), baseline)
	}
	return out
}

// markNoise sets a policy's margins and WithinNoise flags against the
// baseline's run-to-run variation: a mean change no larger than two
// standard errors cannot be told from noise. With the baseline's noise
// unknown (fewer than two seeds measured it) nothing is marked and the
// margin is 0.
func markNoise(s *results.Summary, runs, baseline []*results.Run) {
	mark := func(v func(*results.Run) float64, changes []float64, mean float64) (float64, bool) {
		baseSD, baseMean, baseN := noise(collect(baseline, v))
		if baseN < 2 || len(changes) == 0 {
			return 0, false
		}
		policySD, _, _ := noise(collect(runs, v))
		m := changeMargin(baseSD, baseMean, policySD, len(changes))
		return m, math.Abs(mean) <= m
	}
	s.TrainingTimeChangeMargin, s.TrainingTimeWithinNoise = mark(trainingTime, s.TrainingTimeChange, s.TrainingTimeChangeMean)
	s.TPCompletionChangeMargin, s.TPCompletionWithinNoise = mark(tpMedian, s.TPCompletionChange, s.TPCompletionChangeMean)
}

func trainingTime(r *results.Run) float64 { return r.TrainingTimeS }
func tpMedian(r *results.Run) float64     { return r.TPCompletionMedianS }

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
	s.TrainingTimeChange, s.TrainingTimeChangeSeeds = changes(runs, baseline, trainingTime)
	s.TrainingTimeChangeMin, s.TrainingTimeChangeMax = minMax(s.TrainingTimeChange)
	s.TrainingTimeChangeMean = average(s.TrainingTimeChange)
	s.TrainingTimeMeanS = mean(runs, trainingTime)
	s.TrainingTimeNoise, s.TrainingTimeNoiseRuns = relNoise(collect(runs, trainingTime))

	s.TPCompletionChange, _ = changes(runs, baseline, tpMedian)
	s.TPCompletionChangeMin, s.TPCompletionChangeMax = minMax(s.TPCompletionChange)
	s.TPCompletionChangeMean = average(s.TPCompletionChange)
	// A median time of 0 (here and in the all-reduce medians below) is a
	// run that had nothing to measure: no tensor-parallel exchange, no
	// step of that class. It is left out, and a summary of 0 means no run
	// measured it.
	s.TPCompletionMedianS = median(positive(collect(runs, tpMedian)))
	s.TPCompletionNoise, s.TPCompletionNoiseRuns = relNoise(collect(runs, tpMedian))

	s.GivenUpMin, s.GivenUpMax = minMax(collect(runs, func(r *results.Run) float64 { return r.GradientBytesGivenUpFrac }))
	s.AllReduceNonCritical = median(positive(collect(runs, func(r *results.Run) float64 { return r.AllReduceMedianNonCriticalS })))
	s.AllReduceCritical = median(positive(collect(runs, func(r *results.Run) float64 { return r.AllReduceMedianCriticalS })))

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
	s.NonGradientExact = all(runs, func(r *results.Run) bool { return r.PayloadFree || r.NonGradientBytesExact })
	s.GradientSumsExact = all(runs, func(r *results.Run) bool { return r.PayloadFree || r.GradientSumsExact })
	s.MessageAccountingHeld = all(runs, func(r *results.Run) bool { return r.AccountingHeld() })
	s.PayloadFree = !all(runs, func(r *results.Run) bool { return !r.PayloadFree })
	return s
}

// summarizeExemption averages the exemption figures over seeds. A figure
// per exempt flow exists only in runs with an exempt flow, and the mean
// length of a re-obey period only in runs where some flow obeyed again,
// so each is averaged over those runs alone: a run without any would
// otherwise pull the mean towards zero. With no such run the figure is 0
// (the table prints n/a).
func summarizeExemption(s *results.Summary, runs []*results.Run) {
	s.ExemptFlows = mean(runs, func(r *results.Run) float64 { return float64(r.ExemptFlows) })
	var exempting, reobeying []*results.Run
	for _, r := range runs {
		if r.ExemptFlows > 0 {
			exempting = append(exempting, r)
		}
		if r.ReObeyedFrac > 0 {
			reobeying = append(reobeying, r)
		}
	}
	s.FlagChangesPerExemptFlow = mean(exempting, func(r *results.Run) float64 { return r.FlagChangesPerExemptFlow })
	s.ReObeyedFrac = mean(exempting, func(r *results.Run) float64 { return r.ReObeyedFrac })
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
