package sim

import "time"

// arity of the heaps: four children a node halves the depth of a binary
// heap, and a node's children share a cache line or two.
const arity = 4

// engineHeap.down compares four children unrolled: arity must stay 4.
const _, _ = uint(arity - 4), uint(4 - arity)

// The scheduler's queues are typed 4-ary heaps (no container/heap: its
// interface boxes every element) ordered by time, then by a sequence
// number or a fixed order, so equal times never leave the order to chance.

// arrival is a packet on a link.
type arrival struct {
	at  time.Duration
	seq uint64 // FIFO among equal times, for determinism
	buf []byte
	to  endpoint
	tos uint8
}

func (a *arrival) before(b *arrival) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// arrivalHeap holds packets due after the instant they were sent.
type arrivalHeap []arrival

func (h *arrivalHeap) push(a arrival) {
	*h = append(*h, a)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / arity
		if !q[i].before(&q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *arrivalHeap) pop() arrival {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = arrival{}
	q = q[:n]
	*h = q
	i := 0
	for {
		c := arity*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < min(c+arity, n); j++ {
			if q[j].before(&q[m]) {
				m = j
			}
		}
		if !q[m].before(&q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	return top
}

// arrivalFIFO holds packets due at the instant they were sent (a switch
// hands them over when they reach the far end of its link): they keep the
// order they were sent in, which is their sequence order. Its length is a
// power of two, so positions wrap with a mask, not a division.
type arrivalFIFO struct {
	buf  []arrival
	head int
	n    int
}

func (f *arrivalFIFO) len() int { return f.n }

func (f *arrivalFIFO) push(a arrival) {
	if f.n == len(f.buf) {
		grown := make([]arrival, max(64, 2*len(f.buf))) // a power of two
		for i := range f.n {
			grown[i] = f.buf[(f.head+i)&(len(f.buf)-1)]
		}
		f.buf, f.head = grown, 0
	}
	f.buf[(f.head+f.n)&(len(f.buf)-1)] = a
	f.n++
}

func (f *arrivalFIFO) pop() arrival {
	a := f.buf[f.head]
	f.buf[f.head] = arrival{}
	f.head = (f.head + 1) & (len(f.buf) - 1)
	f.n--
	return a
}

// timer is an At callback.
type timer struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type timerHeap []timer

func (t *timer) before(u *timer) bool {
	if t.at != u.at {
		return t.at < u.at
	}
	return t.seq < u.seq
}

func (h *timerHeap) push(x timer) {
	*h = append(*h, x)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q[i].before(&q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *timerHeap) pop() timer {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = timer{}
	q = q[:n]
	*h = q
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q[r].before(&q[l]) {
			m = r
		}
		if !q[m].before(&q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	return top
}

// Engine kinds, in the order engines due at the same instant run.
const (
	kindSwitch uint8 = iota
	kindHost
)

// engineRef names an engine: its kind and index, its position in the
// run order, and its slot in the scheduler's per-engine arrays.
type engineRef struct {
	ord  uint32 // kind<<31 | idx: switches first, then hosts, as added
	idx  int32
	id   int32
	kind uint8
}

// engineEntry is an engine filed in the heap: 16 bytes, so the four
// children of a node share one cache line.
type engineEntry struct {
	key time.Duration
	ord uint32 // engineRef.ord
	id  int32  // engineRef.id
}

func (a *engineEntry) before(b *engineEntry) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return a.ord < b.ord
}

// engineHeap is an indexed heap of engines by deadline: pos[id] is an
// engine's place in h, or -1 when it has nothing to do or is being run;
// refs[id] names the engine.
type engineHeap struct {
	h    []engineEntry
	pos  []int32
	refs []engineRef
}

// add registers r, off the heap.
func (e *engineHeap) add(r engineRef) {
	e.pos = append(e.pos, -1)
	e.refs = append(e.refs, r)
}

// top returns the engine due first; the heap must not be empty.
func (e *engineHeap) top() engineRef { return e.refs[e.h[0].id] }

// set files r under key, inserting it or moving it.
func (e *engineHeap) set(r engineRef, key time.Duration) {
	p := e.pos[r.id]
	if p < 0 {
		e.h = append(e.h, engineEntry{key: key, ord: r.ord, id: r.id})
		p = int32(len(e.h) - 1)
		e.pos[r.id] = p
		e.up(int(p))
		return
	}
	old := e.h[p].key
	if key == old {
		return
	}
	e.h[p].key = key
	if key < old {
		e.up(int(p))
	} else {
		e.down(int(p))
	}
}

// remove takes r off the heap, if it is on it.
func (e *engineHeap) remove(r engineRef) {
	p := int(e.pos[r.id])
	if p < 0 {
		return
	}
	n := len(e.h) - 1
	e.pos[r.id] = -1
	if p != n {
		e.h[p] = e.h[n]
		e.pos[e.h[p].id] = int32(p)
	}
	e.h = e.h[:n]
	if p != n {
		e.down(p)
		e.up(p)
	}
}

// up and down move the entry at i along its path to its place, shifting
// the entries it passes by one level and writing it once: the same moves
// as swapping it step by step, with half the stores.
func (e *engineHeap) up(i int) {
	x := e.h[i]
	for i > 0 {
		p := (i - 1) / arity
		if !x.before(&e.h[p]) {
			break
		}
		e.h[i] = e.h[p]
		e.pos[e.h[i].id] = int32(i)
		i = p
	}
	e.h[i] = x
	e.pos[x.id] = int32(i)
}

func (e *engineHeap) down(i int) {
	h := e.h
	n := len(h)
	x := h[i]
	for {
		c := arity*i + 1
		if c >= n {
			break
		}
		m := c
		if c+arity <= n {
			// a full set of children, compared in the same order as
			// the loop below, without its bounds checks
			k := h[c : c+arity : c+arity]
			j := 0
			if k[1].before(&k[j]) {
				j = 1
			}
			if k[2].before(&k[j]) {
				j = 2
			}
			if k[3].before(&k[j]) {
				j = 3
			}
			m = c + j
		} else {
			for j := c + 1; j < n; j++ {
				if h[j].before(&h[m]) {
					m = j
				}
			}
		}
		if !h[m].before(&x) {
			break
		}
		h[i] = h[m]
		e.pos[h[i].id] = int32(i)
		i = m
	}
	h[i] = x
	e.pos[x.id] = int32(i)
}
