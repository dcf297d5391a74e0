package lab

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/workload"
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
	w.sizes(seedWorkload(), 1, 1.0/16)
	seed := seedWorkload()
	if w.GradientBytes != int(math.Round(float64(seed.GradientBytes)/16)) || w.Compute != time.Duration(math.Round(float64(seed.Compute)/16)) {
		t.Errorf("seed at 1/16: %+v", w)
	}
	w = WorkloadOptions{TPBytes: 1000}
	w.sizes(labWorkload(), 0, 0.5)
	if w.GradientBytes != 1<<20 || w.TPBytes != 500 || w.Compute != 10*time.Millisecond {
		t.Errorf("lab at 1/2 with TP 1000: %+v", w)
	}
	// A rate-scaled seed profile (byte scale 1/16) scales the seed's bytes
	// and keeps its compute phase; --scale multiplies both on top.
	w = WorkloadOptions{}
	w.sizes(seedWorkload(), 1.0/16, 0.5)
	if w.GradientBytes != scaleBytes(scaleBytes(seed.GradientBytes, 1.0/16), 0.5) || w.TPBytes != scaleBytes(scaleBytes(seed.TPBytes, 1.0/16), 0.5) ||
		w.PPBytes != scaleBytes(scaleBytes(seed.PPBytes, 1.0/16), 0.5) || w.BurstBytes != scaleBytes(scaleBytes(seed.BurstBytes, 1.0/16), 0.5) ||
		w.Compute != time.Duration(math.Round(float64(seed.Compute)*0.5)) {
		t.Errorf("seed-25g at 1/2: %+v", w)
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

// Under the seed's step structure (the model-parallel exchanges during
// the compute phase, the all-reduce after it) the derived sizes leave
// room for every figure the seed gives: the tensor-parallel bytes cross
// the uplinks' share within the compute phase, and the ring alone crosses
// it faster than FORGIVE's 17.4 ms median, so the seed's cut is not ruled
// out by the sizes themselves (the tight baseline's 32.3 ms is then the
// ring under DCQCN, not the ring at the line rate).
func TestSeedWorkloadFitsTheSeedsStep(t *testing.T) {
	w := seedWorkload()
	ring := float64(w.GradientBytes) * 2 * 63 / 64
	uplinkShare := seedHostRate / seedOversub // bits/s per rank
	if tp := float64(w.TPBytes) * 8 / uplinkShare; tp >= w.Compute.Seconds() {
		t.Errorf("tensor-parallel bytes take %.1f ms at the uplinks' share, more than the %v compute phase", tp*1e3, w.Compute)
	}
	if ar := ring * 8 / uplinkShare; ar >= seedFastAllReduce {
		t.Errorf("the ring takes %.1f ms at the uplinks' share, more than FORGIVE's %.1f ms", ar*1e3, seedFastAllReduce*1e3)
	}
}

// --tensor-parallel local puts the exchanges on NVLink and gives them no
// time (workload.TPLocal). That is exact for the seed's sizes: at NVLink
// 4's 450 GB/s a direction (H100 SXM, 900 GB/s both ways) a rank's
// tensor-parallel bytes take 0.63 ms, within the compute phase they
// overlap under with-compute and within the ring at the uplinks' share
// they run beside under after-compute, so in either schedule a local
// delay would never be what a step waits on.
func TestSeedTensorParallelOnNVLinkHidesInTheStep(t *testing.T) {
	const nvlink = 450e9 * 8 // bits/s, one direction
	w := seedWorkload()
	tp := float64(w.TPBytes) * 8 / nvlink
	ring := float64(w.GradientBytes) * 2 * 63 / 64 * 8 / (seedHostRate / seedOversub)
	if tp >= w.Compute.Seconds() || tp >= ring {
		t.Errorf("tensor-parallel bytes take %.2f ms on NVLink: not hidden by the %v compute phase or the ring's %.2f ms", tp*1e3, w.Compute, ring*1e3)
	}
}

// The seed's profiles default to the seed's fabric and step (spraying,
// the model-parallel exchanges during the compute phase); the others to
// the lab's; a choice on the command line wins on either.
func TestStepDefaultsFollowTheProfile(t *testing.T) {
	for _, tc := range []struct {
		profile, entropy string
		mp               workload.ModelParallel
		wantE            string
		wantMP           workload.ModelParallel
	}{
		{"seed-6.25g", "", "", "spray", workload.WithCompute},
		{"seed-400g-paper", "", "", "spray", workload.WithCompute},
		{"seed-400g-ns3", "", "", "spray", workload.WithCompute},
		{"loopback", "", "", "single", workload.AfterCompute},
		{"seed-6.25g", "single", workload.AfterCompute, "single", workload.AfterCompute},
		{"loopback", "spray", workload.WithCompute, "spray", workload.WithCompute},
	} {
		o := Options{Placement: PlacementSim, Profile: tc.profile, Topology: "leaf-spine-8x8-4to1", Steps: 2, Policies: []string{"dcqcn"}}
		if tc.profile == "loopback" {
			o.Topology = ""
		}
		o.Workload.Entropy, o.Workload.ModelParallel = tc.entropy, tc.mp
		pv, err := Check(o)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if w := pv.Options.Workload; w.Entropy != tc.wantE || w.ModelParallel != tc.wantMP {
			t.Errorf("profile %s with --entropy %q --model-parallel %q: %s, %s; want %s, %s",
				tc.profile, tc.entropy, tc.mp, w.Entropy, w.ModelParallel, tc.wantE, tc.wantMP)
		}
	}
	if _, err := Check(Options{Placement: PlacementSim, Workload: WorkloadOptions{Entropy: "sideways"}}); !errors.Is(err, ErrInput) {
		t.Errorf("--entropy sideways: %v, want ErrInput", err)
	}
}

// seed-400g-ns3 keeps the reference's timers (scale.time 1), so the lab
// treats it as a seed profile: the seed's workload at the seed's sizes,
// exactly as on seed-400g.
func TestSeedNS3ProfileGetsTheSeedsWorkload(t *testing.T) {
	var got [2]WorkloadOptions
	for i, profile := range []string{"seed-400g-paper", "seed-400g-ns3"} {
		pv, err := Check(Options{Placement: PlacementSim, Profile: profile, Topology: "leaf-spine-8x8-4to1", Steps: 2, Policies: []string{"dcqcn"}})
		if err != nil {
			t.Fatalf("%s: %v", profile, err)
		}
		got[i] = pv.Options.Workload
	}
	seed := seedWorkload()
	if !reflect.DeepEqual(got[1], got[0]) || got[1].GradientBytes != seed.GradientBytes || got[1].Compute != seed.Compute {
		t.Errorf("seed-400g-ns3's workload %+v\nseed-400g's %+v (seed gradient %d, compute %v)", got[1], got[0], seed.GradientBytes, seed.Compute)
	}
}
