package switchcore

import (
	"math"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// PARAMETERS.md: the marking point is "at dequeue, per egress queue, on
// data-queue occupancy"; the strict-priority queue carries trimmed headers
// and control packets and is never marked. With the data queue held above
// KMax every data packet leaving it is marked, and not one of the trimmed
// headers (ECN-capable, as their packets were) that leave the header queue
// meanwhile.
func TestECNNeverMarksTheHeaderQueue(t *testing.T) {
	cfg := twoPorts()
	cfg.Ports[1].Rate = 1 * gbps
	cfg.Ports[1].DataCap = 10 * packet1K
	cfg.Ports[1].Trim = TrimArrival
	cfg.Ports[1].ECN = ECNConfig{Enabled: true, KMin: packet1K, KMax: 2 * packet1K, PMax: 1}
	h := newHarness(t, cfg)
	for psn := range 40 {
		h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(psn), 0, payload1K), tosData)
	}
	h.settle()
	var headers, headersCE, data, dataCE int
	for _, o := range outputsOn(h.takeOut(), portB) {
		d := wire.Data(o.Pkt.Buf)
		ce := o.Pkt.ECN() == ECNCE
		switch {
		case d.Trimmed():
			headers++
			if ce {
				headersCE++
			}
		default:
			data++
			if ce {
				dataCE++
			}
		}
	}
	st := h.sw.Stats().Ports[portB]
	if headers != 29 || data != 11 {
		t.Fatalf("%d headers and %d data packets out; want 29 trimmed (40 less 1 on the link and 10 queued) and 11", headers, data)
	}
	if headersCE != 0 || st.Classes[ClassHeader].Marked.Packets != 0 {
		t.Fatalf("%d of %d trimmed headers left the strict-priority queue CE-marked (counted %d)", headersCE, headers, st.Classes[ClassHeader].Marked.Packets)
	}
	// Every departure but the last two leaves more than KMax behind.
	if dataCE < data-3 {
		t.Fatalf("%d of %d data packets marked; the ramp is at PMax = 1 above 2 packets", dataCE, data)
	}
}

// "When a queue fills, a switch with packet trimming trims the packet to
// its header and forwards that header on a high-priority queue." A header
// trimmed at an earlier hop stays a header at the next: on the same data
// DSCP as the queued data it joins the strict-priority queue, leaves ahead
// of that data, and is neither dropped by a full drop-tail data queue nor
// counted as data.
func TestHeaderTrimmedUpstreamTakesHeaderQueueAtNextHop(t *testing.T) {
	cfg := twoPorts()
	cfg.Ports[1].Rate = 1 * gbps
	cfg.Ports[1].DataCap = 4 * packet1K // full after one on the link and four queued
	cfg.Ports[1].Trim = TrimOff
	h := newHarness(t, cfg)
	for psn := range 5 {
		if r := h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(psn), 0, payload1K), tosData); r != DropNone {
			t.Fatalf("data PSN %d: %v", psn, r)
		}
	}
	trimmed, err := wire.Trim(dataPacket(hostA, hostB, 2, 77, 0, payload1K))
	if err != nil {
		t.Fatal(err)
	}
	if r := h.recv(portA, trimmed, tosData); r != DropNone {
		t.Fatalf("a header trimmed upstream was dropped at the full data queue: %v", r)
	}
	h.settle()
	out := outputsOn(h.takeOut(), portB)
	if len(out) != 6 {
		t.Fatalf("%d packets out, want 6", len(out))
	}
	if d := wire.Data(out[1].Pkt.Buf); d.Flow() != 2 || !d.Trimmed() {
		t.Fatalf("second out: flow %d trimmed %v; want the upstream header, right after the packet already on the link", d.Flow(), d.Trimmed())
	}
	st := h.sw.Stats().Ports[portB]
	if st.Classes[ClassHeader].Enqueued.Packets != 1 || st.Classes[dataPrio].Enqueued.Packets != 5 || st.Classes[dataPrio].Trimmed.Packets != 0 {
		t.Fatalf("enqueued %d headers and %d data (%d trimmed here); want 1, 5 and 0",
			st.Classes[ClassHeader].Enqueued.Packets, st.Classes[dataPrio].Enqueued.Packets, st.Classes[dataPrio].Trimmed.Packets)
	}
}

