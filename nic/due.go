package nic

import (
	"slices"
	"time"
)

// The engine's timers: what Advance and NextDeadline need of each flow,
// cached, so that neither scans every flow at every call (a host with a
// flow per message has tens of them, and the simulator calls both at
// every event).
//
// A flow's times are a function of its state: its sender, receiver,
// controller and notification point, txBlocked, peerTag, connectAt,
// lastMove, its posted sends (only whether there are any) and failed.
// That state changes only in an entry point that names the flow (a packet
// received for it, Transmit sending from it, PostSend, CreateFlow, an
// Advance that visits it), and each of them touches the flow before it
// changes anything: the flow goes on the stale list, whose flows' times
// are recomputed before NextDeadline or Advance reads them, and on the
// dirty list, which the next Advance visits (a visited flow is left
// stale); Transmit puts on the dirty list only a flow that needs the
// visit (touchSent). The invariant: a flow not on the stale list has
// cached times equal to what its state gives now (checkTimers, in the
// tests, holds it). PostRecv, BeginStep and the PAUSE state change none
// of a flow's times: the pause and the host link's pacer gate every flow
// alike, and NextDeadline applies them to the earliest send time.
//
// Advance visits the flows on the dirty list and the flows whose due time
// has come, in e.order's order, and runs on each what an Advance of every
// flow would: on any other flow that would do nothing but checkProgress's
// bookkeeping, which only ever sets lastUna and lastMove to the una and
// the time of that Advance. For a flow with nothing in flight at its last
// visit (idle), that is lastMove following every Advance's time, which
// touch applies when it next matters: lastMove is only read once the
// flow's state changed (something in flight), and a flow whose una
// stands still with packets in flight is due when it would fail, at
// lastMove + FailAfter + 1.

// The times cached per flow, each with a min-heap of the flows that have
// one.
const (
	keyDue   = iota // when Advance must visit the flow: its earliest timer of any kind
	keyTimer        // the timers NextDeadline reports: before binding only CONNECT's retry and the handshake's failure
	keySend         // the pacer's next send time, for a bound flow with data it may send
	numKeys
)

// flowTimes is a flow's entry in the engine's timers.
type flowTimes struct {
	f   *flow
	seq uint64 // creation order, which is e.order's
	at  [numKeys]time.Duration
	pos [numKeys]int32 // index in heap[k], -1 when the flow has no such time
	// stale: on the stale list, at to be recomputed. dirty: on the dirty
	// list, to be visited by the next Advance. idle: nothing was in
	// flight at the flow's last visit, and nothing changed since: lastMove
	// is the time of the last Advance.
	stale, dirty, idle bool
}

// timers holds every flow's times, indexed by flow.timers.
type timers struct {
	fs          []flowTimes
	free        []uint32 // unused entries of fs
	heap        [numKeys][]uint32
	stale       []uint32
	dirty       []uint32
	walk        []int // visitOrder's stack
	seq         uint64
	lastAdvance time.Duration // the time of the latest Advance
}

// addFlow gives a new flow its entry, touched: the next Advance visits it.
func (e *Engine) addFlow(f *flow) {
	t := &e.tm
	var i uint32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
	} else {
		i = uint32(len(t.fs))
		t.fs = append(t.fs, flowTimes{})
	}
	t.seq++
	t.fs[i] = flowTimes{f: f, seq: t.seq, pos: [numKeys]int32{-1, -1, -1}}
	f.timers = i
	e.touch(f)
}

// removeFlow drops a destroyed flow's entry.
func (e *Engine) removeFlow(f *flow) {
	t := &e.tm
	i := f.timers
	for k := range numKeys {
		t.unset(k, i)
	}
	isI := func(j uint32) bool { return j == i }
	if t.fs[i].stale {
		t.stale = slices.DeleteFunc(t.stale, isI)
	}
	if t.fs[i].dirty {
		t.dirty = slices.DeleteFunc(t.dirty, isI)
	}
	t.fs[i] = flowTimes{}
	t.free = append(t.free, i)
}

