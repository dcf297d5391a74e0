package fabric

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
// subtree (at[k]) and the port it belongs to (win[k]), the lowest-numbered
// port among equals, so node 1 names the port a scan "earliest first,
// lowest port first" picks. Leaves past the last port are never due.
type events struct {
	at   []time.Duration // at[k], k in [1, 2·size): the earliest event under node k
	win  []uint16        // win[k]: whose it is; win[size+i] = i
	size int
}

func newEvents(n int) events {
	size := 1
	if n > 1 {
		size = 1 << bits.Len(uint(n-1))
	}
	ev := events{at: make([]time.Duration, 2*size), win: make([]uint16, 2*size), size: size}
	for k := range ev.at {
		ev.at[k] = never
	}
	for i := range size {
		ev.win[size+i] = uint16(i)
	}
	for k := size - 1; k >= 1; k-- {
		ev.win[k] = ev.win[2*k] // every leaf is never: the left one wins
	}
	return ev
}

// min returns the earliest event of all ports.
func (ev *events) min() time.Duration { return ev.at[1] }

// first returns the port with the earliest event and the event's time.
func (ev *events) first() (int, time.Duration) { return int(ev.win[1]), ev.at[1] }

// of returns port i's earliest event.
func (ev *events) of(i int) time.Duration { return ev.at[ev.size+i] }

// set refiles port i under t: the path from its leaf to the root is
// replayed, each node taking the earlier of its two children (the left,
// lower-numbered one on a tie). A node that comes out as it was leaves
// every node above it as it was, so the replay stops there.
func (ev *events) set(i int, t time.Duration) {
	at, win := ev.at, ev.win
	k := ev.size + i
	if at[k] == t {
		return
	}
	at[k] = t
	w := uint16(i)
	for k > 1 {
		sib := k ^ 1
		st, sw := at[sib], win[sib]
		// The sibling wins if it is earlier or, being the left child
		// (k odd), as early: st-1 < t is st <= t, and times are never
		// negative. One comparison, so the choice needs no branch.
		if st-time.Duration(k&1) < t {
			t, w = st, sw
		}
		k >>= 1
		if at[k] == t && win[k] == w {
			return
		}
		at[k], win[k] = t, w
	}
}
