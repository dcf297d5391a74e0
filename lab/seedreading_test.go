package lab

import (
	"errors"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/results"
	"github.com/forgive-emu/forgive/workload"
)

// seedReadingOptions is a dry run of the seed's experiment under a
// reading: seed-400g (or another seed profile) on the 4:1 fabric.
func seedReadingOptions(profile string, w WorkloadOptions, placement string) Options {
	return Options{Placement: PlacementSim, Profile: profile, Topology: "leaf-spine-8x8-4to1", Steps: 2,
		Policies: []string{"dcqcn"}, Workload: w, RankPlacement: placement}
}

// Under the flat ring's reading the derivation is seedWorkload's, byte
// for byte; --seed-sizes ring gives those sizes to any collective.
func TestSeedSizesUnderTheRingAreTheRings(t *testing.T) {
	seed := seedWorkload()
	for _, w := range []WorkloadOptions{{}, {Collective: "double-binary-tree", Splits: 8, SeedSizes: SeedSizesRing}, {Collective: "direct", TP: 8, SeedSizes: SeedSizesRing}} {
		pv, err := Check(seedReadingOptions("seed-400g-paper", w, ""))
		if err != nil {
			t.Fatal(err)
		}
		got := pv.Options.Workload
		if got.GradientBytes != seed.GradientBytes || got.TPBytes != seed.TPBytes || got.PPBytes != seed.PPBytes || got.BurstBytes != seed.BurstBytes || got.Compute != seed.Compute {
			t.Errorf("%+v: sizes %d %d %d %d %v, want the ring's %d %d %d %d %v", w, got.GradientBytes, got.TPBytes, got.PPBytes, got.BurstBytes, got.Compute,
				seed.GradientBytes, seed.TPBytes, seed.PPBytes, seed.BurstBytes, seed.Compute)
		}
	}
}

// seedReadings are the readings docs/profiles.md's "Sizes per reading"
// table gives, by the name of their screening cell.
var seedReadings = []struct {
	cell      string
	w         WorkloadOptions
	placement string
}{
	{"ring", WorkloadOptions{}, ""},
	{"direct-8x8", WorkloadOptions{Collective: "direct", Dims: []int{8, 8}}, ""},
	{"ring-8x8", WorkloadOptions{Collective: "ring", Dims: []int{8, 8}}, ""},
	{"halving-doubling", WorkloadOptions{Collective: "halving-doubling"}, ""},
	{"double-binary-tree", WorkloadOptions{Collective: "double-binary-tree", Splits: 8}, ""},
	{"direct-tp8", WorkloadOptions{Collective: "direct", TP: 8}, ""},
	{"ring-packed", WorkloadOptions{}, "packed"},
	{"halving-doubling-packed", WorkloadOptions{Collective: "halving-doubling"}, "packed"},
	{"double-binary-tree-packed", WorkloadOptions{Collective: "double-binary-tree", Splits: 8}, "packed"},
	{"direct-tp8-packed", WorkloadOptions{Collective: "direct", TP: 8}, "packed"},
}

