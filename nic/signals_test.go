package nic_test

import (
	"testing"
	"time"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/switchcore"
)

// Signals sums what the flows' snapshots report, CNPs received and rate
// cuts, at every host of a DCQCN incast that cuts: the sampler's cheap
// totals are the counters' totals.
func TestSignalsSumTheFlowsCounters(t *testing.T) {
	s := newStar(t, 4, switchcore.TrimNDP, nil)
	const size = 1 << 20
	s.incast([]uint16{2, 3, 4}, size, nic.ClassGradient, 0)
	s.run(5*time.Second, s.recvDone(1, 3))
	var allCNPs, allCuts uint64
	for h := uint16(1); h <= 4; h++ {
		var cnps, cuts uint64
		for _, k := range s.nics[h].Flows() {
			r, _ := s.nics[h].Flow(k)
			cnps += r.Stats.CNPsRecv
			cuts += r.Ctrl.Cuts
		}
		gotCNPs, gotCuts := s.nics[h].Signals()
		if gotCNPs != cnps || gotCuts != cuts {
			t.Fatalf("host %d: Signals gives %d CNPs and %d cuts, its flows %d and %d", h, gotCNPs, gotCuts, cnps, cuts)
		}
		allCNPs, allCuts = allCNPs+cnps, allCuts+cuts
	}
	if allCNPs == 0 || allCuts == 0 {
		t.Fatalf("%d CNPs and %d cuts: the incast should cut", allCNPs, allCuts)
	}
}
