package hostapi_test

import (
	"context"
	"testing"

	"github.com/forgive-emu/forgive/hostapi"
)

// benchClient returns a client with a region and a flow to a peer that
// keeps a receive posted for every send.
func benchClient(b *testing.B) (*hostapi.Client, hostapi.SendReq) {
	h := newHarness(b, hostapi.ServerConfig{})
	c := h.dial()
	ctx := context.Background()
	r, err := c.RegisterMemory(ctx, 1<<20)
	must(b, err)
	must(b, c.CreateFlow(ctx, hostapi.FlowSpec{Flow: 1, Peer: peerHost, Class: hostapi.ClassGradient, Entropy: hostapi.EntropySpray}))
	h.be.peerFlow(b, 1, hostapi.ClassGradient, 65536, 65536)
	return c, hostapi.SendReq{Flow: 1, Region: r.ID(), Offset: 4096, Length: 4096}
}

// BenchmarkPostSendRoundTrip measures one post_send: request frame over
// the socket, the core's checks and the engine's post, reply frame back.
// The completions are drained as they arrive.
func BenchmarkPostSendRoundTrip(b *testing.B) {
	c, req := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		req.WRID++
		if err := c.PostSend(ctx, req); err != nil {
			b.Fatal(err)
		}
		for {
			if _, ok := c.TryPoll(); !ok {
				break
			}
		}
	}
}

// BenchmarkPostSendRoundTripParallel is the same from several goroutines
// sharing one client, as ranks with several communication threads do.
func BenchmarkPostSendRoundTripParallel(b *testing.B) {
	c, req := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := req
		for pb.Next() {
			req.WRID++
			if err := c.PostSend(ctx, req); err != nil {
				b.Error(err)
				return
			}
			c.TryPoll()
		}
	})
}

// BenchmarkPostSendCompletion measures post to completion: the reply, the
// packets to the peer and back, and the pushed completion.
func BenchmarkPostSendCompletion(b *testing.B) {
	c, req := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		req.WRID++
		if err := c.PostSend(ctx, req); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Poll(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