// Every reading's sizes reproduce the seed's figures they are derived
// from, measured on the step itself (workload.Traffic at the derived
// sizes, over the dry placement's leaves), not on the derivation's
// algebra: gradient traffic is 24 % of the bytes the ranks send, the
// tensor-parallel to pipeline bytes three to one, and the busiest leaf's
// uplinks carry what takes 32.3 ms at their rate; the compute phase and
// the burst's share are the seed's.
func TestSeedSizesPerReadingReproduceTheSeed(t *testing.T) {
	seed := seedWorkload()
	for _, r := range seedReadings {
		pv, err := Check(seedReadingOptions("seed-400g-paper", r.w, r.placement))
		if err != nil {
			t.Fatalf("%s: %v", r.cell, err)
		}
		w := pv.Options.Workload
		cfg := workload.Config{Steps: 1, GradientBytes: w.GradientBytes, TPBytes: w.TPBytes, PPBytes: w.PPBytes, PayloadFree: true,
			Collective: workload.Collective{Dims: w.Dims, TP: w.TP, Splits: w.Splits}}
		if w.Collective != "" {
			c, err := parseCollective(w)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Collective = c
		}
		ids := make([]hostapi.HostID, len(pv.Plan.Hosts))
		leaf := make([]string, len(pv.Plan.Hosts))
		for i, h := range pv.Plan.Hosts {
			ids[i] = hostapi.HostID(i + 1)
			leaf[h.Rank] = h.Switch
		}
		tr, err := cfg.Traffic(ids)
		if err != nil {
			t.Fatalf("%s: %v", r.cell, err)
		}
		sent := map[hostapi.Class]float64{}
		cross := map[string]float64{}
		for _, x := range tr {
			sent[x.Class] += float64(x.Bytes)
			if leaf[x.From] != leaf[x.To] {
				cross[leaf[x.From]+" out"] += float64(x.Bytes)
				cross[leaf[x.To]+" in"] += float64(x.Bytes)
			}
		}
		var busiest float64
		for _, b := range cross {
			busiest = max(busiest, b)
		}
		all := sent[hostapi.ClassGradient] + sent[hostapi.ClassTensor] + sent[hostapi.ClassPipeline]
		capacity := float64(pv.Topology.HostsPerLeaf) * 400e9 / 4 // bits/s: the seed's 4:1 leaf
		near := func(what string, got, want, tol float64) {
			t.Helper()
			if math.Abs(got-want) > tol*math.Abs(want) {
				t.Errorf("%s: %s = %.6g, want %.6g", r.cell, what, got, want)
			}
		}
		// Padding the gradient to whole elements per rank moves these by
		// less than one part in 10^5.
		near("eligible share", sent[hostapi.ClassGradient]/all, seedEligible, 1e-4)
		near("tensor share of the rest", sent[hostapi.ClassTensor]/(sent[hostapi.ClassTensor]+sent[hostapi.ClassPipeline]), seedTensorShare, 1e-4)
		near("busiest uplinks' time (s)", busiest*8/capacity, seedAllReduce, 1e-4)
		if w.Compute != seed.Compute || math.Abs(float64(w.BurstBytes)-seedBurstPerSender*float64(w.GradientBytes)) > 1 {
			t.Errorf("%s: compute %v, burst %d; want the seed's %v and a quarter of %d", r.cell, w.Compute, w.BurstBytes, seed.Compute, w.GradientBytes)
		}
		if pv.SeedSizes == nil || pv.SeedSizes.Reading != SeedSizesReading || pv.SeedSizes.Note != "" {
			t.Errorf("%s: derivation record %+v", r.cell, pv.SeedSizes)
		}
	}
}

// The job is the same on every fabric: the non-blocking and 2:1 fabrics
// carry each reading's sizes as derived on the 4:1 one, where the seed
// measured its 32.3 ms.
func TestSeedSizesAreTheJobsOnEveryFabric(t *testing.T) {
	for _, r := range seedReadings {
		var sizes []WorkloadOptions
		for _, topology := range []string{"leaf-spine-8x8-4to1", "leaf-spine-8x8-2to1", "leaf-spine-8x8-nonblocking"} {
			o := seedReadingOptions("seed-400g-paper", r.w, r.placement)
			o.Topology = topology
			pv, err := Check(o)
			if err != nil {
				t.Fatalf("%s on %s: %v", r.cell, topology, err)
			}
			sizes = append(sizes, pv.Options.Workload)
		}
		for _, w := range sizes[1:] {
			if w.GradientBytes != sizes[0].GradientBytes || w.TPBytes != sizes[0].TPBytes || w.PPBytes != sizes[0].PPBytes {
				t.Errorf("%s: sizes %d %d %d on another fabric, %d %d %d on the 4:1 one", r.cell,
					w.GradientBytes, w.TPBytes, w.PPBytes, sizes[0].GradientBytes, sizes[0].TPBytes, sizes[0].PPBytes)
			}
		}
	}
}

// A rate-scaled seed profile derives the same sizes and shrinks them by
// its byte scale, as it does the ring's.
func TestSeedSizesPerReadingScaleWithTheProfile(t *testing.T) {
	w := WorkloadOptions{Collective: "halving-doubling"}
	full, err := Check(seedReadingOptions("seed-400g-paper", w, ""))
	if err != nil {
		t.Fatal(err)
	}
	small, err := Check(seedReadingOptions("seed-25g", w, ""))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := small.Options.Workload.GradientBytes, scaleBytes(full.Options.Workload.GradientBytes, 1.0/16); got != want {
		t.Errorf("seed-25g under halving-doubling: gradient %d, want 1/16 of seed-400g's: %d", got, want)
	}
}

// docs/profiles.md's table of sizes per reading is what the lab derives.
func TestSeedSizesTableInTheDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/profiles.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\|[^|]*\\| ([0-9,]+) \\| ([0-9,]+) \\| ([0-9,]+) \\|")
	rows := map[string][3]int{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		var v [3]int
		for i := range v {
			v[i], _ = strconv.Atoi(strings.ReplaceAll(m[2+i], ",", ""))
		}
		rows[m[1]] = v
	}
	for _, r := range seedReadings {
		pv, err := Check(seedReadingOptions("seed-400g-paper", r.w, r.placement))
		if err != nil {
			t.Fatal(err)
		}
		w := pv.Options.Workload
		got, ok := rows[r.cell]
		if want := [3]int{w.GradientBytes, w.TPBytes, w.PPBytes}; !ok || got != want {
			t.Errorf("docs/profiles.md's row for %s: %v (present %v), want gradient, tensor, pipeline %v", r.cell, got, ok, want)
		}
	}
	if _, err := Check(seedReadingOptions("seed-400g-paper", WorkloadOptions{SeedSizes: "both"}, "")); err == nil {
		t.Errorf("--seed-sizes both accepted")
	}
}

