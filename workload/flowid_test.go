package workload

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/hostapi"
)

// "A flow id that does not encode a rank count": the banks of the flow-id
// scheme are as wide as the job, never overlap for any job size up to
// MaxRanks, and keep the ids a job of up to 1000 ranks always had.
func TestFlowBanksAreSizedFromTheJobAndNeverOverlap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.OneOf(rapid.IntRange(2, 1100), rapid.IntRange(2, MaxRanks)).Draw(rt, "ranks")
		w := uint64(stride(n))
		if w < uint64(n) {
			rt.Fatalf("%d ranks: stride %d is narrower than the job", n, w)
		}
		flat := (&plan{n: n}).maxFlowID() // the flat ring's banks end here
		sends := rapid.IntRange(1, 4*n).Draw(rt, "max sends")
		type bank struct{ lo, hi uint64 }
		banks := []bank{
			{ringIDs * w, flat},
			{pairIDs, pairIDs + w*w},
			{tensorPairIDs(n), tensorPairIDs(n) + w*w},
			{messageIDs(n), messageIDs(n) + uint64(2*n*sends)},
		}
		for i := 1; i < len(banks); i++ {
			if banks[i].lo < banks[i-1].hi {
				rt.Fatalf("%d ranks: bank %d [%d, %d) overlaps bank %d [%d, %d)", n, i, banks[i].lo, banks[i].hi, i-1, banks[i-1].lo, banks[i-1].hi)
			}
		}
		if n <= minStride {
			if w != 1000 || tensorPairIDs(n) != 1<<21 || messageIDs(n) != 1<<22 || flat != 6000 {
				rt.Fatalf("%d ranks: stride %d, banks at %d and %d, flat ids to %d: want what they always were (1000, 2^21, 2^22, 6000)",
					n, w, tensorPairIDs(n), messageIDs(n), flat)
			}
		}
	})
}

// Beyond 1000 ranks the flat ring's flows still pair up: a ring id of a
// high rank never lands in the tensor pairs' bank.
func TestFlowPlanPairsEveryFlowBeyondAThousandRanks(t *testing.T) {
	for _, n := range []int{1000, 1001, 2048} {
		p := newPlan(Config{TPBytes: 1, PPBytes: 1, Burst: BurstConfig{Senders: 7, Bytes: 1, Steps: []int{1}}}, hostIDs(n))
		ends := map[hostapi.FlowID]int{}
		for i := range n {
			for _, f := range p.flows(i) {
				ends[f.id]++
			}
		}
		for id, k := range ends {
			if k != 2 {
				t.Fatalf("%d ranks: flow %d has %d ends, want 2", n, id, k)
			}
		}
	}
}
