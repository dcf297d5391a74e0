package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// refQueue is the reference the engine tree is checked against: every
// engine's key, the first in (key, ord) order found by sorting.
type refQueue struct {
	refs []engineRef
	keys []time.Duration // by id; never: nothing to do
}

func (q *refQueue) sorted() []engineRef {
	s := slices.Clone(q.refs)
	slices.SortFunc(s, func(a, b engineRef) int {
		if ka, kb := q.keys[a.id], q.keys[b.id]; ka != kb {
			if ka < kb {
				return -1
			}
			return 1
		}
		if a.ord < b.ord {
			return -1
		}
		return 1
	})
	return s
}

// The engine tree always tops the engine first in (key, ord) order, the
// order the scheduler's determinism rests on: through engines added of
// both kinds in any order (growing the tree while keys are filed),
// random re-keying and removal with many equal keys, and a drain in
// order at the end.
func TestEngineTreeOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for _, n := range []int{1, 2, 3, 4, 5, 17, 64, 300} {
		var e engineTree
		var q refQueue
		var count [2]int32
		addOne := func() {
			kind := uint8(rng.IntN(2))
			idx := count[kind]
			count[kind]++
			r := engineRef{kind: kind, idx: idx, id: int32(len(q.refs)), ord: uint32(kind)<<31 | uint32(idx)}
			e.add(r)
			q.refs = append(q.refs, r)
			q.keys = append(q.keys, never)
		}
		addOne()
		for op := range 20000 {
			if len(q.refs) < n && rng.IntN(10) == 0 {
				addOne()
			}
			r := q.refs[rng.IntN(len(q.refs))]
			switch c := rng.IntN(10); {
			case c < 2:
				e.remove(r)
				q.keys[r.id] = never
			default:
				k := time.Duration(rng.IntN(8)) // few keys: many ties
				if c < 5 {
					k = time.Duration(rng.Int64N(1 << 40))
				}
				e.set(r, k)
				q.keys[r.id] = k
			}
			if got := e.key(r); got != q.keys[r.id] {
				t.Fatalf("n=%d op %d: engine %d filed under %v, want %v", n, op, r.id, got, q.keys[r.id])
			}
			want := q.sorted()[0]
			got, key := e.top()
			if key != q.keys[want.id] || e.topKey() != key {
				t.Fatalf("n=%d op %d: top key %v (topKey %v), want %v", n, op, key, e.topKey(), q.keys[want.id])
			}
			if key != never && got != want {
				t.Fatalf("n=%d op %d: top is engine %+v at %v, want %+v", n, op, got, key, want)
			}
		}
		for i, want := range q.sorted() {
			got, key := e.top()
			if q.keys[want.id] == never {
				if key != never {
					t.Fatalf("n=%d drain %d: top key %v, want never", n, i, key)
				}
				break
			}
			if got != want || key != q.keys[want.id] {
				t.Fatalf("n=%d drain %d: top is engine %+v at %v, want %+v at %v", n, i, got, key, want, q.keys[want.id])
			}
			e.remove(got)
		}
	}
}

// The delay queue gives packets back in (time, sequence) order, as one
// heap would, whether they are sent in the order they are due (the FIFO)
// or not (the heap beside it): random sends, mostly at a fixed delay from
// a clock that moves on as packets are taken, checked against a sorted
// reference.
func TestDelayQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, mixed := range []int{0, 1, 3, 10} { // in ten sends, this many off the fixed delay
		var q delayQueue
		var ref []arrival
		var now time.Duration
		var seq uint64
		for op := range 30000 {
			if rng.IntN(3) > 0 || len(ref) == 0 {
				d := time.Duration(1000)
				if rng.IntN(10) < mixed {
					d = time.Duration(rng.IntN(3000))
				}
				seq++
				a := arrival{at: now + d, seq: seq}
				q.push(a)
				i, _ := slices.BinarySearchFunc(ref, a, func(x, y arrival) int {
					if x.before(&y) {
						return -1
					}
					return 1
				})
				ref = slices.Insert(ref, i, a)
				continue
			}
			if got := q.next(); got != ref[0].at {
				t.Fatalf("mixed %d op %d: next %v, want %v", mixed, op, got, ref[0].at)
			}
			now = ref[0].at
			got := q.pop()
			if got.at != ref[0].at || got.seq != ref[0].seq {
				t.Fatalf("mixed %d op %d: popped (%v, %d), want (%v, %d)", mixed, op, got.at, got.seq, ref[0].at, ref[0].seq)
			}
			ref = ref[1:]
			if q.len() != len(ref) {
				t.Fatalf("mixed %d op %d: %d queued, want %d", mixed, op, q.len(), len(ref))
			}
		}
		if q.next() != never && len(ref) == 0 {
			t.Fatalf("mixed %d: empty queue's next is %v, want never", mixed, q.next())
		}
	}
}
