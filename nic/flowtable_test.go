package nic

import (
	"math/rand/v2"
	"testing"
)

// TestFlowTableAgreesWithMap runs random inserts, deletes and lookups on
// the flow table and on a Go map and requires the same answers. Keys come
// from a small space, so probe runs collide, wrap around the end of the
// slot array and are cut by deletions (the backward shift).
func TestFlowTableAgreesWithMap(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var tab flowTable
		ref := map[FlowKey]*flow{}
		key := func() FlowKey { return FlowKey{Peer: uint16(rng.IntN(6)), ID: uint32(rng.IntN(12))} }
		for op := range 4000 {
			k := key()
			switch rng.IntN(3) {
			case 0:
				if ref[k] == nil {
					f := &flow{key: k}
					ref[k] = f
					tab.put(k, f)
				}
			case 1:
				delete(ref, k)
				tab.remove(k)
			}
			if got, want := tab.get(k), ref[k]; got != want {
				t.Fatalf("seed %d op %d: get(%v) = %p, want %p", seed, op, k, got, want)
			}
			if tab.len() != len(ref) {
				t.Fatalf("seed %d op %d: %d flows, want %d", seed, op, tab.len(), len(ref))
			}
			if op%97 == 0 { // every key, present or not
				for p := range uint16(6) {
					for id := range uint32(12) {
						k := FlowKey{p, id}
						if got, want := tab.get(k), ref[k]; got != want {
							t.Fatalf("seed %d op %d: get(%v) = %p, want %p", seed, op, k, got, want)
						}
					}
				}
			}
		}
	}
}

// TestFlowTableKeysDoNotAlias checks that the packed key keeps the peer
// and the id apart: flows that differ in either are different entries.
func TestFlowTableKeysDoNotAlias(t *testing.T) {
	var tab flowTable
	keys := []FlowKey{{1, 0}, {0, 1}, {1, 1 << 16}, {0, 1<<32 - 1}, {1<<16 - 1, 0}, {1<<16 - 1, 1<<32 - 1}}
	for _, k := range keys {
		tab.put(k, &flow{key: k})
	}
	for _, k := range keys {
		if f := tab.get(k); f == nil || f.key != k {
			t.Fatalf("get(%v) = %v", k, f)
		}
	}
	if f := tab.get(FlowKey{1, 1}); f != nil {
		t.Fatalf("get of an absent key = %v", f.key)
	}
}
