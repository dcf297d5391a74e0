package report

import (
	"math"
	"slices"

	"github.com/forgive-emu/forgive/lab/results"
)

// The statistics below skip NaN and infinities and return zero for an
// empty input: a summary must stay JSON-encodable whatever a run recorded.

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// collect returns v of every run, finite values only.
func collect(runs []*results.Run, v func(*results.Run) float64) []float64 {
	out := make([]float64, 0, len(runs))
	for _, r := range runs {
		if x := v(r); finite(x) {
			out = append(out, x)
		}
	}
	return out
}

func mean(runs []*results.Run, v func(*results.Run) float64) float64 {
	xs := collect(runs, v)
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// median is the middle value, or the mean of the two middle values of an
// even count.
func median(xs []float64) float64 {
	xs = slices.DeleteFunc(slices.Clone(xs), func(x float64) bool { return !finite(x) })
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	mid := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[mid]
	}
	return (xs[mid-1] + xs[mid]) / 2
}

func minMax(xs []float64) (lo, hi float64) {
	first := true
	for _, x := range xs {
		if !finite(x) {
			continue
		}
		if first || x < lo {
			lo = x
		}
		if first || x > hi {
			hi = x
		}
		first = false
	}
	return lo, hi
}

func all(runs []*results.Run, ok func(*results.Run) bool) bool {
	for _, r := range runs {
		if !ok(r) {
			return false
		}
	}
	return len(runs) > 0
}

// average is the mean of the finite values of xs, 0 for none.
func average(xs []float64) float64 {
	var (
		sum float64
		n   int
	)
	for _, x := range xs {
		if finite(x) {
			sum += x
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// positive returns the finite values of xs above zero: the measured
// times among them, since the recorder writes 0 for a median over an
// empty population and a time that was measured is never 0.
func positive(xs []float64) []float64 {
	return slices.DeleteFunc(slices.Clone(xs), func(x float64) bool { return !finite(x) || !(x > 0) })
}

// noise is the run-to-run variation of one policy's per-seed values: the
// sample standard deviation (n - 1 in the denominator) and the mean of
// the positive values of xs, and how many there were. With fewer than two
// values the deviation is unknown and 0.
func noise(xs []float64) (sd, mu float64, n int) {
	xs = positive(xs)
	n, mu = len(xs), average(xs)
	if n < 2 {
		return 0, mu, n
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mu) * (x - mu)
	}
	sd = math.Sqrt(ss / float64(n-1))
	if !finite(sd) {
		return 0, mu, n
	}
	return sd, mu, n
}

// relNoise is noise as a fraction of the mean (a coefficient of
// variation): 0 when unknown or when the mean is not positive.
func relNoise(xs []float64) (float64, int) {
	sd, mu, n := noise(xs)
	if n < 2 || !(mu > 0) {
		return 0, n
	}
	return sd / mu, n
}

// changeMargin is two standard errors of the mean of n per-seed changes
// against a baseline with per-seed deviation baseSD around baseMean: each
// change is a difference of two runs, one of the policy's and one of the
// baseline's, so its variance is the sum of theirs, and a mean over n
// seeds divides it by n. The policy's deviation counts as at least the
// baseline's, since with two or three seeds it can come out small by
// chance while identical runs on the same machine vary as the baseline's
// do. 0 when the margin is unknown (no change, or a baseline mean that is
// not positive).
func changeMargin(baseSD, baseMean, policySD float64, n int) float64 {
	if n < 1 || !(baseMean > 0) {
		return 0
	}
	m := 2 * math.Sqrt(baseSD*baseSD+math.Pow(max(baseSD, policySD), 2)) / (baseMean * math.Sqrt(float64(n)))
	if !finite(m) {
		return 0
	}
	return m
}
