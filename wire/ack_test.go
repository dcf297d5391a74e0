package wire

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// "cumulative PSN: every PSN before it is settled" and "SACK bitmap, bit i
// (LSB first) = PSN base+i settled".
func TestAckedCumulativeAndBitmap(t *testing.T) {
	f := AckFields{CumPSN: 100, SackBase: 102, Sack: 1<<0 | 1<<3 | 1<<63}
	for _, tc := range []struct {
		p    PSN
		want bool
		why  string
	}{
		{0, true, "long before the cumulative PSN"},
		{99, true, "just before the cumulative PSN"},
		{100, false, "the cumulative PSN itself is the first unsettled"},
		{101, false, "between the cumulative PSN and the bitmap"},
		{102, true, "bit 0"},
		{103, false, "bit 1 clear"},
		{105, true, "bit 3"},
		{165, true, "bit 63"},
		{166, false, "past the bitmap"},
	} {
		if got := f.Acked(tc.p); got != tc.want {
			t.Errorf("Acked(%d) = %v, want %v: %s", tc.p, got, tc.want, tc.why)
		}
	}
}

// The bitmap may straddle the PSN wrap.
func TestAckedAcrossWrap(t *testing.T) {
	f := AckFields{CumPSN: math.MaxUint32 - 1, SackBase: math.MaxUint32 - 1, Sack: 0b1010}
	for p, want := range map[PSN]bool{
		math.MaxUint32 - 2: true,  // before the cumulative PSN
		math.MaxUint32 - 1: false, // bit 0
		math.MaxUint32:     true,  // bit 1
		0:                  false, // bit 2
		1:                  true,  // bit 3
		2:                  false, // bit 4
	} {
		if got := f.Acked(p); got != want {
			t.Errorf("Acked(%d) = %v, want %v", p, got, want)
		}
	}
}

// Acked agrees with a model that lists the settled PSNs one by one.
func TestAckedMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := ackGen.Draw(t, "ack")
		f.SackBase = f.CumPSN.Add(rapid.Uint32Range(0, 200).Draw(t, "gap"))
		settled := map[PSN]bool{}
		for i := range SackBits {
			if f.Sack&(1<<i) != 0 {
				settled[f.SackBase.Add(uint32(i))] = true
			}
		}
		p := f.CumPSN.Add(uint32(rapid.Int32Range(-300, 300).Draw(t, "delta")))
		want := p.Before(f.CumPSN) || settled[p]
		if got := f.Acked(p); got != want {
			t.Fatalf("Acked(%d) = %v, want %v (cum %d, base %d, sack %#x)",
				p, got, want, f.CumPSN, f.SackBase, f.Sack)
		}
	})
}
