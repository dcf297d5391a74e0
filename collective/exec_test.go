package collective

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// The reference executor: it runs every rank's plan symbolically, each
// element holding the set of ranks whose contribution it contains (and
// whether one came twice), firing the ready events in an order a seeded
// generator chooses, and checks every rule a real executor relies on as
// it goes.

// val is an element's symbolic value.
type val struct {
	mask uint64 // the ranks whose contribution it holds
	dup  bool   // some contribution was added twice
	src  int32  // all-to-all: the element of the sender's buffer it is
}

func (v val) add(w val) val {
	return val{mask: v.mask | w.mask, dup: v.dup || w.dup || v.mask&w.mask != 0}
}

const (
	evPost = iota
	evDeliver
	evComplete
	evApply
)

type event struct {
	kind      uint8
	rank, idx int
}

// waiter is a send (post) or a receive (apply) that a dependency holds.
type waiter struct {
	send bool
	idx  int
}

type executor struct {
	// bare runs the events without values, for groups of more than 64
	// ranks: no deadlock and the windows are still checked (enabling is
	// monotone, so one order that finishes shows that every order does).
	bare  bool
	sc    *Schedule
	n     int
	elem  int
	full  uint64
	owner []int // AllGather: the rank whose shard holds each element
	rng   *rand.Rand

	acc      [][]val  // each rank's accumulator (AllToAll: send buffer)
	out      [][]val  // AllToAll: each rank's output buffer
	finisher [][]bool // the rank finished the element's value itself
	slot     [][][]val
	data     [][][]val // each send's data, read when it is posted

	recvOf    [][]int // the receive at the peer that matches each send
	postWait  [][]int // unmet dependencies of each send
	applyWait [][]int // of each receive (its arrival included)
	onApply   [][][]waiter
	onArrive  [][][]waiter
	onDone    [][][]waiter

	posted, done [][]bool
	applied      [][]bool
	inFlight     []map[int]int // Direct sends outstanding per rank and phase

	ready  []event
	events int
}

