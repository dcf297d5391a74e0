package collective

// direct sends to every peer at once (ASTRA-sim's direct all-reduce, built
// from all-to-all transfers): in the reduce-scatter member i sends chunk j
// to member j for every j != i and adds the m-1 partial sums of its own
// chunk i it receives; in the all-gather it sends its finished chunk to
// every peer, as its owner. Step k (1..m-1) pairs i with i+k, so the
// peers' sends spread over the receivers; Spec.Window bounds how many of
// a rank's sends of one phase are in flight (deps.go chains each send
// after the one Window places before it).
//
// The all-to-all is the same exchange of blocks, with Spec.Splits pieces
// of every block.
type direct struct{}

func (direct) steps(o op, m int) int { return m - 1 }

func (direct) owned(m, pos int) int { return pos }

func (direct) emit(g *group, step int) {
	m, k := g.st.m, step+1
	for i := range m {
		j := mod(i+k, m)
		switch g.st.op {
		case opReduceScatter:
			g.send(i, j, g.chunk(j), Reduce, false)
		case opAllGather:
			g.send(i, j, g.chunk(i), Gather, true)
		case opAllToAll:
			splits := g.c.spec.Splits
			for q := range splits {
				sp := chunk(g.chunk(j), splits, q, g.c.spec.Elem)
				at := chunk(g.chunk(i), splits, q, g.c.spec.Elem)
				g.message(i, j, sp, at, Exchange)
			}
		}
	}
}
