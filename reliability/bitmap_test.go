package reliability

import (
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

// "Packets between the maximum received PSN index and the first unset bit"
// — the cumulative PSN is the first unset bit, and it slides over every
// settled PSN at once, across word boundaries.
func TestBitmapSlides(t *testing.T) {
	b := newPSNBitmap(0, DefaultBitmapPSNs)
	if int(b.size) < DefaultBitmapPSNs {
		t.Fatalf("window %d PSNs, asked for %d", b.size, DefaultBitmapPSNs)
	}
	for p := wire.PSN(1); p <= 130; p++ {
		if !b.settle(p) {
			t.Fatalf("PSN %d rejected", p)
		}
	}
	if b.cum != 0 {
		t.Fatalf("cumulative %d with PSN 0 missing", b.cum)
	}
	if got := b.sack64(); got != ^uint64(1) {
		t.Fatalf("SACK %#x, want every bit but bit 0", got)
	}
	b.settle(0)
	if b.cum != 131 || b.sack64() != 0 {
		t.Fatalf("cumulative %d SACK %#x, want 131 and 0", b.cum, b.sack64())
	}
	if !b.isSettled(5) || b.isSettled(131) {
		t.Error("settled state wrong around the cumulative PSN")
	}
}

// PSNs are 32-bit and wrap; the ring of words is indexed by the absolute
// PSN, so the window slides through 2^32 without a seam.
func TestBitmapWrapsAround(t *testing.T) {
	start := wire.PSN(1<<32 - 70)
	b := newPSNBitmap(start, 256)
	for i := uint32(1); i < 140; i++ {
		b.settle(start.Add(i))
	}
	if got := b.sack64(); got != ^uint64(1) {
		t.Fatalf("SACK across the wrap %#x", got)
	}
	b.settle(start)
	if b.cum != start.Add(140) || b.cum != 70 {
		t.Fatalf("cumulative %d, want 70", b.cum)
	}
}

// A PSN beyond the window cannot be recorded; the window's words are clean
// when the cumulative PSN reaches them again, nacked marks included.
func TestBitmapWindowAndReuse(t *testing.T) {
	b := newPSNBitmap(0, 64)
	if b.settle(wire.PSN(b.size)) {
		t.Fatal("PSN at cum+size accepted")
	}
	b.setNacked(3)
	for p := range wire.PSN(4 * b.size) {
		if !b.settle(p) {
			t.Fatalf("in-order PSN %d rejected", p)
		}
		if q := p.Add(b.size - 1); b.isSettled(q) || b.isNacked(q) {
			t.Fatalf("stale bit for PSN %d", q)
		}
	}
}
