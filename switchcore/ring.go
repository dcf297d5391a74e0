package switchcore

import (
	"math"
	"time"
	"unsafe"

	"github.com/forgive-emu/forgive/wire"
)

// entry is a packet held by the switch, with what the engine needs to know
// about it while it is queued or on the wire.
//
// It holds its packet's buffer as a pointer, a length and a capacity of 32
// bits each rather than a slice, and one word and one byte each serve two
// uses, so an entry is 40 bytes with the header summary: every hop writes
// and reads up to four of them (a queue and the wire), and at fabric scale
// they are the state most often not in cache (TestHotLayout holds the
// size).
type entry struct {
	ptr  *byte  // the buffer's first byte (unsafe.SliceData)
	n, c uint32 // its length and capacity
	// stamp is, in a data queue, the arrival order across the port's
	// priorities (seq) and, on the wire, the instant the packet reaches the
	// far end (at): an entry is never in both, so one word holds either.
	stamp uint64
	tos   uint8 // the packet's TOS
	// prio is, while queued, the PFC priority of the packet's DSCP (its
	// ingress accounting class) and, on the wire, the counter class it
	// left (a priority or ClassHeader: wireClass); nothing reads the
	// priority once the packet has left its queue.
	prio uint8
	in   PortID // the port it arrived on
	// hdr is what wire.Inspect returns for the bytes the entry holds, or
	// a zero Type when those bytes were not inspected (a trimmed packet
	// Inspect refuses). It leaves with the packet (Output.Hdr), so a
	// driver that delivers it to another switch need not parse the
	// header again (ReceiveInspected).
	hdr wire.Summary
}

// wireClass is the counter class an entry on the wire left.
func (e *entry) wireClass() int { return int(e.prio) }

// newEntry makes an entry of pkt, whose header h is (wire.Inspect). Buffers
// longer than 4 GiB cannot be wire packets; a larger capacity is kept as
// 4 GiB.
func newEntry(pkt Packet, prio uint8, h *wire.Summary) entry {
	e := entry{tos: pkt.TOS, in: pkt.In, prio: prio, hdr: *h}
	e.setBuf(pkt.Buf)
	return e
}

func (e *entry) setBuf(b []byte) {
	e.ptr, e.n, e.c = unsafe.SliceData(b), uint32(len(b)), uint32(min(cap(b), math.MaxUint32))
}

// buf returns the packet's buffer (nil if it was nil).
func (e *entry) buf() []byte { return unsafe.Slice(e.ptr, e.c)[:e.n] }

// size is len(buf()).
func (e *entry) size() int { return int(e.n) }

// packet returns the packet the entry holds.
func (e *entry) packet() Packet { return Packet{Buf: e.buf(), TOS: e.tos, In: e.in} }

// ecn returns the packet's ECN codepoint.
func (e *entry) ecn() uint8 { return e.tos & ecnMask }

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
//
// It holds its array as a pointer to the first entry and a length of 32
// bits rather than a slice, so a ring is 32 bytes: a port has ten, and
// the wire's, the strict-priority queue's and the first data queue's
// share the port's second and third cache lines (TestHotLayout).
//
// A pop leaves the entry it removes in the array: a slot outside the
// live entries is never read, and is overwritten by the next push that
// reaches it. Clearing its buffer pointer would cost a store and a write
// barrier check on every pop only to let the collector free a buffer a
// little sooner; left in place, the pointer keeps that buffer reachable
// until then, no more than one buffer per slot of the array (and the
// buffer has been handed to the driver, which usually reuses it anyway).
type ring struct {
	arr   *entry // the array's first entry; nil before the first push
	size  uint32 // the array's length, a power of two (0 before the first push)
	head  uint32 // index of the oldest entry
	n     uint32
	bytes int // sum of len(pkt.Buf) of the entries
}

const minRing = 4

func (r *ring) len() int { return int(r.n) }

// slot returns entry i of the array, i taken modulo its length.
func (r *ring) slot(i uint32) *entry {
	return (*entry)(unsafe.Add(unsafe.Pointer(r.arr), uintptr(i&(r.size-1))*unsafe.Sizeof(entry{})))
}

// at returns the k-th oldest entry, k < len().
func (r *ring) at(k int) *entry { return r.slot(r.head + uint32(k)) }

func (r *ring) push(e entry) {
	if r.n == r.size {
		r.grow()
	}
	*r.slot(r.head + r.n) = e
	r.n++
	r.bytes += e.size()
}

// front returns the oldest entry; the ring must not be empty.
func (r *ring) front() *entry { return r.slot(r.head) }

// back returns the newest entry; the ring must not be empty.
func (r *ring) back() *entry { return r.slot(r.head + r.n - 1) }

// pop removes and returns the oldest entry.
func (r *ring) pop() entry {
	e := *r.slot(r.head)
	r.head = (r.head + 1) & (r.size - 1)
	r.n--
	if r.n == 0 {
		r.head = 0
	}
	r.bytes -= e.size()
	return e
}

// popBack removes and returns the newest entry.
func (r *ring) popBack() entry {
	e := *r.slot(r.head + r.n - 1)
	r.n--
	if r.n == 0 {
		r.head = 0
	}
	r.bytes -= e.size()
	return e
}

func (r *ring) grow() {
	size := max(2*r.size, minRing)
	nb := make([]entry, size)
	for i := range r.n {
		nb[i] = *r.slot(r.head + i)
	}
	r.arr, r.size, r.head = &nb[0], size, 0
}
