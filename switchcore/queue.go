package switchcore

import (
	"math/bits"

	"github.com/forgive-emu/forgive/wire"
)

// admit puts a routed packet on egress port out.
func (s *Switch) admit(in, out *port, pkt Packet, h *wire.Summary) DropReason {
	cl := s.classes[pkt.DSCP()]
	e := newEntry(pkt, cl.prio(), h)
	strict := takesStrictPriority(cl, h)
	class := int(cl.prio())
	if strict {
		class = ClassHeader
	}
	if out.down(s.clock) {
		return s.drop(out, class, pkt, DropLinkDown)
	}
	if s.headroomExceeded(in, cl.prio(), len(pkt.Buf)) {
		return s.rxDrop(in, pkt, DropHeadroom)
	}
	if strict {
		return s.pushHeader(out, e)
	}
	return s.pushData(out, e, h.Type == wire.TypeData)
}

// forward puts a routed packet on the link of out at once, when that is
// all the general path (admit, then a step of out now) would do with it,
// and reports whether it did. That is the common case on a switch
// without PFC or faults: the link of out is idle, nothing is queued on
// out, and no port is due. Then the packet joins an empty queue, which it
// fits (a packet too large for its queue is left to admit, which trims or
// drops it), and the step at now takes it straight off again: every
// counter and state change of that pair is made here (the queue's
// enqueued count and occupancy histogram, the arrival order, the
// round-robin position, the dequeued count) without writing the packet
// into the queue and reading it back.
//
// Without PFC nothing is charged to the ingress port, no priority is
// paused and no PAUSE is owed, and no port but out is due now: the run
// at the start of Receive left none due, and nothing since touched
// another port. Without faults the link is up and loses nothing. The
// packet does not get an ECN mark: it leaves an empty data buffer
// behind, and no mark is made at an occupancy of KMin or less, which is
// never below 0.
func (s *Switch) forward(out *port, pkt Packet, h *wire.Summary) bool {
	now := s.now
	if s.pfcMask != 0 || out.faults() || out.linkFree > now || out.dataMask != 0 || out.hdr.n != 0 {
		return false
	}
	cl := s.classes[pkt.DSCP()]
	e := newEntry(pkt, cl.prio(), h)
	size := e.size()
	class := ClassHeader
	if takesStrictPriority(cl, h) {
		if size > out.headerCap {
			return false
		}
		out.cls[ClassHeader].enqueued(s.coldOf(out), ClassHeader, size, size, out.headerCap)
	} else {
		if size > out.dataCap {
			return false
		}
		class = int(cl.prio())
		out.seq++ // the arrival order it would have had, so the state is what admit leaves
		out.cls[class].enqueued(s.coldOf(out), class, size, size, out.dataCap)
		out.rr = (cl.prio() + 1) % NumPriorities // readyData's choice
	}
	// The step of out at now. It has nothing to emit: the run at the
	// start of Receive emitted what reached the far end by now.
	out.cls[class].dequeued.add(size)
	s.transmit(out, e, class, now)
	// schedule(out), of which only the wire is left: out has nothing
	// queued, and without PFC it owes no PAUSE (only an enabled priority
	// sends one) nor has a pause to refresh, so due(out) is its wire's
	// next arrival, or now (the clock) if that is due already.
	s.ev.set(int(out.id), max(out.wireAt, s.clock))
	return true
}

// takesStrictPriority reports whether a packet joins the strict-priority
// queue: ACK, NACK and CNP packets, trimmed headers, and anything on a
// control DSCP. Data packets and probes join the data FIFO of their
// priority; a probe must not overtake the data of its subflow.
func takesStrictPriority(cl classInfo, h *wire.Summary) bool {
	switch h.Type {
	case wire.TypeData:
		return cl.control() || h.Trimmed()
	case wire.TypeProbe:
		return cl.control()
	}
	return true
}

// pushHeader queues e on the strict-priority queue of p, or drops it when
// that queue is full.
func (s *Switch) pushHeader(p *port, e entry) DropReason {
	if p.hdr.bytes+e.size() > p.headerCap {
		return s.drop(p, ClassHeader, e.packet(), DropHeaderOverflow)
	}
	p.hdr.push(e)
	s.enqueued(p, ClassHeader, e, p.hdr.bytes, p.headerCap)
	return DropNone
}

