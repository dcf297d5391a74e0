package collective

import (
	"slices"
	"sort"
)

// The dependencies are derived from each rank's program alone: its sends
// and receives in program order (by global step; a rank's send and
// receive of one step never overlap) over the byte ranges they read and
// write. The vector is cut into segments at every boundary the rank's
// messages have, and each segment remembers who last wrote it and who has
// read it since:
//
//   - A send from the accumulator waits for the writes of every byte it
//     reads: the last copy, or the partial sums added since (adds commute,
//     so they are not ordered among themselves).
//   - A send of a range that one copy wrote whole, with nothing added
//     since, is forwarded from that receive's staging slot (From).
//   - An apply waits for the sends from the accumulator that read its
//     bytes since the last write (AfterSends). With none, a copy waits for
//     the writes it overwrites; an add waits for the last copy and for the
//     sends the previous adds had to wait for, since it is not ordered
//     after those adds.
//
// Whatever a listed dependency implies is left out (a send that read a
// segment waited for its writers, so an apply after that send need not
// name them), which keeps the lists short at thousands of ranks.

// seg is the state of one segment of a rank's vector.
type seg struct {
	lastCopy int32   // the last receive that copied into it, or -1
	reduces  []int32 // receives that added into it since lastCopy
	readers  []int32 // sends from the accumulator that read it since the last write
	guard    []int32 // the sends an add must wait for when no reader is left
	written  int     // the deriver's clock at the last write
}

// deriver derives one rank's dependencies at a time, reusing its buffers.
type deriver struct {
	bounds []int
	segs   []seg
	recvs  []int32
	sends  []int32
	win    []int32
	arena  []int
	// clock counts the receives derived; the last list a send from the
	// accumulator got is reused by the next send of the same segments if
	// none was written since: a direct all-gather's m-1 sends of one
	// chunk all wait for the same adds, and share one list.
	clock          int
	cacheA, cacheB int
	cacheAt        int
	cache          []int
	prev           []int // the last list ints made
}

