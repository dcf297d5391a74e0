package nic_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/switchcore"
)

// Thousands of short flows in one step, as a flow per message makes them:
// three senders into one receiver, each round a new flow from each (a new
// id, a path per message), one gradient message on it, and both ends
// destroy it once the message completed. FORGIVE's per-flow state must
// stay correct (eligibility fixed at creation, the sender's mode, the
// receiver's scoreboard all start afresh) and the step's invariants hold
// over all of them: forgiven <= budget, forgiven <= p/(1-p) x received,
// and no range charged twice (every message's received and forgiven bytes
// add up to its length, and the step's to the expected bytes). A
// destroyed flow leaves nothing behind: the engines hold what they held
// before the first round.
func TestThousandsOfShortFlowsPerStep(t *testing.T) {
	rounds := 1000
	if testing.Short() {
		rounds = 200
	}
	const size = 32 << 10
	senders := []uint16{2, 3, 4}
	// A small flow limit: the engines forget a destroyed flow's tag once
	// this many later flows were destroyed.
	const maxFlows = 64
	s := newStarIn(t, sim.NewPayloadFree(reliability.DefaultMTU), 4, switchcore.TrimNDP, func(c *nic.Config) { c.MaxFlows = maxFlows })
	regions := map[uint16]nic.RegionID{}
	for h := uint16(1); h <= 4; h++ {
		_, regions[h] = s.region(h, size, 0)
	}
	before := make([]map[string]int, 5)
	for h := 1; h <= 4; h++ {
		before[h] = s.nics[h].StateSizes()
	}
	const step budget.StepID = 4
	nonCritical := false
	expected := int64(rounds * len(senders) * size)
	if _, err := s.nics[1].BeginStep(s.sim.Now(), nic.StepReq{Step: step, Critical: &nonCritical, Expected: expected}); err != nil {
		t.Fatal(err)
	}
	var forgivenListed, trims int64
	for r := range rounds {
		id := uint32(1000 + r)
		for i, h := range senders {
			for _, e := range [][2]uint16{{h, 1}, {1, h}} {
				if err := s.nics[e[0]].CreateFlow(s.sim.Now(), nic.FlowSpec{Peer: e[1], ID: id, Class: nic.ClassGradient, Entropy: nic.EntropyMessage}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.nics[1].PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: h, ID: id}, WR: uint64(i), Region: regions[1], Length: size, Step: step}); err != nil {
				t.Fatal(err)
			}
			if err := s.nics[h].PostSend(s.sim.Now(), nic.SendReq{Key: nic.FlowKey{Peer: 1, ID: id}, WR: uint64(i), Region: regions[h], Length: size}); err != nil {
				t.Fatal(err)
			}
		}
		s.run(s.sim.Now()+time.Second, func() bool {
			for h := 1; h <= 4; h++ {
				want := 1
				if h == 1 {
					want = len(senders)
				}
				if len(s.comps[h]) < want {
					return false
				}
			}
			return true
		})
		for _, c := range s.comps[1] {
			if c.Err != nil {
				t.Fatalf("round %d: %v", r, c.Err)
			}
			var f int64
			for _, rg := range c.Forgiven {
				f += int64(rg.Len())
			}
			if int(c.Len) != size || f > size {
				t.Fatalf("round %d: receive of %d bytes, %d forgiven, want %d", r, c.Len, f, size)
			}
			forgivenListed += f
		}
		for _, h := range senders {
			rep, ok := s.nics[1].Flow(nic.FlowKey{Peer: h, ID: id})
			if !ok {
				t.Fatalf("round %d: no flow from %d", r, h)
			}
			trims += int64(rep.Stats.TrimmedRecv)
			if err := s.nics[1].DestroyFlow(nic.FlowKey{Peer: h, ID: id}); err != nil {
				t.Fatal(err)
			}
			if err := s.nics[h].DestroyFlow(nic.FlowKey{Peer: 1, ID: id}); err != nil {
				t.Fatal(err)
			}
		}
		for h := range s.comps {
			s.comps[h] = s.comps[h][:0]
		}
		if err := s.nics[1].CheckStep(step); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
	}
	// Let the last packets in flight (ACKs of destroyed flows) land.
	drained := false
	s.sim.At(s.sim.Now()+10*time.Millisecond, func() { drained = true })
	s.run(s.sim.Now()+time.Second, func() bool { return drained })
	s.nics[1].EndStep(s.sim.Now(), step)
	rec, ok := s.nics[1].StepRecord(step)
	if !ok {
		t.Fatal("no record of the step")
	}
	if err := s.nics[1].CheckStep(step); err != nil || !rec.InvariantHeld {
		t.Fatalf("%v: %+v", err, rec)
	}
	switch {
	case rec.Forgiven > rec.Budget:
		t.Fatalf("forgave %d bytes over a budget of %d", rec.Forgiven, rec.Budget)
	case float64(rec.Forgiven) > rec.P*float64(rec.Received+rec.Forgiven):
		t.Fatalf("forgave %d bytes, more than p/(1-p) x %d received at p = %g", rec.Forgiven, rec.Received, rec.P)
	case rec.Received+rec.Forgiven != expected || rec.Outstanding != 0:
		t.Fatalf("received %d + forgiven %d (outstanding %d), want the step's %d bytes each charged once", rec.Received, rec.Forgiven, rec.Outstanding, expected)
	case forgivenListed != rec.Forgiven:
		t.Fatalf("completions list %d forgiven bytes, the ledger %d", forgivenListed, rec.Forgiven)
	case trims == 0 || rec.Forgiven == 0:
		t.Fatalf("%d trims, %d bytes forgiven: the test never exercised forgiveness", trims, rec.Forgiven)
	}
	for h := 1; h <= 4; h++ {
		after := s.nics[h].StateSizes()
		// The flow table keeps the slots of the most flows it held at
		// once (three: a table of eight), and the engine the tags of the
		// last maxFlows flows destroyed; everything else is as before.
		if after["flow slots"] > 8 || after["last tags"] > maxFlows {
			t.Errorf("host %d holds %d flow slots and %d tags after %d flows came and went, three at a time", h, after["flow slots"], after["last tags"], rounds*len(senders))
		}
		delete(after, "flow slots")
		delete(after, "last tags")
		delete(before[h], "flow slots")
		delete(before[h], "last tags")
		if fmt.Sprint(after) != fmt.Sprint(before[h]) {
			t.Errorf("host %d holds %v after %d flows came and went, %v before", h, after, rounds*len(senders), before[h])
		}
	}
	t.Logf("%d flows in one step: %d trims, forgiven %d of %d bytes (budget %d, p %.4f)", rounds*len(senders), trims, rec.Forgiven, expected, rec.Budget, rec.P)
}
