package switchcore

import (
	"math/bits"
	"time"
)

// startNext puts the next packet on p's link at t (the link is free):
// PFC frames first, then the strict-priority queue, then the data
// priorities that are not paused, in turn.
func (s *Switch) startNext(p *port, t time.Duration) {
	var e entry
	class := ClassHeader
	switch {
	case p.pfcPending != 0:
		s.startPFC(p, t)
		return
	case p.hdr.len() > 0:
		e = p.hdr.pop()
		s.uncharge(&e)
	default:
		prio, ok := p.readyData(s.coldOf(p), t, s.pfcMask)
		if !ok {
			return
		}
		e = s.popData(p, prio, false)
		class = int(prio)
	}
	if p.down(t) {
		s.drop(p, class, e.packet(), DropLinkDown)
		return
	}
	if class != ClassHeader {
		s.markECN(p, &e)
	}
	p.cls[class].dequeued.add(e.size())
	s.transmit(p, e, class, t)
}

// readyData picks, round-robin, a data priority with packets queued that
// is not paused at t. Only the priorities in pfc (those with PFC enabled)
// can be paused.
func (p *port) readyData(c *portCold, t time.Duration, pfc uint8) (uint8, bool) {
	// bit i of the rotated mask is priority rr+i: the priorities with
	// data, in round-robin order from rr
	for m := bits.RotateLeft8(p.dataMask, -int(p.rr)); m != 0; m &= m - 1 {
		prio := (p.rr + uint8(bits.TrailingZeros8(m))) % NumPriorities
		if pfc&(1<<prio) == 0 || !c.pause[prio].paused(t) {
			p.rr = (prio + 1) % NumPriorities
			return prio, true
		}
	}
	return 0, false
}

// markECN sets CE on an ECN-capable packet leaving the data queue with the
// RED probability of the occupancy it leaves behind (HPCC and htsim decide
// after the packet is removed).
func (s *Switch) markECN(p *port, e *entry) {
	if !p.ecn() {
		return
	}
	ecn := &p.cfg.ECN
	if code := e.ecn(); code != ECNECT0 && code != ECNECT1 {
		return
	}
	q := p.dataBytes
	switch {
	case q > ecn.KMax:
	case q <= ecn.KMin:
		return
	default:
		prob := ecn.PMax * float64(q-ecn.KMin) / float64(ecn.KMax-ecn.KMin)
		if s.rng.Float64() >= prob {
			return
		}
	}
	e.tos |= ECNCE
	s.coldOf(p).stats.Classes[e.prio].Marked.add(e.size())
}

// transmit serializes e on the link from t and puts it on the wire, where
// it may be lost to a fault.
func (s *Switch) transmit(p *port, e entry, class int, t time.Duration) {
	if t > p.linkFree {
		p.excess = 0 // the link was idle: no credit carries over
	}
	p.linkFree = t + p.serialize(e.size()+p.overhead)
	at := p.linkFree + p.delay
	if p.faults() {
		f := &p.cfg.Fault
		if f.Loss > 0 && s.rng.Float64() < f.Loss {
			s.drop(p, class, e.packet(), DropFaultLoss)
			return
		}
		if f.Jitter > 0 {
			at += time.Duration(s.rng.Int64N(int64(f.Jitter)))
		}
	}
	at = max(at, p.lastAt) // a link does not reorder
	p.lastAt = at
	e.stamp, e.prio = uint64(at), uint8(class) // on the wire: its time and class (entry)
	if p.wire.len() == 0 {
		p.wireAt = at
	}
	p.wire.push(e)
}

// serialize returns how long n bytes occupy the link. Time is rounded up
// per packet and the rounding carried to the next one, so a busy link
// never runs faster than its rate and loses less than a nanosecond over
// any backlog.
func (p *port) serialize(n int) time.Duration {
	need := uint64(n) * 8 * 1e9 // ns·bit/s
	if need <= p.excess {
		p.excess -= need
		return 0
	}
	need -= p.excess
	ns := (need + p.rate - 1) / p.rate
	p.excess = ns*p.rate - need
	return time.Duration(ns)
}

// emit hands over the packets that reached the far end of the link by t.
func (s *Switch) emit(p *port, t time.Duration) {
	for p.wireAt <= t {
		e := p.wire.pop()
		p.wireAt = never
		if p.wire.len() > 0 {
			p.wireAt = p.wire.front().at()
		}
		if p.down(e.at()) {
			s.drop(p, e.wireClass(), e.packet(), DropLinkDown)
			continue
		}
		s.sent[p.id].add(e.size())
		s.out = append(s.out, Output{Port: p.id, Pkt: e.packet(), At: e.at(), Hdr: e.hdr})
	}
}

// pausedStart is when the link of p can start its next packet when only
// priorities that can be paused have data: the earliest end of their
// pauses, or linkFree.
func (s *Switch) pausedStart(p *port) time.Duration {
	c := s.coldOf(p)
	t := never
	for m := p.dataMask; m != 0; m &= m - 1 {
		prio := bits.TrailingZeros8(m)
		t = min(t, max(p.linkFree, c.pause[prio].end))
	}
	return t
}
