package switchcore

import (
	"testing"
	"time"

	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/wire"
	"pgregory.net/rapid"
)

// inFlight counts what the switch holds: queued or on the wire.
func inFlight(sw *Switch) (c Counter) {
	for i := range sw.ports {
		p := &sw.ports[i]
		rings := []*ring{&p.hdr, &p.wire}
		for prio := range p.data {
			rings = append(rings, &p.data[prio])
		}
		for _, r := range rings {
			c.Packets += uint64(r.len())
			c.Bytes += uint64(r.bytes)
		}
	}
	return c
}

// checkInvariants checks what must hold between any two calls:
//   - occupancy is never negative and never above capacity;
//   - the PFC bytes held per (ingress port, priority with PFC) equal the
//     bytes of the queued packets that came in there, and are zero for the
//     priorities without PFC, which are not counted;
//   - packets and bytes are conserved: everything received (or generated as
//     PAUSE frames) was sent, dropped, consumed or is still held, and the
//     bytes missing from sent packets are exactly the bytes trimmed.
func checkInvariants(t tester, sw *Switch) {
	t.Helper()
	held := make([][NumPriorities]int, len(sw.ports))
	for i := range sw.ports {
		p := &sw.ports[i]
		sum := 0
		for prio := range p.data {
			q := &p.data[prio]
			sum += q.bytes
			if (q.len() > 0) != (p.dataMask&(1<<prio) != 0) {
				t.Fatalf("port %d priority %d: %d queued, mask %#x", i, prio, q.len(), p.dataMask)
			}
			for k := range q.len() {
				e := q.at(k)
				if sw.pfcMask&(1<<e.prio) != 0 {
					held[e.in][e.prio] += e.size()
				}
			}
		}
		for k := range p.hdr.len() {
			e := p.hdr.at(k)
			if sw.pfcMask&(1<<e.prio) != 0 {
				held[e.in][e.prio] += e.size()
			}
		}
		if sum != p.dataBytes || p.dataBytes < 0 || p.dataBytes > p.cfg.DataCap {
			t.Fatalf("port %d: data occupancy %d (queues hold %d), capacity %d", i, p.dataBytes, sum, p.cfg.DataCap)
		}
		if p.hdr.bytes < 0 || p.hdr.bytes > p.headerCap {
			t.Fatalf("port %d: header occupancy %d, capacity %d", i, p.hdr.bytes, p.headerCap)
		}
	}
	for i := range sw.ports {
		for prio := range NumPriorities {
			if got := sw.ports[i].ingress[prio].bytes; got != held[i][prio] {
				t.Fatalf("port %d priority %d: PFC counts %d bytes, queues hold %d", i, prio, got, held[i][prio])
			}
		}
	}
	tot := sw.Stats().Totals()
	fl := inFlight(sw)
	in := tot.Received.Packets + tot.PausesSent
	out := tot.Sent.Packets + tot.Dropped.Packets + tot.PausesConsumed.Packets + fl.Packets
	if in != out {
		t.Fatalf("packets: received %d + generated %d != sent %d + dropped %d + consumed %d + held %d",
			tot.Received.Packets, tot.PausesSent, tot.Sent.Packets, tot.Dropped.Packets, tot.PausesConsumed.Packets, fl.Packets)
	}
	inB := tot.Received.Bytes + tot.PausesSent*wire.PauseLen
	outB := tot.Sent.Bytes + tot.Dropped.Bytes + tot.PausesConsumed.Bytes + fl.Bytes + tot.TrimmedBytes
	if inB != outB {
		t.Fatalf("bytes: in %d != out %d (sent %d dropped %d consumed %d held %d trimmed %d)",
			inB, outB, tot.Sent.Bytes, tot.Dropped.Bytes, tot.PausesConsumed.Bytes, fl.Bytes, tot.TrimmedBytes)
	}
}

