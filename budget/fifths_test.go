package budget

import (
	"testing"
	"time"
)

// A step's trims land in the first fifth, the middle or the last fifth of
// its span by the time they reached the receiver, and each fifth counts
// the bytes forgiven among them.
func TestFifthsPlaceTrimsBySpan(t *testing.T) {
	const pkt = 4096
	cfg := DefaultConfig()
	cfg.NoVesting = true // every draw forgives while the budget lasts
	l := newLedger(t, cfg, always(0))
	t0 := 3 * time.Millisecond
	if err := l.OnStepBeginAt(t0, 7, false, 1000*pkt); err != nil {
		t.Fatal(err)
	}
	const span = 100 * time.Microsecond
	trim := func(at time.Duration, n int64, forgive bool) {
		t.Helper()
		r := always(0)
		if !forgive {
			r = always(0.99) // P = 1 refuses nothing below 1, so use P < 1
		}
		l.rand = r
		l.cfg.P = 0.5
		if d := l.OnTrimAt(t0+at, 7, n, n); d.Forgive != forgive {
			t.Fatalf("trim at %v: %+v, want forgive %v", at, d, forgive)
		}
	}
	trim(0, pkt, true)                      // first fifth
	trim(19*time.Microsecond, 2*pkt, false) // first fifth (below 20 µs)
	trim(21*time.Microsecond, 3*pkt, true)  // middle
	trim(50*time.Microsecond, 4*pkt, true)  // middle
	trim(79*time.Microsecond, 5*pkt, true)  // middle (below 80 µs)
	trim(81*time.Microsecond, 6*pkt, false) // last fifth
	trim(span, 7*pkt, true)                 // last fifth, at completion
	l.OnAllReduceCompleteAt(t0+span, 7)

	r := record(t, l, 7)
	if r.Span != span {
		t.Fatalf("span %v, want %v", r.Span, span)
	}
	if r.FirstFifthTrimmed != 3*pkt || r.FirstFifthForgiven != pkt {
		t.Fatalf("first fifth: %d trimmed, %d forgiven; want %d, %d", r.FirstFifthTrimmed, r.FirstFifthForgiven, 3*pkt, pkt)
	}
	if r.LastFifthTrimmed != 13*pkt || r.LastFifthForgiven != 7*pkt {
		t.Fatalf("last fifth: %d trimmed, %d forgiven; want %d, %d", r.LastFifthTrimmed, r.LastFifthForgiven, 13*pkt, 7*pkt)
	}
}

// Trims after the step closed, trims of an unknown step and inconsistent
// reports are outside the accounting; an open step has no fifths yet.
func TestFifthsCountOnlyTrimsDecidedWhileOpen(t *testing.T) {
	l := newLedger(t, DefaultConfig(), always(0))
	if err := l.OnStepBeginAt(time.Millisecond, 1, false, 1<<20); err != nil {
		t.Fatal(err)
	}
	l.OnTrimAt(time.Millisecond+time.Microsecond, 1, 4096, 4096)
	l.OnTrimAt(time.Millisecond+2*time.Microsecond, 1, -1, 0) // inconsistent
	if r := record(t, l, 1); r.FirstFifthTrimmed != 0 || r.Span != 0 {
		t.Fatalf("open step already has fifths: %+v", r)
	}
	l.OnAllReduceCompleteAt(2*time.Millisecond, 1)
	l.OnTrimAt(3*time.Millisecond, 1, 4096, 0) // late
	r := record(t, l, 1)
	if r.FirstFifthTrimmed != 4096 || r.LastFifthTrimmed != 0 || r.LateTrims != 1 || r.Span != time.Millisecond {
		t.Fatalf("record: %+v", r)
	}
}

// A step far longer than the histogram's first width (1 ns bins) still
// places its trims to within 2/1024 of the span: the bins merge.
func TestFifthsKeepResolutionOverLongSteps(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NoVesting = true
	l := newLedger(t, cfg, always(0))
	if err := l.OnStepBeginAt(0, 1, false, 1<<30); err != nil {
		t.Fatal(err)
	}
	span := 10 * time.Second
	at := []time.Duration{1, span/5 - span/100, span/5 + span/100, span / 2, 4*span/5 - span/100, 4*span/5 + span/100, span}
	for i, d := range at {
		l.OnTrimAt(d, 1, int64(i+1), int64(i+1))
	}
	l.OnAllReduceCompleteAt(span, 1)
	r := record(t, l, 1)
	if r.FirstFifthTrimmed != 1+2 || r.LastFifthTrimmed != 6+7 {
		t.Fatalf("first %d, last %d; want 3, 13", r.FirstFifthTrimmed, r.LastFifthTrimmed)
	}
	if r.FirstFifthForgiven != r.FirstFifthTrimmed || r.LastFifthForgiven != r.LastFifthTrimmed {
		t.Fatalf("P = 1 without vesting forgives all: %+v", r)
	}
}

