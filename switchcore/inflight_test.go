package switchcore

import (
	"bytes"
	"testing"
	"time"
)

// InFlight reads ahead exactly what the wire hands over later: at every
// window boundary, the packets it lists for the next window are the
// outputs of that window, in order, byte for byte, with the same TOS and
// arrival time; a link-down window's packets, which the hand-over drops,
// are not listed; and reading changes nothing (the run with reads gives
// the outputs of a run without).
func TestInFlightListsWhatTheWireHandsOver(t *testing.T) {
	cfg := twoPorts()
	for i := range cfg.Ports {
		cfg.Ports[i].Fault.Jitter = 300 * time.Nanosecond
		cfg.Ports[i].Fault.DownStart = 20 * microsecond
		cfg.Ports[i].Fault.DownEnd = 24 * microsecond
	}
	play := func(read bool) (outs []Output, listed []Output) {
		h := newHarness(t, cfg)
		const w = 500 * time.Nanosecond // half the propagation delay
		for k := range 200 {
			t0 := time.Duration(k) * w
			h.advance(t0)
			if read {
				// what arrives in [t0+w, t0+2w) is on the wire at t0
				for _, o := range h.sw.InFlight(portB, t0+w, t0+2*w, nil) {
					o.Pkt.Buf = bytes.Clone(o.Pkt.Buf)
					listed = append(listed, o)
				}
			}
			if k%3 == 0 && k < 150 {
				h.recv(portA, dataPacket(hostA, hostB, 7, 0, uint16(k), payload1K), tosData)
				h.recv(portA, ackPacket(hostA, hostB, 7), tosData)
			}
		}
		h.settle()
		for _, o := range h.takeOut() {
			if o.Port == portB {
				outs = append(outs, o)
			}
		}
		return outs, listed
	}
	plain, _ := play(false)
	outs, listed := play(true)
	if len(plain) < 50 || len(outs) != len(plain) {
		t.Fatalf("%d outputs with reads, %d without; want the same, at least 50", len(outs), len(plain))
	}
	var fromWindow []Output
	for i, o := range outs {
		if o.At != plain[i].At || !bytes.Equal(o.Pkt.Buf, plain[i].Pkt.Buf) {
			t.Fatalf("output %d differs when the wire is read ahead", i)
		}
		if o.At >= 500*time.Nanosecond && o.At < 200*500*time.Nanosecond {
			fromWindow = append(fromWindow, o)
		}
	}
	down := 0
	for _, o := range listed {
		if o.At >= cfg.Ports[0].Fault.DownStart && o.At < cfg.Ports[0].Fault.DownEnd {
			down++
		}
	}
	if down != 0 {
		t.Errorf("%d packets listed that arrive while the link is down", down)
	}
	if len(listed) != len(fromWindow) {
		t.Fatalf("listed %d packets, the wire handed over %d in those windows", len(listed), len(fromWindow))
	}
	for i, o := range listed {
		g := fromWindow[i]
		if o.At != g.At || o.Port != g.Port || o.Pkt.TOS != g.Pkt.TOS || !bytes.Equal(o.Pkt.Buf, g.Pkt.Buf) {
			t.Fatalf("listed packet %d (at %v) is not the one handed over (at %v)", i, o.At, g.At)
		}
	}
	if got := h0PortDelay(t, cfg); got != microsecond {
		t.Errorf("PortDelay = %v, want the configured 1µs", got)
	}
}

func h0PortDelay(t *testing.T, cfg Config) time.Duration {
	sw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sw.PortDelay(portB)
}