func newExecutor(sc *Schedule, seed uint64) (*executor, error) {
	n := sc.Spec.Ranks
	e := &executor{sc: sc, n: n, elem: sc.Spec.Elem, rng: rand.New(rand.NewPCG(seed, 0x5eed)), bare: n > 64}
	elems := sc.Spec.Bytes / e.elem
	if e.bare {
		elems = 0
	} else {
		e.full = ^uint64(0) >> (64 - n)
	}
	if sc.Spec.Kind == AllGather && !e.bare {
		e.owner = slices.Repeat([]int{-1}, elems)
		for r := range n {
			for _, sp := range sc.Shard(r) {
				for x := sp.Off / e.elem; x < sp.End()/e.elem; x++ {
					if e.owner[x] != -1 {
						return nil, fmt.Errorf("element %d in the shards of ranks %d and %d", x, e.owner[x], r)
					}
					e.owner[x] = r
				}
			}
		}
	}
	alloc := func() [][]bool { return make([][]bool, n) }
	e.acc, e.out, e.finisher = make([][]val, n), make([][]val, n), alloc()
	e.slot, e.data = make([][][]val, n), make([][][]val, n)
	e.recvOf, e.postWait, e.applyWait = make([][]int, n), make([][]int, n), make([][]int, n)
	e.onApply, e.onArrive, e.onDone = make([][][]waiter, n), make([][][]waiter, n), make([][][]waiter, n)
	e.posted, e.done, e.applied = alloc(), alloc(), alloc()
	e.inFlight = make([]map[int]int, n)
	for r := range n {
		p := &sc.Plans[r]
		e.acc[r], e.out[r], e.finisher[r] = make([]val, elems), make([]val, elems), make([]bool, elems)
		for x := range elems {
			switch sc.Spec.Kind {
			case AllGather:
				if e.owner[x] == r {
					e.acc[r][x], e.finisher[r][x] = val{mask: 1 << r}, true
				}
			case AllToAll:
				e.acc[r][x] = val{mask: 1 << r, src: int32(x)}
				e.out[r][x] = val{mask: 1 << r, src: int32(x)} // its own block stays
			default:
				e.acc[r][x] = val{mask: 1 << r}
			}
		}
		e.slot[r], e.data[r] = make([][]val, len(p.Recvs)), make([][]val, len(p.Sends))
		e.recvOf[r] = slices.Repeat([]int{-1}, len(p.Sends))
		e.postWait[r], e.applyWait[r] = make([]int, len(p.Sends)), make([]int, len(p.Recvs))
		e.onApply[r], e.onArrive[r] = make([][]waiter, len(p.Recvs)), make([][]waiter, len(p.Recvs))
		e.onDone[r] = make([][]waiter, len(p.Sends))
		e.posted[r], e.done[r] = make([]bool, len(p.Sends)), make([]bool, len(p.Sends))
		e.applied[r] = make([]bool, len(p.Recvs))
		e.inFlight[r] = map[int]int{}
	}
	if err := checkMatching(sc); err != nil {
		return nil, err
	}
	for r := range n {
		p := &sc.Plans[r]
		for k, v := range p.Recvs {
			e.recvOf[v.Peer][v.PeerMsg] = k
		}
		for i, s := range p.Sends {
			e.postWait[r][i] = len(s.AfterRecvs) + len(s.AfterSends)
			for _, k := range s.AfterRecvs {
				if k < 0 || k >= len(p.Recvs) {
					return nil, fmt.Errorf("rank %d send %d: AfterRecvs %d out of range", r, i, k)
				}
				if k == s.From {
					e.onArrive[r][k] = append(e.onArrive[r][k], waiter{true, i})
				} else {
					e.onApply[r][k] = append(e.onApply[r][k], waiter{true, i})
				}
			}
			if s.From >= 0 && !slices.Contains(s.AfterRecvs, s.From) {
				return nil, fmt.Errorf("rank %d send %d: From %d not among AfterRecvs %v", r, i, s.From, s.AfterRecvs)
			}
			for _, j := range s.AfterSends {
				if j < 0 || j >= len(p.Sends) || j == i {
					return nil, fmt.Errorf("rank %d send %d: AfterSends %d out of range", r, i, j)
				}
				e.onDone[r][j] = append(e.onDone[r][j], waiter{true, i})
			}
			if e.postWait[r][i] == 0 {
				e.ready = append(e.ready, event{evPost, r, i})
			}
		}
		for k, v := range p.Recvs {
			e.applyWait[r][k] = 1 + len(v.AfterRecvs) + len(v.AfterSends)
			for _, j := range v.AfterRecvs {
				if j < 0 || j >= len(p.Recvs) || j == k {
					return nil, fmt.Errorf("rank %d recv %d: AfterRecvs %d out of range", r, k, j)
				}
				e.onApply[r][j] = append(e.onApply[r][j], waiter{false, k})
			}
			for _, j := range v.AfterSends {
				if j < 0 || j >= len(p.Sends) {
					return nil, fmt.Errorf("rank %d recv %d: AfterSends %d out of range", r, k, j)
				}
				e.onDone[r][j] = append(e.onDone[r][j], waiter{false, k})
			}
		}
	}
	return e, nil
}

