package lab

import (
	"math"
	"testing"
	"time"
)

// The seed's workload reproduces the figures it is derived from:
// gradient traffic is 24 % of a rank's bytes, the bytes that cross a
// leaf's uplinks (ring and tensor) take 32.3 ms at a quarter of 400 Gb/s,
// and a step is 72.7 ms, so the 16 non-critical steps at 17.4 ms cut the
// training time by 16.4 %.
func TestSeedWorkloadMatchesTheSeed(t *testing.T) {
	w := seedWorkload()
	ring := float64(w.GradientBytes) * 2 * 63 / 64
	total := ring + float64(w.TPBytes) + float64(w.PPBytes)
	near := func(what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol*math.Abs(want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	near("eligible share", ring/total, 0.24, 1e-6)
	near("tensor share of the rest", float64(w.TPBytes)/(float64(w.TPBytes)+float64(w.PPBytes)), 0.75, 1e-6)
	near("all-reduce at the uplinks' share (s)", (ring+float64(w.TPBytes))*8/100e9, 32.3e-3, 1e-6)
	step := w.Compute + 32300*time.Microsecond
	cut := 16 * (32.3e-3 - 17.4e-3) / (20 * step.Seconds())
	near("training-time cut", cut, 0.164, 1e-6)
	if w.BurstBytes*4 > w.GradientBytes+4 || w.BurstBytes*4 < w.GradientBytes-4 {
		t.Errorf("burst %d per sender, want a quarter of the gradient %d", w.BurstBytes, w.GradientBytes)
	}
}

// On a profile at the reference's scale the sizes are the seed's; on a
// scaled-down one the lab's; either way --scale multiplies them, and an
// explicit size wins over the default before it is scaled.
func TestWorkloadSizesAndScale(t *testing.T) {
	var w WorkloadOptions
	w.sizes(true, 1.0/16)
	seed := seedWorkload()
	if w.GradientBytes != int(math.Round(float64(seed.GradientBytes)/16)) || w.Compute != time.Duration(math.Round(float64(seed.Compute)/16)) {
		t.Errorf("seed at 1/16: %+v", w)
	}
	w = WorkloadOptions{TPBytes: 1000}
	w.sizes(false, 0.5)
	if w.GradientBytes != 1<<20 || w.TPBytes != 500 || w.Compute != 10*time.Millisecond {
		t.Errorf("lab at 1/2 with TP 1000: %+v", w)
	}
	for in, want := range map[string]float64{"1": 1, "0.25": 0.25, "1/16": 1.0 / 16, " 3/4 ": 0.75} {
		if got, err := ParseScale(in); err != nil || got != want {
			t.Errorf("ParseScale(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "2", "-1", "1/0", "x", "1/y", "NaN"} {
		if _, err := ParseScale(bad); err == nil {
			t.Errorf("ParseScale(%q) accepted", bad)
		}
	}
}