// touch marks a flow whose state is about to change. It comes before the
// change: an idle flow's lastMove is first brought to what the Advances
// since its last visit made it.
func (e *Engine) touch(f *flow) {
	t := &e.tm
	ft := &t.fs[f.timers]
	if !ft.dirty {
		ft.dirty = true
		t.dirty = append(t.dirty, f.timers)
		if ft.idle {
			f.lastMove, ft.idle = t.lastAdvance, false
		}
	}
	if !ft.stale {
		ft.stale = true
		t.stale = append(t.stale, f.timers)
	}
}

// touchSent is touch for Transmit, about to send from f. A flow the last
// Advance visited with packets in flight, and nothing touched since, is
// only marked stale: sending moves neither its una nor its packets in
// flight but up, so the next Advance's checkProgress would find what the
// last one left, and would run none of its timers but those due, which
// its times, refreshed before that Advance reads them, say. Any other
// flow is touched.
func (e *Engine) touchSent(f *flow) {
	t := &e.tm
	ft := &t.fs[f.timers]
	if ft.dirty || ft.idle {
		e.touch(f)
		return
	}
	if !ft.stale {
		ft.stale = true
		t.stale = append(t.stale, f.timers)
	}
}

// refreshStale recomputes the times of the stale flows, but for those
// the next Advance visits when dirtyToo is false: they stay stale.
func (e *Engine) refreshStale(dirtyToo bool) {
	t := &e.tm
	kept := t.stale[:0]
	for _, i := range t.stale {
		if ft := &t.fs[i]; ft.dirty && !dirtyToo {
			kept = append(kept, i)
		} else {
			ft.stale = false
			e.refresh(i)
		}
	}
	t.stale = kept
}

// refresh recomputes entry i's times from its flow's state and files it
// in the heaps; a failed flow has none.
func (e *Engine) refresh(i uint32) {
	t := &e.tm
	ft := &t.fs[i]
	var at [numKeys]time.Duration
	var ok [numKeys]bool
	if ft.f.failed == nil {
		e.flowTimes(ft.f, &at, &ok)
	}
	for k := range numKeys {
		switch {
		case !ok[k]:
			t.unset(k, i)
		case ft.pos[k] < 0 || ft.at[k] != at[k]:
			t.set(k, i, at[k])
		}
	}
}

// flowTimes computes a live flow's times, what NextDeadline and Advance
// read of it, into at and ok, which come in zero. (Results written
// through pointers: arrays returned by value are copied out in wider
// loads than the stores that wrote them, which stall.)
func (e *Engine) flowTimes(f *flow, at *[numKeys]time.Duration, ok *[numKeys]bool) {
	// The timers of every flow, bound or not, which Advance runs.
	due, hasDue := f.tx.NextDeadline()
	d, k := f.rx.NextDeadline()
	due, hasDue = earliest(due, hasDue, d, k)
	d, k = f.cc.NextDeadline()
	due, hasDue = earliest(due, hasDue, d, k)
	d, k = f.np.NextDeadline()
	due, hasDue = earliest(due, hasDue, d, k)
	if f.peerTag == 0 {
		timer := f.connectAt
		if len(f.sends) > 0 {
			timer = min(timer, f.lastMove+e.failAfter+1)
		}
		due, hasDue = earliest(due, hasDue, timer, true)
		at[keyDue], ok[keyDue] = due, hasDue
		at[keyTimer], ok[keyTimer] = timer, true
		return
	}
	if f.tx.InFlight() > 0 {
		due, hasDue = earliest(due, hasDue, f.lastMove+e.failAfter+1, true)
	}
	at[keyDue], ok[keyDue] = due, hasDue
	at[keyTimer], ok[keyTimer] = due, hasDue
	if !f.txBlocked {
		at[keySend], ok[keySend] = f.cc.NextSend(), true
	}
}

// earliest is the earlier of the times at and d, each present if its
// flag is set.
func earliest(at time.Duration, ok bool, d time.Duration, k bool) (time.Duration, bool) {
	if k && (!ok || d < at) {
		return d, true
	}
	return at, ok
}

