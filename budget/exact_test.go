package budget

import (
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

// genProbability draws p in [0, 1]: any float64 in range (subnormals
// included), a uniform one, or one of the values that matter here.
func genProbability() *rapid.Generator[float64] {
	return rapid.OneOf(
		rapid.Custom(func(t *rapid.T) float64 {
			return math.Float64frombits(rapid.Uint64Range(0, math.Float64bits(1)).Draw(t, "pbits"))
		}),
		rapid.Float64Range(0, 1),
		rapid.SampledFrom([]float64{0, 1, 0.005, 0.1, 0.3, 0.5, math.Nextafter(1, 0), math.SmallestNonzeroFloat64}),
	)
}

// genCount draws a byte count, often small so that boundaries are hit.
func genCount() *rapid.Generator[int64] {
	return rapid.OneOf(rapid.Int64Range(0, 64), rapid.Int64Range(0, MaxStepBytes))
}

func rat(n int64) *big.Rat { return new(big.Rat).SetInt64(n) }

func ratP(p float64) *big.Rat { return new(big.Rat).SetFloat64(p) }

// leq reports a <= b.
func leq(a, b *big.Rat) bool { return a.Cmp(b) <= 0 }

// ratFloor returns floor(p × x) computed with big.Rat.
func ratFloor(p float64, x int64) int64 {
	v := new(big.Rat).Mul(ratP(p), rat(x))
	return new(big.Int).Quo(v.Num(), v.Denom()).Int64()
}

func TestExactFractionMulFloor(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProbability().Draw(t, "p")
		x := genCount().Draw(t, "x")
		if got, want := int64(exactFraction(p).mulFloor(uint64(x))), ratFloor(p, x); got != want {
			t.Fatalf("floor(%v × %d) = %d, want %d", p, x, got, want)
		}
	})
}

func TestExactFractionAtMost(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProbability().Draw(t, "p")
		whole := genCount().Draw(t, "whole")
		// Aim at the boundary: just below, at and above floor(p × whole).
		part := ratFloor(p, whole) + rapid.Int64Range(-1, 1).Draw(t, "delta")
		if part < 0 {
			part = 0
		}
		want := leq(rat(part), new(big.Rat).Mul(ratP(p), rat(whole)))
		if got := exactFraction(p).atMost(uint64(part), uint64(whole)); got != want {
			t.Fatalf("%d <= %v × %d: got %v, want %v", part, p, whole, got, want)
		}
	})
}

func TestVestingFormsAreEquivalent(t *testing.T) {
	// "forgiven + len <= p × (received + forgiven + len), equivalently
	// forgiven + len <= p/(1-p) × received." The second form is undefined
	// at p = 1, where the first always holds.
	rapid.Check(t, func(t *rapid.T) {
		p := genProbability().Draw(t, "p")
		received := rapid.Int64Range(0, MaxStepBytes/3).Draw(t, "received")
		var ratio *big.Rat // p/(1-p), exact; nil at p = 1
		if p < 1 {
			ratio = new(big.Rat).Quo(ratP(p), new(big.Rat).Sub(big.NewRat(1, 1), ratP(p)))
		}
		forgivenPlusLen := rapid.Int64Range(0, MaxStepBytes/3).Draw(t, "forgiven+len")
		if ratio != nil && rapid.Bool().Draw(t, "near boundary") {
			v := new(big.Rat).Mul(ratio, rat(received))
			if b := new(big.Int).Quo(v.Num(), v.Denom()); b.IsInt64() && b.Int64() <= MaxStepBytes/3 {
				forgivenPlusLen = max(0, b.Int64()+rapid.Int64Range(-1, 1).Draw(t, "delta"))
			}
		}
		first := leq(rat(forgivenPlusLen), new(big.Rat).Mul(ratP(p), rat(received+forgivenPlusLen)))
		second := ratio == nil || leq(rat(forgivenPlusLen), new(big.Rat).Mul(ratio, rat(received)))
		if first != second {
			t.Fatalf("p %v, received %d, forgiven+len %d: first form %v, second %v", p, received, forgivenPlusLen, first, second)
		}
		if got := exactFraction(p).atMost(uint64(forgivenPlusLen), uint64(received+forgivenPlusLen)); got != first {
			t.Fatalf("ledger's rule %v, exact %v", got, first)
		}
	})
}