// Vesting is what the seed's accounting shows: a burst of trims at a
// step's start finds little received, so the vesting rule forgives a small
// share of it, while the same burst near the end is forgiven in full;
// without vesting the budget covers the early burst too.
func TestFifthsShowVesting(t *testing.T) {
	const pkt = 4096
	share := func(noVesting bool) (first, last float64) {
		cfg := DefaultConfig()
		cfg.NoVesting = noVesting
		l := newLedger(t, cfg, always(0))
		if err := l.OnStepBeginAt(0, 2, false, 1000*pkt); err != nil {
			t.Fatal(err)
		}
		for i := range 1000 {
			now := time.Duration(i) * time.Microsecond
			if (i >= 10 && i < 20) || (i >= 900 && i < 910) {
				l.OnTrimAt(now, 2, pkt, pkt)
				continue
			}
			if err := l.OnArrival(2, pkt, 0); err != nil {
				t.Fatal(err)
			}
		}
		l.OnAllReduceCompleteAt(1000*time.Microsecond, 2)
		r := record(t, l, 2)
		if r.FirstFifthTrimmed != 10*pkt || r.LastFifthTrimmed != 10*pkt {
			t.Fatalf("trims per fifth: %+v", r)
		}
		return float64(r.FirstFifthForgiven) / float64(r.FirstFifthTrimmed), float64(r.LastFifthForgiven) / float64(r.LastFifthTrimmed)
	}
	vf, vl := share(false)
	if !(vf < 0.5 && vl == 1) {
		t.Fatalf("vesting: first fifth forgiven %.2f, last %.2f; want under half, all", vf, vl)
	}
	nf, nl := share(true)
	if nf != 1 || nl != 1 {
		t.Fatalf("no vesting: first fifth forgiven %.2f, last %.2f; want all, all", nf, nl)
	}
}

// The traffic span leaves out a compute phase between a step's begin and
// its first gradient byte: over the step's span its first fifth is all
// compute and holds no trim, over the traffic span it holds the trims
// that came right after the first byte.
func TestFifthsOverTheTrafficSpan(t *testing.T) {
	const pkt = 4096
	cfg := DefaultConfig()
	cfg.NoVesting = true
	l := newLedger(t, cfg, always(0))
	us := time.Microsecond
	if err := l.OnStepBeginAt(0, 3, false, 1000*pkt); err != nil {
		t.Fatal(err)
	}
	if err := l.OnArrivalAt(40*us, 3, pkt, 0); err != nil { // traffic starts at 40 µs: span 60 µs, fifths of 12 µs
		t.Fatal(err)
	}
	l.OnTrimAt(41*us, 3, pkt, pkt)     // traffic's first fifth (40..52), the step's middle
	l.OnTrimAt(51*us, 3, 2*pkt, 2*pkt) // traffic's first fifth
	l.OnTrimAt(70*us, 3, 3*pkt, 3*pkt) // middle of both
	l.OnTrimAt(95*us, 3, 4*pkt, 4*pkt) // last fifth of both (from 88 and 80 µs)
	l.OnAllReduceCompleteAt(100*us, 3)
	r := record(t, l, 3)
	if r.Span != 100*us || r.TrafficSpan != 60*us {
		t.Fatalf("span %v, traffic span %v; want 100 µs, 60 µs", r.Span, r.TrafficSpan)
	}
	if r.FirstFifthTrimmed != 0 || r.LastFifthTrimmed != 4*pkt {
		t.Fatalf("step's fifths: first %d, last %d; want 0, %d", r.FirstFifthTrimmed, r.LastFifthTrimmed, 4*pkt)
	}
	if r.TrafficFirstFifthTrimmed != 3*pkt || r.TrafficFirstFifthForgiven != 3*pkt || r.TrafficLastFifthTrimmed != 4*pkt || r.TrafficLastFifthForgiven != 4*pkt {
		t.Fatalf("traffic fifths: %+v", r)
	}
}
