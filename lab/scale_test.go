package lab

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// The new kinds run the job in the simulator with every check held, and
// the same inputs give the same results.json byte for byte: a fat tree
// (k = 4, 16 ranks) and a rail-optimized fabric (4 nodes of 4 ranks),
// FORGIVE and DCQCN, with spray entropy so ECMP spreads every packet.
func TestSimFatTreeAndRailAreDeterministic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	for _, tp := range []string{"fat-tree-k4", "rail-4x4"} {
		o := simOptions("dcqcn", "forgive")
		o.Topology, o.Ranks, o.Steps, o.Profile = tp, 0, 2, "seed-6.25g"
		o.Workload.Entropy = "spray"
		a, err := Run(ctx, o)
		if err != nil {
			t.Fatalf("%s: %v", tp, err)
		}
		for _, r := range a.Runs {
			if !r.ChecksHeld() || r.SimPacketHops == 0 || a.Ranks != 16 {
				t.Errorf("%s %s: checks held %v, %d hops, %d ranks", tp, r.Policy, r.ChecksHeld(), r.SimPacketHops, a.Ranks)
			}
			checkDecisions(t, r)
		}
		b, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if ja, jb := wallFree(t, a), wallFree(t, b); !bytes.Equal(ja, jb) {
			t.Fatalf("%s: two runs with the same inputs differ:\n%s\n---\n%s", tp, ja, jb)
		}
	}
}

// A thousand ranks: the seed's 1,024-rank fabric (fat-tree-k16) runs a
// small job of one step in the simulator, its all-reduce by halving and
// doubling (20 messages a rank; the ring's 2,046 would take minutes of
// CPU) on persistent flows whose ids (2^20 + 1024s + d) the old
// 1,000-rank scheme could not give, with every check held.
func TestSimThousandRanks(t *testing.T) {
	if raceDetector {
		// As TestSimLabEveryPolicy: a deterministic simulator run whose
		// engines the small fabrics' tests run under the race detector;
		// 1,024 ranks under it would take most of the package's time.
		t.Skip("1,024 ranks in the simulator, checked without -race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	f, err := Run(ctx, Options{Placement: PlacementSim, Topology: "fat-tree-k16", Profile: "seed-400g-paper", Steps: 1,
		Policies: []string{"forgive"}, PayloadFree: PayloadsOn, Jobs: 1,
		Workload: WorkloadOptions{Collective: "halving-doubling", GradientBytes: 1 << 20, TPBytes: 64 << 10, PPBytes: 64 << 10, BurstBytes: 64 << 10,
			BurstSteps: []int{1}, Compute: time.Microsecond}})
	if err != nil {
		t.Fatal(err)
	}
	r := f.Runs[0]
	if f.Ranks != 1024 || !r.ChecksHeld() || r.SimPacketHops == 0 {
		t.Fatalf("%d ranks: checks held %v (invariant %v, accounting %v), %d hops", f.Ranks, r.ChecksHeld(), r.BudgetInvariantHeld, r.AccountingHeld(), r.SimPacketHops)
	}
}
