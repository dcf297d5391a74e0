package workload

import (
	"math/rand/v2"
	"testing"

	"github.com/forgive-emu/forgive/hostapi"
)

// forgiveIn forgives one random range of some gradient messages of the
// given phases, as a daemon's gather policy lets it.
func forgiveIn(prob float64, phases ...hostapi.Phase) func(*rand.Rand, hostapi.Class, hostapi.Phase, int) []hostapi.Range {
	return func(r *rand.Rand, class hostapi.Class, ph hostapi.Phase, n int) []hostapi.Range {
		ok := false
		for _, p := range phases {
			ok = ok || p == ph
		}
		if class != hostapi.ClassGradient || !ok || r.Float64() >= prob {
			return nil
		}
		off := r.IntN(n)
		return []hostapi.Range{{Start: uint64(off), End: uint64(off + 1 + r.IntN(n-off))}}
	}
}

// Every ring receive declares its phase: the reduce-scatter's n-1 are
// reduce, the all-gather's first is from the chunk's owner, its other n-2
// gather; no other receive declares one (the fake refuses it).
func TestRingReceivesDeclareTheirPhase(t *testing.T) {
	const n = 5
	f := newFakeFabric(1, hostIDs(n)...)
	cfg := baseConfig()
	cfg.TPBytes = 1000
	if _, err := runFake(t, f, cfg, nil); err != nil {
		t.Fatal(err)
	}
	checkFabric(t, f)
	per := cfg.Steps * n
	want := map[hostapi.Phase]int{hostapi.PhaseReduce: per * (n - 1), hostapi.PhaseGatherOwner: per, hostapi.PhaseGather: per * (n - 2)}
	if len(f.phases) != len(want) {
		t.Fatalf("receives by phase %v, want %v", f.phases, want)
	}
	for ph, k := range want {
		if f.phases[ph] != k {
			t.Fatalf("receives by phase %v, want %v", f.phases, want)
		}
	}
}

// The replicas: forgiveness in the all-gather leaves the ranks holding
// different gradients; forgiveness in the reduce-scatter alone (gather:
// repair) does not; forgiveness of the owner's message with the owner
// notices (gather: owner) does not either, and without them it does.
func TestReplicasStayIdenticalUnlessAFinishedValueIsForgiven(t *testing.T) {
	const n = 4
	for _, c := range []struct {
		name      string
		phases    []hostapi.Phase
		notices   bool
		identical bool
	}{
		{"forgive", []hostapi.Phase{hostapi.PhaseReduce, hostapi.PhaseGatherOwner, hostapi.PhaseGather}, false, false},
		{"repair", []hostapi.Phase{hostapi.PhaseReduce}, false, true},
		{"owner", []hostapi.Phase{hostapi.PhaseReduce, hostapi.PhaseGatherOwner}, true, true},
		{"owner without notices", []hostapi.Phase{hostapi.PhaseReduce, hostapi.PhaseGatherOwner}, false, false},
	} {
		f := newFakeFabric(9, hostIDs(n)...)
		f.forgivePhase = forgiveIn(0.6, c.phases...)
		cfg := baseConfig()
		cfg.Steps = 6
		cfg.OwnerNotices = c.notices
		res, err := runFake(t, f, cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		checkFabric(t, f)
		if res.ForgivenBytes == 0 || res.ForgivenBytes != f.forgivenSent || res.Mismatches != 0 || !res.NonGradientExact {
			t.Fatalf("%s: forgiven %d (fabric %d), mismatches %d, non-gradient exact %v",
				c.name, res.ForgivenBytes, f.forgivenSent, res.Mismatches, res.NonGradientExact)
		}
		if got := res.ReplicaMismatches == 0; got != c.identical {
			t.Fatalf("%s: %d elements differ between replicas; want identical %v", c.name, res.ReplicaMismatches, c.identical)
		}
	}
}

// The notices also run without payloads, where they carry only their
// length, and a run with notices and shedding is refused.
func TestOwnerNoticesPayloadFreeAndNotWithShedding(t *testing.T) {
	cfg := baseConfig()
	cfg.OwnerNotices = true
	cfg.Shed = &ShedConfig{PLow: 0.1, PHigh: 0.1, Seed: 1}
	if _, err := cfg.withDefaults(hostIDs(4)); err == nil {
		t.Fatal("owner notices with shedding accepted")
	}
	f := newFakeFabric(2, hostIDs(4)...)
	f.forgivePhase = forgiveIn(0.5, hostapi.PhaseReduce, hostapi.PhaseGatherOwner)
	cfg.Shed = nil
	cfg.PayloadFree = true
	res, err := runFake(t, f, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkFabric(t, f)
	if res.DataChecked || res.ForgivenBytes == 0 {
		t.Fatalf("payload-free run: data checked %v, forgiven %d", res.DataChecked, res.ForgivenBytes)
	}
}
