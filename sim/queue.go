package sim

import (
	"time"

	"github.com/forgive-emu/forgive/wire"
)

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
	// hdr is wire.Inspect of buf, parsed once when the packet left its
	// host and carried from switch to switch (switchcore.Output.Hdr); a
	// zero Type when it was not (the far-end switch then reads the bytes).
	hdr wire.Summary
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
// is a 4-ary winner tree: each engine has a leaf, laid out in run order
// (switch i at leaf i, host j at leaf half+j), and every inner node holds
// the winner of its four children, the one with the smallest key or, on
// equal keys, the leftmost. Leaves to the left come first in run order,
// so the root is the first in (key, ord) order, as a heap ordered by that
// pair would top.
//
// Filing an engine under a later key replays the matches on its leaf's
// path to the root: log4(leaves) levels of three comparisons each, with
// no early exit and branch-free choices, where a heap's sift compares
// children whose order no branch predictor can guess (the scheduler's
// deadlines all lie within a microsecond or so of now). Filing it under
// an earlier key compares it with the winner each node holds and stops
// at the first it does not beat (see set). An engine with nothing to do
// is filed under never.
//
// Layout: node i (root 0, children of i at 4i+1..4i+4) is kept at t[i+3],
// so the four children of a node are t[4k:4k+4], 64 bytes that start on
// a multiple of 64 from the slice's start; the root is t[3], and the
// parent of t[p] is t[p/4+2].
type engineTree struct {
	t     []treeNode // t[3] is the root, t[leaf0:] the leaves (t[:3] unused)
	leaf0 int        // index in t of leaf 0
	half  int        // leaves for each kind; the tree has 2*half leaves, a power of 4
	refs  []engineRef
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

// treeRoot is the index of the root in engineTree.t.
const treeRoot = 3

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
		return e.leaf0 + int(r.idx)
	}
	return e.leaf0 + e.half + int(r.idx)
}

// grow makes four times the leaves of each kind and replays every match.
func (e *engineTree) grow() {
	old := e.t
	oldLeaf := make([]int, len(e.refs))
	for id, r := range e.refs {
		oldLeaf[id] = e.leaf(r)
	}
	if e.half == 0 {
		e.half = 2 // 4 leaves
	} else {
		e.half *= 4
	}
	leaves := 2 * e.half
	inner := (leaves - 1) / 3 // 1 + 4 + ... + leaves/4
	e.leaf0 = treeRoot + inner
	e.t = make([]treeNode, e.leaf0+leaves)
	for i := e.leaf0; i < len(e.t); i++ {
		e.t[i] = treeNode{key: never, tag: nodeTag(0, -1)}
	}
	for id, r := range e.refs {
		e.t[e.leaf(r)] = old[oldLeaf[id]]
	}
	for p := e.leaf0 - 1; p >= treeRoot; p-- {
		e.t[p] = match(e.t[4*(p-2) : 4*(p-2)+4 : 4*(p-2)+4])
	}
}

// match returns the winner of four siblings: the smallest key, the
// leftmost of equal ones (a strict less-than never lets a right one win a
// tie). Its choices compile to conditional moves.
func match(g []treeNode) treeNode {
	a, b, c, d := g[0], g[1], g[2], g[3]
	if b.key < a.key {
		a = b
	}
	if d.key < c.key {
		c = d
	}
	if c.key < a.key {
		a = c
	}
	return a
}

// top returns the engine due first and its key; with every engine
// filed under never, the key is never (and the engine is meaningless).
func (e *engineTree) top() (engineRef, time.Duration) {
	w := e.t[treeRoot]
	ord := uint32(w.tag >> 32)
	r := engineRef{ord: ord, idx: int32(ord &^ (1 << 31)), id: int32(uint32(w.tag)), kind: uint8(ord >> 31)}
	return r, w.key
}

// topKey returns the key of the engine due first (never when none is).
func (e *engineTree) topKey() time.Duration { return e.t[treeRoot].key }

// key returns the key r is filed under (never when it has nothing to do).
func (e *engineTree) key(r engineRef) time.Duration { return e.t[e.leaf(r)].key }

// remove files r under never.
func (e *engineTree) remove(r engineRef) { e.set(r, never) }

// set files r under key.
//
// A key that goes down (an engine made due now: a host handed a packet, a
// Wake) can only make r win more: a node's new winner is r or the winner
// it held, whichever comes first in (key, leaf position) order, and leaf
// position order is tag order (tags grow with ord, and ord with the
// leaf). So the walk up compares r with each node's winner alone, and
// where the held winner comes first it stops: that node keeps its winner,
// and a node's winner is a function of its four children alone, so every
// node above keeps its own. r's key is finite, so the winner is unique in
// that order and is the one a replay of the matches gives.
//
// A key that goes up replays the matches on the path: it is mostly the
// engine just run, which held every node on its path, so a test for a
// node r did not hold would stop no walk and cost more than it saves.
func (e *engineTree) set(r engineRef, key time.Duration) {
	t := e.t
	p := e.leaf(r)
	old := t[p].key
	if old == key {
		return // the leaf's matches are unchanged, and so is every one above
	}
	t[p].key = key
	tag := t[p].tag
	if key < old {
		for p > treeRoot {
			p = p>>2 + 2
			w := &t[p]
			if w.key < key || w.key == key && w.tag < tag {
				return
			}
			*w = treeNode{key: key, tag: tag}
		}
		return
	}
	for p > treeRoot {
		q := p &^ 3
		w := match(t[q : q+4 : q+4])
		p = p>>2 + 2
		t[p] = w
	}
}