// The lossless-fabric seed's PFC watchdog: once it has cleared a queue
// paused too long, that queue "ignores pause for the recovery period", so
// a neighbour that keeps pausing cannot stall it again at once. A PAUSE
// that arrives during the recovery window leaves the next packet free to
// go; after the window, PAUSE holds packets again.
func TestWatchdogRecoveryWindowIgnoresPause(t *testing.T) {
	cfg := pfcConfig()
	cfg.PFC[dataPrio].WatchdogLimit = time.Millisecond
	cfg.PFC[dataPrio].WatchdogRecovery = 2 * time.Millisecond
	h := newHarness(t, cfg)
	pause := func(from, until time.Duration) { // a neighbour that never lets go
		h.advance(from)
		for h.now < until {
			h.recv(portB, wire.AppendPause(nil, 1<<dataPrio, 200), 0)
			h.advance(min(h.now+100*time.Microsecond, until))
		}
	}
	pause(0, 10*time.Microsecond)
	for psn := range 3 {
		h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(psn), 0, payload1K), tosData)
	}
	pause(10*time.Microsecond, time.Millisecond+time.Microsecond)
	if st := h.sw.Stats().Ports[portB]; st.WatchdogFires[dataPrio] != 1 || len(outputsOn(h.takeOut(), portB)) != 0 {
		t.Fatalf("the watchdog fired %d times; want once, with nothing sent while paused", st.WatchdogFires[dataPrio])
	}
	// Recovery runs until 3 ms: the neighbour pauses first, then a packet
	// arrives, and it leaves at once.
	pause(time.Millisecond+time.Microsecond, 1500*time.Microsecond)
	h.recv(portA, dataPacket(hostA, hostB, 1, 10, 0, payload1K), tosData)
	pause(h.now, 1600*time.Microsecond)
	out := outputsOn(h.takeOut(), portB)
	if len(out) != 1 || out[0].At > 1520*time.Microsecond {
		t.Fatalf("during recovery %d packets left (at %v); want the new one, at once despite the PAUSE", len(out), outputAt(out))
	}
	// After the window PAUSE holds packets again.
	pause(3100*time.Microsecond, 3200*time.Microsecond)
	h.recv(portA, dataPacket(hostA, hostB, 1, 11, 0, payload1K), tosData)
	pause(h.now, 3600*time.Microsecond)
	if out := outputsOn(h.takeOut(), portB); len(out) != 0 {
		t.Fatalf("%d packets left a paused queue after the recovery window", len(out))
	}
}

func outputAt(out []Output) []time.Duration {
	var at []time.Duration
	for _, o := range out {
		at = append(at, o.At)
	}
	return at
}

// TestOccupancyBucketCarries checks that a histogram bucket of a port's
// hot counters, which counts in 32 bits, carries into the 64-bit count
// Stats reports instead of wrapping.
func TestOccupancyBucketCarries(t *testing.T) {
	cfg := Config{Ports: []PortConfig{{Rate: gbps, DataCap: 1000}, {Rate: gbps, DataCap: 1000}}}
	sw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &sw.ports[1].cls[0]
	h.occupancy[3] = math.MaxUint32 - 1
	cold := &sw.cold[1].stats.Classes[0].Occupancy
	for range 3 {
		h.observe(cold, 200, 1000) // bucket 200*16/1000 = 3
	}
	got := sw.Stats().Ports[1].Classes[0].Occupancy[3]
	if want := uint64(math.MaxUint32) + 2; got != want {
		t.Fatalf("bucket 3 after 2^32+1 observations: %d, want %d", got, want)
	}
	if h.occupancy[3] != 1 {
		t.Fatalf("hot bucket %d after wrapping, want 1", h.occupancy[3])
	}
}
