package nic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// checkTxIndex holds the transmit index's invariant (txindex.go): it
// names e.order's flows' timers entries in e.order's order, it is kept
// exactly when the host has more than txScanMax flows, and then no flow
// that may send has a time later than its pacer's.
func checkTxIndex(e *Engine) error {
	if len(e.txSlot) != len(e.order) {
		return fmt.Errorf("%d flows in the transmit index, %d in the order", len(e.txSlot), len(e.order))
	}
	if want := len(e.order) > e.txScanMax; e.txIndexed != want {
		return fmt.Errorf("%d flows, at most %d scanned: indexed %v", len(e.order), e.txScanMax, e.txIndexed)
	}
	for i, f := range e.order {
		if e.txSlot[i] != f.timers {
			return fmt.Errorf("flow %v at %d: entry %d in the index, %d its own", f.key, i, e.txSlot[i], f.timers)
		}
		if e.txIndexed && f.txTime() != never && e.txAt[f.timers] > f.cc.NextSend() {
			return fmt.Errorf("flow %v may send at %v, the index says %v: an unblock is missing", f.key, f.cc.NextSend(), e.txAt[f.timers])
		}
	}
	return nil
}

// Transmit with the index sends what a scan of every flow sends: the
// same packets, byte for byte, in the same order, and the same
// completions and counters, through random work with many flows per host
// (the count crossing the threshold both ways), flows coming and going,
// failing on a lossy network, running dry and being given data again. The
// reference net scans every flow at every Transmit (txScanMax above any
// count); the other indexes above a threshold, from always (0) to the
// default.
func TestTransmitIndexMatchesScan(t *testing.T) {
	indexed, scanned, sendable := 0, 0, 0
	for _, scanMax := range []int{0, 3, 8, txScanMax} {
		for seed := range uint64(4) {
			run := func(scanMax int) *dueNet {
				n := newDueNet(t, seed+1, 3, false)
				n.ids = 24
				for _, e := range n.hosts {
					e.txScanMax = scanMax
				}
				return n
			}
			n, ref := run(scanMax), run(math.MaxInt)
			early := rand.New(rand.NewPCG(seed, 3))
			most := 0
			for range 3000 {
				n.step()
				n.churn()
				ref.step()
				ref.churn()
				for _, e := range n.hosts {
					// A time earlier than the flow's is a bound too:
					// the round-robin tests the flow, and must skip
					// it when it may not send, or not yet.
					if e.txIndexed && early.IntN(4) == 0 {
						e.txAt[e.txSlot[early.IntN(len(e.txSlot))]] = 0
					}
					most = max(most, len(e.order))
					if e.txIndexed {
						indexed++
					} else {
						scanned++
					}
					for _, f := range e.order {
						if f.txTime() != never {
							sendable++
						}
					}
				}
			}
			for i := range max(len(n.log), len(ref.log)) {
				if i >= len(n.log) || i >= len(ref.log) || n.log[i] != ref.log[i] {
					var got, want string
					if i < len(n.log) {
						got = n.log[i]
					}
					if i < len(ref.log) {
						want = ref.log[i]
					}
					t.Fatalf("scanMax %d seed %d: event %d differs from a scan of every flow's (%d and %d events):\n%s\n%s",
						scanMax, seed+1, i, len(n.log), len(ref.log), got, want)
				}
			}
			for h, e := range n.hosts {
				if e.Stats() != ref.hosts[h].Stats() {
					t.Fatalf("scanMax %d seed %d host %d: stats %+v, a scan of every flow's %+v", scanMax, seed+1, h+1, e.Stats(), ref.hosts[h].Stats())
				}
			}
			if most <= max(scanMax, 8) {
				t.Fatalf("scanMax %d seed %d: at most %d flows on a host: too few to index", scanMax, seed+1, most)
			}
		}
	}
	// The test must have exercised both ways of choosing.
	if indexed == 0 || scanned == 0 || sendable < indexed/10 {
		t.Fatalf("%d host steps indexed, %d scanned, %d flows that may send", indexed, scanned, sendable)
	}
	t.Logf("%d host steps indexed, %d scanned, %d flows that may send", indexed, scanned, sendable)
}

// churn is more random work for step: flows destroyed at random, which
// keeps the count of a host's flows going up and down across the index's
// threshold, and sends posted on flows that exist, which gives many flows
// data at once.
func (n *dueNet) churn() {
	h := n.rng.IntN(len(n.hosts))
	e := n.hosts[h]
	if len(e.order) == 0 {
		return
	}
	f := e.order[n.rng.IntN(len(e.order))]
	switch r := n.rng.IntN(100); {
	case r < 6:
		_ = e.DestroyFlow(f.key)
		n.check(h)
	case r < 20:
		peer := int(f.key.Peer) - 1
		size := 1 + n.rng.IntN(48<<10)
		_ = n.hosts[peer].PostRecv(RecvReq{Key: FlowKey{Peer: uint16(h + 1), ID: f.key.ID}, WR: 2, Region: n.regions[peer], Length: size})
		n.check(peer)
		_ = e.PostSend(n.now, SendReq{Key: f.key, WR: 2, Region: n.regions[h], Length: size})
		n.check(h)
		n.run(h)
	}
}
