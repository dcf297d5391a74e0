package wire

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// "PSN: 32 bits" (Ultra Ethernet PDS conventions). Sequence numbers wrap, and
// a receiver must keep ordering packets correctly as the counter rolls over.
func TestPSNOrderAcrossWrap(t *testing.T) {
	last := PSN(math.MaxUint32)
	first := last.Add(1)
	if first != 0 {
		t.Fatalf("MaxUint32+1 = %d, want 0", first)
	}
	if !last.Before(first) || !first.After(last) {
		t.Errorf("%d should come before %d across the wrap", last, first)
	}
	if first.Before(last) || last.After(first) {
		t.Errorf("%d should not come before %d across the wrap", first, last)
	}
	if d := first.Sub(last); d != 1 {
		t.Errorf("distance 0 - MaxUint32 = %d, want 1", d)
	}
	if d := last.Sub(first); d != -1 {
		t.Errorf("distance MaxUint32 - 0 = %d, want -1", d)
	}
}

func TestPSNBeforeEq(t *testing.T) {
	p := PSN(7)
	if !p.BeforeEq(p) || p.Before(p) || p.After(p) {
		t.Errorf("a PSN equals itself: BeforeEq true, Before and After false")
	}
	if !p.BeforeEq(p.Add(1)) || p.Add(1).BeforeEq(p) {
		t.Errorf("BeforeEq(7, 8) must be true and BeforeEq(8, 7) false")
	}
}

// "The send window keeps live PSNs far closer than [2^31]": InWindow is the
// test a receiver applies to a PSN, and it must hold across the wrap too.
func TestPSNInWindowAcrossWrap(t *testing.T) {
	lo := PSN(math.MaxUint32 - 1)
	for _, tc := range []struct {
		p    PSN
		want bool
	}{
		{lo - 1, false},
		{lo, true},
		{lo.Add(1), true},
		{0, true},
		{1, true},
		{2, false}, // lo + 4: the first PSN past a 4-wide window
	} {
		if got := tc.p.InWindow(lo, 4); got != tc.want {
			t.Errorf("%d.InWindow(%d, 4) = %v, want %v", tc.p, lo, got, tc.want)
		}
	}
	if PSN(5).InWindow(5, 0) {
		t.Errorf("an empty window contains nothing")
	}
}

// distinctOrderable draws two PSNs whose order is defined: not equal and not
// exactly 2^31 apart (RFC 1982 leaves that distance undefined).
func distinctOrderable(t *rapid.T) (PSN, PSN) {
	a := PSN(rapid.Uint32().Draw(t, "a"))
	d := rapid.Uint32Range(1, math.MaxUint32).Filter(func(d uint32) bool { return d != 1<<31 }).Draw(t, "d")
	return a, a.Add(d)
}

func TestPSNBeforeAntisymmetric(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := distinctOrderable(t)
		if a.Before(b) == b.Before(a) {
			t.Fatalf("exactly one of %d<%d and %d<%d must hold", a, b, b, a)
		}
		if a.Before(b) != b.After(a) {
			t.Fatalf("Before and After disagree on %d, %d", a, b)
		}
	})
}

func TestPSNAddSubInverse(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := PSN(rapid.Uint32().Draw(t, "p"))
		q := PSN(rapid.Uint32().Draw(t, "q"))
		n := rapid.Uint32().Draw(t, "n")
		if got := p.Add(n).Sub(p); got != int32(n) {
			t.Fatalf("(%d+%d)-%d = %d, want %d", p, n, p, got, int32(n))
		}
		if got := q.Add(uint32(p.Sub(q))); got != p {
			t.Fatalf("%d + (%d-%d) = %d, want %d", q, p, q, got, p)
		}
	})
}

// Advancing by less than 2^31 always moves forward, wherever the wrap falls.
func TestPSNAdvanceIsAfter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := PSN(rapid.Uint32Range(math.MaxUint32-1000, math.MaxUint32).Draw(t, "p"))
		n := rapid.Uint32Range(1, 1<<31-1).Draw(t, "n")
		q := p.Add(n)
		if !p.Before(q) || !q.After(p) || q.Before(p) {
			t.Fatalf("%d + %d = %d must come after %d", p, n, q, p)
		}
		if !q.InWindow(p, n+1) || q.InWindow(p, n) {
			t.Fatalf("%d must be the last PSN of the window [%d, %d+%d]", q, p, p, n)
		}
	})
}

func TestPSNBeforeTransitiveInHalfWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := PSN(rapid.Uint32().Draw(t, "a"))
		x := rapid.Uint32Range(1, 1<<30).Draw(t, "x")
		y := rapid.Uint32Range(1, 1<<30-1).Draw(t, "y")
		b, c := a.Add(x), a.Add(x).Add(y)
		if !a.Before(b) || !b.Before(c) || !a.Before(c) {
			t.Fatalf("%d < %d < %d must be ordered", a, b, c)
		}
	})
}

// The initial PSN is a fixed function of the tag (both ends compute it) and
// spreads nearby tags over the whole PSN space.
func TestInitialPSNFromTag(t *testing.T) {
	if got := InitialPSN(1); got != InitialPSN(1) {
		t.Fatal("InitialPSN is not a function of the tag")
	}
	seen := map[PSN]bool{}
	high := 0
	for tag := uint32(1); tag <= 1000; tag++ {
		p := InitialPSN(tag)
		if p == 0 {
			t.Errorf("tag %d starts at PSN 0", tag)
		}
		seen[p] = true
		if p >= 1<<31 {
			high++
		}
	}
	if len(seen) < 999 {
		t.Errorf("1000 tags give %d distinct initial PSNs", len(seen))
	}
	if high < 400 || high > 600 {
		t.Errorf("%d of 1000 initial PSNs in the upper half: not spread", high)
	}
}
