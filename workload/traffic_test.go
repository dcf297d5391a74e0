package workload

import (
	"testing"

	"github.com/forgive-emu/forgive/hostapi"
	"pgregory.net/rapid"
)

// Traffic lists exactly what a step moves: run one step of any schedule,
// with or without tensor-parallel groups and pipeline messages, on the
// fake fabric, and the bytes it delivers between every ordered pair of
// ranks, class by class, are the bytes Traffic lists.
func TestTrafficIsWhatAStepMoves(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 12).Draw(rt, "ranks")
		f := newFakeFabric(rapid.Uint64().Draw(rt, "fabric seed"), hostIDs(n)...)
		cfg := baseConfig()
		cfg.Steps = 1
		if rapid.Bool().Draw(rt, "compiled") {
			cfg.Collective = drawCollective(rt, n)
		}
		cfg.GradientBytes = rapid.IntRange(1, 3000).Draw(rt, "gradient bytes")
		cfg.TPBytes = rapid.IntRange(0, 100).Draw(rt, "tp bytes")
		if cfg.Collective.TPCollective != "" {
			cfg.TPBytes = rapid.IntRange(1, 400).Draw(rt, "tp collective bytes")
		}
		cfg.PPBytes = rapid.IntRange(0, 100).Draw(rt, "pp bytes")
		hosts := hostIDs(n)
		want := map[moveKey]int{}
		tr, err := cfg.Traffic(hosts)
		if err != nil {
			rt.Fatalf("%v: %v", cfg.Collective, err)
		}
		for _, x := range tr {
			if x.From == x.To || x.From < 0 || x.To < 0 || x.From >= n || x.To >= n || x.Bytes <= 0 {
				rt.Fatalf("%v: transfer %+v: want two distinct ranks of %d and bytes", cfg.Collective, x, n)
			}
			want[moveKey{hosts[x.From], hosts[x.To], x.Class}] += x.Bytes
		}
		if _, err := runFake(rt, f, cfg, nil); err != nil {
			rt.Fatalf("%v: %v", cfg.Collective, err)
		}
		checkFabric(rt, f)
		for k, b := range f.moved {
			if want[k] != b {
				rt.Errorf("%v: %d -> %d %v: the step moved %d bytes, Traffic lists %d", cfg.Collective, k.from, k.to, k.class, b, want[k])
			}
		}
		for k, b := range want {
			if f.moved[k] != b {
				rt.Errorf("%v: %d -> %d %v: Traffic lists %d bytes, the step moved %d", cfg.Collective, k.from, k.to, k.class, b, f.moved[k])
			}
		}
	})
}

// The flat ring's traffic is 2(n-1) chunks to the successor, the pairs'
// a message each way, the pipeline's i to i+n/2: the shapes the seed's
// sizes were first derived from (the lab's seedload.go).
func TestTrafficOfTheFlatRing(t *testing.T) {
	const n = 8
	cfg := Config{Steps: 1, GradientBytes: 4 * n * 10, TPBytes: 300, PPBytes: 200}
	tr, err := cfg.Traffic(hostIDs(n))
	if err != nil {
		t.Fatal(err)
	}
	sum := map[moveKey]int{}
	for _, x := range tr {
		sum[moveKey{hostapi.HostID(x.From), hostapi.HostID(x.To), x.Class}] += x.Bytes
	}
	for i := range n {
		if got, want := sum[moveKey{hostapi.HostID(i), hostapi.HostID((i + 1) % n), hostapi.ClassGradient}], 2*(n-1)*10*4; got != want {
			t.Errorf("ring %d -> %d: %d bytes, want %d", i, (i+1)%n, got, want)
		}
		if got := sum[moveKey{hostapi.HostID(i), hostapi.HostID(i ^ 1), hostapi.ClassTensor}]; got != 300 {
			t.Errorf("tensor pair %d -> %d: %d bytes, want 300", i, i^1, got)
		}
		if got := sum[moveKey{hostapi.HostID(i), hostapi.HostID((i + n/2) % n), hostapi.ClassPipeline}]; got != 200 {
			t.Errorf("pipeline %d -> %d: %d bytes, want 200", i, (i+n/2)%n, got)
		}
	}
	if len(sum) != 3*n {
		t.Errorf("%d (sender, receiver, class) entries, want %d", len(sum), 3*n)
	}
}
