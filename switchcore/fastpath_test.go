package switchcore

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// twins drives two switches built from one config, one of them with its
// fast paths off, with the same packets at the same times, and requires
// them to answer alike at every call: the same drop reasons, the same
// outputs (port, time, TOS, ingress and bytes) in the same order, the same
// buffers given back, the same deadlines, and in the end the same Stats.
// The fast one's outputs are taken with Outputs, the slow one's with Drain.
type twins struct {
	t          *testing.T
	fast, slow *Switch
	now        time.Duration
	out        [2][]Output
	spare      [2][][]byte
	outputs    int
	// outputs whose Hdr was checked against wire.Inspect of their bytes,
	// and of those the trimmed data headers and the PAUSE frames
	inspected, trimmed, pauses int
}

func newTwins(t *testing.T, cfg Config) *twins {
	t.Helper()
	fast, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	slow.noFastPaths = true
	return &twins{t: t, fast: fast, slow: slow}
}

func (w *twins) recv(in PortID, b []byte, tos uint8) {
	w.t.Helper()
	rf := w.fast.Receive(w.now, Packet{Buf: bytes.Clone(b), TOS: tos, In: in})
	rs := w.slow.Receive(w.now, Packet{Buf: bytes.Clone(b), TOS: tos, In: in})
	if rf != rs {
		w.t.Fatalf("at %v: Receive on port %d = %v with fast paths, %v without\n% x", w.now, in, rf, rs, b)
	}
	w.compare()
}

// compare drains both switches and checks they handed over the same.
func (w *twins) compare() {
	w.t.Helper()
	for i, sw := range []*Switch{w.fast, w.slow} {
		w.spare[i] = sw.Reclaim(w.spare[i][:0])
	}
	// The fast switch hands its outputs over without a copy, the slow
	// one with: Outputs must give what Drain gives.
	w.out[0] = append(w.out[0][:0], w.fast.Outputs()...)
	w.out[1] = w.slow.Drain(w.out[1][:0])
	if len(w.out[0]) != len(w.out[1]) || len(w.spare[0]) != len(w.spare[1]) {
		w.t.Fatalf("at %v: %d outputs and %d buffers back with fast paths, %d and %d without",
			w.now, len(w.out[0]), len(w.spare[0]), len(w.out[1]), len(w.spare[1]))
	}
	for k := range w.out[0] {
		f, s := w.out[0][k], w.out[1][k]
		if f.Port != s.Port || f.At != s.At || f.Pkt.TOS != s.Pkt.TOS || f.Pkt.In != s.Pkt.In || !bytes.Equal(f.Pkt.Buf, s.Pkt.Buf) || f.Hdr != s.Hdr {
			w.t.Fatalf("at %v: output %d is %+v with fast paths, %+v without", w.now, k, f, s)
		}
		w.checkHdr(&f)
	}
	w.outputs += len(w.out[0])
	df, okf := w.fast.NextDeadline()
	ds, oks := w.slow.NextDeadline()
	if df != ds || okf != oks {
		w.t.Fatalf("at %v: next deadline %v %v with fast paths, %v %v without", w.now, df, okf, ds, oks)
	}
}

// checkHdr requires an output's Hdr to be what wire.Inspect says of the
// bytes it carries: equal when they are valid, a zero Type when not.
func (w *twins) checkHdr(o *Output) {
	w.t.Helper()
	h, err := wire.Inspect(o.Pkt.Buf)
	if err != nil {
		h = wire.Summary{}
	}
	if o.Hdr != h {
		w.t.Fatalf("at %v: output on port %d carries header %+v, its bytes inspect as %+v (%v)\n% x", w.now, o.Port, o.Hdr, h, err, o.Pkt.Buf)
	}
	w.inspected++
	if h.Trimmed() {
		w.trimmed++
	}
	if h.Type == wire.TypePause {
		w.pauses++
	}
}

