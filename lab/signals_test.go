package lab

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/workload"
)

// A simulated run under a compiled collective records what the per-phase
// plots need: a signal sample beside every queue sample, cumulative and
// ending at the run's own totals; every step's phases, in order and
// matching its time; and the rate of a gradient flow of rank 1 that
// crosses the spine (the flat ring's flow id names no flow there).
func TestSimRecordsSignalsAndPhases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o := simOptions("dcqcn", "forgive")
	o.Topology, o.Ranks, o.Steps = congestedTopology(t), 0, 3
	o.Workload.Collective = "double-binary-tree"
	o.Workload.GradientBytes = 512 << 10
	f, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var trimmed int64
	for _, r := range f.Runs {
		if len(r.Signals) == 0 || len(r.Signals) != len(r.Occupancy) {
			t.Fatalf("%s: %d signal samples beside %d queue samples", r.Policy, len(r.Signals), len(r.Occupancy))
		}
		for i, p := range r.Signals {
			if p.TS != r.Occupancy[i].TS {
				t.Fatalf("%s: signal sample %d at %v s, its queue sample at %v s", r.Policy, i, p.TS, r.Occupancy[i].TS)
			}
			if i > 0 {
				q := r.Signals[i-1]
				if p.Trimmed() < q.Trimmed() || p.CNPs < q.CNPs || p.RateCuts < q.RateCuts {
					t.Fatalf("%s: sample %d %+v went back from %+v (persistent flows)", r.Policy, i, p, q)
				}
			}
		}
		last := r.Signals[len(r.Signals)-1]
		if last.Trimmed() > r.TrimmedBytes || last.CNPs > r.CNPs || last.RateCuts > r.RateCuts {
			t.Errorf("%s: last sample %+v beyond the run's %d trimmed bytes, %d CNPs, %d cuts", r.Policy, last, r.TrimmedBytes, r.CNPs, r.RateCuts)
		}
		trimmed += last.Trimmed()
		if r.Policy == "dcqcn" && (last.CNPs == 0 || last.RateCuts == 0) {
			t.Errorf("dcqcn: last sample %+v: the congested fabric should signal and cut", last)
		}
		var prevEnd float64
		for _, s := range r.Steps {
			if !s.HasPhases() || s.StartS < prevEnd || s.ComputeEndS < s.StartS || s.AllReduceFirstS < s.ComputeEndS ||
				s.AllReduceLastS < s.AllReduceFirstS || s.EndS < s.AllReduceLastS {
				t.Errorf("%s step %d: phases out of order: %+v", r.Policy, s.Step, s)
			}
			if d := s.EndS - s.StartS - s.TimeS; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s step %d: %v s from start to end, time %v s", r.Policy, s.Step, s.EndS-s.StartS, s.TimeS)
			}
			prevEnd = s.EndS
		}
		var id, from, to int
		if _, err := fmt.Sscanf(r.RateFlow, "flow %d (rank %d to rank %d)", &id, &from, &to); err != nil || len(r.Rate) == 0 {
			t.Fatalf("%s: rate flow %q (%v), %d rate samples", r.Policy, r.RateFlow, err, len(r.Rate))
		}
		if !workload.GradientFlow(hostapi.FlowID(id), 0, f.Ranks) || id < 1<<20 || from != 1 {
			t.Errorf("%s: rate flow %q: want a compiled schedule's gradient flow from rank 1", r.Policy, r.RateFlow)
		}
	}
	if trimmed == 0 {
		t.Error("no sample saw a trim: the congested fabric should trim")
	}
}

// rateFlow takes the flat ring's flow when the rank has it; otherwise the
// lowest gradient flow that has sent to another switch, never a tensor
// flow nor a flow that only receives; the choice stays while its flow
// lives, and moves on when it is gone.
func TestRateFlowPicksASenderAcrossTheSpine(t *testing.T) {
	plan := &topo.Plan{Hosts: []topo.HostProc{{ID: 1, Switch: "leaf0"}, {ID: 2, Switch: "leaf1"}, {ID: 3, Switch: "leaf0"}, {ID: 4, Switch: "leaf1"}},
		Switches: make([]topo.SwitchProc, 3)}
	newRec := func() *recorder {
		return newRecorder(nil, plan, make([]hostReader, 4), []hostapi.HostID{1, 2, 3, 4}, 1, nil)
	}
	sent := hostapi.FlowStats{DataBytes: 1}
	pair := func(s, d int) hostapi.FlowID { return hostapi.FlowID(1<<20 + 1000*s + d) }
	for _, c := range []struct {
		name  string
		flows []hostapi.FlowCounters
		want  hostapi.FlowID
	}{
		{"ring", []hostapi.FlowCounters{{Flow: 1000, Peer: 1}, {Flow: 1001, Peer: 3}}, 1001},
		{"compiled", []hostapi.FlowCounters{
			{Flow: 2000, Peer: 1, Values: sent},           // tensor
			{Flow: pair(0, 1), Peer: 1},                   // receives only
			{Flow: pair(1, 3), Peer: 4, Values: sent},     // same switch
			{Flow: pair(1, 2), Peer: 3, Values: sent},     // across: the lowest
			{Flow: pair(1, 0) + 5, Peer: 1, Values: sent}, // across, higher
		}, pair(1, 2)},
		{"none", []hostapi.FlowCounters{{Flow: pair(1, 3), Peer: 4, Values: sent}}, 0},
	} {
		r := newRec()
		f, ok := r.rateFlow(c.flows)
		if ok != (c.want != 0) || f.Flow != c.want {
			t.Errorf("%s: picked flow %d (%v), want %d", c.name, f.Flow, ok, c.want)
		}
	}
	r := newRec()
	r.rateFlow([]hostapi.FlowCounters{{Flow: pair(1, 2), Peer: 3, Values: sent}})
	if f, _ := r.rateFlow([]hostapi.FlowCounters{{Flow: pair(1, 0), Peer: 1, Values: sent}, {Flow: pair(1, 2), Peer: 3, Values: sent}}); f.Flow != pair(1, 2) {
		t.Errorf("the chosen flow changed to %d while it lived", f.Flow)
	}
	if f, _ := r.rateFlow([]hostapi.FlowCounters{{Flow: pair(1, 0), Peer: 1, Values: sent}}); f.Flow != pair(1, 0) {
		t.Errorf("picked %d once the chosen flow was gone, want %d", f.Flow, pair(1, 0))
	}
}
