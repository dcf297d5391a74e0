package sim

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The engine heap always tops the engine first in (key, ord) order, the
// order the scheduler's determinism rests on, through random re-keying and
// removal with many equal keys.
func TestEngineHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for _, n := range []int{1, 3, 4, 5, 17, 64, 300} {
		var e engineHeap
		refs := make([]engineRef, n)
		keys := make([]time.Duration, n) // -1: off the heap
		for i := range refs {
			kind := uint8(rng.IntN(2))
			refs[i] = engineRef{kind: kind, idx: int32(i), id: int32(i), ord: uint32(kind)<<31 | uint32(i)}
			e.add(refs[i])
			keys[i] = -1
		}
		for op := range 20000 {
			i := rng.IntN(n)
			if rng.IntN(5) == 0 {
				e.remove(refs[i])
				keys[i] = -1
			} else {
				k := time.Duration(rng.IntN(8)) // few keys: many ties
				if op%2 == 0 {
					k = time.Duration(rng.Int64N(1 << 40))
				}
				e.set(refs[i], k)
				keys[i] = k
			}
			want := -1
			for j := range n {
				if keys[j] < 0 {
					continue
				}
				if want < 0 || keys[j] < keys[want] || keys[j] == keys[want] && refs[j].ord < refs[want].ord {
					want = j
				}
			}
			if want < 0 {
				if len(e.h) != 0 {
					t.Fatalf("n=%d op %d: heap holds %d entries, want none", n, op, len(e.h))
				}
				continue
			}
			if got := e.top(); got.id != refs[want].id || e.h[0].key != keys[want] {
				t.Fatalf("n=%d op %d: top is engine %d at %v, want %d at %v", n, op, got.id, e.h[0].key, want, keys[want])
			}
		}
	}
}
