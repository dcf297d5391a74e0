package pattern

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// Known runs, shares and correlations, computed by hand.
func TestBurstinessOfKnownRanges(t *testing.T) {
	const n, steps, chunk = 3, 2, 100
	rs := []prange{
		// step 1, rank 0: [0,10) and [10,30) merge into one run of 30;
		// [50,54) is a run of 4.
		{step: 1, recv: 0, round: 0, off: 0, n: 10}, {step: 1, recv: 0, round: 0, off: 10, n: 20},
		{step: 1, recv: 0, gather: true, round: 1, off: 50, n: 4},
		// step 1, rank 1: [20,40) overlaps rank 0's [0,30) on 10 bytes;
		// round 0 again, as rank 0.
		{step: 1, recv: 1, round: 0, off: 20, n: 20},
		// step 2, rank 2: a run of 6.
		{step: 2, recv: 2, round: 1, off: 200, n: 6},
	}
	b := burstiness(rs, n, steps, chunk)
	if b.Ranges != 5 || b.Bytes != 60 || b.Runs != 4 || b.RunMaxBytes != 30 || b.RunMedianBytes != 6 {
		t.Fatalf("%+v: want 5 ranges, 60 bytes, runs 30, 4, 20, 6", b)
	}
	if b.RunMeanBytes != 15 || b.RunByteMedianBytes != 30 {
		t.Fatalf("run mean %v, byte median %d; want 15 and 30 (30 of 60 bytes in runs of 30 or more)", b.RunMeanBytes, b.RunByteMedianBytes)
	}
	// runs of 4 (bin 2), 6 (bin 2), 20 (bin 4), 30 (bin 4)
	if want := []int64{0, 0, 2, 0, 2}; !slices.Equal(b.RunHistogram, want) {
		t.Fatalf("histogram %v, want %v", b.RunHistogram, want)
	}
	// Step 1 has 44 distinct bytes at some rank ([0,40) and [50,54)), 10
	// at two; step 2 has 6, none shared.
	if want := 10.0 / 50; math.Abs(b.SharedFrac-want) > 1e-12 {
		t.Fatalf("shared %v, want %v", b.SharedFrac, want)
	}
	if b.TopSteps != 1 || math.Abs(b.TopStepsFrac-54.0/60) > 1e-12 {
		t.Fatalf("top %d steps hold %v, want 1 step with 54/60", b.TopSteps, b.TopStepsFrac)
	}
	// Message fractions, step 1: rank 0 (0.3, 0, 0, 0.04), rank 1 (0.2,
	// 0, 0, 0), rank 2 all zero (left out): one pair.
	want := pearson([]float64{0.3, 0, 0, 0.04}, []float64{0.2, 0, 0, 0})
	if math.Abs(b.MessageCorrelation-want) > 1e-12 {
		t.Fatalf("message correlation %v, want %v", b.MessageCorrelation, want)
	}
}

func pearson(x, y []float64) float64 {
	mx, my := mean(x), mean(y)
	var c, vx, vy float64
	for i := range x {
		c += (x[i] - mx) * (y[i] - my)
		vx += (x[i] - mx) * (x[i] - mx)
		vy += (y[i] - my) * (y[i] - my)
	}
	return c / math.Sqrt(vx*vy)
}

// The control keeps each (step, rank)'s forgiven bytes, never overlaps
// itself, stays inside the chunk the rank receives in the round it
// names, and is the same for the same seed.
func TestUniformControl(t *testing.T) {
	const n, steps, chunk, unit = 4, 3, 1000, 64
	pat := []prange{
		{step: 1, recv: 0, flow: 1003, round: 0, off: 0, n: 640},
		{step: 1, recv: 2, flow: 1001, gather: true, round: 2, off: 64, n: 100},
		{step: 3, recv: 3, flow: 1002, round: 1, off: 0, n: 3000},
	}
	c, err := uniformControl(pat, n, steps, chunk, unit, 7)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ step, rank int }
	want, got := map[key]int64{}, map[key]int64{}
	for _, r := range pat {
		want[key{r.step, r.recv}] += r.n
	}
	seen := map[[2]int64]bool{} // (step*n+rank, tensor byte / unit)
	for _, r := range c {
		got[key{r.step, r.recv}] += r.n
		ch := int64(ringChunk(n, r.recv, r.gather, r.round))
		if r.off < ch*chunk || r.off+r.n > (ch+1)*chunk || r.n > unit || r.n <= 0 || !math.IsNaN(r.t) || r.send != (r.recv+n-1)%n {
			t.Errorf("control range %+v: not within chunk %d of its round, or not a unit", r, ch)
		}
		k := [2]int64{int64(r.step*n + r.recv), r.off}
		if r.gather {
			k[0] += 1000
		}
		if seen[k] {
			t.Errorf("control range %+v drawn twice", r)
		}
		seen[k] = true
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("step %d rank %d: control forgives %d bytes, the pattern %d", k.step, k.rank, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("control covers %d (step, rank) pairs, the pattern %d", len(got), len(want))
	}
	again, _ := uniformControl(pat, n, steps, chunk, unit, 7)
	other, _ := uniformControl(pat, n, steps, chunk, unit, 8)
	if !rangesEqual(c, again) || rangesEqual(c, other) {
		t.Error("the control is not a function of the seed alone")
	}
	// More bytes than the rank receives in a step is an error.
	if _, err := uniformControl([]prange{{step: 1, recv: 0, n: 2*(n-1)*chunk + 1}}, n, 1, chunk, unit, 1); err == nil || !strings.Contains(err.Error(), "more than it receives") {
		t.Errorf("an impossible pattern: %v", err)
	}
}

func rangesEqual(a, b []prange) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.t, y.t = 0, 0
		if x != y {
			return false
		}
	}
	return true
}
