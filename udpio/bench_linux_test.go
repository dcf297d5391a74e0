package udpio

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

// Benchmarks count one op per datagram, so ns/op and allocs/op are per
// packet, and report pkt/s and Gb/s of payload. Keep -benchtime short on the
// shared two-core machine (200ms is plenty for stable figures).

var benchSizes = []int{64, 1400}

func reportRate(b *testing.B, packets, size int, elapsed time.Duration) {
	secs := elapsed.Seconds()
	b.ReportMetric(float64(packets)/secs, "pkt/s")
	b.ReportMetric(float64(packets*size)*8/secs/1e9, "Gb/s")
}

// BenchmarkLoopbackWriteReadBatch measures the socket layer alone: one
// goroutine writes a batch to a second socket and reads it back, so the
// figure is the syscall and kernel cost per datagram with no scheduling.
func BenchmarkLoopbackWriteReadBatch(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			rx := listen(b, "127.0.0.1:0", Options{})
			tx := listen(b, "127.0.0.2:0", Options{})
			out := makeMsgs(DefaultBatchSize, size)
			numbered(out, size, rx.LocalAddr())
			in := makeMsgs(DefaultBatchSize, size)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			start := time.Now()
			for done := 0; done < b.N; {
				k := min(DefaultBatchSize, b.N-done)
				if _, err := tx.WriteBatch(out[:k]); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < k; {
					n, err := rx.ReadBatchUntil(in, time.Time{})
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
				done += k
			}
			reportRate(b, b.N, size, time.Since(start))
		})
	}
}

// BenchmarkLoopbackStream is one flow with the sender and the receiver on
// their own goroutines, as two daemons would be. The sender keeps at most a
// window of datagrams unacknowledged by the receiver (a transport's flow
// control, here a channel of credits) so that no datagram is lost in a
// socket buffer and the count is exact.
func BenchmarkLoopbackStream(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			rx := listen(b, "127.0.0.1:0", Options{})
			tx := listen(b, "127.0.0.2:0", Options{})
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			start := time.Now()
			got := runFlow(b, tx, rx, rx.LocalAddr(), b.N, size)
			reportRate(b, got, size, time.Since(start))
			reportLoss(b, got)
		})
	}
}

// BenchmarkPlainForwarder is the reference the switch is measured against:
// sender -> Forward -> sink, each on its own goroutine, with the same
// credit window as BenchmarkLoopbackStream, on plain batched sockets and
// on sockets with segmentation offload (Options.Offload) at every hop. A
// forwarder that fails, drops or truncates a datagram, or a datagram lost
// on the way, fails the benchmark: a broken reference measures nothing.
func BenchmarkPlainForwarder(b *testing.B) {
	for _, offload := range []bool{false, true} {
		for _, size := range []int{64, 1400, 4096} {
			name := fmt.Sprintf("size=%d", size)
			if offload {
				name = "gso/" + name
			}
			b.Run(name, func(b *testing.B) { benchForwarder(b, size, Options{Offload: offload}) })
		}
	}
}

func benchForwarder(b *testing.B, size int, opts Options) {
	sink := listen(b, "127.0.0.1:0", opts)
	in := listen(b, "127.0.0.2:0", opts)
	out := listen(b, "127.0.0.3:0", opts)
	tx := listen(b, "127.0.0.4:0", opts)
	if gso, gro := in.Offload(); opts.Offload && (!gso || !gro) {
		b.Fatalf("no offload on this kernel: GSO %v, GRO %v", gso, gro)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var st ForwardStats
	var ferr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		st, ferr = Forward(ctx, in, out, sink.LocalAddr())
	}()
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	got := runFlow(b, tx, sink, in.LocalAddr(), b.N, size)
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	wg.Wait()
	if ferr != nil || st.Dropped != 0 || st.Truncated != 0 || got != b.N {
		b.Fatalf("the reference broke: %v; %d of %d datagrams arrived, forwarder stats %+v", ferr, got, b.N, st)
	}
	if gso, _ := out.Offload(); opts.Offload && !gso {
		b.Fatalf("the forwarder's GSO turned off: %v", out.OffloadFailure())
	}
	reportRate(b, got, size, elapsed)
}

// flowWindow is the sender's credit: datagrams sent and not yet read by the
// sink. It stays well inside the default socket buffers at either size.
const flowWindow = 512

// stallTimeout ends a run in which datagrams stopped arriving, which only a
// loss can cause; the loss is then reported rather than waited for.
// It is long because a shared machine can leave a goroutine unscheduled
// for most of a second, and the plain forwarder fails on what reads as
// a loss.
const stallTimeout = 5 * time.Second

// runFlow sends total datagrams of size bytes from tx to dst and reads them
// at sink, returning how many arrived.
func runFlow(b *testing.B, tx, sink *Conn, dst netip.AddrPort, total, size int) int {
	credits := make(chan int, flowWindow)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sendFlow(b, tx, dst, total, size, credits, stop)
	}()
	got := 0
	msgs := makeMsgs(DefaultBatchSize, size)
	for got < total {
		n, err := sink.ReadBatchUntil(msgs, time.Now().Add(stallTimeout))
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
		got += n
		credits <- n
	}
	close(stop)
	wg.Wait()
	return got
}

