package nic_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/switchcore"
)

// A NIC with payloads copies bytes, so it refuses a region without
// memory; a payload-free one takes it and checks work against its size.
func TestRegisterLength(t *testing.T) {
	with, err := nic.New(nicConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := with.RegisterLength(4096); !errors.Is(err, nic.ErrBadRequest) {
		t.Fatalf("RegisterLength on a NIC with payloads: %v, want ErrBadRequest", err)
	}
	cfg := nicConfig(1)
	cfg.NoPayload = true
	free, err := nic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := free.RegisterLength(-1); !errors.Is(err, nic.ErrBadRequest) {
		t.Fatalf("RegisterLength(-1): %v, want ErrBadRequest", err)
	}
	r, err := free.RegisterLength(8192)
	if err != nil {
		t.Fatal(err)
	}
	if err := free.CreateFlow(0, nic.FlowSpec{Peer: 2, ID: 1, Class: nic.ClassGradient}); err != nil {
		t.Fatal(err)
	}
	key := nic.FlowKey{Peer: 2, ID: 1}
	if err := free.PostRecv(nic.RecvReq{Key: key, WR: 1, Region: r, Off: 4096, Length: 4097}); !errors.Is(err, nic.ErrBounds) {
		t.Fatalf("a receive past the region's 8192 bytes: %v, want ErrBounds", err)
	}
	if err := free.PostSend(0, nic.SendReq{Key: key, WR: 2, Region: r, Length: 8192}); err != nil {
		t.Fatalf("a send of the whole region: %v", err)
	}
	if err := free.DeregisterMemory(r); !errors.Is(err, nic.ErrRegionInUse) {
		t.Fatalf("deregistering a region with posted work: %v, want ErrRegionInUse", err)
	}
}

// The same congested gradient incast with payloads and without them
// (regions of a length, no bytes) runs identically: every completion,
// when it happened, every engine's counters and the receiver's ledger.
func TestPayloadFreeRegionsRunAsWithPayloads(t *testing.T) {
	type outcome struct {
		comps  []nic.Completion
		at     time.Duration
		stats  []nic.Stats
		record any
	}
	run := func(sm *sim.Sim) outcome {
		s := newStarIn(t, sm, 4, switchcore.TrimNDP, nil)
		const size = 1 << 20
		nonCritical := false
		if _, err := s.nics[1].BeginStep(0, nic.StepReq{Step: 4, Critical: &nonCritical, Expected: 3 * size}); err != nil {
			t.Fatal(err)
		}
		s.incast([]uint16{2, 3, 4}, size, nic.ClassGradient, 4)
		s.run(5*time.Second, s.recvDone(1, 3))
		s.nics[1].EndStep(s.sim.Now(), 4)
		if err := s.nics[1].CheckStep(4); err != nil {
			t.Fatal(err)
		}
		rec, ok := s.nics[1].StepRecord(4)
		if !ok {
			t.Fatal("no record of step 4")
		}
		if rec.Forgiven == 0 || rec.Forgiven > rec.Budget || rec.Received+rec.Forgiven != rec.Expected {
			t.Fatalf("the incast must forgive within the budget: %+v", rec)
		}
		o := outcome{comps: s.comps[1], at: s.sim.Now(), record: rec}
		for _, n := range s.nics[1:] {
			o.stats = append(o.stats, n.Stats())
		}
		return o
	}
	with := run(sim.New(reliability.DefaultMTU))
	without := run(sim.NewPayloadFree(reliability.DefaultMTU))
	if !reflect.DeepEqual(with, without) {
		t.Fatalf("payload-free run differs:\nwith payloads %+v\npayload-free  %+v", with, without)
	}
}
