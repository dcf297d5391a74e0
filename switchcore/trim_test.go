package switchcore

import (
	"testing"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// trimConfig returns the two-port switch whose port 1 trims in the given
// mode, with a data buffer of exactly ten 1 KB packets.
func trimConfig(mode TrimMode) Config {
	cfg := twoPorts()
	cfg.Ports[1].DataCap = 10 * packet1K
	cfg.Ports[1].Trim = mode
	return cfg
}

// The FORGIVE seed: switches "trim only when the 4 MiB data queue is full".
// A burst lands on port 1 at one instant; the link takes the first packet,
// and every arrival that finds room is queued whole. Once an arrival does
// not fit, it is trimmed (TrimArrival) or it is queued and something queued
// is trimmed to make room (TrimNDP): "with probability 0.5 trim the
// arriving packet, else trim the most recently queued data packet and
// enqueue the arrival".
func TestNothingTrimmedUntilDataQueueFull(t *testing.T) {
	for _, mode := range []TrimMode{TrimArrival, TrimNDP} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := trimConfig(mode)
			h := newHarness(t, cfg)
			capacity := cfg.Ports[1].DataCap
			var trims, queuedWhenFull, trimmedArrivals uint64
			for i := range 2000 {
				before, _ := h.sw.Occupancy(portB)
				trimmedBefore := h.sw.Stats().Ports[portB].Classes[dataPrio].Trimmed.Packets
				hdrBefore := h.sw.Stats().Ports[portB].Classes[ClassHeader].Enqueued.Packets
				if r := h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(i), 0, payload1K), tosData); r != DropNone {
					t.Fatalf("arrival %d dropped (%v); a trimming port must not drop data", i, r)
				}
				after, _ := h.sw.Occupancy(portB)
				st := h.sw.Stats().Ports[portB].Classes
				trimmed := st[dataPrio].Trimmed.Packets - trimmedBefore
				if after > capacity || after < 0 {
					t.Fatalf("arrival %d: occupancy %d outside [0, %d]", i, after, capacity)
				}
				full := before+packet1K > capacity
				q := &h.sw.ports[portB].data[dataPrio]
				queued := q.len() > 0 && wire.Data(q.back().buf()).PSN() == wire.PSN(i)
				switch {
				case !full && trimmed != 0:
					t.Fatalf("arrival %d trimmed %d packets with %d of %d bytes queued", i, trimmed, before, capacity)
				case full && trimmed == 0:
					t.Fatalf("arrival %d found the queue full (%d bytes) and nothing was trimmed", i, before)
				case full && queued:
					queuedWhenFull++ // the arrival went in, a queued packet was trimmed
				case full:
					trimmedArrivals++
				}
				if headers := st[ClassHeader].Enqueued.Packets - hdrBefore; headers != trimmed {
					t.Fatalf("arrival %d: %d trimmed, %d headers queued", i, trimmed, headers)
				}
				trims += trimmed
				h.advance(h.now + 100*time.Nanosecond) // eight arrivals per departure
			}
			if trims == 0 {
				t.Fatal("the burst never filled the queue")
			}
			full := queuedWhenFull + trimmedArrivals
			switch mode {
			case TrimArrival:
				if queuedWhenFull != 0 {
					t.Errorf("TrimArrival queued %d arrivals into a full queue", queuedWhenFull)
				}
			case TrimNDP:
				if ok, sigma := within4Sigma(int(queuedWhenFull), int(full), 0.5); !ok {
					t.Errorf("NDP queued %d of %d arrivals at a full queue, want half ± %.0f", queuedWhenFull, full, 4*sigma)
				}
			}
			h.settle()
			var bytes uint64
			for _, cs := range h.sw.Stats().Ports[portB].Classes {
				bytes += cs.Trimmed.Bytes
			}
			if got := h.sw.TrimmedBytes(portB); got != bytes || bytes == 0 || h.sw.TrimmedBytes(portA) != 0 || h.sw.TrimmedBytes(99) != 0 {
				t.Errorf("TrimmedBytes: %d on port B, Stats says %d; %d on port A, %d on no port", got, bytes, h.sw.TrimmedBytes(portA), h.sw.TrimmedBytes(99))
			}
			if h.sw.Stats().Totals().Dropped.Packets != 0 {
				t.Errorf("drops with a trimming port: %+v", h.sw.Stats().Ports[portB].Classes[dataPrio].Drops)
			}
		})
	}
}

// htsim's composite queue trims "the most recently queued data packet": with
// the queue full, an NDP arrival that wins the coin takes the place of the
// newest packet, whose header goes to the strict-priority queue.
func TestNDPTrimsMostRecentlyQueued(t *testing.T) {
	h := newHarness(t, trimConfig(TrimNDP))
	// Packet 0 takes the link, PSNs 1..10 fill the buffer.
	for psn := range 11 {
		h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(psn), 0, payload1K), tosData)
	}
	var newest wire.PSN = 10
	var bootedPSNs, trimmedArrivals []wire.PSN
	for psn := wire.PSN(11); len(bootedPSNs) < 5; psn++ {
		before := h.sw.Stats().Ports[portB].Classes[ClassHeader].Enqueued.Packets
		h.recv(portA, dataPacket(hostA, hostB, 1, psn, 0, payload1K), tosData)
		if q, _ := h.sw.Occupancy(portB); q != 10*packet1K {
			t.Fatalf("occupancy %d after a full-queue arrival, want still %d", q, 10*packet1K)
		}
		if h.sw.Stats().Ports[portB].Classes[ClassHeader].Enqueued.Packets != before+1 {
			t.Fatalf("PSN %d: no header queued", psn)
		}
		hdr := wire.Data(h.sw.ports[portB].hdr.back().buf())
		switch hdr.PSN() {
		case newest: // the queued packet was trimmed, the arrival took its place
			bootedPSNs = append(bootedPSNs, newest)
			newest = psn
		case psn:
			trimmedArrivals = append(trimmedArrivals, psn)
		default:
			t.Fatalf("PSN %d arrival trimmed PSN %d; newest queued was %d", psn, hdr.PSN(), newest)
		}
	}
	h.settle()
	want := map[wire.PSN]bool{}
	for _, psn := range append(bootedPSNs, trimmedArrivals...) {
		want[psn] = true
	}
	for _, o := range h.out {
		if d := wire.Data(o.Pkt.Buf); d.Trimmed() != want[d.PSN()] {
			t.Errorf("PSN %d came out trimmed=%v", d.PSN(), d.Trimmed())
		}
	}
	t.Logf("booted %v, trimmed on arrival %v", bootedPSNs, trimmedArrivals)
}

