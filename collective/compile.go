package collective

import "fmt"

// op is what a stage does over one dimension's groups.
type op uint8

const (
	opReduceScatter op = iota
	opAllGather
	opReduce    // up a tree
	opBroadcast // down a tree
	opAllToAll
)

var opNames = [...]string{"reduce-scatter", "all-gather", "reduce", "broadcast", "all-to-all"}

// stage is one phase: an op of one algorithm over the groups of one
// dimension. Every group of a dimension has the same size, so every rank
// of every piece goes through the same steps.
type stage struct {
	op        op
	dim       int // index into Spec.Dims
	m, stride int // the groups' size; ranks of a group differ by stride
	alg       algorithm
	phase     int
	innermost bool // the last dimension with more than one rank
	firstStep int  // global number of the stage's first step
	steps     int
}

// algorithm compiles one dimension's groups, a step at a time.
type algorithm interface {
	// steps is how many steps op takes over a group of m.
	steps(o op, m int) int
	// emit adds the messages of one step of g's op.
	emit(g *group, step int)
	// owned is the chunk of a reduce-scatter over m that pos keeps.
	owned(m, pos int) int
}

func algorithmOf(a Algorithm, m int) algorithm {
	switch a {
	case Direct:
		return direct{}
	case HalvingDoubling:
		return newHalvingDoubling(m)
	case DoubleBinaryTree:
		return newDoubleTree(m)
	}
	return ring{}
}

// compiler holds one compilation.
type compiler struct {
	spec   Spec
	stages []stage
	dims   []stage // every dimension of more than one rank, for shardBefore
	plans  []Plan
	// The global step of each message, by rank, to merge a rank's sends
	// and receives into its program order when deriving dependencies.
	sendStep, recvStep [][]int32
	phases             []PhaseInfo
	// counts, when set, makes run count each rank's sends and receives
	// (twice over) instead of emitting them, so that the second run
	// allocates every list once.
	counts []int
}

// Compile compiles s into every rank's plan.
func Compile(s Spec) (*Schedule, error) {
	s, err := s.fill()
	if err != nil {
		return nil, err
	}
	c := &compiler{
		spec:     s,
		plans:    make([]Plan, s.Ranks),
		sendStep: make([][]int32, s.Ranks),
		recvStep: make([][]int32, s.Ranks),
	}
	c.plan()
	if n := c.bound(); n > MaxMessages {
		return nil, fmt.Errorf("collective: ranks %d, dims %v, algorithms %v, splits %d: up to %d messages, more than %d; use more dimensions or fewer splits", s.Ranks, s.Dims, s.Algorithms, s.Splits, n, MaxMessages)
	}
	c.counts = make([]int, 2*s.Ranks)
	c.run()
	for r := range c.plans {
		ns, nr := c.counts[2*r], c.counts[2*r+1]
		c.plans[r] = Plan{Sends: make([]Send, 0, ns), Recvs: make([]Recv, 0, nr)}
		c.sendStep[r], c.recvStep[r] = make([]int32, 0, ns), make([]int32, 0, nr)
	}
	c.counts = nil
	c.run()
	var d deriver
	for r := range c.plans {
		d.derive(c, r)
	}
	return &Schedule{Spec: s, Plans: c.plans, Phases: c.phases}, nil
}

// plan lays out the stages: for an all-reduce over dims d0..dL,
// reduce-scatter over d0..dL-1, all-reduce over dL (a reduce-scatter and
// an all-gather, or a tree's reduce and broadcast), all-gather over
// dL-1..d0. Dimensions of one rank do nothing and get no stage.
func (c *compiler) plan() {
	s := &c.spec
	var dims []int
	for d, m := range s.Dims {
		if m > 1 {
			dims = append(dims, d)
		}
	}
	add := func(o op, d int) {
		a := s.algorithm(d)
		c.stages = append(c.stages, stage{
			op: o, dim: d, m: s.Dims[d], stride: stride(s.Dims, d),
			alg: algorithmOf(a, s.Dims[d]), phase: len(c.stages),
			innermost: d == dims[len(dims)-1],
		})
		c.phases = append(c.phases, PhaseInfo{
			Name: fmt.Sprintf("%s dim %d (%s)", opNames[o], d, a),
			Op:   opNames[o], Dim: d, Algorithm: a,
		})
	}
	for _, d := range dims {
		c.dims = append(c.dims, stage{dim: d, m: s.Dims[d], stride: stride(s.Dims, d), alg: algorithmOf(s.algorithm(d), s.Dims[d])})
	}
	if len(dims) == 0 {
		return
	}
	last := dims[len(dims)-1]
	switch s.Kind {
	case AllReduce:
		for _, d := range dims[:len(dims)-1] {
			add(opReduceScatter, d)
		}
		if s.algorithm(last) == DoubleBinaryTree {
			add(opReduce, last)
			add(opBroadcast, last)
		} else {
			add(opReduceScatter, last)
			add(opAllGather, last)
		}
		for i := len(dims) - 2; i >= 0; i-- {
			add(opAllGather, dims[i])
		}
	case ReduceScatter:
		for _, d := range dims {
			add(opReduceScatter, d)
		}
	case AllGather:
		for i := len(dims) - 1; i >= 0; i-- {
			add(opAllGather, dims[i])
		}
	case AllToAll:
		add(opAllToAll, last)
	}
	step := 0
	for i := range c.stages {
		st := &c.stages[i]
		st.firstStep = step
		st.steps = st.alg.steps(st.op, st.m)
		step += st.steps
	}
}

