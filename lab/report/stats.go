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