// "trimmed size: header only" and "NVIDIA Cumulus default 256 B, DSCP
// remarked to 11": the header keeps PSN, offset and original length, and
// the optional remark changes the DSCP and keeps the ECN bits.
func TestTrimmedHeaderKeepsFieldsAndRemarks(t *testing.T) {
	cfg := trimConfig(TrimArrival)
	cfg.Ports[1].RemarkTrimmed, cfg.Ports[1].TrimmedDSCP = true, 11
	h := newHarness(t, cfg)
	for psn := range 12 {
		h.recv(portA, dataPacket(hostA, hostB, 9, wire.PSN(psn), 0, payload1K), tosData)
	}
	h.settle()
	var hdrs []Output
	for _, o := range h.out {
		if len(o.Pkt.Buf) == wire.DataLen {
			hdrs = append(hdrs, o)
		}
	}
	if len(hdrs) != 1 {
		t.Fatalf("%d headers out, want 1 (12 packets: 1 on the link, 10 queued, 1 trimmed)", len(hdrs))
	}
	d, err := wire.ParseData(hdrs[0].Pkt.Buf)
	if err != nil || !d.Trimmed() || d.PSN() != 11 || d.PayloadLen() != payload1K || d.Offset() != 11*payload1K {
		t.Fatalf("header %+v (err %v): want trimmed PSN 11, payload length %d kept", d.Fields(), err, payload1K)
	}
	if hdrs[0].Pkt.DSCP() != 11 || hdrs[0].Pkt.ECN() != ECNECT0 {
		t.Errorf("header TOS %#x, want DSCP 11 with ECT(0) kept", hdrs[0].Pkt.TOS)
	}
	st := h.sw.Stats().Ports[portB].Classes[dataPrio].Trimmed
	if st.Packets != 1 || st.Bytes != payload1K {
		t.Errorf("Trimmed = %+v, want 1 packet, %d payload bytes", st, payload1K)
	}
}

// With trimming off the port is drop-tail: a full queue drops arrivals and
// counts them as data-full.
func TestDropTail(t *testing.T) {
	h := newHarness(t, trimConfig(TrimOff))
	var dropped int
	for psn := range 20 {
		if h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(psn), 0, payload1K), tosData) == DropDataFull {
			dropped++
		}
	}
	if dropped != 9 {
		t.Errorf("%d dropped, want 9 (20 arrivals, 1 on the link, 10 queued)", dropped)
	}
	st := h.sw.Stats().Ports[portB].Classes[dataPrio]
	if st.Drops[DropDataFull].Packets != 9 || st.Trimmed.Packets != 0 {
		t.Errorf("Drops[data_full] = %+v, Trimmed = %+v", st.Drops[DropDataFull], st.Trimmed)
	}
	// Eleven enqueues: the first found an empty queue (it left at once, so
	// it joined at one packet), the next ten 1 to 10 packets of 10: the
	// histogram has one sample per enqueue and the full queue in the top
	// bucket.
	var samples uint64
	for _, n := range st.Occupancy {
		samples += n
	}
	if samples != st.Enqueued.Packets || st.Enqueued.Packets != 11 || st.Occupancy[HistBuckets-1] != 1 || st.MaxOccupancy != 10*packet1K {
		t.Errorf("Enqueued %d, histogram %v, max %d", st.Enqueued.Packets, st.Occupancy, st.MaxOccupancy)
	}
	h.settle()
	if len(h.out) != 11 {
		t.Errorf("%d delivered, want 11", len(h.out))
	}
}

// Ordered Chaos: probes "are enqueued with data packets and remain exposed
// to congestion". A probe queues behind the data of its subflow, and a
// full queue drops it: it has no payload to trim.
func TestProbesQueueWithDataAndAreNotTrimmed(t *testing.T) {
	cfg := trimConfig(TrimArrival)
	cfg.Ports[1].DataCap = 10*packet1K + wire.ProbeLen
	h := newHarness(t, cfg)
	probe := func() []byte {
		return wire.AppendProbe(nil, wire.ProbeFields{Kind: wire.ProbeTail, Src: hostA, Dst: hostB, Flow: 1, PSN: 10})
	}
	for psn := range 11 {
		h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(psn), 0, payload1K), tosData)
	}
	if r := h.recv(portA, probe(), tosData); r != DropNone {
		t.Fatalf("probe into the last %d bytes: %v", wire.ProbeLen, r)
	}
	if r := h.recv(portA, probe(), tosData); r != DropDataFull {
		t.Fatalf("probe into a full queue: %v, want data_full", r)
	}
	h.settle()
	last := h.out[len(h.out)-1]
	if wire.Type(last.Pkt.Buf[0]&0x0F) != wire.TypeProbe {
		t.Errorf("last packet out is %v; the probe must follow the data queued before it", wire.Type(last.Pkt.Buf[0]&0x0F))
	}
}
