package workload

import (
	"errors"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/collective"
	"github.com/forgive-emu/forgive/hostapi"
)

// drawCollective draws a schedule for n ranks: an algorithm per dimension
// (dimensions that multiply to a data-parallel group's size), a
// tensor-parallel degree that divides n, splits, a window and flows.
func drawCollective(rt *rapid.T, n int) Collective {
	var tps []int
	for d := 1; d <= n; d++ {
		if n%d == 0 && n/d >= 2 {
			tps = append(tps, d)
		}
	}
	c := Collective{TP: rapid.SampledFrom(tps).Draw(rt, "tp")}
	size := n / c.tp()
	var dims []int
	for rest := size; rest > 1; {
		var divs []int
		for d := 2; d <= rest; d++ {
			if rest%d == 0 {
				divs = append(divs, d)
			}
		}
		d := rapid.SampledFrom(divs).Draw(rt, "dim")
		dims = append(dims, d)
		rest /= d
	}
	if len(dims) > 1 || rapid.Bool().Draw(rt, "explicit dims") {
		c.Dims = dims
	}
	// A tree all-reduces: it can only be the innermost dimension's.
	inner := []collective.Algorithm{collective.Ring, collective.Direct, collective.HalvingDoubling}
	for d := range max(len(dims), 1) {
		algs := inner
		if d == max(len(dims), 1)-1 {
			algs = collective.Algorithms()
		}
		c.Algorithms = append(c.Algorithms, rapid.SampledFrom(algs).Draw(rt, "algorithm"))
	}
	if c.TP >= 2 {
		c.TPCollective = rapid.SampledFrom([]string{"", "ring", "direct", "halving-doubling", "double-binary-tree", AllToAll}).Draw(rt, "tp collective")
	}
	c.Splits = rapid.IntRange(0, 3).Draw(rt, "splits")
	c.Window = rapid.IntRange(0, 3).Draw(rt, "window")
	c.FlowPerMessage = rapid.Bool().Draw(rt, "flow per message")
	return c
}

// expectedSchedShed recomputes the shedding draws of a compiled schedule
// independently of the executor: every send of every rank's plan.
func expectedSchedShed(cfg Config, n int) int64 {
	cfg, err := cfg.withDefaults(hostIDs(n))
	if err != nil {
		panic(err)
	}
	g := cfg.groups
	var total int64
	for s := 1; s <= cfg.Steps; s++ {
		p := cfg.Shed.PHigh
		if cfg.Critical(s) {
			p = cfg.Shed.PLow
		}
		for k := range n {
			for m, sd := range g.plan(k).Sends {
				if budget.Shed(cfg.Shed.Seed, budget.StepID(s), uint64(k), uint64(m), p) {
					total += int64(sd.Len)
				}
			}
		}
	}
	return total
}