func sendFlow(b *testing.B, tx *Conn, dst netip.AddrPort, total, size int, credits <-chan int, stop <-chan struct{}) {
	msgs := makeMsgs(DefaultBatchSize, size)
	numbered(msgs, size, dst)
	inflight := 0
	for sent := 0; sent < total; {
		for inflight+DefaultBatchSize > flowWindow {
			select {
			case n := <-credits:
				inflight -= n
			case <-stop:
				return
			}
		}
		k := min(DefaultBatchSize, total-sent)
		if _, err := tx.WriteBatch(msgs[:k]); err != nil {
			b.Error(err)
			return
		}
		sent += k
		inflight += k
	}
}

func reportLoss(b *testing.B, got int) {
	b.ReportMetric(float64(b.N-got)/float64(b.N), "loss")
}

// BenchmarkXNetReadBatch reads through golang.org/x/net/ipv4.PacketConn,
// the API this package does not use for its per-packet path: compare its
// allocs/op with BenchmarkLoopbackWriteReadBatch. x/net returns each
// source as a fresh *net.UDPAddr with its own IP slice.
func BenchmarkXNetReadBatch(b *testing.B) {
	const size = 64
	rx := listen(b, "127.0.0.1:0", Options{})
	tx := listen(b, "127.0.0.2:0", Options{})
	pc := ipv4.NewPacketConn(rx.udp)
	if err := pc.SetControlMessage(ipv4.FlagTTL, false); err != nil {
		b.Fatal(err)
	}
	out := makeMsgs(DefaultBatchSize, size)
	numbered(out, size, rx.LocalAddr())
	in := make([]ipv4.Message, DefaultBatchSize)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, size)}
		in[i].OOB = make([]byte, recvOOBSpace)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		k := min(DefaultBatchSize, b.N-done)
		if _, err := tx.WriteBatch(out[:k]); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < k; {
			n, err := pc.ReadBatch(in, 0)
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range in[:n] {
				_ = m.Addr.(*net.UDPAddr).AddrPort()
			}
			got += n
		}
		done += k
	}
}

// BenchmarkWakeLatency compares the two event-loop shapes on the path that
// matters for latency: a datagram arrives, the loop handles it and answers.
// One op is one round trip of a single datagram (client -> echo -> client).
//
//   - deadline-poller: the loop goroutine itself blocks in ReadBatchUntil
//     with a deadline 10 ms away, so it waits in the runtime poller, which
//     wakes the loop directly;
//   - deadline-ppoll: the same with a deadline 1 ms away, so it waits in
//     ppoll (the precise phase of ReadBatchUntil);
//   - channel: a reader goroutine blocks in ReadBatch and hands each batch
//     to the loop through a channel; the loop selects on it and a 10 ms
//     timer.
func BenchmarkWakeLatency(b *testing.B) {
	for _, shape := range []string{"deadline-poller", "deadline-ppoll", "channel"} {
		b.Run(shape, func(b *testing.B) {
			echo := listen(b, "127.0.0.1:0", Options{})
			client := listen(b, "127.0.0.2:0", Options{})
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch shape {
				case "deadline-poller":
					echoDeadlineLoop(ctx, echo, engineTick)
				case "deadline-ppoll":
					echoDeadlineLoop(ctx, echo, preciseWindow/2)
				default:
					echoChannelLoop(ctx, echo)
				}
			}()
			ping := []Msg{{Buf: make([]byte, 64), N: 64, Addr: echo.LocalAddr()}}
			pong := makeMsgs(1, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				writeAllMsgs(b, client, ping)
				if _, err := client.ReadBatch(pong); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cancel()
			echo.Wake()
			wg.Wait()
		})
	}
}

// engineTick stands in for the engine's next deadline (a retransmission
// timer) so that the loops also arm a timer every turn. It is longer than
// the precise window, so ReadBatchUntil waits in the runtime poller.
const engineTick = 10 * time.Millisecond

func echoDeadlineLoop(ctx context.Context, c *Conn, tick time.Duration) {
	msgs := makeMsgs(DefaultBatchSize, 64)
	for ctx.Err() == nil {
		n, err := c.ReadBatchUntil(msgs, time.Now().Add(tick))
		if err != nil {
			return
		}
		echoBack(c, msgs[:n])
	}
}

func echoChannelLoop(ctx context.Context, c *Conn) {
	// Two batches alternate between the reader and the loop.
	batches := make(chan []Msg)
	free := make(chan []Msg, 2)
	free <- makeMsgs(DefaultBatchSize, 64)
	free <- makeMsgs(DefaultBatchSize, 64)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for msgs := range free {
			n, err := c.ReadBatch(msgs)
			if err != nil {
				return
			}
			batches <- msgs[:n]
		}
	}()
	timer := time.NewTimer(engineTick)
	defer timer.Stop()
	for {
		select {
		case msgs := <-batches:
			echoBack(c, msgs)
			free <- msgs[:cap(msgs)]
		case <-timer.C:
		case <-ctx.Done():
			c.SetReadDeadline(aLongTimeAgo)
			close(free)
			// Drain a batch the reader may be handing over.
			for {
				select {
				case <-batches:
				case <-readerDone:
					return
				}
			}
		}
		timer.Reset(engineTick)
	}
}

func echoBack(c *Conn, msgs []Msg) {
	_, _ = c.WriteBatch(msgs)
}