// ints copies xs, deduplicated and sorted, into the arena.
func (d *deriver) ints(xs []int32) []int {
	if len(xs) == 0 {
		return nil
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	if len(xs) == len(d.prev) {
		same := true
		for i, x := range xs {
			same = same && int(x) == d.prev[i]
		}
		if same { // lists are read only, so equal ones share
			return d.prev
		}
	}
	if cap(d.arena)-len(d.arena) < len(xs) {
		d.arena = make([]int, 0, max(4096, len(xs)))
	}
	start := len(d.arena)
	for _, x := range xs {
		d.arena = append(d.arena, int(x))
	}
	d.prev = d.arena[start:len(d.arena):len(d.arena)]
	return d.prev
}

// span is the segments [a, b) that cover the range at off of n bytes.
func (d *deriver) span(off, n int) (int, int) {
	return sort.SearchInts(d.bounds, off), sort.SearchInts(d.bounds, off+n)
}

// derive fills in rank r's dependencies.
func (d *deriver) derive(c *compiler, r int) {
	p := &c.plans[r]
	d.bounds = d.bounds[:0]
	for _, s := range p.Sends {
		d.bounds = append(d.bounds, s.Off, s.Off+s.Len)
	}
	for _, v := range p.Recvs {
		d.bounds = append(d.bounds, v.Off, v.Off+v.Len)
	}
	slices.Sort(d.bounds)
	d.bounds = slices.Compact(d.bounds)
	n := max(len(d.bounds)-1, 0)
	if cap(d.segs) < n {
		d.segs = make([]seg, n)
	}
	d.segs = d.segs[:n]
	for i := range d.segs {
		s := &d.segs[i]
		s.lastCopy, s.reduces, s.readers, s.guard = -1, s.reduces[:0], s.readers[:0], s.guard[:0]
		s.written = 0
	}
	d.win = d.win[:0]
	d.clock, d.cacheA, d.cacheB, d.prev = 1, -1, -1, nil
	winPhase := -1
	alltoall := c.spec.Kind == AllToAll
	sendStep, recvStep := c.sendStep[r], c.recvStep[r]
	i, j := 0, 0
	for i < len(p.Sends) || j < len(p.Recvs) {
		if j == len(p.Recvs) || (i < len(p.Sends) && sendStep[i] <= recvStep[j]) {
			s := &p.Sends[i]
			if !alltoall {
				d.send(p, i)
			}
			if c.phases[s.Phase].Algorithm == Direct {
				if s.Phase != winPhase {
					winPhase, d.win = s.Phase, d.win[:0]
				}
				d.win = append(d.win, int32(i))
				if w := c.spec.Window; w > 0 && len(d.win) > w {
					d.sends = append(d.sends[:0], d.win[len(d.win)-1-w])
					s.AfterSends = d.ints(d.sends)
				}
			}
			i++
		} else {
			if !alltoall {
				d.recv(p, j)
			}
			j++
		}
	}
}

// send derives what send k waits for, and marks what it reads.
func (d *deriver) send(p *Plan, k int) {
	s := &p.Sends[k]
	a, b := d.span(s.Off, s.Len)
	if s.Role == Gather || s.Role == GatherOwner {
		if from := d.segs[a].lastCopy; from >= 0 && p.Recvs[from].Off == s.Off && p.Recvs[from].Len == s.Len {
			whole := true
			for i := a; i < b && whole; i++ {
				whole = d.segs[i].lastCopy == from && len(d.segs[i].reduces) == 0
			}
			if whole {
				s.From = int(from)
				s.AfterRecvs = d.ints(append(d.recvs[:0], from))
				return
			}
		}
	}
	if a == d.cacheA && b == d.cacheB {
		fresh := true
		for i := a; i < b && fresh; i++ {
			fresh = d.segs[i].written < d.cacheAt
		}
		if fresh {
			s.AfterRecvs = d.cache
			for i := a; i < b; i++ {
				d.segs[i].readers = append(d.segs[i].readers, int32(k))
			}
			return
		}
	}
	d.recvs = d.recvs[:0]
	for i := a; i < b; i++ {
		g := &d.segs[i]
		if len(g.reduces) > 0 {
			d.recvs = append(d.recvs, g.reduces...)
		} else if g.lastCopy >= 0 {
			d.recvs = append(d.recvs, g.lastCopy)
		}
		g.readers = append(g.readers, int32(k))
	}
	s.AfterRecvs = d.ints(d.reduceRecvs(p, d.recvs))
	d.cacheA, d.cacheB, d.cacheAt, d.cache = a, b, d.clock, s.AfterRecvs
}

// recv derives what the apply of receive k waits for, and marks what it
// writes.
func (d *deriver) recv(p *Plan, k int) {
	v := &p.Recvs[k]
	a, b := d.span(v.Off, v.Len)
	d.recvs, d.sends = d.recvs[:0], d.sends[:0]
	add := v.Role == Reduce
	for i := a; i < b; i++ {
		g := &d.segs[i]
		switch {
		case len(g.readers) > 0:
			d.sends = append(d.sends, g.readers...)
		case add:
			d.sends = append(d.sends, g.guard...)
			if g.lastCopy >= 0 {
				d.recvs = append(d.recvs, g.lastCopy)
			}
		case len(g.reduces) > 0:
			d.recvs = append(d.recvs, g.reduces...)
		case g.lastCopy >= 0:
			d.recvs = append(d.recvs, g.lastCopy)
		}
		switch {
		case !add:
			g.lastCopy, g.reduces, g.guard = int32(k), g.reduces[:0], g.guard[:0]
		case len(g.readers) > 0:
			g.guard = append(g.guard[:0], g.readers...)
			g.reduces = append(g.reduces[:0], int32(k))
		default:
			g.reduces = append(g.reduces, int32(k))
		}
		g.readers = g.readers[:0]
		g.written = d.clock
	}
	d.clock++
	v.AfterRecvs = d.ints(d.reduceRecvs(p, d.recvs))
	v.AfterSends = d.ints(d.sends)
}

// reduceRecvs drops, from a short list of receives to wait for, those
// another one on the list already waits for (directly, or through a send
// it waits for).
func (d *deriver) reduceRecvs(p *Plan, xs []int32) []int32 {
	if len(xs) < 2 || len(xs) > 8 {
		return xs
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	implied := func(x, by int32) bool {
		v := &p.Recvs[by]
		if slices.Contains(v.AfterRecvs, int(x)) {
			return true
		}
		for _, s := range v.AfterSends {
			if slices.Contains(p.Sends[s].AfterRecvs, int(x)) {
				return true
			}
		}
		return false
	}
	var keep [8]bool
	for i, x := range xs {
		keep[i] = true
		for j, y := range xs {
			if i != j && implied(x, y) {
				keep[i] = false
				break
			}
		}
	}
	out := xs[:0]
	for i, x := range xs {
		if keep[i] {
			out = append(out, x)
		}
	}
	return out
}