// Every algorithm, any groups and dimensions, any order of deliveries,
// any forgiveness and shedding, persistent flows or a flow per message:
// the untainted sums are exact at every rank, no pending send's memory
// changes, nothing is left posted or created, and the counts agree with
// the fabric, the draws and the plans.
func TestCollectivePropertyAnyOrderAnyLoss(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 12).Draw(rt, "ranks")
		f := newFakeFabric(rapid.Uint64().Draw(rt, "fabric seed"), hostIDs(n)...)
		f.acksLast = rapid.Bool().Draw(rt, "acks last")
		lossy := rapid.Bool().Draw(rt, "forgive")
		if lossy {
			f.forgive = forgiveGradient(rapid.Float64Range(0, 1).Draw(rt, "forgive prob"))
		}
		cfg := baseConfig()
		cfg.Collective = drawCollective(rt, n)
		cfg.Steps = rapid.IntRange(1, 3).Draw(rt, "steps")
		cfg.GradientBytes = rapid.IntRange(1, 3000).Draw(rt, "gradient bytes")
		cfg.TPBytes = rapid.IntRange(0, 100).Draw(rt, "tp bytes")
		if cfg.Collective.TPCollective != "" {
			cfg.TPBytes = rapid.IntRange(1, 400).Draw(rt, "tp collective bytes")
		}
		if rapid.Bool().Draw(rt, "with compute") {
			cfg.ModelParallel = WithCompute
		}
		cfg.Seed = rapid.Uint64().Draw(rt, "seed")
		if rapid.Bool().Draw(rt, "shed") {
			cfg.Shed = &ShedConfig{PHigh: rapid.Float64Range(0, 1).Draw(rt, "p_high"), Seed: cfg.Seed}
		}
		res, err := runFake(rt, f, cfg, nil)
		if err != nil {
			rt.Fatalf("%v: %v", cfg.Collective, err)
		}
		checkFabric(rt, f)
		g := roundUp(cfg.GradientBytes, 4*n/cfg.Collective.tp())
		all := int64(cfg.Steps * n * g / 4)
		if res.ElementsTested%int64(n/cfg.Collective.tp()) != 0 || res.ElementsTested > all || res.Mismatches != 0 {
			rt.Fatalf("%v: tested %d of %d elements, %d mismatches", cfg.Collective, res.ElementsTested, all, res.Mismatches)
		}
		if cfg.Collective.TPCollective != "" && len(res.TPDurations) != cfg.Steps*n {
			rt.Fatalf("%v: %d tensor-parallel exchanges timed, want one per rank and step: %d", cfg.Collective, len(res.TPDurations), cfg.Steps*n)
		}
		if res.ForgivenBytes != f.forgivenSent {
			rt.Fatalf("result counts %d forgiven bytes, the fabric forgave %d", res.ForgivenBytes, f.forgivenSent)
		}
		if !lossy && cfg.Shed == nil {
			if res.ElementsTested != all {
				rt.Fatalf("%v: lossless run tested %d of %d elements", cfg.Collective, res.ElementsTested, all)
			}
			if res.ReplicaMismatches != 0 {
				rt.Fatalf("%v: lossless run left %d elements that differ between replicas", cfg.Collective, res.ReplicaMismatches)
			}
		}
		if cfg.Shed != nil && cfg.Collective.Flat() && res.ShedBytes != expectedShed(cfg, n) {
			rt.Fatalf("ring: shed %d bytes, the draws shed %d", res.ShedBytes, expectedShed(cfg, n))
		}
		if cfg.Shed != nil && !cfg.Collective.Flat() && res.ShedBytes != expectedSchedShed(cfg, n) {
			rt.Fatalf("%v: shed %d bytes, the draws shed %d", cfg.Collective, res.ShedBytes, expectedSchedShed(cfg, n))
		}
	})
}

