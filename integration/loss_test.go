package integration

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
)

// A loss fault drops packets silently: no trimmed header reports them, so
// the receiver learns of a loss from the gap behind it or, when nothing
// follows (the tail of a message the sender has no more data behind), from
// the sender's tail probe ("probes that find losses a trim never
// reports"). A transfer through a port that loses 5 % of its packets, one
// 256 KiB message and then 600 one-packet messages sent one after the other
// (every one a tail), arrives byte-exact with the losses recovered by
// probes and NACKs, not by retransmission timeouts: the RTO is 200 ms,
// 400 times the path's round trip, and fires only for what a probe
// cannot find (a lost retransmission) or when the machine stalls a daemon.
func TestLossFaultRecoveredByProbesAndNACKs(t *testing.T) {
	const loss = 0.05
	s := newStarPorts(t, 2, "200Mbps",
		map[uint16]hostOpts{1: {rto: "200ms/800ms", failAfter: "5s"}, 2: {rto: "200ms/800ms", failAfter: "5s"}},
		map[uint16]portOpts{1: {loss: loss}})
	c1, c2 := s.client(1), s.client(2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const big, small, smalls = 256 << 10, 4096, 600
	size := big + small*smalls
	const id = 81
	for _, e := range []struct {
		c    *hostapi.Client
		peer hostapi.HostID
	}{{c2, 1}, {c1, 2}} {
		if err := e.c.CreateFlow(ctx, hostapi.FlowSpec{Flow: id, Peer: e.peer, Class: hostapi.ClassOther}); err != nil {
			t.Fatal(err)
		}
	}
	sr, err := c2.RegisterMemory(ctx, size)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := c1.RegisterMemory(ctx, size)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := sr.Bytes(), rr.Bytes()
	rng := rand.New(rand.NewPCG(id, 2))
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	type msg struct{ off, n int }
	msgs := []msg{{0, big}}
	for i := range smalls {
		msgs = append(msgs, msg{big + i*small, small})
	}
	for i, m := range msgs {
		if err := c1.PostRecv(ctx, hostapi.RecvReq{Flow: id, Region: rr.ID(), Offset: uint64(m.off), Length: uint64(m.n), WRID: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// One message at a time: each is the tail of everything sent so far.
	for i, m := range msgs {
		if err := c2.PostSend(ctx, hostapi.SendReq{Flow: id, Region: sr.ID(), Offset: uint64(m.off), Length: uint64(m.n), WRID: uint64(i)}); err != nil {
			t.Fatal(err)
		}
		if comp := awaitKind(t, c2, hostapi.KindSend, time.Minute); comp.Status != hostapi.StatusOK || comp.WRID != uint64(i) {
			t.Fatalf("send %d: %+v", i, comp)
		}
	}
	for i := range msgs {
		if comp := awaitKind(t, c1, hostapi.KindRecv, time.Minute); comp.Status != hostapi.StatusOK || comp.WRID != uint64(i) {
			t.Fatalf("receive %d: %+v", i, comp)
		}
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("received bytes differ from the bytes sent")
	}
	drops := metric(t, s.swStats, "trimswitch_dropped_packets_total", `port="h1"`)
	trims := metric(t, s.swStats, "trimswitch_trimmed_packets_total", `port="h1"`)
	tx := flowValues(t, c2, id)
	t.Logf("%.0f packets lost on the link, %.0f trimmed; sender: %d retransmissions, %d probes, %d NACKs, %d RTOs",
		drops, trims, tx["retx_packets"], tx["probes_sent"], tx["nacks_recv"], tx["rtos"])
	if drops < 20 || trims != 0 {
		t.Fatalf("the 5 %% loss fault dropped %.0f packets and the port trimmed %.0f; the test needs silent losses", drops, trims)
	}
	// About half the losses are probes, which nothing retransmits.
	if tx["retx_packets"] < uint64(drops)/4 {
		t.Fatalf("%d retransmissions for %.0f losses", tx["retx_packets"], drops)
	}
	// Under load a stalled daemon adds timeouts of its own, so the bound
	// leaves room; without probes every lost one-packet message (about
	// half the losses) waits for one.
	if 2*tx["rtos"] > uint64(drops) {
		t.Fatalf("%d retransmission timeouts for %.0f losses: probes and NACKs should recover nearly all of them", tx["rtos"], drops)
	}
	if tx["probes_sent"] < smalls || tx["nacks_recv"] < uint64(drops)/5 {
		t.Fatalf("%d probes and %d NACKs for %.0f losses: losses were not found by probes and gaps", tx["probes_sent"], tx["nacks_recv"], drops)
	}
}