// checkMatching checks that every send has exactly one receive at its
// peer that points back at it, with the same range (all-to-all: length),
// role, dimension and phase, and that every receive points at a send.
func checkMatching(sc *Schedule) error {
	seen := make([][]int, len(sc.Plans))
	for r := range sc.Plans {
		seen[r] = make([]int, len(sc.Plans[r].Sends))
	}
	for r, p := range sc.Plans {
		for k, v := range p.Recvs {
			if v.Peer < 0 || v.Peer >= len(sc.Plans) || v.Peer == r {
				return fmt.Errorf("rank %d recv %d: peer %d", r, k, v.Peer)
			}
			sends := sc.Plans[v.Peer].Sends
			if v.PeerMsg < 0 || v.PeerMsg >= len(sends) {
				return fmt.Errorf("rank %d recv %d: PeerMsg %d of %d sends", r, k, v.PeerMsg, len(sends))
			}
			s := sends[v.PeerMsg]
			sameRange := s.Off == v.Off || sc.Spec.Kind == AllToAll
			if s.Peer != r || !sameRange || s.Len != v.Len || s.Role != v.Role || s.Dim != v.Dim || s.Phase != v.Phase {
				return fmt.Errorf("rank %d recv %d %+v does not match rank %d send %d %+v", r, k, v, v.Peer, v.PeerMsg, s)
			}
			if v.Len <= 0 {
				return fmt.Errorf("rank %d recv %d: empty", r, k)
			}
			seen[v.Peer][v.PeerMsg]++
		}
	}
	for r := range seen {
		for i, c := range seen[r] {
			if c != 1 {
				return fmt.Errorf("rank %d send %d %+v: %d matching receives", r, i, sc.Plans[r].Sends[i], c)
			}
		}
	}
	return nil
}

// final reports whether v is the element's finished value.
func (e *executor) final(x int, v val) bool {
	if e.sc.Spec.Kind == AllGather {
		return !v.dup && e.owner[x] >= 0 && v.mask == 1<<e.owner[x]
	}
	return !v.dup && v.mask == e.full
}

func (e *executor) wake(r int, ws []waiter) {
	for _, w := range ws {
		if w.send {
			if e.postWait[r][w.idx]--; e.postWait[r][w.idx] == 0 {
				e.ready = append(e.ready, event{evPost, r, w.idx})
			}
		} else if e.applyWait[r][w.idx]--; e.applyWait[r][w.idx] == 0 {
			e.ready = append(e.ready, event{evApply, r, w.idx})
		}
	}
}

// run fires ready events until none is left, and checks that everything
// happened.
func (e *executor) run() error {
	for len(e.ready) > 0 {
		i := e.rng.IntN(len(e.ready))
		ev := e.ready[i]
		e.ready[i] = e.ready[len(e.ready)-1]
		e.ready = e.ready[:len(e.ready)-1]
		e.events++
		if err := e.fire(ev); err != nil {
			return err
		}
	}
	for r, p := range e.sc.Plans {
		for i := range p.Sends {
			if !e.done[r][i] {
				return fmt.Errorf("deadlock: rank %d send %d %+v never completed (posted %v, %d dependencies unmet)", r, i, p.Sends[i], e.posted[r][i], e.postWait[r][i])
			}
		}
		for k := range p.Recvs {
			if !e.applied[r][k] {
				return fmt.Errorf("deadlock: rank %d recv %d %+v never applied (%d dependencies unmet)", r, k, p.Recvs[k], e.applyWait[r][k])
			}
		}
	}
	return nil
}

