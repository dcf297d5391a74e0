package lab

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/workload"
)

// The seed's workload, derived from its figures (docs/profiles.md, "The
// seed's workload"): 64 ranks on 400 Gb/s hosts, a 4:1 oversubscribed
// leaf-spine with the ranks interleaved, "the median all-reduce
// completion time on non-critical steps" of the tight baseline 32.3 ms,
// "eligible gradient traffic is only 24 percent of the bytes" with tensor
// parallelism on the network, 20 steps.
const (
	seedRanks          = 64
	seedHostRate       = 400e9 // bits/s
	seedOversub        = 4
	seedAllReduce      = 32.3e-3 // seconds
	seedEligible       = 0.24
	seedTensorShare    = 0.75 // of the bytes that are not eligible; the rest is pipeline
	seedFastAllReduce  = 17.4e-3
	seedNonCritical    = 16    // of the 20 steps
	seedTrainingCut    = 0.164 // the middle of "16.1 to 16.7 percent"
	seedBurstPerSender = 0.25  // of a rank's gradient, as in the lab's default workload
)

// seedWorkload returns the workload sizes at scale 1.
//
// A rank sends S bytes per step: ring R = 0.24 S, tensor T = 0.57 S,
// pipeline P = 0.19 S. With rank i on leaf i mod 8, every ring edge and
// every tensor pair crosses the spine and every pipeline edge (i to
// i+32) stays on its leaf, so a leaf's uplinks carry R + T = 0.81 S per
// rank at a quarter of the host rate: 32.3 ms x 100 Gb/s = 403.75 MB, so
// S = 498.5 MB. A ring all-reduce of G bytes sends 2(N-1)/N G, so
// G = R x 64/126 = 60.8 MB. The compute phase is what is left of a step:
// the 16 non-critical steps saved 16 x (32.3 - 17.4) ms = 238.4 ms, which
// was 16.4 % of the training time, so a step took 72.7 ms, 40.4 ms of it
// beside the all-reduce.
func seedWorkload() WorkloadOptions {
	uplinkBytes := seedAllReduce * seedHostRate / seedOversub / 8
	perRank := uplinkBytes / (seedEligible + seedTensorShare*(1-seedEligible))
	ring := seedEligible * perRank
	grad := ring * seedRanks / (2 * (seedRanks - 1))
	step := seedNonCritical * (seedAllReduce - seedFastAllReduce) / seedTrainingCut / 20
	return WorkloadOptions{
		GradientBytes: int(math.Round(grad)),
		TPBytes:       int(math.Round(seedTensorShare * (1 - seedEligible) * perRank)),
		PPBytes:       int(math.Round((1 - seedTensorShare) * (1 - seedEligible) * perRank)),
		BurstBytes:    int(math.Round(seedBurstPerSender * grad)),
		Compute:       time.Duration(math.Round((step - seedAllReduce) * 1e9)),
	}
}

// stepDefaults fills the path policy and the step structure the user
// left empty. On the seed's profiles (seed) they are the seed's: its
// fabric sprays ("a receiver that already reassembles out of order
// because the fabric sprays packets across paths"; Ultra Ethernet's
// "default bulk mode that sprays packets across paths"), and its step is
// the compute phase and then the all-reduce ("72.7 ms = 40.4 ms of
// compute + 32.3 ms of all-reduce", docs/profiles.md), the model-parallel
// exchanges overlapping the compute phase. Elsewhere they are the lab's:
// one path per flow, and the model-parallel exchanges beside the
// all-reduce. The other choice of each stays available by name, as a
// counterfactual (--entropy single, --model-parallel after-compute).
func (w *WorkloadOptions) stepDefaults(seed bool) {
	if w.Entropy == "" {
		w.Entropy = hostapi.EntropySingle.String()
		if seed {
			w.Entropy = hostapi.EntropySpray.String()
		}
	}
	if w.ModelParallel == "" {
		w.ModelParallel = workload.AfterCompute
		if seed {
			w.ModelParallel = workload.WithCompute
		}
	}
}

// ParseScale reads a scale as a decimal or a quotient: "0.25", "1/16".
// It must lie in (0, 1].
func ParseScale(s string) (float64, error) {
	s = strings.TrimSpace(s)
	var v float64
	if num, den, ok := strings.Cut(s, "/"); ok {
		n, err1 := strconv.ParseFloat(strings.TrimSpace(num), 64)
		d, err2 := strconv.ParseFloat(strings.TrimSpace(den), 64)
		if err := errors.Join(err1, err2); err != nil || d == 0 {
			return 0, fmt.Errorf("%q: want a number such as 0.25 or a quotient such as 1/16", s)
		}
		v = n / d
	} else {
		var err error
		if v, err = strconv.ParseFloat(s, 64); err != nil {
			return 0, fmt.Errorf("%q: want a number such as 0.25 or a quotient such as 1/16", s)
		}
	}
	if !(v > 0 && v <= 1) {
		return 0, fmt.Errorf("%q: want a scale in (0, 1]", s)
	}
	return v, nil
}

// scaleBytes shrinks a size, keeping at least one byte.
func scaleBytes(n int, scale float64) int {
	if n == 0 {
		return 0
	}
	return max(1, int(math.Round(float64(n)*scale)))
}
