package integration

import (
	"context"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
)

// BenchmarkFlowCost is what a flow costs on the real path: two forgived
// daemons through a trimswitch process, driven over their unix sockets
// by the Go host-API client, every sub-benchmark on the same fabric in
// the same run. One op of each:
//
//   - status: a status request's round trip, the reference: what any
//     request costs through the socket;
//   - create-destroy: create_flow and destroy_flow at one daemon, a new
//     flow id each time (the daemon also sends the flow's CONNECT);
//   - flow-per-message: a flow's whole life with one 4 KiB message, as a
//     flow per message makes it: create_flow at both daemons, the
//     message (post_recv, post_send, both completions; the handshake
//     runs under it), destroy_flow at both;
//   - message-on-open-flow: the same message on a flow that stays open,
//     the reference for the one above.
//
// Allocations are the client's; the daemons' are in other processes.
//
//	go test ./integration -run '^$' -bench FlowCost -benchtime 2000x -count 5
func BenchmarkFlowCost(b *testing.B) {
	f := startOneFlow(b, "trimswitch", nil)
	ctx := context.Background()
	const size = 4096
	src, err := f.c1.RegisterMemory(ctx, size)
	if err != nil {
		b.Fatal(err)
	}
	dst, err := f.c2.RegisterMemory(ctx, size)
	if err != nil {
		b.Fatal(err)
	}
	next := hostapi.FlowID(1000) // flow 1 is startOneFlow's
	newID := func() hostapi.FlowID { next++; return next }
	message := func(b *testing.B, id hostapi.FlowID, wr uint64) {
		if err := f.c2.PostRecv(ctx, hostapi.RecvReq{Flow: id, Region: dst.ID(), Length: size, WRID: wr}); err != nil {
			b.Fatal(err)
		}
		if err := f.c1.PostSend(ctx, hostapi.SendReq{Flow: id, Region: src.ID(), Length: size, WRID: wr}); err != nil {
			b.Fatal(err)
		}
		for _, c := range []*hostapi.Client{f.c2, f.c1} {
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			comp, err := c.Poll(wctx)
			cancel()
			if err != nil || comp.Status != hostapi.StatusOK || comp.WRID != wr {
				b.Fatalf("flow %d, message %d: %+v, %v", id, wr, comp, err)
			}
		}
	}
	b.Run("status", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.c1.Status(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, ent := range []hostapi.Entropy{hostapi.EntropySingle, hostapi.EntropyMessage} {
		b.Run("create-destroy/"+ent.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				id := newID()
				if err := f.c1.CreateFlow(ctx, hostapi.FlowSpec{Flow: id, Peer: 2, Class: hostapi.ClassGradient, Entropy: ent}); err != nil {
					b.Fatal(err)
				}
				if err := f.c1.DestroyFlow(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, ent := range []hostapi.Entropy{hostapi.EntropySingle, hostapi.EntropyMessage} {
		b.Run("flow-per-message/"+ent.String(), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				id := newID()
				for _, e := range []struct {
					c    *hostapi.Client
					peer hostapi.HostID
				}{{f.c1, 2}, {f.c2, 1}} {
					if err := e.c.CreateFlow(ctx, hostapi.FlowSpec{Flow: id, Peer: e.peer, Class: hostapi.ClassOther, Entropy: ent}); err != nil {
						b.Fatal(err)
					}
				}
				message(b, id, uint64(i))
				if err := f.c1.DestroyFlow(ctx, id); err != nil {
					b.Fatal(err)
				}
				if err := f.c2.DestroyFlow(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("message-on-open-flow", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			message(b, 1, uint64(i))
		}
	})
}
