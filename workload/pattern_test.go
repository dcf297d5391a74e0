package workload

import (
	"math/rand/v2"
	"testing"

	"github.com/forgive-emu/forgive/hostapi"
)

// The loss pattern names every forgiven range where it lies in the
// receiver's flat gradient: the ring chunk the message carries (recomputed
// here from the ring's schedule, not the plan's) plus the range's offset.
func TestPatternPlacesEveryForgivenRangeInTheTensor(t *testing.T) {
	const n = 4
	f := newFakeFabric(5, hostIDs(n)...)
	f.forgive = func(_ *rand.Rand, class hostapi.Class, size int) []hostapi.Range {
		if class != hostapi.ClassGradient {
			return nil
		}
		return []hostapi.Range{{Start: 8, End: 12}, {Start: uint64(size - 4), End: uint64(size)}}
	}
	cfg := baseConfig()
	res, err := runFake(t, f, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkFabric(t, f)
	pat := res.Pattern
	chunk := roundUp(cfg.GradientBytes, 4*n) / n
	if pat.Ranks != n || pat.ChunkBytes != chunk {
		t.Fatalf("pattern of %d ranks, %d-byte chunks; want %d, %d", pat.Ranks, pat.ChunkBytes, n, chunk)
	}
	type key struct {
		step, rank int
		gather     bool
		round      int
		off        int64
	}
	got := map[key]ForgivenRange{}
	perStep := map[int]int64{}
	for _, r := range pat.Ranges {
		k := key{r.Step, r.Receiver, r.Gather, r.Round, r.Offset}
		if _, dup := got[k]; dup {
			t.Fatalf("range %+v twice", r)
		}
		got[k] = r
		perStep[r.Step] += r.Length
		if r.Sender != (r.Receiver+n-1)%n || r.Flow != hostapi.FlowID(1000+r.Sender) {
			t.Errorf("range %+v: want sender %d on its ring flow", r, (r.Receiver+n-1)%n)
		}
	}
	if want := cfg.Steps * n * 2 * (n - 1) * 2; len(pat.Ranges) != want {
		t.Fatalf("%d ranges, want two per gradient receive: %d", len(pat.Ranges), want)
	}
	for _, s := range res.Steps {
		if perStep[s.Step] != s.Forgiven {
			t.Errorf("step %d: the pattern holds %d bytes, the step forgave %d", s.Step, perStep[s.Step], s.Forgiven)
		}
	}
	for s := 1; s <= cfg.Steps; s++ {
		for i := range n {
			for round := range n - 1 {
				for _, gather := range []bool{false, true} {
					c := (i - round - 1 + 2*n) % n // reduce-scatter: chunk i-r-1
					if gather {
						c = (i - round + 2*n) % n // all-gather: chunk i-r
					}
					for _, off := range []int{8, chunk - 4} {
						r, ok := got[key{s, i, gather, round, int64(c*chunk + off)}]
						if !ok || r.Length != 4 {
							t.Errorf("step %d rank %d gather %v round %d: no 4-byte range at chunk %d + %d", s, i, gather, round, c, off)
						}
					}
				}
			}
		}
	}
}
