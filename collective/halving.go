package collective

import "math/bits"

// halvingDoubling is Rabenseifner's all-reduce, a reduce-scatter by
// recursive halving and an all-gather by recursive doubling (ASTRA-sim's
// HalvingDoubling). Over p = 2^k members, halving step s pairs each
// member with the one p/2^(s+1) away: of the block of chunks the pair
// shares, each sends the half the other keeps and adds the half it keeps,
// so member v ends with the sum of chunk v after k steps; doubling runs
// the steps backwards, each member sending the block it holds.
//
// A group of m = p + r members, 0 < r < p, pairs its first 2r members:
// the even member 2j of each pair hands the odd one 2j+1 its whole range
// but its own chunk 2j, as a partial sum, and stays out while the odd
// one stands for both in the halving among p members, over p blocks of
// chunks (the pair's two chunks count as one block, the members from 2r
// on as one block each); then the odd one sends chunk 2j's sum of all the
// others to 2j, which adds its own and so finishes chunk 2j itself. The
// all-gather mirrors it: 2j sends its finished chunk to 2j+1 (as its
// owner), the p members double, and 2j+1 sends 2j everything but chunk
// 2j. Every member owns its own chunk after the reduce-scatter, so a
// dimension of any size composes with the others, and the even members
// send and receive the whole range once each way.
type halvingDoubling struct {
	p, r, k int
}

func newHalvingDoubling(m int) halvingDoubling {
	k := bits.Len(uint(m)) - 1
	p := 1 << k
	return halvingDoubling{p: p, r: m - p, k: k}
}

func (h halvingDoubling) steps(o op, m int) int {
	if h.r > 0 {
		return h.k + 2
	}
	return h.k
}

func (halvingDoubling) owned(m, pos int) int { return pos }

// member is the member that stands for block v in the power-of-two part.
func (h halvingDoubling) member(v int) int {
	if v < h.r {
		return 2*v + 1
	}
	return v + h.r
}

// block is the first chunk of block v (v = p: the end).
func (h halvingDoubling) block(v int) int {
	if v < h.r {
		return 2 * v
	}
	return v + h.r
}

// blocks is the span of blocks [a, b).
func (h halvingDoubling) blocks(g *group, a, b int) Span {
	return g.chunks(h.block(a), h.block(b))
}

func (h halvingDoubling) emit(g *group, step int) {
	m := g.st.m
	if h.r > 0 {
		switch step {
		case 0: // the even members of the pairs hand over
			for j := range h.r {
				if g.st.op == opReduceScatter {
					g.send(2*j, 2*j+1, g.chunks(0, 2*j), Reduce, false)
					g.send(2*j, 2*j+1, g.chunks(2*j+1, m), Reduce, false)
				} else {
					g.send(2*j, 2*j+1, g.chunk(2*j), Gather, true)
				}
			}
			return
		case h.k + 1: // and get theirs back
			for j := range h.r {
				if g.st.op == opReduceScatter {
					g.send(2*j+1, 2*j, g.chunk(2*j), Reduce, false)
				} else {
					g.send(2*j+1, 2*j, g.chunks(0, 2*j), Gather, false)
					g.send(2*j+1, 2*j, g.chunks(2*j+1, m), Gather, false)
				}
			}
			return
		}
		step--
	}
	for v := range h.p {
		if g.st.op == opReduceScatter {
			d := h.p >> (step + 1)
			lo := v &^ (2*d - 1)
			if v&d == 0 { // keep the lower half, send the upper
				g.send(h.member(v), h.member(v+d), h.blocks(g, lo+d, lo+2*d), Reduce, false)
			} else {
				g.send(h.member(v), h.member(v-d), h.blocks(g, lo, lo+d), Reduce, false)
			}
		} else {
			d := 1 << step
			lo := v &^ (d - 1)
			// The first step sends the member's own finished block, of
			// which it is the owner unless a pair's even member finished
			// half of it.
			g.send(h.member(v), h.member(v^d), h.blocks(g, lo, lo+d), Gather, step == 0 && v >= h.r)
		}
	}
}