// advance moves both to t, stopping at every deadline on the way.
func (w *twins) advance(t time.Duration) {
	w.t.Helper()
	for {
		d, ok := w.fast.NextDeadline()
		if !ok || d > t {
			break
		}
		w.now = max(w.now, d)
		w.fast.Advance(w.now)
		w.slow.Advance(w.now)
		w.compare()
	}
	w.now = max(w.now, t)
	w.fast.Advance(w.now)
	w.slow.Advance(w.now)
	w.compare()
}

func (w *twins) finish() {
	w.t.Helper()
	w.advance(w.now + time.Second)
	if f, s := w.fast.Stats(), w.slow.Stats(); !reflect.DeepEqual(f, s) {
		w.t.Fatalf("Stats differ:\nfast %+v\nslow %+v", f, s)
	}
}

// twinConfig is a four-port switch without PFC, port 0 facing host 1
// (with the source guard), ECMP for host 9, ECN on port 2, NDP trimming
// into buffers of a few packets (port 1's smaller than the largest packet),
// and on request a lossy port 3 that is down for a while.
func twinConfig(faults bool) Config {
	port := PortConfig{Rate: 10 * gbps, Delay: microsecond, Overhead: 24, DataCap: 6 * packet1K, HeaderCap: 400, Trim: TrimNDP}
	cfg := Config{
		Ports:  []PortConfig{port, port, port, port},
		Routes: map[uint16][]PortID{1: {0}, 2: {1}, 3: {2}, 4: {3}, 9: {1, 2, 3}},
		Seed:   7,
	}
	cfg.Ports[0].Host = 1
	cfg.Ports[1].Trim = TrimArrival
	cfg.Ports[1].DataCap = 1500 // smaller than the largest packets: they are trimmed on arrival
	cfg.Ports[2].ECN = ECNConfig{Enabled: true, KMin: 0, KMax: 3 * packet1K, PMax: 0.5}
	cfg.Ports[3].Delay = 0 // a packet can reach the far end the instant it left
	cfg.Ports[3].Rate = 100 * gbps
	if faults {
		cfg.Ports[3].Fault = FaultConfig{Loss: 0.1, Jitter: 300, DownStart: 200 * microsecond, DownEnd: 400 * microsecond}
	}
	return cfg
}

// randomPacket is a packet of any type (or a broken one) from or to any
// of the hosts, with a TOS for data, control or CE.
func randomPacket(rng *rand.Rand) ([]byte, uint8) {
	src, dst := uint16(1+rng.IntN(4)), []uint16{1, 2, 3, 4, 9, 50}[rng.IntN(6)]
	flow, psn := uint32(rng.IntN(8)), wire.PSN(rng.IntN(1000))
	tos := []uint8{tosData, tosData, tosNotECT, tosDataCE, tosDataE1, tosAck, 0}[rng.IntN(7)]
	switch k := rng.IntN(20); {
	case k < 12:
		b := dataPacket(src, dst, flow, psn, uint16(rng.IntN(64)), rng.IntN(2*payload1K))
		if rng.IntN(8) == 0 {
			b, _ = wire.Trim(b)
		}
		return b, tos
	case k < 16:
		return ackPacket(src, dst, flow), tosAck
	case k == 16:
		return wire.AppendProbe(nil, wire.ProbeFields{Kind: wire.ProbeTail, Src: src, Dst: dst, Flow: flow, Entropy: 3}), tos
	case k == 17:
		return wire.AppendCNP(nil, src, dst, flow, psn), tosAck
	case k == 18:
		return wire.AppendPause(nil, 1<<dataPrio, uint16(rng.IntN(4))), tos
	}
	b := dataPacket(src, dst, flow, psn, 0, 10)
	b[rng.IntN(len(b))] ^= 0x40 // usually malformed
	return b, tos
}

