package switchcore

import (
	"math/bits"
	"time"
)

// events keeps each port's earliest pending event and, in a winner tree
// over the ports, which port has the earliest of all: finding the next
// port to step costs two loads, and refiling a port costs one comparison
// per level of the tree (log2 of the radix), where a scan of every port's
// event grew linearly with the radix.
//
// The tree is a complete binary tree over size leaves (the number of
// ports rounded up to a power of two): node k has children 2k and 2k+1,
// and leaf size+i is port i. Node k holds the earliest event of its
// subtree and the port it belongs to, the lowest-numbered port among
// equals, so node 1 names the port a scan "earliest first, lowest port
// first" picks. Leaves past the last port are never due.
type events struct {
	node []evNode // node[k], k in [1, 2·size)
	size int
}

// evNode is a node of the tree: an event and whose it is. A node and its
// sibling share a 32-byte pair, so a step up the tree reads one line.
type evNode struct {
	at   time.Duration
	port uint16
}

func newEvents(n int) events {
	size := 1
	if n > 1 {
		size = 1 << bits.Len(uint(n-1))
	}
	ev := events{node: make([]evNode, 2*size), size: size}
	for k := range ev.node {
		ev.node[k].at = never
	}
	for i := range size {
		ev.node[size+i].port = uint16(i)
	}
	for k := size - 1; k >= 1; k-- {
		ev.node[k].port = ev.node[2*k].port // every leaf is never: the left one wins
	}
	return ev
}

// min returns the earliest event of all ports.
func (ev *events) min() time.Duration { return ev.node[1].at }

// first returns the port with the earliest event and the event's time.
func (ev *events) first() (int, time.Duration) { n := &ev.node[1]; return int(n.port), n.at }

// of returns port i's earliest event.
func (ev *events) of(i int) time.Duration { return ev.node[ev.size+i].at }

// set refiles port i under t: the path from its leaf to the root is
// replayed, each node taking the earlier of its two children (the left,
// lower-numbered one on a tie). A node that comes out as it was leaves
// every node above it as it was, so the replay stops there.
func (ev *events) set(i int, t time.Duration) {
	node := ev.node
	k := ev.size + i
	if node[k].at == t {
		return
	}
	node[k].at = t
	w := uint16(i)
	for k > 1 {
		sib := &node[k^1]
		// The sibling wins if it is earlier or, being the left child
		// (k odd), as early: st-1 < t is st <= t, and times are never
		// negative. One comparison, so the choice needs no branch.
		if st, sw := sib.at, sib.port; st-time.Duration(k&1) < t {
			t, w = st, sw
		}
		k >>= 1
		n := &node[k]
		if n.at == t && n.port == w {
			return
		}
		n.at, n.port = t, w
	}
}

// refile is set without the stop part way up: it replays the whole path,
// which is right for any port, and is for the port a run just stepped,
// the earliest of all. Every node on that port's path named it when the
// step began, so unless the step refiled another port (a PAUSE it owes)
// none comes out as it was (it would have to name the port under its new
// time, which the leaf's own check catches), and the comparisons set
// makes to stop early would be wasted.
func (ev *events) refile(i int, t time.Duration) {
	node := ev.node
	k := ev.size + i
	if node[k].at == t {
		return
	}
	node[k].at = t
	w := uint16(i)
	for k > 1 {
		sib := &node[k^1]
		if st, sw := sib.at, sib.port; st-time.Duration(k&1) < t { // as in set
			t, w = st, sw
		}
		k >>= 1
		node[k].at, node[k].port = t, w
	}
}
