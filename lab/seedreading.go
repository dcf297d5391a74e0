package lab

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/workload"
)

// The seed's sizes under a reading (docs/profiles.md, "Sizes per
// reading"). seedWorkload derives them under the lab's first reading:
// the flat ring, the pairs (2k, 2k+1) and the pipeline i -> i+32, ranks
// interleaved over the leaves. The same figures give other sizes under
// another collective or placement, because two steps of that derivation
// depend on the reading: how many bytes a rank sends per gradient byte
// (2(N-1)/N for a ring, 2 for a double binary tree) and which bytes cross
// a leaf's uplinks. seedSizesUnder takes both from the reading itself
// (workload.Traffic over the run's placement) and keeps every other step.

// Values of WorkloadOptions.SeedSizes.
const (
	// SeedSizesReading derives the seed's sizes under the run's own
	// collective, exchanges and placement (the default; "" means it).
	SeedSizesReading = "reading"
	// SeedSizesRing keeps the sizes derived under the flat ring's
	// reading whatever the run's collective: the control.
	SeedSizesRing = "ring"
)

// SeedSizes records how a run on a seed profile got its sizes.
type SeedSizes struct {
	// Reading is SeedSizesReading or SeedSizesRing.
	Reading string
	// Sent is the bytes a rank sends per byte of its gradient, its
	// tensor-parallel and its pipeline message, over all ranks' mean.
	SentGradient, SentTensor, SentPipeline float64
	// Uplinks names the busiest leaf's uplinks, one direction, and
	// PerGradientByte is what they carry per gradient byte at the seed's
	// split (24 % eligible, the rest three to one tensor and pipeline).
	Uplinks         string
	PerGradientByte float64
	// Note says why a reading kept the ring's sizes, if it did.
	Note string
}