// genConfig draws a switch of 2-4 ports with random rates, buffers, trim
// modes, marking, faults and PFC. Host i+1 hangs off port i; host 50 is
// reached over every port by ECMP.
func genConfig(t *rapid.T) Config {
	n := rapid.IntRange(2, 4).Draw(t, "ports")
	cfg := Config{Routes: map[uint16][]PortID{}, Seed: rapid.Uint64().Draw(t, "seed")}
	var all []PortID
	for i := range n {
		dataCap := rapid.IntRange(1, 20000).Draw(t, "dataCap")
		p := PortConfig{
			Rate:      rapid.SampledFrom([]units.Rate{gbps, 10 * gbps, 100 * gbps}).Draw(t, "rate"),
			Delay:     time.Duration(rapid.IntRange(0, 2000).Draw(t, "delay")),
			Overhead:  rapid.IntRange(0, 64).Draw(t, "overhead"),
			DataCap:   dataCap,
			HeaderCap: rapid.IntRange(0, 3000).Draw(t, "headerCap"),
			Trim:      TrimMode(rapid.IntRange(0, 2).Draw(t, "trim")),
		}
		if rapid.Bool().Draw(t, "ecn") {
			kmin := rapid.IntRange(0, dataCap).Draw(t, "kmin")
			p.ECN = ECNConfig{Enabled: true, KMin: kmin, KMax: rapid.IntRange(kmin, 2*dataCap).Draw(t, "kmax"), PMax: 0.5}
		}
		if rapid.Bool().Draw(t, "faults") {
			start := time.Duration(rapid.IntRange(0, 50_000).Draw(t, "downStart"))
			p.Fault = FaultConfig{
				Loss:      rapid.Float64Range(0, 0.3).Draw(t, "loss"),
				DownStart: start,
				DownEnd:   start + time.Duration(rapid.IntRange(0, 20_000).Draw(t, "downLen")),
				Jitter:    time.Duration(rapid.IntRange(0, 1000).Draw(t, "jitter")),
			}
		}
		cfg.Ports = append(cfg.Ports, p)
		cfg.Routes[uint16(i+1)] = []PortID{PortID(i)}
		all = append(all, PortID(i))
	}
	cfg.Routes[50] = all
	if rapid.Bool().Draw(t, "pfc") {
		xoff := rapid.IntRange(1, 10000).Draw(t, "xoff")
		cfg.PFC[dataPrio] = PFCConfig{
			Enabled: true, XOff: xoff, XOn: rapid.IntRange(0, xoff).Draw(t, "xon"),
			Headroom:      rapid.IntRange(0, 5000).Draw(t, "headroom"),
			PauseTime:     time.Duration(rapid.IntRange(0, 50).Draw(t, "pauseUS")) * time.Microsecond,
			WatchdogLimit: time.Duration(rapid.IntRange(1, 200).Draw(t, "watchdogUS")) * time.Microsecond,
		}
	}
	return cfg
}

// genPacket draws a packet of any kind: data of any size and class,
// control packets, trimmed headers, probes, PAUSE frames, garbage.
func genPacket(t *rapid.T, nports int) Packet {
	dst := uint16(rapid.SampledFrom([]int{1, 2, 3, 4, 50, 99}).Draw(t, "dst"))
	flow := rapid.Uint32Range(0, 3).Draw(t, "flow")
	tos := rapid.SampledFrom([]uint8{24, 0, 46, 48}).Draw(t, "dscp")<<2 | rapid.Uint8Range(0, 3).Draw(t, "ecn")
	in := PortID(rapid.IntRange(0, nports).Draw(t, "in")) // nports: a port that does not exist
	var b []byte
	switch rapid.IntRange(0, 6).Draw(t, "kind") {
	case 0, 1:
		b = dataPacket(1, dst, flow, 0, rapid.Uint16().Draw(t, "entropy"), rapid.IntRange(0, 3000).Draw(t, "payload"))
	case 2:
		b = ackPacket(1, dst, flow)
	case 3:
		b, _ = wire.Trim(dataPacket(1, dst, flow, 0, 0, 100))
	case 4:
		b = wire.AppendProbe(nil, wire.ProbeFields{Kind: wire.ProbeTail, Src: 1, Dst: dst, Flow: flow})
	case 5:
		b = wire.AppendPause(nil, rapid.Uint8().Draw(t, "mask"), uint16(rapid.IntRange(0, 300).Draw(t, "micros")))
	case 6:
		b = rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "garbage")
	}
	return Packet{Buf: b, TOS: tos, In: in}
}

// Property: whatever arrives, in whatever order, under any configuration,
// bytes are conserved, occupancy stays within [0, capacity], the PFC
// accounting matches the queues, and every buffer comes back exactly once.
func TestPropertyConservation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		h := newHarness(t, cfg)
		steps := rapid.IntRange(1, 300).Draw(t, "steps")
		for range steps {
			h.advance(h.now + time.Duration(rapid.IntRange(0, 3000).Draw(t, "dt")))
			pkt := genPacket(t, len(cfg.Ports))
			h.recv(pkt.In, pkt.Buf, pkt.TOS)
			checkInvariants(t, h.sw)
		}
		h.settle()
		checkInvariants(t, h.sw)
		if fl := inFlight(h.sw); fl.Packets != 0 {
			t.Fatalf("%d packets held after the switch went idle", fl.Packets)
		}
		if len(h.owned) != 0 {
			t.Fatalf("%d buffers never came back", len(h.owned))
		}
		for _, o := range h.out {
			if _, err := wire.Validate(o.Pkt.Buf); err != nil {
				t.Fatalf("switch emitted an invalid packet: %v", err)
			}
		}
	})
}
