package collective

import (
	"fmt"
	"strings"
)

// Algorithm names how one logical dimension's group moves its data.
type Algorithm string

// The algorithms; doc.go describes each and where its idea comes from.
const (
	// Ring passes chunks around the group: n-1 rounds of reduce-scatter,
	// n-1 of all-gather, one neighbour each way (today's workload ring).
	Ring Algorithm = "ring"
	// Direct sends to every peer at once (ASTRA-sim's direct, all-to-all
	// based), at most Spec.Window of a rank's sends of one phase in flight.
	Direct Algorithm = "direct"
	// HalvingDoubling is recursive halving reduce-scatter and recursive
	// doubling all-gather (Rabenseifner); a group that is not a power of two
	// pairs its first 2r ranks (doc.go).
	HalvingDoubling Algorithm = "halving-doubling"
	// DoubleBinaryTree is NCCL's two complementary binary trees, each
	// carrying half the data, pipelined in Spec.Splits pieces.
	DoubleBinaryTree Algorithm = "double-binary-tree"
)

var algorithms = []Algorithm{Ring, Direct, HalvingDoubling, DoubleBinaryTree}

// Algorithms lists every algorithm, in a fixed order.
func Algorithms() []Algorithm { return append([]Algorithm(nil), algorithms...) }

// ParseAlgorithm reads an algorithm's name.
func ParseAlgorithm(s string) (Algorithm, error) {
	for _, a := range algorithms {
		if string(a) == s {
			return a, nil
		}
	}
	names := make([]string, len(algorithms))
	for i, a := range algorithms {
		names[i] = string(a)
	}
	return "", fmt.Errorf("collective: algorithm %q: want one of %s", s, strings.Join(names, ", "))
}

// Kind is the collective operation.
type Kind string

// The operations.
const (
	// AllReduce leaves the sum of every rank's vector at every rank.
	AllReduce Kind = "all-reduce"
	// ReduceScatter leaves at each rank the sum of its shard (Schedule.Shard).
	ReduceScatter Kind = "reduce-scatter"
	// AllGather starts from each rank's shard (Schedule.Shard) and leaves
	// every shard at every rank.
	AllGather Kind = "all-gather"
	// AllToAll is mixture-of-experts dispatch and combine: rank i sends
	// block j of its buffer to rank j, which keeps it as block i of its
	// output buffer.
	AllToAll Kind = "all-to-all"
)

// MaxRanks is the largest group Compile accepts.
const MaxRanks = 65536

// Spec is what to compile.
type Spec struct {
	// Kind is the operation; "" means AllReduce.
	Kind Kind
	// Ranks is the group's size, 1..MaxRanks.
	Ranks int
	// Dims are the logical dimensions, fastest-varying first (rank = c0 +
	// Dims[0]*c1 + ...); their product is Ranks; nil means [Ranks].
	Dims []int
	// Algorithms has one algorithm per dimension, or one for all; nil
	// means Ring.
	Algorithms []Algorithm
	// Bytes is the vector each rank contributes (for AllToAll, its send
	// buffer), a multiple of Elem.
	Bytes int
	// Elem is the bytes of one element (0 means 4): no chunk boundary
	// splits an element. A range of e elements cut into k chunks gives the
	// first e mod k chunks one element more than the others.
	Elem int
	// Splits cuts the vector into that many pieces (0 and 1: one), which
	// go through the dimensions independently and so pipeline across them
	// and, for DoubleBinaryTree, through the tree's levels.
	Splits int
	// Window bounds Direct: at most Window of a rank's sends of one phase
	// are in flight at once (0: every peer at once).
	Window int
}

// algorithm returns the algorithm of dimension d of a filled spec.
func (s *Spec) algorithm(d int) Algorithm {
	if len(s.Algorithms) == 1 {
		return s.Algorithms[0]
	}
	return s.Algorithms[d]
}

