package collective

import (
	"fmt"
	"testing"

	"github.com/forgive-emu/forgive/internal/race"
	"pgregory.net/rapid"
)

// TestEveryGroupSize runs every algorithm's all-reduce over every group
// of 2 to 64 ranks, and the hierarchical shapes of the brief with every
// combination of algorithms, under a completion order and a vector rapid
// draws (a vector of fewer elements than ranks included).
func TestEveryGroupSize(t *testing.T) {
	type tc struct {
		dims []int
		algs []Algorithm
	}
	var cases []tc
	for _, a := range Algorithms() {
		for n := 2; n <= 64; n++ {
			cases = append(cases, tc{[]int{n}, []Algorithm{a}})
		}
	}
	flat := []Algorithm{Ring, Direct, HalvingDoubling}
	for _, dims := range [][]int{{2, 2}, {8, 8}, {3, 5}, {4, 2, 8}} {
		var each func(prefix []Algorithm)
		each = func(prefix []Algorithm) {
			if len(prefix) == len(dims) {
				cases = append(cases, tc{dims, prefix})
				return
			}
			as := flat
			if len(prefix) == len(dims)-1 {
				as = Algorithms()
			}
			for _, a := range as {
				each(append(append([]Algorithm(nil), prefix...), a))
			}
		}
		each(nil)
	}
	run := func(c tc, elems, elem, splits, window int, seed uint64) error {
		ranks := 1
		for _, m := range c.dims {
			ranks *= m
		}
		spec := Spec{Ranks: ranks, Dims: c.dims, Algorithms: c.algs, Bytes: elems * elem, Elem: elem, Splits: splits, Window: window}
		sc, err := Compile(spec)
		if err != nil {
			return err
		}
		e, err := newExecutor(sc, seed)
		if err == nil {
			err = e.run()
		}
		if err == nil {
			err = e.check()
		}
		for r := 0; r < ranks && err == nil; r++ {
			if got, want := sc.SentBytes(r), FormulaSentBytes(spec, r); got != want {
				err = fmt.Errorf("rank %d sends %d, formula %d", r, got, want)
			}
		}
		if err != nil {
			return fmt.Errorf("%+v: %v", sc.Spec, err)
		}
		return nil
	}
	// Every case once, its vector one element more than two per rank
	// (unequal chunks), in two pieces, a window of 2; every sixth case
	// under the race detector, which finds nothing in a package without
	// goroutines (every third took the package past go test's 10 minutes
	// on a loaded machine).
	for i, c := range cases {
		if race.Enabled && i%6 != 0 {
			continue
		}
		ranks := 1
		for _, m := range c.dims {
			ranks *= m
		}
		if err := run(c, 2*ranks+1, 4, 2, 2, uint64(i)); err != nil {
			t.Error(err)
		}
	}
	// And rapid's choice of case, vector, pieces, window and order.
	rapid.Check(t, func(t *rapid.T) {
		c := rapid.SampledFrom(cases).Draw(t, "case")
		ranks := 1
		for _, m := range c.dims {
			ranks *= m
		}
		err := run(c, rapid.IntRange(1, 2*ranks+3).Draw(t, "elems"), rapid.SampledFrom([]int{1, 4}).Draw(t, "elem"),
			rapid.IntRange(0, 3).Draw(t, "splits"), rapid.IntRange(0, 3).Draw(t, "window"), rapid.Uint64().Draw(t, "order"))
		if err != nil {
			t.Fatal(err)
		}
	})
}
