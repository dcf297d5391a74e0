package nic_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/switchcore"
)

// ns-3's VAR_WIN (rdma-queue-pair.cc GetWin): the window times R_C over
// the line rate, truncated to whole bytes, at least one; at or above the
// line rate the window itself.
func TestScaledWindow(t *testing.T) {
	for _, c := range []struct {
		window     int
		rate, line float64
		want       int
	}{
		{500000, 400e9, 400e9, 500000},
		{500000, 200e9, 400e9, 250000}, // half the rate, half the window
		{500000, 203e9, 400e9, 253750},
		{500001, 200e9, 400e9, 250000}, // truncated, as uint64 arithmetic
		{500000, 100e6, 400e9, 125},    // MIN_RATE: 125 bytes, one packet at a time
		{100, 1, 400e9, 1},             // never below one byte
		{500000, 500e9, 400e9, 500000}, // never above the window
	} {
		if got := nic.ScaledWindow(c.window, c.rate, c.line); got != c.want {
			t.Errorf("ScaledWindow(%d, %v, %v) = %d, want %d", c.window, c.rate, c.line, got, c.want)
		}
	}
}

// A per-peer window bounds the bytes a flow to that peer leaves
// unacknowledged; with the rate scaling, a flow DCQCN has cut leaves
// fewer still. The same incast without them goes further, and every
// transfer arrives byte-exact.
func TestPeerWindowBoundsBytesInFlight(t *testing.T) {
	const window = 5 * 4096
	// over is the most bytes unacknowledged beyond the rate-scaled
	// window (at least one packet), at an instant when the flow's rate
	// was below the line rate and had not changed for 150 µs (about
	// three RTTs at 1 Gb/s: what was sent at another rate has drained);
	// samples counts such instants.
	run := func(tweak func(*nic.Config)) (maxUnacked, over, samples int, cuts uint64) {
		s := newStar(t, 4, switchcore.TrimNDP, tweak)
		dst, src := s.incast([]uint16{2, 3, 4}, 1<<20, nic.ClassTensor, 0)
		type since struct {
			rate float64
			at   time.Duration
		}
		stable := map[nic.FlowKey]since{}
		over = -1 << 30
		s.sim.OnInstant = func(now time.Duration) {
			for _, r := range senders(s) {
				maxUnacked = max(maxUnacked, r.Unacked)
				if st, ok := stable[r.Key]; !ok || st.rate != r.Rate {
					stable[r.Key] = since{r.Rate, now}
					continue
				}
				if r.Rate < testRate && now-stable[r.Key].at > 150*time.Microsecond {
					over = max(over, r.Unacked-max(nic.ScaledWindow(window, r.Rate, testRate), 4096))
					samples++
				}
			}
		}
		s.run(5*time.Second, s.recvDone(1, 3))
		for i := range dst {
			if !bytes.Equal(dst[i], src[i]) {
				t.Fatalf("message from host %d differs from what was sent", i+2)
			}
		}
		for _, r := range senders(s) {
			cuts += r.Ctrl.Cuts
		}
		return maxUnacked, over, samples, cuts
	}
	// A cut rate recovers slowly (the seed simulator's 900 µs timer, no
	// byte counter), so it stays put long enough to be measured.
	slow := func(c *nic.Config) {
		c.DCQCN = congestion.DefaultDCQCN(testRate)
		c.DCQCN.RateTimer, c.DCQCN.ByteCounter = 900*time.Microsecond, 1<<40
	}
	peer := func(scaled bool) func(*nic.Config) {
		return func(c *nic.Config) {
			slow(c)
			c.PeerWindows = nic.PeerWindows{{First: 1, Last: 2, Window: window}, {First: 9, Last: 12, Window: 4096}}
			c.RateScaledWindow = scaled
		}
	}
	open, _, _, _ := run(slow)
	fixed, fixedOver, fixedN, _ := run(peer(false))
	scaled, scaledOver, scaledN, cuts := run(peer(true))
	t.Logf("most bytes unacknowledged by one flow: %d without a peer window, %d with %d, %d rate-scaled (%d cuts); most beyond the scaled window at a steady rate: %d fixed (%d samples), %d scaled (%d samples)",
		open, fixed, window, scaled, cuts, fixedOver, fixedN, scaledOver, scaledN)
	if fixed > window || fixed == 0 || open <= window {
		t.Errorf("peer window %d: %d bytes unacknowledged, %d without it", window, fixed, open)
	}
	if scaled > window || scaled == 0 || cuts == 0 {
		t.Errorf("rate-scaled: %d bytes unacknowledged, %d cuts", scaled, cuts)
	}
	// A retransmission is not held back by the window (a trimmed
	// packet's bytes are already counted): allow one packet beyond it.
	if fixedN == 0 || scaledN == 0 || fixedOver <= 4096 || scaledOver > 4096 {
		t.Errorf("beyond the scaled window at a steady rate below the line rate: %d bytes (%d samples) with the fixed window, %d (%d samples) rate-scaled; want over a packet and at most one",
			fixedOver, fixedN, scaledOver, scaledN)
	}
}

