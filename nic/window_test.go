package nic_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

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
			c.PeerWindow = map[uint16]int{1: window, 9: 4096}
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

func TestPeerWindowConfigRefused(t *testing.T) {
	c := nic.DefaultConfig(1, testRate)
	c.PeerWindow = map[uint16]int{2: 0}
	if err := c.Validate(); !errors.Is(err, nic.ErrConfig) || !bytes.Contains([]byte(err.Error()), []byte("PeerWindow[2]")) {
		t.Errorf("zero peer window: %v", err)
	}
	for _, cc := range []congestion.Kind{congestion.KindDCQCN, congestion.KindNSCC, congestion.KindNone} {
		c = nic.DefaultConfig(1, testRate)
		c.CC, c.RateScaledWindow, c.PeerWindow = cc, true, map[uint16]int{2: 1}
		if err := c.Validate(); err != nil {
			t.Errorf("rate-scaled window under %v: %v", cc, err)
		}
	}
}
