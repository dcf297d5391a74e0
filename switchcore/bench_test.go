package switchcore

import (
	"testing"
	"time"
)

// benchLoop drives a two-port switch the way trimswitch does: one packet
// in per iteration at the given spacing, Advance, Drain, Reclaim, and the
// buffers recycled through a pool, so any allocation shows up per op.
// Packet i arrives at i·gapNum/gapDen ns, so the spacing can match a
// serialization time that is not a whole number of nanoseconds.
func benchLoop(b *testing.B, cfg Config, gapNum, gapDen int64, prefill int) {
	sw, step := forwardLoop(b, cfg, prefill)
	b.ReportAllocs()
	b.SetBytes(int64(len(forwardTemplate)))
	b.ResetTimer()
	var i int64
	for b.Loop() {
		i++
		step(time.Duration(i * gapNum / gapDen))
	}
	b.StopTimer()
	stats := sw.Stats()
	arrived := float64(stats.Ports[portA].Received.Packets)
	st := stats.Ports[portB].Classes[dataPrio]
	b.ReportMetric(float64(st.Marked.Packets)/arrived, "marked/pkt")
	b.ReportMetric(float64(st.Trimmed.Packets)/arrived, "trimmed/pkt")
}

// forwardTemplate is the packet forwardLoop sends: 1 KiB of payload.
var forwardTemplate = dataPacket(hostA, hostB, 1, 0, 0, payload1K)

// forwardLoop returns a switch of cfg and its per-packet step at now: one
// packet in on port A, Advance, Drain, Reclaim, the buffers recycled
// through a pool. prefill steps have run at time 0.
func forwardLoop(tb testing.TB, cfg Config, prefill int) (*Switch, func(now time.Duration)) {
	tb.Helper()
	sw, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	template := forwardTemplate
	pool := make([][]byte, 0, 4096)
	for range cap(pool) {
		pool = append(pool, append(make([]byte, 0, len(template)), template...))
	}
	get := func() []byte {
		if len(pool) == 0 {
			return append(make([]byte, 0, len(template)), template...)
		}
		buf := pool[len(pool)-1][:len(template)]
		pool = pool[:len(pool)-1]
		copy(buf[:32], template) // undo a trim: header flags and length
		return buf
	}
	out := make([]Output, 0, 64)
	spare := make([][]byte, 0, 64)
	step := func(now time.Duration) {
		sw.Receive(now, Packet{Buf: get(), TOS: tosData, In: portA})
		sw.Advance(now)
		out = sw.Drain(out[:0])
		for _, o := range out {
			if o.Pkt.In != NoPort {
				pool = append(pool, o.Pkt.Buf)
			}
		}
		spare = sw.Reclaim(spare[:0])
		pool = append(pool, spare...)
	}
	for range prefill {
		step(0)
	}
	return sw, step
}

// 1032 bytes at 10 Gb/s take 825.6 ns.
const ser1K, ser1KDen = 8256, 10

// Forwarding with no queue: each packet arrives as the previous one
// finishes serializing, so none is marked or trimmed.
func BenchmarkForwardUnmarked(b *testing.B) {
	benchLoop(b, twoPorts(), ser1K, ser1KDen, 0)
}

// Forwarding through a queue held mid-ramp: every departure draws the RED
// probability (about 1 in 10 marked).
func BenchmarkForwardMarking(b *testing.B) {
	cfg := ecnConfig()
	benchLoop(b, cfg, ser1K, ser1KDen, 41)
}

// Arrivals at twice the link rate into a full NDP queue: half the
// packets are trimmed, on arrival or from the tail.
func BenchmarkForwardTrimming(b *testing.B) {
	benchLoop(b, trimConfig(TrimNDP), ser1K, 2*ser1KDen, 100)
}
