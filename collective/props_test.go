package collective

import (
	"testing"

	"pgregory.net/rapid"
)

// specGen draws a valid spec of at most maxRanks ranks: one to three
// dimensions (or nil), an algorithm for each or one for all (a tree only
// where it may go), any kind, element sizes 1 to 8, vectors from empty to
// a few elements per rank (so that some chunks are empty), splits and
// windows.
func specGen(maxRanks int) *rapid.Generator[Spec] {
	return rapid.Custom(func(t *rapid.T) Spec {
		var s Spec
		s.Kind = rapid.SampledFrom([]Kind{AllReduce, AllReduce, AllReduce, ReduceScatter, AllGather, AllToAll}).Draw(t, "kind")
		nd := rapid.IntRange(0, 3).Draw(t, "ndims")
		if s.Kind == AllToAll {
			nd = 0
		}
		if nd == 0 {
			s.Ranks = rapid.IntRange(1, maxRanks).Draw(t, "ranks")
		} else {
			s.Ranks = 1
			for i := range nd {
				d := rapid.IntRange(1, max(1, maxRanks/s.Ranks)).Draw(t, "dim")
				if i < nd-1 {
					d = min(d, 9)
				}
				s.Dims = append(s.Dims, d)
				s.Ranks *= d
			}
		}
		dims := s.Dims
		if dims == nil {
			dims = []int{s.Ranks}
		}
		last := -1
		for d, m := range dims {
			if m > 1 {
				last = d
			}
		}
		pick := func(d int) Algorithm {
			if s.Kind == AllToAll {
				return Direct
			}
			as := []Algorithm{Ring, Direct, HalvingDoubling}
			if s.Kind == AllReduce && d == last {
				as = append(as, DoubleBinaryTree)
			}
			return rapid.SampledFrom(as).Draw(t, "alg")
		}
		if len(dims) == 1 || rapid.Bool().Draw(t, "oneAlg") {
			a := pick(last)
			if a == DoubleBinaryTree && len(dims) > 1 {
				a = Ring
			}
			s.Algorithms = []Algorithm{a}
		} else {
			for d := range dims {
				s.Algorithms = append(s.Algorithms, pick(d))
			}
		}
		s.Elem = rapid.SampledFrom([]int{0, 1, 2, 4, 8}).Draw(t, "elem")
		elem := s.Elem
		if elem == 0 {
			elem = 4
		}
		if s.Kind == AllToAll {
			s.Bytes = rapid.IntRange(0, 3).Draw(t, "blockElems") * s.Ranks * elem
		} else {
			s.Bytes = rapid.IntRange(0, 3*s.Ranks+7).Draw(t, "elems") * elem
		}
		s.Splits = rapid.IntRange(0, 4).Draw(t, "splits")
		s.Window = rapid.IntRange(0, 4).Draw(t, "window")
		return s
	})
}

// TestExecutes runs every schedule of up to 64 ranks under a random
// completion order: it never deadlocks, never writes what a send still
// reads, keeps every window, sends only finished values as gathers and
// only its own as gather-owner, and ends with every contribution exactly
// once in every element (properties 1 to 4, 6 to 8).
func TestExecutes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := specGen(64).Draw(t, "spec")
		sc, err := Compile(spec)
		if err != nil {
			t.Fatalf("compile %+v: %v", spec, err)
		}
		for range 2 {
			e, err := newExecutor(sc, rapid.Uint64().Draw(t, "order"))
			if err != nil {
				t.Fatalf("%+v: %v", sc.Spec, err)
			}
			if err := e.run(); err != nil {
				t.Fatalf("%+v: %v", sc.Spec, err)
			}
			if err := e.check(); err != nil {
				t.Fatalf("%+v: %v", sc.Spec, err)
			}
		}
	})
}
