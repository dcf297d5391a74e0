package trimswitchdrv

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/udpio"
)

// BenchmarkForwardingVsPlain measures, in one run and with the same sender,
// sink, packet size and packet count, (a) udpio.Forward, the plain batched
// UDP forwarder, (b) the same forwarder on sockets with segmentation
// offload (udpio.Options.Offload, which the driver uses), and (c) the
// switch driver of this package running in this process with unshaped
// links (rate 0). The sender and the sink use offload too. Rounds
// alternate between the three so that all see the same machine load. It
// reports each one's packets and payload gigabits per second, the
// switch's ratio to each reference, the loss, and the driver's heap
// allocations per forwarded packet (sender and sink included). A reference
// that fails or loses a datagram fails the benchmark.
//
// One op is benchRounds rounds of each; run it with -benchtime=1x:
//
//	go test ./trimswitchdrv -run '^$' -bench ForwardingVsPlain -benchtime=1x
func BenchmarkForwardingVsPlain(b *testing.B) {
	for _, size := range []int{1400, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			benchForwarding(b, size)
		})
	}
}

const (
	benchPackets = 30000 // per round, per forwarder
	benchRounds  = 3
	// benchWindow is the sender's credit, in datagrams not yet read by the
	// sink, so that no datagram is lost in a socket buffer and the count
	// is exact (udpio's benchmarks use the same scheme).
	benchWindow = 512
	benchStall  = time.Second
)

// forwarder is one of the two systems under test.
type forwarder struct {
	name    string
	in      netip.AddrPort // where the sender sends
	stop    func() error   // stops it (once; later calls return the same)
	packets int
	elapsed time.Duration
	mallocs uint64
}

func benchForwarding(b *testing.B, size int) {
	sender, sink := listenOffload(b, true), listenOffload(b, true)
	plain := startPlain(b, "plain", false, sink.LocalAddr())
	gso := startPlain(b, "plain-gso", true, sink.LocalAddr())
	sw := startBenchSwitch(b, sender.LocalAddr(), sink.LocalAddr())
	defer plain.stop()
	defer gso.stop()
	defer sw.stop()
	pkt := benchPacket(b, size)
	b.ReportAllocs() // per op: the whole run; switch-allocs/pkt is the per-packet figure
	b.ResetTimer()
	for range b.N {
		for range benchRounds {
			for _, f := range []*forwarder{plain, gso, sw} {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				start := time.Now()
				f.packets += runFlow(b, sender, sink, f.in, pkt)
				f.elapsed += time.Since(start)
				runtime.ReadMemStats(&after)
				f.mallocs += after.Mallocs - before.Mallocs
			}
		}
	}
	b.StopTimer()
	sent := b.N * benchRounds * benchPackets
	for _, ref := range []*forwarder{plain, gso} {
		if err := ref.stop(); err != nil || ref.packets != sent {
			b.Fatalf("the reference %s broke: %v; %d of %d datagrams arrived", ref.name, err, ref.packets, sent)
		}
	}
	for _, f := range []*forwarder{plain, gso, sw} {
		secs := f.elapsed.Seconds()
		b.ReportMetric(float64(f.packets)/secs, f.name+"-pkt/s")
		b.ReportMetric(float64(f.packets*size)*8/secs/1e9, f.name+"-Gb/s")
		b.ReportMetric(float64(sent-f.packets)/float64(sent), f.name+"-loss")
	}
	b.ReportMetric(rate(sw)/rate(plain), "switch/plain")
	b.ReportMetric(rate(sw)/rate(gso), "switch/plain-gso")
	b.ReportMetric(float64(sw.mallocs)/float64(sw.packets), "switch-allocs/pkt")
}

func rate(f *forwarder) float64 { return float64(f.packets) / f.elapsed.Seconds() }

func startPlain(b *testing.B, name string, offload bool, sink netip.AddrPort) *forwarder {
	in, out := listenOffload(b, offload), listenOffload(b, offload)
	if gso, gro := in.Offload(); offload && (!gso || !gro) {
		b.Fatalf("no offload on this kernel for %s: GSO %v, GRO %v", name, gso, gro)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		st, err := udpio.Forward(ctx, in, out, sink)
		if err == nil && (st.Dropped != 0 || st.Truncated != 0) {
			err = fmt.Errorf("dropped %d, truncated %d", st.Dropped, st.Truncated)
		}
		done <- err
	}()
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	return &forwarder{name: name, in: in.LocalAddr(), stop: stop}
}