// With tensor-parallel groups, the gradient all-reduce sums over each
// data-parallel group only: every rank's untainted elements equal its own
// group's sum, which the lossless run checks for every element.
func TestDataParallelGroupsReduceWithinTheGroup(t *testing.T) {
	f := newFakeFabric(3, hostIDs(8)...)
	cfg := baseConfig()
	cfg.Collective = Collective{Algorithms: []collective.Algorithm{collective.Direct}, TP: 4}
	res, err := runFake(t, f, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkFabric(t, f)
	if all := int64(cfg.Steps * 8 * cfg.GradientBytes / 4); res.ElementsTested != all || res.Mismatches != 0 {
		t.Fatalf("tested %d of %d elements, %d mismatches", res.ElementsTested, all, res.Mismatches)
	}
	// Every flow joins two ranks of one data-parallel group: ranks 4 apart.
	for _, h := range hostIDs(8) {
		for _, c := range f.hosts[h].created {
			if d := int(c.Peer) - int(h); d%4 != 0 {
				t.Fatalf("host %d created flow %d to host %d, outside its data-parallel group", h, c.Flow, c.Peer)
			}
		}
	}
}

// The daemon hears the bytes each step will bring from the plan, less
// what the predecessor sheds: with no shedding, each rank's received
// bytes of the compiled schedule.
func TestExpectedGradientBytesComeFromThePlan(t *testing.T) {
	for _, alg := range collective.Algorithms() {
		f := newFakeFabric(5, hostIDs(6)...)
		cfg := baseConfig()
		cfg.GradientBytes = 4 * 600
		cfg.Collective = Collective{Algorithms: []collective.Algorithm{alg}, Dims: []int{6}}
		res, err := runFake(t, f, cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		full, _ := cfg.withDefaults(hostIDs(6))
		var sum int64
		for i, h := range hostIDs(6) {
			want := uint64(full.groups.sched.ReceivedBytes(i))
			for _, b := range f.hosts[h].begins {
				if b.ExpectedGradientBytes != want {
					t.Fatalf("%s: rank %d declared %d expected bytes, its plan receives %d", alg, i, b.ExpectedGradientBytes, want)
				}
			}
			sum += int64(want)
		}
		if res.GradientBytesExpected != int64(cfg.Steps)*sum {
			t.Fatalf("%s: result expects %d bytes, the plans %d", alg, res.GradientBytesExpected, int64(cfg.Steps)*sum)
		}
	}
}

// The gather policies on every algorithm: forgiving reduce-phase bytes
// alone (gather: repair) keeps the replicas identical, and so does the
// owner policy, under which a compiled schedule declares its finished
// values gather (the daemons repair them); forgiving finished values
// (gather: forgive) does not.
func TestGatherPoliciesOnEverySchedule(t *testing.T) {
	for _, alg := range collective.Algorithms() {
		for _, c := range []struct {
			name      string
			phases    []hostapi.Phase
			owner     bool
			identical bool
		}{
			{"forgive", []hostapi.Phase{hostapi.PhaseReduce, hostapi.PhaseGatherOwner, hostapi.PhaseGather}, false, false},
			{"repair", []hostapi.Phase{hostapi.PhaseReduce}, false, true},
			{"owner", []hostapi.Phase{hostapi.PhaseReduce, hostapi.PhaseGatherOwner}, true, true},
		} {
			f := newFakeFabric(9, hostIDs(6)...)
			f.forgivePhase = forgiveIn(0.6, c.phases...)
			cfg := baseConfig()
			cfg.Steps = 6
			cfg.OwnerNotices = c.owner
			cfg.Collective = Collective{Algorithms: []collective.Algorithm{alg}, Dims: []int{6}}
			res, err := runFake(t, f, cfg, nil)
			if err != nil {
				t.Fatalf("%s, %s: %v", alg, c.name, err)
			}
			checkFabric(t, f)
			if res.ForgivenBytes == 0 || res.ForgivenBytes != f.forgivenSent || res.Mismatches != 0 {
				t.Fatalf("%s, %s: forgiven %d (fabric %d), mismatches %d", alg, c.name, res.ForgivenBytes, f.forgivenSent, res.Mismatches)
			}
			if got := res.ReplicaMismatches == 0; got != c.identical {
				t.Fatalf("%s, %s: %d elements differ between replicas; want identical %v", alg, c.name, res.ReplicaMismatches, c.identical)
			}
		}
	}
}

// The tensor-parallel groups' exchange is checked element by element and
// never forgiven: a changed byte or a forgiven range fails the run, for
// the all-reduce of activations and for the all-to-all.
func TestTensorGroupExchangeIsExact(t *testing.T) {
	for _, tc := range []string{"ring", "direct", AllToAll} {
		cfg := baseConfig()
		cfg.TPBytes = 4 * 64
		cfg.Collective = Collective{Algorithms: []collective.Algorithm{collective.Direct}, TP: 4, TPCollective: tc}
		f := newFakeFabric(11, hostIDs(8)...)
		res, err := runFake(t, f, cfg, nil)
		if err != nil || !res.NonGradientExact || len(res.TPDurations) != cfg.Steps*8 {
			t.Fatalf("%s: %v, exact %v, %d exchanges timed", tc, err, res.NonGradientExact, len(res.TPDurations))
		}
		checkFabric(t, f)
		f = newFakeFabric(11, hostIDs(8)...)
		f.corrupt = func(class hostapi.Class, data []byte) {
			if class == hostapi.ClassTensor && len(data) > 0 {
				data[0] ^= 0x40
			}
		}
		if _, err := runFake(t, f, cfg, nil); !errors.Is(err, ErrNonGradient) {
			t.Fatalf("%s: a corrupted tensor-parallel message: %v, want ErrNonGradient", tc, err)
		}
		f = newFakeFabric(11, hostIDs(8)...)
		f.forgive = func(_ *rand.Rand, class hostapi.Class, n int) []hostapi.Range {
			if class != hostapi.ClassTensor {
				return nil
			}
			return []hostapi.Range{{Start: 0, End: uint64(n)}}
		}
		if _, err := runFake(t, f, cfg, nil); !errors.Is(err, ErrNonGradient) {
			t.Fatalf("%s: a forgiven tensor-parallel message: %v, want ErrNonGradient", tc, err)
		}
	}
}

// A tensor-parallel groups' exchange needs groups: without --tp it is
// refused, not ignored.
func TestTPCollectiveNeedsGroups(t *testing.T) {
	cfg := baseConfig()
	cfg.TPBytes = 400
	cfg.Collective = Collective{TPCollective: "ring"}
	if err := cfg.Validate(hostIDs(4)); err == nil {
		t.Fatal("a tensor-parallel exchange without tensor-parallel groups was accepted")
	}
}