// visitOrder returns the flows Advance visits at now, in e.order's order:
// the dirty ones and those whose due time has come. They stay dirty until
// doneVisits.
func (e *Engine) visitOrder(now time.Duration) []uint32 {
	t := &e.tm
	e.refreshStale(false)
	// The due flows are the subtree of the heap's root whose times are
	// at most now; touching them leaves the heap as it is.
	h := t.heap[keyDue]
	walk := t.walk[:0]
	if len(h) > 0 {
		walk = append(walk, 0)
	}
	for len(walk) > 0 {
		p := walk[len(walk)-1]
		walk = walk[:len(walk)-1]
		if p < len(h) && t.fs[h[p]].at[keyDue] <= now {
			e.touch(t.fs[h[p]].f)
			walk = append(walk, 2*p+1, 2*p+2)
		}
	}
	t.walk = walk
	if len(t.dirty) > 1 {
		slices.SortFunc(t.dirty, func(a, b uint32) int {
			if t.fs[a].seq < t.fs[b].seq {
				return -1
			}
			return 1
		})
	}
	return t.dirty
}

// doneVisits ends an Advance at now: a visited flow left with nothing in
// flight becomes idle, and the dirty list is empty. The visited flows are
// left stale: the next NextDeadline or Advance recomputes their times,
// once, however many calls touch them before.
func (e *Engine) doneVisits(now time.Duration) {
	t := &e.tm
	for _, i := range t.dirty {
		ft := &t.fs[i]
		ft.dirty = false
		if !ft.stale {
			ft.stale = true
			t.stale = append(t.stale, i)
		}
		f := ft.f
		ft.idle = f.failed == nil && f.peerTag != 0 && f.tx.InFlight() == 0
	}
	t.dirty = t.dirty[:0]
	t.lastAdvance = now
}

// The heaps: heap[k] is a binary min-heap of entries by at[k].

// set files entry i in heap k at time at.
func (t *timers) set(k int, i uint32, at time.Duration) {
	ft := &t.fs[i]
	ft.at[k] = at
	if ft.pos[k] < 0 {
		ft.pos[k] = int32(len(t.heap[k]))
		t.heap[k] = append(t.heap[k], i)
	}
	t.down(k, t.up(k, int(ft.pos[k])))
}

// unset takes entry i out of heap k, if it is there.
func (t *timers) unset(k int, i uint32) {
	p := int(t.fs[i].pos[k])
	if p < 0 {
		return
	}
	h := t.heap[k]
	last := len(h) - 1
	t.swap(k, p, last)
	t.heap[k] = h[:last]
	t.fs[i].pos[k] = -1
	if p < last {
		t.down(k, t.up(k, p))
	}
}

// min returns the earliest time in heap k.
func (t *timers) min(k int) (time.Duration, bool) {
	if len(t.heap[k]) == 0 {
		return 0, false
	}
	return t.fs[t.heap[k][0]].at[k], true
}

func (t *timers) less(k, a, b int) bool {
	h := t.heap[k]
	return t.fs[h[a]].at[k] < t.fs[h[b]].at[k]
}

func (t *timers) swap(k, a, b int) {
	h := t.heap[k]
	h[a], h[b] = h[b], h[a]
	t.fs[h[a]].pos[k] = int32(a)
	t.fs[h[b]].pos[k] = int32(b)
}

// up moves the element at p towards the root while it is earlier than
// its parent, and returns where it stopped.
func (t *timers) up(k, p int) int {
	for p > 0 {
		parent := (p - 1) / 2
		if !t.less(k, p, parent) {
			break
		}
		t.swap(k, p, parent)
		p = parent
	}
	return p
}

// down moves the element at p away from the root while a child is
// earlier.
func (t *timers) down(k, p int) {
	n := len(t.heap[k])
	for {
		c := 2*p + 1
		if c >= n {
			return
		}
		if c+1 < n && t.less(k, c+1, c) {
			c++
		}
		if !t.less(k, c, p) {
			return
		}
		t.swap(k, p, c)
		p = c
	}
}
