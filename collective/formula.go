package collective

// FormulaSentBytes is the bytes rank sends under s, from each algorithm's
// closed form, written apart from the compiler so that a test can hold
// one against the other. It is 0 for a spec Compile refuses.
//
// Over a group of m with e elements, member c owning chunk o (ring: c+1,
// the others: c) and chunk i having e/m elements plus one if i < e mod m:
//
//	reduce-scatter, every algorithm: e - |chunk o| (every chunk but the
//	    one it keeps leaves it once; a halving-doubling pair's even member
//	    hands over all but its own chunk, the odd one gets it back)
//	all-gather, ring:   e - |chunk c+2| (every chunk but the one its
//	    successor owns)
//	all-gather, direct: (m-1) |chunk c|
//	all-gather, halving-doubling: the blocks it holds before each
//	    doubling step (1, 2, 4, ... blocks); a pair's even member sends
//	    only its chunk, the odd one also sends it all the rest
//	double binary tree, per tree and its half h: h (to the parent,
//	    unless root) + h per child; position x has no child if odd, else
//	    one, and a second if x < m
//
// A dimension works on what the reduce-scatters over the dimensions
// before it left; ring and direct all-reduce come to 2(m-1)/m of the
// vector when chunks are equal.
func FormulaSentBytes(s Spec, rank int) int {
	s, err := s.fill()
	if err != nil || rank < 0 || rank >= s.Ranks {
		return 0
	}
	e := s.Bytes / s.Elem
	if s.Kind == AllToAll {
		return (s.Ranks - 1) * (e / s.Ranks) * s.Elem
	}
	type dim struct {
		m, c int
		a    Algorithm
	}
	var dims []dim
	stride := 1
	for d, m := range s.Dims {
		if m > 1 {
			dims = append(dims, dim{m: m, c: rank / stride % m, a: s.algorithm(d)})
		}
		stride *= m
	}
	if len(dims) == 0 {
		return 0
	}
	total := 0
	for piece := range s.Splits {
		n := part(e, s.Splits, piece)
		// levels[i] is the elements dimension i works on.
		levels := []int{n}
		for _, d := range dims[:len(dims)-1] {
			levels = append(levels, part(n, d.m, own(d.a, d.m, d.c)))
			n = levels[len(levels)-1]
		}
		last := dims[len(dims)-1]
		switch s.Kind {
		case AllReduce:
			for i, d := range dims[:len(dims)-1] {
				total += rsFormula(levels[i], d.m, own(d.a, d.m, d.c)) + agFormula(levels[i], d.m, d.c, d.a)
			}
			if last.a == DoubleBinaryTree {
				total += treeFormula(n, last.m, last.c)
			} else {
				total += rsFormula(n, last.m, own(last.a, last.m, last.c)) + agFormula(n, last.m, last.c, last.a)
			}
		case ReduceScatter:
			for i, d := range dims {
				total += rsFormula(levels[i], d.m, own(d.a, d.m, d.c))
			}
		case AllGather:
			for i, d := range dims {
				total += agFormula(levels[i], d.m, d.c, d.a)
			}
		}
	}
	return total * s.Elem
}

// part is the elements of part i of k of e elements.
func part(e, k, i int) int {
	if i < e%k {
		return e/k + 1
	}
	return e / k
}

// own is the chunk member c of a group of m keeps after a reduce-scatter.
func own(a Algorithm, m, c int) int {
	if a == Ring {
		return (c + 1) % m
	}
	return c
}

func rsFormula(e, m, o int) int { return e - part(e, m, o) }

func agFormula(e, m, c int, a Algorithm) int {
	switch a {
	case Ring:
		return e - part(e, m, (c+2)%m)
	case Direct:
		return (m - 1) * part(e, m, c)
	}
	p := 1
	for p*2 <= m {
		p *= 2
	}
	r := m - p
	if c < 2*r && c%2 == 0 {
		return part(e, m, c)
	}
	// Its virtual rank among p, and the first chunk of each virtual block.
	v := c - r
	if c < 2*r {
		v = c / 2
	}
	first := func(b int) int {
		if b < r {
			return 2 * b
		}
		return b + r
	}
	total := 0
	for size := 1; size < p; size *= 2 {
		lo := v / size * size
		for ch := first(lo); ch < first(lo+size); ch++ {
			total += part(e, m, ch)
		}
	}
	if c < 2*r {
		total += e - part(e, m, c-1)
	}
	return total
}

func treeFormula(e, m, c int) int {
	root := 1
	for root*2 <= m {
		root *= 2
	}
	total := 0
	for t, x := range [2]int{c + 1, c} {
		if x == 0 {
			x = m
		}
		kids := 0
		if x%2 == 0 {
			kids = 1
			if x < m {
				kids = 2
			}
		}
		if x != root {
			kids++
		}
		total += kids * part(e, 2, t)
	}
	return total
}