// A job of another size than the seed's 64 ranks keeps the ring's sizes
// per rank, under any collective, and the dry run says why.
func TestSeedSizesOnlyForTheSeedsRanks(t *testing.T) {
	o := seedReadingOptions("seed-6.25g", WorkloadOptions{Collective: "halving-doubling"}, "")
	o.Topology = "leaf-spine-2x4-4to1"
	pv, err := Check(o)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pv.Options.Workload.GradientBytes, scaleBytes(seedWorkload().GradientBytes, 1.0/64); got != want || pv.SeedSizes == nil || !strings.Contains(pv.SeedSizes.Note, "64 ranks") {
		t.Errorf("8 ranks under halving-doubling: gradient %d (want the ring's %d), record %+v", got, want, pv.SeedSizes)
	}
}

// With no collective or flows flags, seed-400g runs the reading its
// profile names (docs/profiles.md, "The seed profiles' reading"): the same
// schedule, sizes and step as seed-400g-ns3 with the reading's flags
// given, so the documented command of that reading and the default are
// one run. Each default gives way to its flag, and the other profiles
// keep the lab's job.
func TestSeedProfileRunsItsReading(t *testing.T) {
	reading := WorkloadOptions{Collective: "direct", Dims: []int{8, 8}, Flows: FlowsMessage}
	byDefault, err := Check(seedReadingOptions("seed-400g", WorkloadOptions{}, ""))
	if err != nil {
		t.Fatal(err)
	}
	named, err := Check(seedReadingOptions("seed-400g-ns3", reading, ""))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(byDefault.Collective, named.Collective) || !reflect.DeepEqual(byDefault.Options.Workload, named.Options.Workload) {
		t.Errorf("seed-400g by default:\n%+v\n%+v\nseed-400g-ns3 with the reading's flags:\n%+v\n%+v",
			byDefault.Collective, byDefault.Options.Workload, named.Collective, named.Options.Workload)
	}
	if s := byDefault.Collective.Schedule; s != "direct dims 8x8 flow-per-message" {
		t.Errorf("seed-400g's schedule %q", s)
	}
	ring := seedWorkload()
	for _, c := range []struct {
		profile  string
		w        WorkloadOptions
		schedule string
	}{
		{"seed-400g", WorkloadOptions{Collective: "ring"}, "ring flow-per-message"},
		{"seed-400g", WorkloadOptions{Collective: "ring", Flows: FlowsPersistent}, "ring"},
		{"seed-400g", WorkloadOptions{Flows: FlowsPersistent}, "direct dims 8x8"},
		{"seed-400g", WorkloadOptions{Dims: []int{8, 8}}, "ring dims 8x8 flow-per-message"},
		{"seed-400g", WorkloadOptions{Collective: "double-binary-tree", Splits: 8}, "double-binary-tree splits 8 flow-per-message"},
		{"seed-400g-paper", WorkloadOptions{}, "ring"},
		{"seed-400g-ns3", WorkloadOptions{}, "ring"},
		{"seed-400g-paper", WorkloadOptions{Flows: FlowsMessage}, "ring flow-per-message"},
	} {
		pv, err := Check(seedReadingOptions(c.profile, c.w, ""))
		if err != nil {
			t.Errorf("%s %+v: %v", c.profile, c.w, err)
			continue
		}
		if pv.Collective.Schedule != c.schedule {
			t.Errorf("%s %+v: schedule %q, want %q", c.profile, c.w, pv.Collective.Schedule, c.schedule)
		}
		if strings.HasPrefix(c.schedule, "ring") && !strings.Contains(c.schedule, "dims") && pv.Options.Workload.GradientBytes != ring.GradientBytes {
			t.Errorf("%s %+v: gradient %d B, want the flat ring's %d", c.profile, c.w, pv.Options.Workload.GradientBytes, ring.GradientBytes)
		}
	}
}