func listenOffload(b *testing.B, offload bool) *udpio.Conn {
	c, err := udpio.Listen("127.0.0.1:0", udpio.Options{Offload: offload})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func startBenchSwitch(b *testing.B, sender, sink netip.AddrPort) *forwarder {
	doc := twoPortYAML(sender, sink, "  rate: 0\n  data_queue: 64MiB", "")
	cfg := parse(b, doc)
	cfg.MaxDatagram = DefaultMaxDatagram // the plain forwarder's buffer size
	d, err := Open(cfg, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.Run(ctx); err != nil {
			b.Error(err)
		}
	}()
	return &forwarder{name: "switch", in: d.LocalAddr(0), stop: sync.OnceValue(func() error { cancel(); <-done; return nil })}
}

func benchPacket(b *testing.B, size int) []byte {
	return dataPacket(b, 1, size-32) // a 32-byte DATA header, then the payload
}

// runFlow sends benchPackets copies of pkt to dst through the forwarder
// and returns how many reached the sink.
func runFlow(b *testing.B, tx, sink *udpio.Conn, dst netip.AddrPort, pkt []byte) int {
	credits := make(chan int, benchWindow)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sendFlow(b, tx, dst, pkt, credits, stop)
	}()
	msgs := make([]udpio.Msg, sink.BatchSize())
	for i := range msgs {
		msgs[i].Buf = make([]byte, len(pkt))
	}
	got := 0
	for got < benchPackets {
		n, err := sink.ReadBatchUntil(msgs, time.Now().Add(benchStall))
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break // a loss stalled the window; the loss metric reports it
		}
		got += n
		credits <- n
	}
	close(stop)
	wg.Wait()
	return got
}

func sendFlow(b *testing.B, tx *udpio.Conn, dst netip.AddrPort, pkt []byte, credits <-chan int, stop <-chan struct{}) {
	msgs := make([]udpio.Msg, tx.BatchSize())
	for i := range msgs {
		msgs[i] = udpio.Msg{Buf: pkt, N: len(pkt), Addr: dst, TOS: udpio.ECT0}
	}
	inflight := 0
	for sent := 0; sent < benchPackets; {
		for inflight+len(msgs) > benchWindow {
			select {
			case n := <-credits:
				inflight -= n
			case <-stop:
				return
			}
		}
		k := min(len(msgs), benchPackets-sent)
		if _, err := tx.WriteBatch(msgs[:k]); err != nil {
			b.Error(err)
			return
		}
		sent += k
		inflight += k
	}
}

// BenchmarkTimerOvershoot measures how late a 20 µs sleep wakes: the
// driver's waiter (udpio.Waiter: ppoll with the thread's timer slack at
// 1 µs) against a time.Timer, which the runtime wakes on its poller's
// millisecond grid. This is why a shaped link is driven by the waiter. Use
// -benchtime=200x.
func BenchmarkTimerOvershoot(b *testing.B) {
	const d = 20 * time.Microsecond
	b.Run("waiter", func(b *testing.B) {
		w, err := udpio.NewWaiter()
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		var late time.Duration
		for range b.N {
			start := time.Now()
			if err := w.Wait(start.Add(d)); err != nil {
				b.Fatal(err)
			}
			late += time.Since(start) - d
		}
		b.ReportMetric(float64(late.Microseconds())/float64(b.N), "late-µs")
	})
	b.Run("time.Timer", func(b *testing.B) {
		t := time.NewTimer(time.Hour)
		var late time.Duration
		for range b.N {
			start := time.Now()
			t.Reset(d)
			<-t.C
			late += time.Since(start) - d
		}
		b.ReportMetric(float64(late.Microseconds())/float64(b.N), "late-µs")
	})
}

// BenchmarkQueueSample measures what one queue sample of the lab costs the
// switch, in one run: the whole /metrics with gzip, as Go's HTTP client
// asks for it (the reference, what the lab read every 20 ms before), and
// /queues, the occupancy gauges alone. Each op serves one request through
// the switch's own handler. Either answer without the bottleneck's gauge
// fails the benchmark.
//
//	go test ./trimswitchdrv -run '^$' -bench QueueSample
func BenchmarkQueueSample(b *testing.B) {
	sender, receiver := listen(b), listen(b)
	r := start(b, parse(b, twoPortYAML(sender.LocalAddr(), receiver.LocalAddr(), unshapedDefaults, "metrics: 127.0.0.1:0\n")))
	h := r.metrics.srv.Handler
	want := []byte(`trimswitch_queue_occupancy_bytes{port="out",queue="data"} 0`)
	serve := func(b *testing.B, path string, gzipped bool) {
		b.ReportAllocs()
		checked := false
		for b.Loop() {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			if gzipped {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			b.SetBytes(int64(w.Body.Len()))
			if checked { // the answer is checked once, outside the switch's cost
				continue
			}
			checked = true
			body := w.Body.Bytes()
			if gzipped {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					b.Fatalf("%s: %v", path, err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					b.Fatalf("%s: %v", path, err)
				}
			}
			if w.Code != http.StatusOK || !bytes.Contains(body, want) {
				b.Fatalf("%s answered %d without %s", path, w.Code, want)
			}
		}
	}
	b.Run("metrics-gzip", func(b *testing.B) { serve(b, "/metrics", true) })
	b.Run("queues", func(b *testing.B) { serve(b, "/queues", false) })
}