func (e *executor) fire(ev event) error {
	r, p := ev.rank, &e.sc.Plans[ev.rank]
	switch ev.kind {
	case evPost:
		s := &p.Sends[ev.idx]
		a, b := s.Off/e.elem, (s.Off+s.Len)/e.elem
		if e.bare {
			a, b = 0, 0
		}
		if s.From >= 0 {
			v := p.Recvs[s.From]
			if v.Off != s.Off || v.Len != s.Len || !v.Role.copies() {
				return fmt.Errorf("rank %d send %d %+v forwards recv %d %+v", r, ev.idx, *s, s.From, v)
			}
			e.data[r][ev.idx] = slices.Clone(e.slot[r][s.From])
		} else {
			e.data[r][ev.idx] = slices.Clone(e.acc[r][a:b])
		}
		for x, v := range e.data[r][ev.idx] {
			switch {
			case v.dup:
				return fmt.Errorf("rank %d send %d: element %d holds a contribution twice", r, ev.idx, a+x)
			case (s.Role == Gather || s.Role == GatherOwner) && !e.final(a+x, v):
				return fmt.Errorf("rank %d send %d %+v: %s of element %d, not finished (%b)", r, ev.idx, *s, s.Role, a+x, v.mask)
			case s.Role == GatherOwner && (s.From >= 0 || !e.finisher[r][a+x]):
				return fmt.Errorf("rank %d send %d %+v: gather-owner of element %d the rank did not finish", r, ev.idx, *s, a+x)
			}
		}
		e.posted[r][ev.idx] = true
		if e.sc.Phases[s.Phase].Algorithm == Direct {
			e.inFlight[r][s.Phase]++
			if w := e.sc.Spec.Window; w > 0 && e.inFlight[r][s.Phase] > w {
				return fmt.Errorf("rank %d: %d sends of phase %d in flight, window %d", r, e.inFlight[r][s.Phase], s.Phase, w)
			}
		}
		e.ready = append(e.ready, event{evDeliver, r, ev.idx})
	case evDeliver:
		s := &p.Sends[ev.idx]
		k := e.recvOf[r][ev.idx]
		e.slot[s.Peer][k] = e.data[r][ev.idx]
		e.wake(s.Peer, e.onArrive[s.Peer][k])
		if e.applyWait[s.Peer][k]--; e.applyWait[s.Peer][k] == 0 {
			e.ready = append(e.ready, event{evApply, s.Peer, k})
		}
		e.ready = append(e.ready, event{evComplete, r, ev.idx})
	case evComplete:
		s := &p.Sends[ev.idx]
		e.done[r][ev.idx] = true
		if e.sc.Phases[s.Phase].Algorithm == Direct {
			e.inFlight[r][s.Phase]--
		}
		e.wake(r, e.onDone[r][ev.idx])
	case evApply:
		v := &p.Recvs[ev.idx]
		a, b := v.Off/e.elem, (v.Off+v.Len)/e.elem
		if v.Role != Exchange && !e.bare {
			for i, s := range p.Sends {
				if e.posted[r][i] && !e.done[r][i] && s.From < 0 && s.Off < v.Off+v.Len && v.Off < s.Off+s.Len {
					return fmt.Errorf("rank %d recv %d %+v writes what send %d %+v still reads", r, ev.idx, *v, i, s)
				}
			}
		}
		data := e.slot[r][ev.idx]
		for x := a; x < b && !e.bare; x++ {
			d := data[x-a]
			switch v.Role {
			case Reduce:
				e.acc[r][x] = e.acc[r][x].add(d)
				e.finisher[r][x] = e.final(x, e.acc[r][x])
			case Gather, GatherOwner:
				e.acc[r][x], e.finisher[r][x] = d, false
			case Exchange:
				e.out[r][x] = d
			default:
				return fmt.Errorf("rank %d recv %d: role %d", r, ev.idx, v.Role)
			}
		}
		e.applied[r][ev.idx] = true
		e.wake(r, e.onApply[r][ev.idx])
	}
	return nil
}

// check checks the result at every rank.
func (e *executor) check() error {
	if e.bare {
		return nil
	}
	sp := e.sc.Spec
	elems := sp.Bytes / e.elem
	for r := range e.n {
		in := make([]bool, elems)
		for _, s := range e.sc.Shard(r) {
			for x := s.Off / e.elem; x < s.End()/e.elem; x++ {
				in[x] = true
			}
		}
		for x := range elems {
			v := e.acc[r][x]
			switch sp.Kind {
			case AllReduce, AllGather:
				if !e.final(x, v) {
					return fmt.Errorf("rank %d element %d: %b (dup %v), want every contribution once", r, x, v.mask, v.dup)
				}
			case ReduceScatter:
				if in[x] && !e.final(x, v) {
					return fmt.Errorf("rank %d element %d of its shard: %b (dup %v)", r, x, v.mask, v.dup)
				}
			case AllToAll:
				block := sp.Bytes / e.elem / e.n
				from, at := x/block, x%block
				want := val{mask: 1 << from, src: int32(r*block + at)}
				if e.out[r][x] != want {
					return fmt.Errorf("rank %d output element %d: %+v, want element %d of rank %d", r, x, e.out[r][x], want.src, from)
				}
			}
		}
	}
	return nil
}