// A profile's collective needs the job its dimensions name: elsewhere
// the lab refuses it, naming the flags that choose another, and the
// flags then run anywhere.
func TestSeedProfileCollectiveNeedsItsRanks(t *testing.T) {
	for _, o := range []Options{
		{Placement: PlacementSim, Profile: "seed-400g", Topology: "leaf-spine-2x4"},
		{Placement: PlacementSim, Profile: "seed-400g", Topology: "leaf-spine-8x8-4to1", Workload: WorkloadOptions{TP: 8}},
		{Placement: PlacementSim, Profile: "seed-400g", Topology: "two-jobs-8x8-4to1", Policies: []string{"forgive+dcqcn"}},
	} {
		_, err := Check(o)
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "profile seed-400g runs the gradient all-reduce direct on dims [8 8], 64 ranks a group or a whole multiple of them") ||
			!strings.Contains(err.Error(), "--collective ring") {
			t.Errorf("%s %+v: %v, want the profile's collective refused, naming --collective", o.Topology, o.Workload, err)
		}
		o.Workload.Collective = "ring"
		if _, err := Check(o); err != nil {
			t.Errorf("%s %+v: %v", o.Topology, o.Workload, err)
		}
	}
	if _, err := Check(Options{Placement: PlacementSim, Profile: "seed-400g", Topology: "leaf-spine-8x8-4to1", Workload: WorkloadOptions{Flows: "qp"}}); !errors.Is(err, ErrInput) ||
		!strings.Contains(err.Error(), `--flows "qp": want persistent or message`) {
		t.Errorf("--flows qp: %v", err)
	}
}

// At a whole multiple m of the seed's 64 ranks a group, the profile's
// collective runs the seed's dimensions and one more of m (docs/profiles.md,
// "The seed profiles' reading"): every such job, alone or beside --tp,
// gets dimensions whose product is its group, with the seed's 8 x 8 first.
func TestSeedProfileCollectiveAtScale(t *testing.T) {
	for _, c := range []struct {
		topology string
		tp       int
		want     string
	}{
		{"fat-tree-k8", 1, "direct dims 8x8x2 flow-per-message"},
		{"fat-tree-k8", 2, "direct dims 8x8 tp 2 flow-per-message"},
		{"fat-tree-k16", 1, "direct dims 8x8x16 flow-per-message"},
		{"leaf-spine-8x8-4to1", 1, "direct dims 8x8 flow-per-message"},
	} {
		o := seedReadingOptions("seed-400g", WorkloadOptions{TP: c.tp}, "")
		o.Topology = c.topology
		pv, err := Check(o)
		if err != nil {
			t.Errorf("%s --tp %d: %v", c.topology, c.tp, err)
			continue
		}
		if s := pv.Collective.Schedule; s != c.want {
			t.Errorf("%s --tp %d: schedule %q, want %q", c.topology, c.tp, s, c.want)
		}
		group := 1
		for _, d := range pv.Options.Workload.Dims {
			group *= d
		}
		if ranks := pv.Topology.Ranks(); group*c.tp != ranks || !slices.Equal(pv.Options.Workload.Dims[:2], []int{8, 8}) {
			t.Errorf("%s --tp %d: dims %v for %d ranks", c.topology, c.tp, pv.Options.Workload.Dims, ranks)
		}
	}
}

// A worker runs what the planning process planned: the options a sweep
// records, read back, give the same schedule and sweep id whatever the
// profile's defaults, so a default never fills in what the user chose.
func TestWorkerRunsThePlannedReading(t *testing.T) {
	for _, c := range []struct {
		profile string
		w       WorkloadOptions
	}{
		{"seed-400g", WorkloadOptions{}},
		{"seed-400g", WorkloadOptions{Collective: "ring", Flows: FlowsPersistent}},
		{"seed-400g", WorkloadOptions{Flows: FlowsPersistent}},
		{"seed-400g", WorkloadOptions{Collective: "ring"}},
		{"seed-400g-paper", WorkloadOptions{}},
		{"seed-400g-paper", WorkloadOptions{Collective: "direct", Dims: []int{8, 8}, Flows: FlowsMessage}},
	} {
		p, err := check(seedReadingOptions(c.profile, c.w, ""))
		if err != nil {
			t.Fatal(err)
		}
		so, err := p.sweepOptions()
		if err != nil {
			t.Fatal(err)
		}
		o, err := optionsFrom(so)
		if err != nil {
			t.Fatal(err)
		}
		q, err := check(o)
		if err != nil {
			t.Fatalf("%s %+v: the worker's check: %v", c.profile, c.w, err)
		}
		again, err := q.sweepOptions()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p.collective, q.collective) || results.SweepID(so) != results.SweepID(again) {
			t.Errorf("%s %+v: planned %+v (sweep %s), the worker runs %+v (sweep %s)", c.profile, c.w,
				p.collective, results.SweepID(so), q.collective, results.SweepID(again))
		}
	}
}
