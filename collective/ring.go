package collective

// ring passes chunks around the group, to the next rank and from the
// previous one (ASTRA-sim's Ring; today's workload ring). Member i, round
// r of m-1:
//
//	reduce-scatter: send chunk i-r, receive chunk i-r-1 and add it
//	all-gather:     send chunk i+1-r, receive chunk i-r and keep it
//
// After the reduce-scatter member i holds the sum of chunk i+1, which its
// first all-gather round sends as the chunk's owner; later rounds forward
// what the previous round received.
type ring struct{}

func (ring) steps(o op, m int) int { return m - 1 }

func (ring) owned(m, pos int) int { return mod(pos+1, m) }

func (ring) emit(g *group, r int) {
	m := g.st.m
	for i := range m {
		switch g.st.op {
		case opReduceScatter:
			g.send(i, mod(i+1, m), g.chunk(mod(i-r, m)), Reduce, false)
		case opAllGather:
			g.send(i, mod(i+1, m), g.chunk(mod(i+1-r, m)), Gather, r == 0)
		}
	}
}