// fill checks s and returns it with its defaults filled.
func (s Spec) fill() (Spec, error) {
	if s.Kind == "" {
		s.Kind = AllReduce
	}
	switch s.Kind {
	case AllReduce, ReduceScatter, AllGather, AllToAll:
	default:
		return s, fmt.Errorf("collective: kind %q: want all-reduce, reduce-scatter, all-gather or all-to-all", s.Kind)
	}
	if s.Ranks < 1 || s.Ranks > MaxRanks {
		return s, fmt.Errorf("collective: ranks %d: want 1..%d", s.Ranks, MaxRanks)
	}
	if s.Dims == nil {
		s.Dims = []int{s.Ranks}
	} else {
		s.Dims = append([]int(nil), s.Dims...)
	}
	prod := 1
	for _, d := range s.Dims {
		if d < 1 {
			return s, fmt.Errorf("collective: dims %v: a dimension of %d, want >= 1", s.Dims, d)
		}
		prod *= d
		if prod > MaxRanks {
			break
		}
	}
	if prod != s.Ranks {
		return s, fmt.Errorf("collective: dims %v: product %d, want ranks %d", s.Dims, prod, s.Ranks)
	}
	if s.Algorithms == nil {
		s.Algorithms = []Algorithm{Ring}
	} else {
		s.Algorithms = append([]Algorithm(nil), s.Algorithms...)
	}
	if len(s.Algorithms) != 1 && len(s.Algorithms) != len(s.Dims) {
		return s, fmt.Errorf("collective: algorithms %v: %d of them for %d dims, want 1 or %d", s.Algorithms, len(s.Algorithms), len(s.Dims), len(s.Dims))
	}
	for _, a := range s.Algorithms {
		if _, err := ParseAlgorithm(string(a)); err != nil {
			return s, fmt.Errorf("collective: algorithms %v: unknown %q", s.Algorithms, a)
		}
	}
	if s.Elem == 0 {
		s.Elem = 4
	}
	if s.Elem < 0 {
		return s, fmt.Errorf("collective: elem %d: want > 0", s.Elem)
	}
	if s.Bytes < 0 || s.Bytes%s.Elem != 0 {
		return s, fmt.Errorf("collective: bytes %d: want a non-negative multiple of elem %d", s.Bytes, s.Elem)
	}
	if s.Splits < 0 {
		return s, fmt.Errorf("collective: splits %d: want >= 0", s.Splits)
	}
	if s.Splits == 0 {
		s.Splits = 1
	}
	if s.Window < 0 {
		return s, fmt.Errorf("collective: window %d: want >= 0", s.Window)
	}
	return s, s.checkShape()
}

// checkShape refuses the combinations no algorithm here compiles.
func (s *Spec) checkShape() error {
	last := -1 // the innermost dimension with more than one rank
	for d, m := range s.Dims {
		if m > 1 {
			last = d
		}
	}
	for d, m := range s.Dims {
		a := s.algorithm(d)
		if m == 1 {
			continue
		}
		if s.Kind == AllToAll && a != Direct {
			return fmt.Errorf("collective: algorithms %v: all-to-all is compiled only by direct", s.Algorithms)
		}
		if a == DoubleBinaryTree && (s.Kind != AllReduce || d != last) {
			return fmt.Errorf("collective: algorithms %v: double-binary-tree only all-reduces, so it must be the algorithm of the innermost dimension of an all-reduce", s.Algorithms)
		}
	}
	if s.Kind == AllToAll {
		n := 0
		for _, m := range s.Dims {
			if m > 1 {
				n++
			}
		}
		if n > 1 {
			return fmt.Errorf("collective: dims %v: all-to-all runs over one dimension", s.Dims)
		}
		if s.Bytes%(s.Ranks*s.Elem) != 0 {
			return fmt.Errorf("collective: bytes %d: all-to-all wants a multiple of ranks x elem = %d (equal blocks)", s.Bytes, s.Ranks*s.Elem)
		}
	}
	return nil
}
