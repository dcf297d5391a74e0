package nic

import (
	"math"
	"time"
)

// The transmit index: what Transmit's round-robin reads of each flow, in
// a dense array, so that a host with many flows (a flow per message: tens
// to hundreds) finds the next flow that may send without reading every
// flow's state, a cache miss per flow.
//
// A flow may send at now when it is bound, not failed, not blocked and
// its pacer lets a packet leave (transmit's test). The index holds, for
// each flow, a time at or before the earliest it may send: txAt[f.timers]
// is never later than f.cc.NextSend() while the flow is bound, live and
// not blocked. The round-robin reads the flows' times in e.order's order
// from rr and tests only a flow whose time has come, with transmit's own
// test, so it picks the flow a scan of every flow picks, and advances rr
// as that scan does. A flow whose time has come but that may not send
// gets its exact time there: its pacer's, or never (blocked, failed or
// unbound), until something lets it send again.
//
// The bound holds through every change of a flow's state: the pacer's time
// only moves later (Pacer.OnSend, in transmit, which then stores the new
// time), and a flow that could not send may again only where unblock
// clears txBlocked (an ACK, a NACK, a timer, a posted send, a binding,
// which is also where peerTag is set), and unblock stores its time. A flow
// starts blocked (never); failing only ever makes a flow unable to send.
//
// A host with at most txScanMax flows (most have one or two) scans them
// as they are, which costs less than keeping the index: the index is kept
// only above that (txIndexed), built when a flow is created past it.

// txScanMax is the most flows a host's Transmit scans without the index.
const txScanMax = 16

// never is the time of a flow that may not send until it is unblocked.
const never = time.Duration(math.MaxInt64)

// txAdd files a flow just appended to e.order, with its timers' entry.
func (e *Engine) txAdd(f *flow) {
	e.txSlot = append(e.txSlot, f.timers)
	for len(e.txAt) <= int(f.timers) {
		e.txAt = append(e.txAt, never)
	}
	e.txAt[f.timers] = never // a new flow is blocked until something is posted
	if !e.txIndexed && len(e.order) > e.txScanMax {
		e.txIndexed = true
		for i, g := range e.order {
			e.txAt[e.txSlot[i]] = g.txTime()
		}
	}
}

// txRemove drops the flow at index i of e.order, just removed from it.
func (e *Engine) txRemove(i int) {
	e.txSlot = append(e.txSlot[:i], e.txSlot[i+1:]...)
	if len(e.order) <= e.txScanMax {
		e.txIndexed = false
	}
}

// txTime is the earliest time f may send, never if it may not.
func (f *flow) txTime() time.Duration {
	if f.txBlocked || f.failed != nil || f.peerTag == 0 {
		return never
	}
	return f.cc.NextSend()
}

// unblock lets f's sender be asked for data again: something may have
// given it data or window, or it was just bound.
func (e *Engine) unblock(f *flow) {
	f.txBlocked = false
	if e.txIndexed {
		e.txAt[f.timers] = f.cc.NextSend()
	}
}

// nextIndexed is transmit's round-robin with the index: it passes at most
// left flows from rr, advancing rr past each, and returns the first that
// may send at now and the flows still left to pass, or nil when none of
// them may.
func (e *Engine) nextIndexed(now time.Duration, left int) (*flow, int) {
	at, slots := e.txAt, e.txSlot
	i := e.rr
	for ; left > 0; left-- {
		s, j := slots[i], i
		if i++; i == len(slots) {
			i = 0
		}
		if at[s] > now {
			continue
		}
		f := e.order[j]
		if f.txBlocked || f.failed != nil || f.peerTag == 0 {
			at[s] = never
			continue
		}
		if !f.cc.Ready(now) {
			at[s] = f.cc.NextSend()
			continue
		}
		e.rr = i
		return f, left - 1
	}
	e.rr = i
	return nil, 0
}
