package budget

import (
	"math"
	"math/bits"
)

// fraction is a probability held exactly as num / 2^shift.
//
// Every finite float64 is a dyadic rational, so converting the configured p
// loses nothing. The spec's pseudocode writes the vesting rule in floating
// point, where p*(received+forgiven+len) is rounded and may land on either
// side of the exact value; comparing the integers instead makes the rule,
// the budget and the invariant check agree exactly, allocation-free.
//
// With p <= 1, num < 2^53, and byte counts below 2^62, every product below
// fits in 128 bits.
type fraction struct {
	num   uint64
	shift uint
}

// exactFraction converts p, already validated to lie in [0, 1].
func exactFraction(p float64) fraction {
	if !(p > 0) {
		return fraction{}
	}
	mant, exp := math.Frexp(p) // p = mant * 2^exp, 0.5 <= mant < 1
	num := uint64(mant * (1 << 53))
	shift := 53 - exp // p <= 1 means exp <= 1, so shift >= 52
	// Strip common factors of two so that p = 1 becomes 1/2^0.
	tz := min(bits.TrailingZeros64(num), shift)
	return fraction{num: num >> tz, shift: uint(shift - tz)}
}

// mulFloor returns floor(p * x).
func (f fraction) mulFloor(x uint64) uint64 {
	hi, lo := bits.Mul64(f.num, x)
	_, lo = shr128(hi, lo, f.shift)
	return lo // p <= 1, so the result is at most x and fits
}

// atMost reports whether part <= p * whole, that is
// part * 2^shift <= num * whole, exactly.
func (f fraction) atMost(part, whole uint64) bool {
	if part == 0 {
		return true
	}
	if uint(bits.Len64(part))+f.shift > 128 {
		return false // the left side is at least 2^128, the right side is not
	}
	lhi, llo := shl128(0, part, f.shift)
	rhi, rlo := bits.Mul64(f.num, whole)
	return lhi < rhi || (lhi == rhi && llo <= rlo)
}

// shl128 shifts the 128-bit value hi:lo left by s < 128 bits.
// Go defines shifts by 64 or more as zero, which the s < 64 case relies on.
func shl128(hi, lo uint64, s uint) (uint64, uint64) {
	if s >= 64 {
		return lo << (s - 64), 0
	}
	return hi<<s | lo>>(64-s), lo << s
}

// shr128 shifts the 128-bit value hi:lo right by s bits.
func shr128(hi, lo uint64, s uint) (uint64, uint64) {
	switch {
	case s >= 128:
		return 0, 0
	case s >= 64:
		return 0, hi >> (s - 64)
	default:
		return hi >> s, lo>>s | hi<<(64-s)
	}
}