// A bad range names its index and field, and says what it wants.
func TestPeerWindowConfigRefused(t *testing.T) {
	w := func(first, last uint16, window int) nic.PeerWindowRange {
		return nic.PeerWindowRange{First: first, Last: last, Window: window}
	}
	for _, c := range []struct {
		ranges nic.PeerWindows
		period uint16
		want   string
	}{
		{nic.PeerWindows{w(2, 2, 0)}, 0, "PeerWindows[0].Window = 0, want >= 1 byte"},
		{nic.PeerWindows{w(2, 4, 4096), w(5, 9, -1)}, 0, "PeerWindows[1].Window = -1, want >= 1 byte"},
		{nic.PeerWindows{w(0, 4, 4096)}, 0, "PeerWindows[0].First = 0, want >= 1 (host ids start at 1)"},
		{nic.PeerWindows{w(5, 4, 4096)}, 0, "PeerWindows[0].Last = 4, want >= First (5)"},
		{nic.PeerWindows{w(2, 8, 4096), w(8, 9, 4096)}, 0, "PeerWindows[1].First = 8, want > PeerWindows[0].Last (8): ranges in increasing order, not overlapping"},
		{nic.PeerWindows{w(9, 12, 4096), w(2, 4, 4096)}, 0, "PeerWindows[1].First = 2, want > PeerWindows[0].Last (12)"},
		{nic.PeerWindows{w(1, 4, 4096), w(5, 9, 4096)}, 8, "PeerWindows[1].Last = 9, want <= PeerWindowPeriod (8)"},
		{nil, 8, "PeerWindowPeriod = 8, want 0 without PeerWindows"},
	} {
		cfg := nic.DefaultConfig(1, testRate)
		cfg.PeerWindows, cfg.PeerWindowPeriod = c.ranges, c.period
		if err := cfg.Validate(); !errors.Is(err, nic.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrConfig with %q", c.ranges, err, c.want)
		}
	}
	for _, cc := range []congestion.Kind{congestion.KindDCQCN, congestion.KindNSCC, congestion.KindNone} {
		c := nic.DefaultConfig(1, testRate)
		c.CC, c.RateScaledWindow = cc, true
		c.PeerWindows = nic.PeerWindows{w(1, 1, 1), w(2, 2, 1), w(3, 65535, 1<<31-1)} // adjacent ranges, the whole id space
		if err := c.Validate(); err != nil {
			t.Errorf("rate-scaled window under %v: %v", cc, err)
		}
		c.PeerWindows, c.PeerWindowPeriod = nic.PeerWindows{w(1, 1, 1), w(3, 8, 1)}, 8 // the last range ends at the period
		if err := c.Validate(); err != nil {
			t.Errorf("rate-scaled window under %v, a period: %v", cc, err)
		}
	}
}

// Looking a peer up in the ranges (by halves, after folding its id by the
// period) finds what a table of every host id finds, the ranges written
// into it once, or once per period: for any ranges Validate accepts,
// adjacent or far apart, single hosts or wide, up to host 65535.
func TestPeerWindowLookupIsATable(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		scale := rapid.SampledFrom([]int{3, 40, 9000}).Draw(rt, "scale")
		var ranges nic.PeerWindows
		next := 1
		for range rapid.IntRange(0, 30).Draw(rt, "ranges") {
			first := next + rapid.IntRange(0, scale).Draw(rt, "gap")
			last := first + rapid.IntRange(0, scale).Draw(rt, "length")
			if last > 65535 {
				break
			}
			ranges = append(ranges, nic.PeerWindowRange{First: uint16(first), Last: uint16(last), Window: rapid.IntRange(1, 1<<31-1).Draw(rt, "window")})
			next = last + 1
		}
		period := 0
		if len(ranges) > 0 && rapid.Bool().Draw(rt, "periodic") {
			period = rapid.IntRange(int(ranges[len(ranges)-1].Last), min(65535, next+scale)).Draw(rt, "period")
		}
		c := nic.DefaultConfig(1, testRate)
		c.PeerWindows, c.PeerWindowPeriod = ranges, uint16(period)
		if err := c.Validate(); err != nil {
			rt.Fatalf("%+v, period %d: %v", ranges, period, err)
		}
		var table [65536]int // 0: no window
		step := period
		if step == 0 {
			step = len(table)
		}
		for base := 0; base < len(table); base += step {
			for _, r := range ranges {
				for id := base + int(r.First); id <= base+int(r.Last) && id < len(table); id++ {
					table[id] = r.Window
				}
			}
		}
		for id := range table {
			w, ok := c.PeerWindow(uint16(id))
			if w != table[id] || ok != (table[id] != 0) {
				rt.Fatalf("peer %d: PeerWindow %d, %v; the table has %d", id, w, ok, table[id])
			}
		}
	})
}
