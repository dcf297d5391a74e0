package sim

import "time"

// arity of the arrival heap: four children a node halves the depth of a
// binary heap, and a node's children share a cache line or two.
const arity = 4

// The scheduler's queues are typed (no container/heap: its interface boxes
// every element) and ordered by time, then by a sequence number or a
// fixed order, so equal times never leave the order to chance.

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

// delayQueue holds packets due later than the instant they were sent, in
// (time, sequence) order. Packets are mostly sent in the order they are
// due (every host uplink of a fabric has the same delay, so a later send
// arrives later), and those wait in a FIFO: a packet due no earlier than
// the FIFO's last one keeps the FIFO sorted, its sequence number being the
// highest yet. A packet due earlier waits in a heap, and pop takes the
// first of the two heads, so the order is the one a single heap gives.
type delayQueue struct {
	fifo arrivalFIFO
	heap arrivalHeap
	last time.Duration // due time of the FIFO's last packet
}

func (q *delayQueue) push(a arrival) {
	if q.fifo.len() == 0 || a.at >= q.last {
		q.fifo.push(a)
		q.last = a.at
		return
	}
	q.heap.push(a)
}

// next returns the due time of the first packet, never when there is none.
func (q *delayQueue) next() time.Duration {
	t := never
	if q.fifo.len() > 0 {
		t = q.fifo.buf[q.fifo.head].at
	}
	if len(q.heap) > 0 {
		t = min(t, q.heap[0].at)
	}
	return t
}

// pop takes the first packet off; the queue must not be empty.
func (q *delayQueue) pop() arrival {
	if len(q.heap) > 0 && (q.fifo.len() == 0 || q.heap[0].before(&q.fifo.buf[q.fifo.head])) {
		return q.heap.pop()
	}
	return q.fifo.pop()
}

func (q *delayQueue) len() int { return q.fifo.len() + len(q.heap) }

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

// engineTree files every engine under its deadline and tops the one due
// first, ties going to the engine first in run order (engineRef.ord). It
// is a winner tree: each engine has a leaf, laid out in run order
// (switch i at leaf i, host j at leaf half+j), and every inner node holds
// the winner of its two children, the one with the smaller key or, on
// equal keys, the left one. Leaves to the left come first in run order,
// so the root is the first in (key, ord) order, as a heap ordered by that
// pair would top.
//
// Re-keying an engine replays the matches on its leaf's path to the root:
// log2(leaves) steps of one comparison each, with no early exit and a
// branch-free choice, where a heap's sift compares children whose order
// no branch predictor can guess (the scheduler's deadlines all lie within
// a microsecond or so of now). An engine with nothing to do is filed
// under never.
type engineTree struct {
	t    []treeNode // t[1] is the root, t[2*half:] the leaves (t[0] unused)
	half int        // leaves for each kind; the tree has 2*half leaves
	refs []engineRef
}

// treeNode is the winner of a subtree: its key, and its engine's ord and
// id in one word (ord<<32 | uint32(id); id -1: a leaf without an engine),
// so the winner's engineRef is read off the node itself and a match moves
// two words.
type treeNode struct {
	key time.Duration
	tag uint64
}

func nodeTag(ord uint32, id int32) uint64 { return uint64(ord)<<32 | uint64(uint32(id)) }

// add registers r, filed under never. It may grow the tree (a setup
// cost, never paid while a run goes on: engines are added before).
func (e *engineTree) add(r engineRef) {
	for e.half == 0 || int(r.idx) >= e.half {
		e.grow()
	}
	e.refs = append(e.refs, r)
	e.t[e.leaf(r)] = treeNode{key: never, tag: nodeTag(r.ord, r.id)}
}

// leaf returns the index in t of r's leaf.
func (e *engineTree) leaf(r engineRef) int {
	if r.kind == kindSwitch {
		return 2*e.half + int(r.idx)
	}
	return 3*e.half + int(r.idx)
}

// grow doubles the leaves of each kind and replays every match.
func (e *engineTree) grow() {
	old := e.t
	oldLeaf := make([]int, len(e.refs))
	for id, r := range e.refs {
		oldLeaf[id] = e.leaf(r)
	}
	e.half = max(1, 2*e.half)
	e.t = make([]treeNode, 4*e.half)
	for i := 2 * e.half; i < len(e.t); i++ {
		e.t[i] = treeNode{key: never, tag: nodeTag(0, -1)}
	}
	for id, r := range e.refs {
		e.t[e.leaf(r)] = old[oldLeaf[id]]
	}
	for i := 2*e.half - 1; i >= 1; i-- {
		left, right := e.t[2*i], e.t[2*i+1]
		if right.key < left.key {
			e.t[i] = right
		} else {
			e.t[i] = left
		}
	}
}

// top returns the engine due first and its key; with every engine
// filed under never, the key is never (and the engine is meaningless).
func (e *engineTree) top() (engineRef, time.Duration) {
	w := e.t[1]
	ord := uint32(w.tag >> 32)
	r := engineRef{ord: ord, idx: int32(ord &^ (1 << 31)), id: int32(uint32(w.tag)), kind: uint8(ord >> 31)}
	return r, w.key
}

// topKey returns the key of the engine due first (never when none is).
func (e *engineTree) topKey() time.Duration { return e.t[1].key }

// key returns the key r is filed under (never when it has nothing to do).
func (e *engineTree) key(r engineRef) time.Duration { return e.t[e.leaf(r)].key }

// remove files r under never.
func (e *engineTree) remove(r engineRef) { e.set(r, never) }

// set files r under key, which must not be negative (the scheduler's keys
// are times no earlier than now, which starts at 0, or never).
func (e *engineTree) set(r engineRef, key time.Duration) {
	t := e.t
	i := e.leaf(r)
	if t[i].key == key {
		return // the leaf's matches are unchanged, and so is every one above
	}
	t[i].key = key
	w := t[i]
	// len(t) is a power of two, so masking with len(t)-1 keeps an index
	// in range without a bounds check; the mask changes nothing, as the
	// indices only fall from the leaf towards the root.
	m := uint(len(t) - 1)
	for u := uint(i); u > 1; {
		sib := t[(u^1)&m]
		// The sibling wins when its key is smaller, or equal and it is
		// the left one (u odd: this node is the right child). Keys are
		// in [0, never], so w.key-sib.key cannot overflow.
		if w.key-sib.key > -time.Duration(u&1) {
			w = sib
		}
		u >>= 1
		t[u&m] = w
	}
}