// seedSizesUnder derives the seed's sizes at scale 1 under the run's
// reading. The seed's figures it rests on are seedWorkload's: gradient
// traffic is 24 % of a rank's bytes, and the bytes that cross the busiest
// leaf's uplinks take the tight baseline's 32.3 ms at the uplinks' rate
// on the seed's 4:1 fabric at 400 Gb/s, whatever the run's fabric and
// rate (the rate-scaled profiles shrink the result by their byte scale
// afterwards).
// With G the gradient, a rank sends sG x G of gradient; S = sG G / 0.24;
// the tensor-parallel message is T = 0.57 S / sT and the pipeline's
// P = 0.19 S / sP; the busiest uplinks carry c(G, T, P), linear in G, and
// c / capacity = 32.3 ms gives G. Under the flat ring's reading this is
// seedWorkload's derivation step by step (TestSeedSizesUnderTheRingAreTheRings).
func (p *prepared) seedSizesUnder() (WorkloadOptions, *SeedSizes, error) {
	def := seedWorkload()
	rec := &SeedSizes{Reading: SeedSizesReading}
	if p.opts.Workload.SeedSizes == SeedSizesRing {
		rec.Reading, rec.Note = SeedSizesRing, "the flat ring's sizes, as --seed-sizes ring asks"
		return def, rec, nil
	}
	if p.topology.Kind != topo.KindLeafSpine {
		rec.Note = fmt.Sprintf("a %s topology has no leaf uplinks to derive sizes from: the flat ring's sizes", p.topology.Kind)
		return def, rec, nil
	}
	hosts := p.dry.Hosts
	n := len(hosts)
	if n != seedRanks {
		// The figures are the seed's 64 ranks'; a smaller or larger job
		// is the lab's scaling, and keeps the sizes per rank it had.
		rec.Note = fmt.Sprintf("the seed's figures are for %d ranks, not %d: the flat ring's sizes per rank", seedRanks, n)
		return def, rec, nil
	}
	ids := make([]hostapi.HostID, n)
	leaf := make([]string, n)
	for i, h := range hosts {
		ids[i] = hostapi.HostID(i + 1)
		leaf[h.Rank] = h.Switch
	}
	// Unit sizes every schedule splits without remainder, so that the
	// coefficients are exact ratios.
	unit := 4 * n * 4096 * max(1, p.opts.Workload.Splits)
	cfg := p.workloadConfig(p.policies[0], 1)
	cfg.GradientBytes, cfg.TPBytes, cfg.PPBytes, cfg.Burst = unit, unit, unit, workload.BurstConfig{}
	cfg.Shed = nil
	tr, err := cfg.Traffic(ids)
	if err != nil {
		return def, nil, fmt.Errorf("%w: the seed's sizes under this reading: %w", ErrInput, err)
	}
	sent := map[hostapi.Class]float64{}
	type dir struct {
		leaf string
		out  bool
	}
	cross := map[dir]map[hostapi.Class]float64{}
	add := func(d dir, c hostapi.Class, b float64) {
		if cross[d] == nil {
			cross[d] = map[hostapi.Class]float64{}
		}
		cross[d][c] += b
	}
	for _, x := range tr {
		b := float64(x.Bytes) / float64(unit)
		sent[x.Class] += b / float64(n)
		if leaf[x.From] != leaf[x.To] {
			add(dir{leaf[x.From], true}, x.Class, b)
			add(dir{leaf[x.To], false}, x.Class, b)
		}
	}
	sG, sT, sP := sent[hostapi.ClassGradient], sent[hostapi.ClassTensor], sent[hostapi.ClassPipeline]
	rec.SentGradient, rec.SentTensor, rec.SentPipeline = sG, sT, sP
	// Off the fabric (--tensor-parallel local) a message is still the
	// job's size: a pair's, one message a rank.
	sT, sP = cmp1(sT), cmp1(sP)
	// Per gradient byte: the tensor-parallel and pipeline messages.
	a := seedTensorShare * (1 - seedEligible) / seedEligible * sG / sT
	b := (1 - seedTensorShare) * (1 - seedEligible) / seedEligible * sG / sP
	keys := slices.SortedFunc(maps.Keys(cross), func(x, y dir) int {
		if x.leaf != y.leaf {
			if x.leaf < y.leaf {
				return -1
			}
			return 1
		}
		if x.out == y.out {
			return 0
		}
		if x.out {
			return -1
		}
		return 1
	})
	for _, d := range keys {
		c := cross[d]
		if k := c[hostapi.ClassGradient] + a*c[hostapi.ClassTensor] + b*c[hostapi.ClassPipeline]; k > rec.PerGradientByte {
			rec.PerGradientByte = k
			rec.Uplinks = d.leaf + "'s uplinks out"
			if !d.out {
				rec.Uplinks = d.leaf + "'s downlinks from the spines"
			}
		}
	}
	if rec.PerGradientByte == 0 {
		rec.Note = "nothing crosses a leaf's uplinks under this reading: the flat ring's sizes"
		return def, rec, nil
	}
	// The uplink capacity of a leaf of the seed's worst fabric, where
	// the 32.3 ms was measured: a quarter of 400 Gb/s per host. The job is
	// the same on every fabric the seed ran (the non-blocking and 2:1
	// fabrics carry the same sizes), so the run's own uplinks do not enter.
	capacity := float64(p.topology.HostsPerLeaf) * seedHostRate / seedOversub
	grad := seedAllReduce * capacity / 8 / rec.PerGradientByte
	if grad > 1<<30 {
		return def, nil, fmt.Errorf("%w: the seed's sizes under this reading: a gradient of %.0f MB (more than 1 GiB): %s carry only %.3f bytes per gradient byte",
			ErrInput, grad/1e6, rec.Uplinks, rec.PerGradientByte)
	}
	return WorkloadOptions{
		GradientBytes: int(math.Round(grad)),
		TPBytes:       int(math.Round(a * grad)),
		PPBytes:       int(math.Round(b * grad)),
		BurstBytes:    int(math.Round(seedBurstPerSender * grad)),
		Compute:       def.Compute,
	}, rec, nil
}

// cmp1 is v, or 1 when v is 0.
func cmp1(v float64) float64 {
	if v == 0 {
		return 1
	}
	return v
}
