package collective

import (
	"reflect"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/internal/race"
	"pgregory.net/rapid"
)

// compileGen draws specs of up to 1024 ranks, for the properties that
// need only the compiler; a ring or direct dimension is kept to 256
// ranks (64 under the race detector, which finds nothing in a package
// without goroutines and makes the n^2 messages slow).
func compileGen() *rapid.Generator[Spec] {
	flat := 256
	if race.Enabled {
		flat = 64
	}
	return rapid.Custom(func(t *rapid.T) Spec {
		s := specGen(1024).Draw(t, "spec")
		for d, m := range s.Dims {
			a := s.algorithm(d)
			if m > flat && (a == Ring || a == Direct) {
				s.Dims[d] = flat
			}
		}
		if s.Dims != nil {
			s.Ranks = 1
			for _, m := range s.Dims {
				s.Ranks *= m
			}
		} else if a := s.Algorithms[0]; s.Ranks > flat && (a == Ring || a == Direct) {
			s.Ranks = flat
		}
		if s.Kind == AllToAll {
			e := s.Elem
			if e == 0 {
				e = 4
			}
			s.Bytes = s.Bytes / e % 4 * s.Ranks * e
		}
		return s
	})
}

// TestBytesMatchFormula holds the compiler to each algorithm's closed
// form, rank by rank, and the whole to conservation: what is sent is
// received (property 5). It also checks the matching (property 4), that
// the shards of a reduce-scatter or all-gather cover the vector exactly
// once, and, running the events without values, that groups of up to
// 1,024 ranks cannot deadlock and keep their windows.
func TestBytesMatchFormula(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := compileGen().Draw(t, "spec")
		sc, err := Compile(spec)
		if err != nil {
			t.Fatalf("compile %+v: %v", spec, err)
		}
		sent, recvd := 0, 0
		for r := range sc.Spec.Ranks {
			got, want := sc.SentBytes(r), FormulaSentBytes(spec, r)
			if got != want {
				t.Fatalf("%+v rank %d: sends %d bytes, formula %d", sc.Spec, r, got, want)
			}
			sent += got
			recvd += sc.ReceivedBytes(r)
		}
		if sent != recvd {
			t.Fatalf("%+v: %d bytes sent, %d received", sc.Spec, sent, recvd)
		}
		e, err := newExecutor(sc, rapid.Uint64().Draw(t, "order"))
		if err == nil {
			err = e.run()
		}
		if err != nil {
			t.Fatalf("%+v: %v", sc.Spec, err)
		}
		if k := sc.Spec.Kind; k == ReduceScatter || k == AllGather {
			covered := make([]int, sc.Spec.Bytes)
			for r := range sc.Spec.Ranks {
				for _, sp := range sc.Shard(r) {
					for b := sp.Off; b < sp.End(); b++ {
						covered[b]++
					}
				}
			}
			for b, c := range covered {
				if c != 1 {
					t.Fatalf("%+v: byte %d in %d shards", sc.Spec, b, c)
				}
			}
		}
	})
}

// TestCompileIsDeterministic compiles every spec twice.
func TestCompileIsDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := compileGen().Draw(t, "spec")
		a, err := Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Compile(spec)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%+v: two compilations differ", spec)
		}
	})
}

// TestFormulaCanFail shows the formula test has teeth: the formula of
// one algorithm is not another's.
func TestFormulaCanFail(t *testing.T) {
	for _, tc := range []struct{ a, b Algorithm }{{Ring, HalvingDoubling}, {Direct, DoubleBinaryTree}, {HalvingDoubling, DoubleBinaryTree}} {
		sc, err := Compile(Spec{Ranks: 6, Bytes: 6 * 4 * 7, Algorithms: []Algorithm{tc.a}})
		if err != nil {
			t.Fatal(err)
		}
		differs := false
		for r := range 6 {
			differs = differs || sc.SentBytes(r) != FormulaSentBytes(Spec{Ranks: 6, Bytes: 6 * 4 * 7, Algorithms: []Algorithm{tc.b}}, r)
		}
		if !differs {
			t.Errorf("%s and %s send the same bytes at every rank of 6", tc.a, tc.b)
		}
	}
}

func TestErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Ranks: 64, Dims: []int{8, 7}, Bytes: 256}, "collective: dims [8 7]: product 56, want ranks 64"},
		{Spec{Ranks: 0}, "collective: ranks 0"},
		{Spec{Ranks: MaxRanks + 1}, "collective: ranks 65537"},
		{Spec{Ranks: 4, Bytes: 6}, "collective: bytes 6"},
		{Spec{Ranks: 4, Kind: "broadcast"}, "collective: kind"},
		{Spec{Ranks: 4, Algorithms: []Algorithm{"mesh"}}, "collective: algorithms"},
		{Spec{Ranks: 4, Dims: []int{2, 2}, Algorithms: []Algorithm{Ring, Ring, Ring}}, "collective: algorithms"},
		{Spec{Ranks: 4, Dims: []int{2, 2}, Algorithms: []Algorithm{DoubleBinaryTree, Ring}}, "double-binary-tree"},
		{Spec{Ranks: 4, Kind: ReduceScatter, Algorithms: []Algorithm{DoubleBinaryTree}}, "double-binary-tree"},
		{Spec{Ranks: 4, Kind: AllToAll, Algorithms: []Algorithm{Ring}}, "all-to-all"},
		{Spec{Ranks: 4, Kind: AllToAll, Algorithms: []Algorithm{Direct}, Bytes: 8}, "collective: bytes 8"},
		{Spec{Ranks: 4, Splits: -1}, "collective: splits"},
		{Spec{Ranks: 4, Window: -1}, "collective: window"},
		{Spec{Ranks: 4, Elem: -4}, "collective: elem"},
		{Spec{Ranks: MaxRanks, Algorithms: []Algorithm{Direct}, Bytes: 4}, "collective: ranks 65536, dims [65536], algorithms [direct], splits 1: up to"},
	} {
		_, err := Compile(tc.spec)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%+v) = %v, want %q", tc.spec, err, tc.want)
		}
	}
	if _, err := ParseAlgorithm("tree"); err == nil {
		t.Error("ParseAlgorithm(tree) succeeded")
	}
	for _, a := range Algorithms() {
		if got, err := ParseAlgorithm(string(a)); got != a || err != nil {
			t.Errorf("ParseAlgorithm(%q) = %q, %v", a, got, err)
		}
	}
}