// TestFastPathsAgree runs random traffic through twins: bursts at one
// instant (several packets of the same time, links busy), sparse arrivals
// (idle links: the fast paths), every packet type, both trim modes, ECN,
// a zero-delay link, with and without faults, and a PFC switch.
func TestFastPathsAgree(t *testing.T) {
	pfc := twinConfig(false)
	// XOn just below XOff: the departure of the packet that paused the
	// neighbour can resume it, so the order of two ports' steps at one
	// instant shows in the frames sent.
	pfc.PFC[dataPrio] = PFCConfig{Enabled: true, XOff: 2 * packet1K, XOn: 2*packet1K - 100, PauseTime: 5 * microsecond,
		WatchdogLimit: 40 * microsecond}
	configs := map[string]Config{"plain": twinConfig(false), "faults": twinConfig(true), "pfc": pfc, "fuzz": fuzzConfig()}
	for name, cfg := range configs {
		for seed := range uint64(8) {
			rng := rand.New(rand.NewPCG(seed, 99))
			w := newTwins(t, cfg)
			for range 3000 {
				if rng.IntN(3) > 0 {
					// 0 to 3 µs: some at once, some after the links went idle
					w.advance(w.now + time.Duration(rng.IntN(4))*time.Duration(rng.IntN(1000)))
				}
				b, tos := randomPacket(rng)
				w.recv(PortID(rng.IntN(len(cfg.Ports)+1)), b, tos) // one port past the last
			}
			w.finish()
			if w.outputs < 1000 {
				t.Fatalf("%s, seed %d: only %d outputs", name, seed, w.outputs)
			}
		}
	}
}

// FuzzFastPathsAgree: any stream of packets at any times through twins
// of the switch without PFC (where every fast path applies) gets the same
// answers from both. Each record is [port][tos][gap][length][bytes...],
// as in FuzzReceive.
func FuzzFastPathsAgree(f *testing.F) {
	var stream []byte
	for i, b := range fuzzSeeds() {
		stream = append(stream, byte(i%4), tosData, byte(i*7), byte(len(b)))
		stream = append(stream, b...)
	}
	f.Add(stream)
	f.Fuzz(func(t *testing.T, stream []byte) {
		w := newTwins(t, twinConfig(true))
		for len(stream) >= 4 {
			port, tos, gap, n := PortID(stream[0]%5), stream[1], stream[2], int(stream[3])
			stream = stream[4:]
			n = min(n, len(stream))
			b := stream[:n]
			stream = stream[n:]
			w.advance(w.now + time.Duration(gap)*20)
			w.recv(port, b, tos)
		}
		w.finish()
	})
}

// TestOutputHeaderIsInspect: every packet a switch hands over carries in
// Output.Hdr what wire.Inspect says of its bytes (twins.checkHdr, on every
// output of TestFastPathsAgree's traffic), through the fast paths and the
// queues, when the switch trims a packet (the bytes change) and when it
// writes a PAUSE frame itself. A driver that passes Hdr to the next
// switch's ReceiveInspected therefore hands it the parse of the bytes,
// as if that switch had read them.
func TestOutputHeaderIsInspect(t *testing.T) {
	pfc := twinConfig(false)
	pfc.PFC[dataPrio] = PFCConfig{Enabled: true, XOff: 2 * packet1K, XOn: 2*packet1K - 100, PauseTime: 5 * microsecond}
	for name, cfg := range map[string]Config{"plain": twinConfig(false), "faults": twinConfig(true), "pfc": pfc} {
		rng := rand.New(rand.NewPCG(3, 5))
		w := newTwins(t, cfg)
		for range 3000 {
			if rng.IntN(3) > 0 {
				w.advance(w.now + time.Duration(rng.IntN(4))*time.Duration(rng.IntN(1000)))
			}
			b, tos := randomPacket(rng)
			w.recv(PortID(rng.IntN(len(cfg.Ports))), b, tos)
		}
		w.finish()
		t.Logf("%s: %d outputs checked, %d trimmed, %d PAUSE frames", name, w.inspected, w.trimmed, w.pauses)
		if w.inspected < 1000 || w.trimmed == 0 || name == "pfc" && w.pauses == 0 {
			t.Errorf("%s: %d outputs checked, %d trimmed, %d PAUSE frames: the traffic does not cover the rewrites", name, w.inspected, w.trimmed, w.pauses)
		}
	}
}