// MaxMessages bounds a schedule's messages (each a Send and a Recv of
// about 100 bytes each): a flat ring or direct over n ranks has 2n(n-1),
// which a hierarchy of dimensions cuts to 2n(d0-1 + d1-1 + ...).
const MaxMessages = 1 << 25

// bound is an upper bound on the messages of the schedule, computed
// before any is made.
func (c *compiler) bound() int {
	pieces := c.spec.Splits
	if pieces > MaxMessages {
		return pieces
	}
	n := 0
	for _, st := range c.stages {
		per := 1 // messages a rank sends per step and piece
		switch st.alg.(type) {
		case halvingDoubling:
			per = 2
		case *doubleTree:
			per = 4
		}
		n += st.steps * c.spec.Ranks * pieces * per
		if n > MaxMessages {
			break
		}
	}
	return n
}

// stride is the rank distance between neighbours along dimension d.
func stride(dims []int, d int) int {
	s := 1
	for _, m := range dims[:d] {
		s *= m
	}
	return s
}

// pieces are the Splits pieces of the vector, empty ones left out. An
// all-to-all splits each block instead (direct.emit), so its one piece is
// the whole buffer.
func (c *compiler) pieces() []Span {
	if c.spec.Kind == AllToAll {
		if c.spec.Bytes == 0 {
			return nil
		}
		return []Span{{Len: c.spec.Bytes}}
	}
	var out []Span
	for i := range c.spec.Splits {
		if p := chunk(Span{Len: c.spec.Bytes}, c.spec.Splits, i, c.spec.Elem); p.Len > 0 {
			out = append(out, p)
		}
	}
	return out
}

// run emits every message: stage by stage, step by step, piece by piece,
// group by group, so that a rank's messages come out in its program
// order.
func (c *compiler) run() {
	pieces := c.pieces()
	for i := range c.stages {
		st := &c.stages[i]
		bases := groupBases(c.spec.Ranks, st.m, st.stride)
		// The range of every (piece, group) at this stage.
		ranges := make([]Span, len(pieces)*len(bases))
		for p, piece := range pieces {
			for b, base := range bases {
				ranges[p*len(bases)+b] = c.shardBefore(piece, base, st.dim)
			}
		}
		g := group{c: c, st: st}
		for step := range st.steps {
			g.step = int32(st.firstStep + step)
			for p := range pieces {
				for b, base := range bases {
					g.base, g.r = base, ranges[p*len(bases)+b]
					if g.r.Len > 0 {
						st.alg.emit(&g, step)
					}
				}
			}
		}
	}
}

// groupBases are the lowest ranks of the groups of a dimension of m ranks
// at stride: the ranks whose coordinate along it is 0.
func groupBases(ranks, m, stride int) []int {
	out := make([]int, 0, ranks/m)
	for r := 0; r < ranks; r++ {
		if (r/stride)%m == 0 {
			out = append(out, r)
		}
	}
	return out
}

// shardBefore is the part of piece that rank works on along dimension
// dim: what the reduce-scatters over the dimensions before dim left it
// (the all-gathers over them undo it in reverse).
func (c *compiler) shardBefore(piece Span, rank, dim int) Span {
	r := piece
	for _, st := range c.dims {
		if st.dim >= dim {
			break
		}
		pos := (rank / st.stride) % st.m
		r = chunk(r, st.m, st.alg.owned(st.m, pos), c.spec.Elem)
	}
	return r
}

// group is one group of a stage, for one piece, at one step.
type group struct {
	c    *compiler
	st   *stage
	base int  // the group's lowest rank
	r    Span // the range the group works on
	step int32
}

// rank is the group-local rank of the group's member at pos.
func (g *group) rank(pos int) int { return g.base + pos*g.st.stride }

// chunk is chunk i of the group's m chunks of its range.
func (g *group) chunk(i int) Span { return chunk(g.r, g.st.m, i, g.c.spec.Elem) }

// chunks is chunks i..j-1.
func (g *group) chunks(i, j int) Span { return chunks(g.r, g.st.m, i, j, g.c.spec.Elem) }

// send adds a message from the member at pos from to the member at pos to,
// carrying sp. A Gather from a sender the algorithm calls the range's
// owner (owner) is a GatherOwner on the innermost dimension, the one whose
// reduction finishes the sum. Empty messages are left out.
func (g *group) send(from, to int, sp Span, role Role, owner bool) {
	if role == Gather && owner && g.st.innermost {
		role = GatherOwner
	}
	g.message(from, to, sp, sp, role)
}

// message adds a message whose range at the receiver is at (AllToAll).
func (g *group) message(from, to int, sp, at Span, role Role) {
	if sp.Len == 0 {
		return
	}
	c := g.c
	src, dst := g.rank(from), g.rank(to)
	if c.counts != nil {
		c.counts[2*src]++
		c.counts[2*dst+1]++
		return
	}
	sends := &c.plans[src].Sends
	c.plans[dst].Recvs = append(c.plans[dst].Recvs, Recv{
		Peer: src, Off: at.Off, Len: at.Len, Role: role, PeerMsg: len(*sends),
		Dim: g.st.dim, Phase: g.st.phase,
	})
	*sends = append(*sends, Send{
		Peer: dst, Off: sp.Off, Len: sp.Len, Role: role, From: -1,
		Dim: g.st.dim, Phase: g.st.phase,
	})
	c.sendStep[src] = append(c.sendStep[src], g.step)
	c.recvStep[dst] = append(c.recvStep[dst], g.step)
}
