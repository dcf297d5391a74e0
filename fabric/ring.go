package fabric

import "time"

// entry is a packet held by the switch, with what the engine needs to know
// about it while it is queued or on the wire.
type entry struct {
	pkt   Packet
	prio  uint8 // PFC priority of its DSCP: its ingress accounting class
	class uint8 // on the wire: the counter class it left (a priority or ClassHeader)
	// stamp is, in a data queue, the arrival order across the port's
	// priorities (seq) and, on the wire, the instant the packet reaches the
	// far end (at): an entry is never in both, so one word holds either and
	// an entry is 48 bytes, not 56.
	stamp uint64
}

// seq is the arrival order of a data-queue entry.
func (e *entry) seq() uint64 { return e.stamp }

// at is the instant an entry on the wire reaches the far end.
func (e *entry) at() time.Duration { return time.Duration(e.stamp) }

// ring is a double-ended FIFO of entries over a power-of-two array. It
// grows by doubling when full, so a queue allocates only while it reaches a
// depth it never had before, and its array is no larger than twice the
// deepest it has been. When it empties it starts again at the front of the
// array, so a queue that is often empty keeps reusing the same few cache
// lines instead of walking the whole array.
type ring struct {
	buf   []entry
	head  int // index of the oldest entry
	n     int
	bytes int // sum of len(pkt.Buf) of the entries
}

const minRing = 4

func (r *ring) len() int { return r.n }

func (r *ring) push(e entry) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = e
	r.n++
	r.bytes += len(e.pkt.Buf)
}

// front returns the oldest entry; the ring must not be empty.
func (r *ring) front() *entry { return &r.buf[r.head] }

// back returns the newest entry; the ring must not be empty.
func (r *ring) back() *entry { return &r.buf[(r.head+r.n-1)&(len(r.buf)-1)] }

// pop removes and returns the oldest entry.
func (r *ring) pop() entry {
	e := r.buf[r.head]
	r.buf[r.head] = entry{} // drop the reference so a stale Buf is not kept alive
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if r.n == 0 {
		r.head = 0
	}
	r.bytes -= len(e.pkt.Buf)
	return e
}

// popBack removes and returns the newest entry.
func (r *ring) popBack() entry {
	i := (r.head + r.n - 1) & (len(r.buf) - 1)
	e := r.buf[i]
	r.buf[i] = entry{}
	r.n--
	if r.n == 0 {
		r.head = 0
	}
	r.bytes -= len(e.pkt.Buf)
	return e
}

func (r *ring) grow() {
	size := max(2*len(r.buf), minRing)
	nb := make([]entry, size)
	for i := range r.n {
		nb[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = nb, 0
}
