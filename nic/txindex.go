package nic

import (
	"math"
	"math/bits"
	"time"
)

// The transmit index: what Transmit's round-robin reads of each flow, in
// dense arrays, so that a host with many flows (a flow per message: tens
// to hundreds, of which few have data at any time) finds the next flow
// that may send without reading every flow's state, a cache miss per
// flow.
//
// A flow may send at now when it is bound, not failed, not blocked and
// its pacer lets a packet leave (transmit's test). The index holds, for
// each flow, a time at or before the earliest it may send: at[f.timers]
// is never later than f.cc.NextSend() while the flow is bound, live and
// not blocked, and never (the latest time) when it is known not to be;
// live has the bit of e.order's index of every flow whose time is not
// never. The round-robin passes the flows from rr in e.order's order a
// word of bits at a time, reads the time of each flow whose bit is set,
// and tests only a flow whose time has come, with transmit's own test: it
// picks the flow a scan of every flow picks, and advances rr as that scan
// does. A flow whose time has come but that may not send gets its exact
// time there: its pacer's, or never (blocked, failed or unbound), until
// something lets it send again.
//
// The bound holds through every change of a flow's state: the pacer's time
// only moves later (Pacer.OnSend, in transmit, which then stores the new
// time), and a flow that could not send may again only where unblock
// clears txBlocked (an ACK, a NACK, a timer, a posted send, a binding,
// which is also where peerTag is set), and unblock stores its time and
// sets its bit: whatever clears txBlocked calls unblock. A flow starts
// blocked (never); failing only ever makes a flow unable to send. A
// destroyed flow's index and bit leave with it (txRemove), and the flows
// after it move down one, as in e.order.
//
// A host with at most txScanMax flows (most have one or two) scans them
// as they are, which costs no more than keeping the index: the index is
// kept only above that (txIndexed), built anew when a flow is created past
// it. Choosing by the index or by the scan picks the same flows: the
// threshold changes only the speed.

// txScanMax is the most flows a host's Transmit scans without the index:
// with its flows in cache, a host's packet costs about the same either
// way at 4 to 8 flows (BenchmarkTransmitIdleFlows), less with the index
// above, and a simulated fabric's hosts' flows are mostly not in cache.
const txScanMax = 8

// never is the time of a flow that may not send until it is unblocked.
const never = time.Duration(math.MaxInt64)

// txIndex is the transmit index, kept while the engine's txIndexed.
type txIndex struct {
	slot []uint32        // e.order's flows' timers entries, in e.order's order
	pos  []int32         // by timers entry: the flow's index in e.order
	at   []time.Duration // by timers entry: no later than the flow may send
	live []uint64        // by index in e.order: the flows whose time is not never
}

// txAdd files a flow just appended to e.order, with its timers' entry.
func (e *Engine) txAdd(f *flow) {
	x := &e.txi
	if !e.txIndexed {
		if len(e.order) > e.txScanMax {
			e.txBuild()
		}
		return
	}
	p := len(x.slot)
	x.slot = append(x.slot, f.timers)
	x.grow(f.timers)
	x.pos[f.timers] = int32(p)
	x.at[f.timers] = never // a new flow is blocked until something is posted
	if p>>6 == len(x.live) {
		x.live = append(x.live, 0)
	}
}

// txBuild builds the index of e.order's flows.
func (e *Engine) txBuild() {
	x := &e.txi
	e.txIndexed = true
	x.slot = x.slot[:0]
	clear(x.live)
	x.live = x.live[:0]
	for p, f := range e.order {
		x.slot = append(x.slot, f.timers)
		x.grow(f.timers)
		x.pos[f.timers] = int32(p)
		if p>>6 == len(x.live) {
			x.live = append(x.live, 0)
		}
		if x.at[f.timers] = f.txTime(); x.at[f.timers] != never {
			x.live[p>>6] |= 1 << (p & 63)
		}
	}
}

// grow makes room for timers entry i.
func (x *txIndex) grow(i uint32) {
	for len(x.at) <= int(i) {
		x.at = append(x.at, never)
		x.pos = append(x.pos, -1)
	}
}

// txRemove drops the flow at index i of e.order, just removed from it.
func (e *Engine) txRemove(i int) {
	if !e.txIndexed {
		return
	}
	if len(e.order) <= e.txScanMax {
		e.txIndexed = false
		return
	}
	x := &e.txi
	x.slot = append(x.slot[:i], x.slot[i+1:]...)
	for _, s := range x.slot[i:] {
		x.pos[s]--
	}
	// The bits above i move down one.
	w := i >> 6
	low := uint64(1)<<(i&63) - 1
	x.live[w] = x.live[w]&low | x.live[w]>>1&^low
	for k := w + 1; k < len(x.live); k++ {
		x.live[k-1] |= x.live[k] << 63
		x.live[k] >>= 1
	}
	if n := (len(x.slot) + 63) >> 6; n < len(x.live) {
		x.live = x.live[:n]
	}
}

// held says f's sender may not be asked for data, whatever the time: it
// ran dry or out of window (txBlocked), it failed, or its peer's tag is
// not known yet, so nothing could carry the data. Transmit's scan and the
// index both test it.
func (f *flow) held() bool { return f.txBlocked || f.failed != nil || f.peerTag == 0 }

// txTime is the earliest time f may send, never if it may not.
func (f *flow) txTime() time.Duration {
	if f.held() {
		return never
	}
	return f.cc.NextSend()
}

// unblock lets f's sender be asked for data again: something may have
// given it data or window, or it was just bound.
func (e *Engine) unblock(f *flow) {
	f.txBlocked = false
	if e.txIndexed {
		x := &e.txi
		x.at[f.timers] = f.cc.NextSend()
		p := x.pos[f.timers]
		x.live[p>>6] |= 1 << (p & 63)
	}
}

// txSent stores the time f, which just sent, may send next.
func (x *txIndex) txSent(f *flow) { x.at[f.timers] = f.cc.NextSend() }

// txNever marks f, at index p of e.order, unable to send until unblocked.
func (x *txIndex) txNever(s uint32, p int) {
	x.at[s] = never
	x.live[p>>6] &^= 1 << (p & 63)
}

// nextIndexed is transmit's round-robin with the index: it passes at most
// left flows from rr, advancing rr past each, and returns the first that
// may send at now and the flows still left to pass, or nil when none of
// them may.
func (e *Engine) nextIndexed(now time.Duration, left int) (*flow, int) {
	x := &e.txi
	n := len(x.slot)
	i := e.rr
	for left > 0 {
		// The first flow at or after i, before end, whose bit is set.
		end := min(n, i+left)
		p, w := end, i>>6
		for word := x.live[w] &^ (1<<(i&63) - 1); ; word = x.live[w] {
			if word != 0 {
				p = min(w<<6+bits.TrailingZeros64(word), end)
				break
			}
			if w++; w<<6 >= end {
				break
			}
		}
		if p == end {
			left -= end - i
			if i = end; i == n {
				i = 0
			}
			continue
		}
		left -= p - i + 1
		if i = p + 1; i == n {
			i = 0
		}
		s := x.slot[p]
		if x.at[s] > now {
			continue
		}
		f := e.order[p]
		if f.held() {
			x.txNever(s, p)
			continue
		}
		if !f.cc.Ready(now) {
			x.at[s] = f.cc.NextSend()
			continue
		}
		e.rr = i
		return f, left
	}
	e.rr = i
	return nil, 0
}
