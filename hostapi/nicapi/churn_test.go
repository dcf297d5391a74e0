package nicapi_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/hostapi/nicapi"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/wire"
)

// Thousands of short flows through the host API in one step: two hosts
// back to back, each flow created at both, one gradient message on it,
// destroyed at both once the message completed, as a flow per message
// makes them. Every message arrives whole and completes once, the step's
// record holds the invariants and counts every byte once, and the host
// API keeps nothing of a destroyed flow (its flows and the clients' are
// empty, nothing outstanding, no completion unrouted).
func TestThousandsOfShortFlowsThroughTheHostAPI(t *testing.T) {
	flows := 3000
	if testing.Short() {
		flows = 300
	}
	const size = 8 << 10
	const c hostapi.ClientID = 1
	var hosts [2]*nicapi.Host
	var engines [2]*nic.Engine
	var comps [2][]hostapi.Completion
	for i := range 2 {
		cfg := nic.DefaultConfig(uint16(i+1), 1e12) // pacing is not what this test is about
		cfg.DCQCN.LineRate = 0
		e, err := nic.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		engines[i] = e
		hosts[i] = nicapi.New(e, hostapi.Limits{}, func(_ hostapi.ClientID, comp hostapi.Completion) {
			comps[i] = append(comps[i], comp)
			hosts[i].Written(c, 1)
		})
	}
	var regions [2]hostapi.RegionID
	mem := [2][]byte{make([]byte, size), make([]byte, size)}
	for i := range mem[0] {
		mem[0][i] = byte(i*7) | 1
	}
	for i, h := range hosts {
		r, err := h.RegisterMemory(c, mem[i])
		if err != nil {
			t.Fatal(err)
		}
		regions[i] = r
	}
	var now time.Duration
	nonCritical := false
	expected := uint64(flows * size)
	if err := hosts[1].BeginStep(now, 0, hostapi.StepReq{Step: 1, Critical: &nonCritical, ExpectedGradientBytes: expected}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, wire.DataLen+9000)
	pump := func() {
		for moved := true; moved; {
			moved = false
			for i := range 2 {
				for {
					pkt, tos, ok := engines[i].Transmit(now, buf)
					if !ok {
						break
					}
					engines[1-i].Receive(now, pkt, tos)
					moved = true
				}
			}
		}
		for i := range 2 {
			engines[i].Advance(now)
			hosts[i].Deliver()
		}
		now += time.Microsecond
	}
	for n := range flows {
		id := hostapi.FlowID(1000 + n)
		for i, h := range hosts {
			spec := hostapi.FlowSpec{Flow: id, Peer: hostapi.HostID(2 - i), Class: hostapi.ClassGradient, Entropy: hostapi.EntropyMessage}
			if err := h.CreateFlow(now, c, spec); err != nil {
				t.Fatal(err)
			}
		}
		if err := hosts[1].PostRecv(c, hostapi.RecvReq{Flow: id, Region: regions[1], Length: size, Step: 1, WRID: uint64(n)}); err != nil {
			t.Fatal(err)
		}
		if err := hosts[0].PostSend(now, c, hostapi.SendReq{Flow: id, Region: regions[0], Length: size, WRID: uint64(n)}); err != nil {
			t.Fatal(err)
		}
		for steps := 0; len(comps[0]) == 0 || len(comps[1]) == 0; steps++ {
			if steps > 10000 {
				t.Fatalf("flow %d: the message did not complete", id)
			}
			pump()
		}
		for i := range 2 {
			if len(comps[i]) != 1 || comps[i][0].Status != hostapi.StatusOK || comps[i][0].WRID != uint64(n) {
				t.Fatalf("flow %d, host %d: completions %+v", id, i+1, comps[i])
			}
			comps[i] = comps[i][:0]
		}
		if !bytes.Equal(mem[1], mem[0]) {
			t.Fatalf("flow %d: the received bytes differ", id)
		}
		clear(mem[1])
		for i, h := range hosts {
			if err := h.DestroyFlow(c, id); err != nil {
				t.Fatal(err)
			}
			if len(comps[i]) != 0 {
				t.Fatalf("flow %d: destroying it failed work: %+v", id, comps[i])
			}
		}
	}
	for range 100 {
		pump() // the last ACKs land on destroyed flows
	}
	if err := hosts[1].EndStep(now, 0, 1); err != nil {
		t.Fatal(err)
	}
	recs, err := hosts[1].Steps(0, 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("steps: %v, %v", recs, err)
	}
	rec := recs[0]
	if !rec.InvariantHeld || rec.Forgiven > rec.Budget || rec.Received+rec.Forgiven != int64(expected) || rec.Outstanding != 0 {
		t.Fatalf("step record %+v, want the invariants held and %d bytes each counted once", rec, expected)
	}
	for i, h := range hosts {
		// Every destroyed flow's counters stay in the client's retired
		// sums: each flow sent (host 1) or received (host 2) its message.
		rt := h.Counters(c).Retired
		if rt.Flows != uint64(flows) || rt.All.SendsDone+rt.All.RecvsDone != uint64(flows) ||
			(i == 0 && rt.All.DataBytes-rt.All.RetxBytes != uint64(flows*size)) || (i == 1 && rt.All.RecvBytes < uint64(flows*size)) {
			t.Errorf("host %d: retired %d flows, %d sends and %d receives done, %d new data bytes, %d received; want %d flows of %d bytes",
				i+1, rt.Flows, rt.All.SendsDone, rt.All.RecvsDone, rt.All.DataBytes-rt.All.RetxBytes, rt.All.RecvBytes, flows, size)
		}
		cc := h.Counters(c).Client
		if h.Flows() != 0 || cc.Flows != 0 || cc.Outstanding != 0 || h.Unrouted() != 0 || cc.Regions != 1 {
			t.Fatalf("host %d after %d flows: %d flows open, client %+v, %d unrouted", i+1, flows, h.Flows(), cc, h.Unrouted())
		}
	}
	t.Logf("%d flows: step %+v", flows, rec)
}