// pushData queues e on its data FIFO, trimming or dropping as the port's
// trim mode says when the data buffer is full. A trimmable packet is an
// untrimmed data packet; a probe is header-only and can only be dropped.
func (s *Switch) pushData(p *port, e entry, trimmable bool) DropReason {
	size := e.size()
	if p.dataBytes+size > p.dataCap {
		switch p.trim {
		case TrimOff:
			return s.drop(p, int(e.prio), e.packet(), DropDataFull)
		case TrimNDP:
			// htsim's coin: half the time the arrival makes room by
			// trimming what was queued last.
			if s.rng.Uint64()&1 == 0 && s.makeRoom(p, size) {
				break
			}
			fallthrough
		case TrimArrival:
			if !trimmable {
				return s.drop(p, int(e.prio), e.packet(), DropDataFull)
			}
			return s.pushHeader(p, s.trim(p, e))
		}
	}
	e.stamp = p.seq
	p.seq++
	p.data[e.prio].push(e)
	p.dataBytes += size
	p.dataMask |= 1 << e.prio
	s.enqueued(p, int(e.prio), e, p.dataBytes, p.dataCap)
	return DropNone
}

// makeRoom trims the most recently queued data packets, moving their
// headers to the strict-priority queue, until size more bytes fit. It
// reports false when that cannot work: the arrival is larger than the
// whole buffer, or the newest entry is a probe (what was trimmed before
// the probe was reached stays trimmed).
func (s *Switch) makeRoom(p *port, size int) bool {
	if size > p.dataCap {
		return false
	}
	for p.dataBytes+size > p.dataCap {
		prio, ok := p.newestData()
		if !ok {
			return false
		}
		e := s.popData(p, prio, true)
		s.pushHeader(p, s.trim(p, e))
	}
	return true
}

// newestData returns the priority whose FIFO holds the most recently
// queued data entry, if that entry is an untrimmed data packet.
func (p *port) newestData() (uint8, bool) {
	best, found := uint8(0), false
	var bestSeq uint64
	for m := p.dataMask; m != 0; m &= m - 1 {
		prio := uint8(bits.TrailingZeros8(m))
		if seq := p.data[prio].back().seq(); !found || seq > bestSeq {
			best, bestSeq, found = prio, seq, true
		}
	}
	if !found || wire.Type(p.data[best].back().buf()[0]&0x0F) != wire.TypeData {
		return 0, false
	}
	return best, true
}

// popData removes the oldest (or, with newest, the newest) entry of a data
// FIFO and releases its ingress accounting.
func (s *Switch) popData(p *port, prio uint8, newest bool) entry {
	q := &p.data[prio]
	var e entry
	if newest {
		e = q.popBack()
	} else {
		e = q.pop()
	}
	p.dataBytes -= e.size()
	if q.len() == 0 {
		p.dataMask &^= 1 << prio
	}
	s.uncharge(&e)
	return e
}

// trim cuts a data packet to its header in place and counts it. The
// entry's header summary is inspected again from the bytes just written,
// so it stays what wire.Inspect says of them.
func (s *Switch) trim(p *port, e entry) entry {
	before := e.size()
	b, _ := wire.Trim(e.buf()) // the caller checked it is untrimmed data
	e.setBuf(b)
	if h, err := wire.Inspect(b); err == nil {
		e.hdr = h
	} else {
		e.hdr = wire.Summary{} // not inspected: the next switch reads the bytes
	}
	s.coldOf(p).stats.Classes[e.prio].Trimmed.add(before - e.size())
	if p.cfg.RemarkTrimmed {
		e.tos = p.cfg.TrimmedDSCP<<2 | e.ecn()
	}
	return e
}

// enqueued records a packet joining a queue of class c now holding occ of
// capacity bytes, and charges it to its ingress port.
func (s *Switch) enqueued(p *port, c int, e entry, occ, capacity int) {
	p.cls[c].enqueued(s.coldOf(p), c, e.size(), occ, capacity)
	s.charge(&e)
}

// enqueued counts a packet of size bytes joining a queue of class c that
// then holds occ of capacity bytes.
func (h *classHot) enqueued(cold *portCold, c, size, occ, capacity int) {
	h.enqueues.add(size)
	h.maxOccupancy = max(h.maxOccupancy, occ)
	h.observe(&cold.stats.Classes[c].Occupancy, occ, capacity)
}
