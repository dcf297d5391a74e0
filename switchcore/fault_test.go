package switchcore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// sendPaced sends n 1 KB packets from host A to host B, one every gap.
func sendPaced(h *harness, n int, gap time.Duration) {
	for psn := range n {
		h.advance(time.Duration(psn) * gap)
		h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(psn), 0, payload1K), tosData)
	}
	h.settle()
}

// Ordered Chaos: "corruption drops occur before a packet is queued at the
// switch, leaving no trimmed header to signal the loss". A lossy link loses
// its configured fraction of packets, silently: no trim, counted as fault
// loss.
func TestFaultLossRate(t *testing.T) {
	cfg := trimConfig(TrimNDP)
	cfg.Ports[1].Fault.Loss = 0.05
	h := newHarness(t, cfg)
	const n = 20000
	sendPaced(h, n, time.Microsecond)
	lost := n - len(h.out)
	if ok, sigma := within4Sigma(lost, n, 0.05); !ok {
		t.Errorf("lost %d of %d, want %.0f ± %.0f", lost, n, 0.05*n, 4*sigma)
	}
	st := h.sw.Stats().Ports[portB].Classes[dataPrio]
	if st.Drops[DropFaultLoss].Packets != uint64(lost) || st.Trimmed.Packets != 0 {
		t.Errorf("Drops[fault_loss] = %+v, Trimmed = %+v; want %d lost, none trimmed", st.Drops[DropFaultLoss], st.Trimmed, lost)
	}
	for _, o := range h.out {
		if wire.Data(o.Pkt.Buf).Trimmed() {
			t.Fatal("a fault loss produced a trimmed header")
		}
	}
}

// A link down during [DownStart, DownEnd) "carries nothing": every packet
// routed to it, leaving on it or arriving at its far end in the window is
// dropped and counted; before and after, everything arrives.
func TestLinkDownDropsEverythingInWindow(t *testing.T) {
	cfg := twoPorts()
	start, end := 100*time.Microsecond, 200*time.Microsecond
	cfg.Ports[1].Fault.DownStart, cfg.Ports[1].Fault.DownEnd = start, end
	h := newHarness(t, cfg)
	sendPaced(h, 300, time.Microsecond)
	delivered := map[wire.PSN]bool{}
	for _, o := range h.out {
		if o.At >= start && o.At < end {
			t.Errorf("PSN %d arrived at %v, inside the down window", wire.Data(o.Pkt.Buf).PSN(), o.At)
		}
		delivered[wire.Data(o.Pkt.Buf).PSN()] = true
	}
	// Packet k arrives at k µs and reaches the far end 1.826 µs later.
	for psn := range wire.PSN(300) {
		sentAt := time.Duration(psn) * time.Microsecond
		farEnd := sentAt + 1826*time.Nanosecond
		inWindow := (sentAt >= start && sentAt < end) || (farEnd >= start && farEnd < end)
		if delivered[psn] == inWindow {
			t.Errorf("PSN %d (sent %v, far end %v): delivered=%v", psn, sentAt, farEnd, delivered[psn])
		}
	}
	st := h.sw.Stats().Ports[portB].Classes[dataPrio]
	if got := int(st.Drops[DropLinkDown].Packets); got != 300-len(h.out) || got < 100 {
		t.Errorf("Drops[link_down] = %d, %d lost", got, 300-len(h.out))
	}
}

// A packet queued before the link goes down and dequeued in the window is
// dropped too: the queue flushes instead of waiting for the link.
func TestLinkDownFlushesQueue(t *testing.T) {
	cfg := twoPorts()
	cfg.Ports[1].Rate = gbps
	cfg.Ports[1].Fault.DownStart, cfg.Ports[1].Fault.DownEnd = 10*time.Microsecond, time.Second
	h := newHarness(t, cfg)
	for psn := range 20 {
		h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(psn), 0, payload1K), tosData)
	}
	h.settle()
	// At 1 Gb/s a packet takes 8.256 µs: the first reaches the far end at
	// 9.256 µs; the second, on the link from 8.256 µs, arrives in the window.
	if len(h.out) != 1 {
		t.Errorf("%d delivered, want 1", len(h.out))
	}
	if q, _ := h.sw.Occupancy(portB); q != 0 {
		t.Errorf("%d bytes still queued on a down link", q)
	}
}

// "Injected randomness: a seeded math/rand/v2 source inside the engine
// (deterministic given the seed)": the same seed and inputs give the same
// outputs at the same instants; another seed gives others.
func TestFaultsDeterministicWithSeed(t *testing.T) {
	run := func(seed uint64) []string {
		cfg := trimConfig(TrimNDP)
		cfg.Seed = seed
		cfg.Ports[1].Fault = FaultConfig{Loss: 0.1, Jitter: 300 * time.Nanosecond}
		cfg.Ports[1].ECN = ECNConfig{Enabled: true, KMin: 2 * packet1K, KMax: 8 * packet1K, PMax: 0.5}
		h := newHarness(t, cfg)
		sendPaced(h, 2000, 500*time.Nanosecond)
		var trace []string
		for _, o := range h.out {
			d := wire.Data(o.Pkt.Buf)
			trace = append(trace, fmt.Sprintf("%v ecn=%d trimmed=%v psn=%d", o.At, o.Pkt.ECN(), d.Trimmed(), d.PSN()))
		}
		return trace
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Error("same seed, different outputs")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds, identical outputs")
	}
}

// Jitter adds [0, Jitter) to the propagation delay and never reorders the
// link.
func TestJitterBoundedAndInOrder(t *testing.T) {
	cfg := twoPorts()
	cfg.Ports[1].Fault.Jitter = 2 * time.Microsecond
	h := newHarness(t, cfg)
	sendPaced(h, 2000, 900*time.Nanosecond)
	var extra []time.Duration
	for i, o := range h.out {
		if d := wire.Data(o.Pkt.Buf); d.PSN() != wire.PSN(i) {
			t.Fatalf("output %d is PSN %d: the link reordered", i, d.PSN())
		}
		base := time.Duration(i)*900*time.Nanosecond + 826*time.Nanosecond + time.Microsecond
		if o.At < base {
			t.Fatalf("PSN %d arrived %v before its unjittered time", i, base-o.At)
		}
		extra = append(extra, o.At-base)
	}
	// Not reordering can push a packet behind a jittered predecessor, by up
	// to the jitter minus the spacing; never by more than the jitter.
	if m := slices.Max(extra); m >= 2*time.Microsecond || m < time.Microsecond {
		t.Errorf("largest extra delay %v, want within [1µs, 2µs)", m)
	}
}
