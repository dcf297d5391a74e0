package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/udpio"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/hostapi"
)

// BenchmarkEngines moves flows=1, 2 and 4 flows at once between two
// forgived daemons with engines=1 and engines=2 (docs/forgived.md,
// "Engines"), through the plain forwarder of BenchmarkOneFlow (one
// udpio.Forward per direction, in this process), so that what differs is
// the daemons alone. One op is 32 MiB in all, split evenly over the flows,
// one message each; goodput is payload bytes delivered per second. The
// flows' ids are chosen so that, with two engines, they are spread over
// both at both ends (forgivedrv.Steer). The reference, in the same run, is
// the forwarder alone: 32 MiB per op of 4096-byte datagrams from a
// socket in this process, through the same forwarder, to a sink, with at
// most 256 datagrams in flight (no daemons, no transport).
//
//	go test ./integration -run '^$' -bench Engines -benchtime 3x -count 5
func BenchmarkEngines(b *testing.B) {
	b.Run("reference=plain-forwarder", benchForwarderAlone)
	for _, flows := range []int{1, 2, 4} {
		for _, engines := range []int{1, 2} {
			b.Run(fmt.Sprintf("flows=%d/engines=%d", flows, engines), func(b *testing.B) {
				benchEngines(b, flows, engines)
			})
		}
	}
}

// spreadFlows returns k flow ids (1 first) that two engines share evenly
// at both hosts: host 1 steers by peer 2, host 2 by peer 1.
func spreadFlows(k int) []hostapi.FlowID {
	ids := []hostapi.FlowID{1}
	want := func(i int) int { return i % 2 }
	for id := uint32(2); len(ids) < k; id++ {
		i := len(ids)
		if forgivedrv.Steer(2, id, 2) == want(i) && forgivedrv.Steer(1, id, 2) == want(i) {
			ids = append(ids, hostapi.FlowID(id))
		}
	}
	return ids
}

func benchEngines(b *testing.B, flows, engines int) {
	f := startOneFlow(b, "plain-forwarder", func(string) string { return fmt.Sprintf("engines: %d\n", engines) })
	ids := spreadFlows(flows)
	ctx := context.Background()
	for _, id := range ids[1:] { // flow 1 is startOneFlow's
		for _, e := range []struct {
			c    *hostapi.Client
			peer hostapi.HostID
		}{{f.c1, 2}, {f.c2, 1}} {
			if err := e.c.CreateFlow(ctx, hostapi.FlowSpec{Flow: id, Peer: e.peer, Class: hostapi.ClassOther}); err != nil {
				b.Fatal(err)
			}
		}
	}
	part := oneFlowSize / flows
	b.SetBytes(oneFlowSize)
	b.ResetTimer()
	var took time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		for j, id := range ids {
			wr := uint64(i*flows + j)
			if err := f.c2.PostRecv(ctx, hostapi.RecvReq{Flow: id, Region: f.dst.ID(), Offset: uint64(j * part), Length: uint64(part), WRID: wr}); err != nil {
				b.Fatal(err)
			}
		}
		for j, id := range ids {
			wr := uint64(i*flows + j)
			if err := f.c1.PostSend(ctx, hostapi.SendReq{Flow: id, Region: f.src.ID(), Offset: uint64(j * part), Length: uint64(part), WRID: wr}); err != nil {
				b.Fatal(err)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		for range ids {
			comp, err := f.c2.Poll(wctx)
			if err != nil || comp.Status != hostapi.StatusOK {
				cancel()
				b.Fatalf("op %d, flows %d, engines %d: %+v %v; %s", i, flows, engines, comp, err, fabricState(f.c1, f.c2))
			}
		}
		cancel()
		took += time.Since(start)
	}
	b.StopTimer()
	// The senders' completions, so the next op's sends find no work left.
	for range b.N * flows {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		comp, err := f.c1.Poll(wctx)
		cancel()
		if err != nil || comp.Status != hostapi.StatusOK {
			b.Fatalf("send completion %+v %v", comp, err)
		}
	}
	f.check()
	secs := took.Seconds()
	b.ReportMetric(float64(b.N)*oneFlowSize*8/secs/1e9, "Gb/s")
	var retx uint64
	ct, err := f.c1.Counters(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, fl := range ct.Flows {
		retx += fl.Values.RetxPackets
	}
	b.ReportMetric(float64(retx)/float64(b.N), "retx/op")
}

// benchForwarderAlone is BenchmarkEngines' reference: the plain forwarder
// with no daemon at either end.
func benchForwarderAlone(b *testing.B) {
	const size, window = 4096, 256
	seq := fabricSeq.Add(1)
	net := fmt.Sprintf("127.%d.%d.", 100+os.Getpid()%100, seq)
	listen := func(last int) *udpio.Conn {
		c, err := udpio.Listen(fmt.Sprintf("%s%d:4793", net, last), udpio.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	tx, in, out, sink := listen(1), listen(101), listen(102), listen(2)
	ctx, cancel := context.WithCancel(context.Background())
	fwd := make(chan error, 1)
	go func() {
		_, err := udpio.Forward(ctx, in, out, sink.LocalAddr())
		fwd <- err
	}()
	defer func() {
		cancel()
		if err := <-fwd; err != nil && !errors.Is(err, context.Canceled) {
			b.Error(err)
		}
	}()
	msgs := make([]udpio.Msg, tx.BatchSize())
	rx := make([]udpio.Msg, sink.BatchSize())
	for i := range msgs {
		msgs[i] = udpio.Msg{Buf: make([]byte, size), N: size, Addr: in.LocalAddr()}
	}
	for i := range rx {
		rx[i].Buf = make([]byte, size+1)
	}
	total := oneFlowSize / size
	b.SetBytes(oneFlowSize)
	b.ResetTimer()
	start := time.Now()
	lost := 0
	for range b.N {
		sent, got := 0, 0
		for got+lost < total && sent <= total {
			for sent < total && sent-got-lost < window {
				k := min(len(msgs), total-sent, window-(sent-got-lost))
				if _, err := tx.WriteBatch(msgs[:k]); err != nil {
					b.Fatal(err)
				}
				sent += k
			}
			// A bounded wait: a datagram the forwarder or the kernel
			// dropped is counted lost, not waited for.
			n, err := sink.ReadBatchUntil(rx, time.Now().Add(5*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				lost += sent - got - lost
				continue
			}
			got += n
		}
	}
	secs := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(b.N)*oneFlowSize*8/secs/1e9, "Gb/s")
	b.ReportMetric(float64(lost)/float64(b.N), "lost/op")
}
