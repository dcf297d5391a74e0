package switchcore

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/internal/units"
)

// The link model (DESIGN.md, switch brief): "a packet starts when the link
// is idle, occupies size*8/rate, then spends the propagation delay on the
// wire before it is emitted".
func TestPropagationDelay(t *testing.T) {
	h := newHarness(t, twoPorts())
	h.advance(5 * time.Microsecond)
	if r := h.recv(portA, dataPacket(hostA, hostB, 7, 0, 0, payload1K), tosData); r != DropNone {
		t.Fatalf("Receive = %v, want accepted", r)
	}
	// 1032 bytes at 10 Gb/s occupy the link 825.6 ns, rounded up to 826.
	want := 5*time.Microsecond + 826*time.Nanosecond + time.Microsecond
	d, ok := h.sw.NextDeadline()
	if !ok || d != want {
		t.Fatalf("NextDeadline = %v, %v; want %v (start + serialization + propagation)", d, ok, want)
	}
	h.advance(want - 1)
	if len(h.out) != 0 {
		t.Fatalf("packet emitted at %v, before its wire time %v", h.out[0].At, want)
	}
	h.advance(want)
	out := h.takeOut()
	if len(out) != 1 || out[0].Port != portB || out[0].At != want || len(out[0].Pkt.Buf) != packet1K {
		t.Fatalf("outputs = %+v, want one 1032-byte packet on port 1 at %v", out, want)
	}
	if _, ok := h.sw.NextDeadline(); ok {
		t.Errorf("idle switch still has a deadline")
	}
}

// An idle link starts a packet at once: spaced arrivals never queue, and
// each leaves exactly serialization + propagation after it arrived.
func TestIdleLinkStartsAtOnce(t *testing.T) {
	h := newHarness(t, twoPorts())
	for i := range 50 {
		at := time.Duration(i) * 2 * time.Microsecond // slower than the link
		h.advance(at)
		h.recv(portA, dataPacket(hostA, hostB, 7, 0, 0, payload1K), tosData)
	}
	h.settle()
	out := h.takeOut()
	if len(out) != 50 {
		t.Fatalf("%d outputs, want 50", len(out))
	}
	for i, o := range out {
		want := time.Duration(i)*2*time.Microsecond + 826*time.Nanosecond + time.Microsecond
		if o.At != want {
			t.Fatalf("packet %d at %v, want %v", i, o.At, want)
		}
	}
}

// "the link never departs faster than its rate and achieves it within 1%
// when backlogged": a backlog of packets of random sizes, measured at every
// departure.
func TestLinkRateWhenBacklogged(t *testing.T) {
	cases := []struct {
		name     string
		rate     units.Rate
		overhead int
		maxPay   int
	}{
		{"400G jumbo", 400 * gbps, 0, 4096},
		// 32 to 96 byte packets at 400 Gb/s take 0.64 to 1.92 ns: rounding
		// each up to whole nanoseconds alone would run 20-50 % slow.
		{"400G tiny", 400 * gbps, 0, 64},
		{"10G with framing", 10 * gbps, 62, 1500},
		{"odd rate", 7_777_777_777, 24, 2000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := twoPorts()
			cfg.Ports[1].Rate = tc.rate
			cfg.Ports[1].Overhead = tc.overhead
			cfg.Ports[1].DataCap = 1 << 30
			h := newHarness(t, cfg)
			rng := rand.New(rand.NewPCG(3, 4))
			const n = 3000
			for i := range n {
				h.recv(portA, dataPacket(hostA, hostB, 1, 0, uint16(i), rng.IntN(tc.maxPay+1)), tosData)
			}
			h.settle()
			out := outputsOn(h.takeOut(), portB)
			if len(out) != n {
				t.Fatalf("%d outputs, want %d", len(out), n)
			}
			delay := cfg.Ports[1].Delay
			var bits uint64
			for i, o := range out {
				bits += uint64(len(o.Pkt.Buf)+tc.overhead) * 8
				elapsed := uint64(o.At - delay) // the backlog started at 0
				// elapsed ≥ bits/rate, in integers: never faster than the rate.
				if elapsed*uint64(tc.rate) < bits*1e9 {
					t.Fatalf("packet %d done after %d ns carrying %d bits: faster than %d b/s", i, elapsed, bits, tc.rate)
				}
			}
			elapsed := out[n-1].At - delay
			achieved := float64(bits) / elapsed.Seconds()
			if achieved < 0.99*float64(tc.rate) {
				t.Errorf("backlog ran at %.4g b/s, below 99%% of %d", achieved, tc.rate)
			}
			t.Logf("achieved %.6f of the rate over %d packets", achieved/float64(tc.rate), n)
		})
	}
}
