package workload

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/hostapi"
)

// "Both ends of a flow use the same id, and an id is unique among the
// flows open on one daemon": every flow id a rank creates is unique at
// that rank and created by exactly one other rank, its peer, with the same
// class.
func TestFlowPlanPairsEveryFlow(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 40).Draw(rt, "ranks")
		cfg := Config{TPBytes: rapid.IntRange(0, 1).Draw(rt, "tp"), PPBytes: rapid.IntRange(0, 1).Draw(rt, "pp"),
			FlowBase: hostapi.FlowID(rapid.IntRange(0, 1<<20).Draw(rt, "base"))}
		if rapid.Bool().Draw(rt, "burst") {
			cfg.Burst = BurstConfig{Senders: rapid.IntRange(1, n-1).Draw(rt, "senders"), Bytes: 1, Steps: []int{1}}
		}
		p := newPlan(cfg, hostIDs(n))
		type end struct {
			rank  int
			peer  int
			class hostapi.Class
		}
		ends := map[hostapi.FlowID][]end{}
		for i := range n {
			seen := map[hostapi.FlowID]bool{}
			for _, f := range p.flows(i) {
				if seen[f.id] {
					rt.Fatalf("rank %d creates flow %d twice", i, f.id)
				}
				seen[f.id] = true
				if f.peer == i {
					rt.Fatalf("rank %d: flow %d to itself", i, f.id)
				}
				ends[f.id] = append(ends[f.id], end{i, f.peer, f.class})
			}
		}
		for id, e := range ends {
			if len(e) != 2 || e[0].peer != e[1].rank || e[1].peer != e[0].rank || e[0].class != e[1].class {
				rt.Fatalf("flow %d has ends %+v, want two reciprocal ends of one class", id, e)
			}
		}
	})
}

// The ring schedule: in reduce-scatter round r, rank i receives exactly the
// chunk its predecessor sends; after the last round rank i holds chunk
// i+1 with every rank's contribution; all-gather then brings every rank
// every chunk but the one it reduced.
func TestRingScheduleReducesAndGathersEveryChunk(t *testing.T) {
	for n := 2; n <= 9; n++ {
		p := newPlan(Config{GradientBytes: 4 * n}, hostIDs(n))
		// contrib[i][c]: the set of ranks whose chunk c rank i has summed.
		contrib := make([][]map[int]bool, n)
		for i := range n {
			contrib[i] = make([]map[int]bool, n)
			for c := range n {
				contrib[i][c] = map[int]bool{i: true}
			}
		}
		for r := range n - 1 {
			next := make([][]map[int]bool, n)
			for i := range n {
				next[i] = append([]map[int]bool(nil), contrib[i]...)
			}
			for i := range n {
				pred := p.mod(i - 1)
				c := p.rsRecvChunk(i, r)
				if sent := p.rsSendChunk(pred, r); sent != c {
					t.Fatalf("%d ranks, round %d: rank %d receives chunk %d, its predecessor sends %d", n, r, i, c, sent)
				}
				sum := map[int]bool{}
				for k := range contrib[i][c] {
					sum[k] = true
				}
				for k := range contrib[pred][c] {
					sum[k] = true
				}
				next[i][c] = sum
			}
			contrib = next
		}
		for i := range n {
			if got := len(contrib[i][p.mod(i+1)]); got != n {
				t.Fatalf("%d ranks: after reduce-scatter rank %d's chunk %d has %d contributions, want %d", n, i, p.mod(i+1), got, n)
			}
		}
		for i := range n {
			got := map[int]bool{}
			for r := range n - 1 {
				got[p.agRecvChunk(i, r)] = true
				// The sender forwards what it received the round before (or
				// its own reduced chunk in round 0).
				pred := p.mod(i - 1)
				sent := p.mod(pred + 1)
				if r > 0 {
					sent = p.agRecvChunk(pred, r-1)
				}
				if sent != p.agRecvChunk(i, r) {
					t.Fatalf("%d ranks: all-gather round %d: rank %d expects chunk %d, gets %d", n, r, i, p.agRecvChunk(i, r), sent)
				}
			}
			if len(got) != n-1 || got[p.mod(i+1)] {
				t.Fatalf("%d ranks: rank %d gathers chunks %v", n, i, got)
			}
		}
	}
}

func TestWorkRequestIDsRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tag := rapid.Uint64Range(0, 0xffff).Draw(rt, "tag")
		step := rapid.IntRange(0, MaxSteps).Draw(rt, "step")
		kind := wrKind(rapid.IntRange(int(wrRingSend), int(wrBurstRecv)).Draw(rt, "kind"))
		index := rapid.IntRange(0, 1<<24-1).Draw(rt, "index")
		t2, s2, k2, i2 := splitWR(wrID(tag, step, kind, index))
		if t2 != tag || s2 != step || k2 != kind || i2 != index {
			rt.Fatalf("(%d %d %d %d) came back as (%d %d %d %d)", tag, step, kind, index, t2, s2, k2, i2)
		}
	})
}

// A forgiven byte range taints every element it overlaps, and no other.
func TestTaintCoversOverlappingElements(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		elems := rapid.IntRange(1, 500).Draw(rt, "elems")
		off := rapid.IntRange(0, 4*elems-1).Draw(rt, "off")
		n := rapid.IntRange(1, 4*elems-off).Draw(rt, "len")
		tt := newTaint(elems)
		tt.addBytes(off, n)
		for e := range elems {
			overlaps := 4*e < off+n && off < 4*e+4
			if tt.has(e) != overlaps {
				rt.Fatalf("bytes [%d,%d): element %d tainted %v, overlaps %v", off, off+n, e, tt.has(e), overlaps)
			}
		}
		if tt.count() != (off+n+3)/4-off/4 {
			rt.Fatalf("count %d", tt.count())
		}
	})
}

// Every gradient value is a small integer, so sums over any number of
// ranks up to 2^18 are exact in float32.
func TestGradientValuesAreSmallIntegers(t *testing.T) {
	for e := range 10000 {
		v := gradientValue(1, 2, 3, e)
		if v < -32 || v > 31 || v != float32(int(v)) {
			t.Fatalf("element %d is %v", e, v)
		}
	}
}

// RegisteredBytes sums every rank's region as the layout places it, and
// reads the layout alone: it makes none of the payload templates a run
// with payloads generates (at the seed's rate they are 381 MB, which a
// payload-free run at 60 GB of regions must not pay for).
func TestRegisteredBytes(t *testing.T) {
	hosts := hostIDs(4)
	cfg := Config{Steps: 1, GradientBytes: 1 << 20, TPBytes: 32 << 20, PPBytes: 16 << 20,
		Burst: BurstConfig{Senders: 2, Bytes: 1 << 20, Steps: []int{1}}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := cfg.RegisteredBytes(hosts)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := cfg.withDefaults(hosts)
	p := newPlan(full, hosts)
	var want int64
	for i := range hosts {
		want += int64(p.layout(i).size)
	}
	if got != want || want < 4*(3<<20+2*(32<<20)) {
		t.Fatalf("RegisteredBytes %d, the layouts sum to %d", got, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("RegisteredBytes allocated %d bytes: it made payload templates (%d tensor-parallel bytes)", alloc, cfg.TPBytes)
	}
}

// With the tensor-parallel exchanges off the network (TPLocal) no rank
// creates a tensor-class flow, registers a tensor buffer or generates a
// tensor payload, and every other flow and buffer is the one the network
// placement has; with TPNetwork the pairs do have their flow.
func TestTensorParallelLocalPlacesNoTensorFlow(t *testing.T) {
	for n := 2; n <= 9; n++ {
		cfg := Config{Steps: 1, GradientBytes: 4 * n, TPBytes: 3000, PPBytes: 2000,
			Burst: BurstConfig{Senders: 1, Bytes: 100, Steps: []int{1}}}
		cfg.TensorParallel = TPNetwork
		onNet := newPlan(cfg, hostIDs(n))
		cfg.TensorParallel = TPLocal
		local := newPlan(cfg, hostIDs(n))
		if len(local.payloads.base[payloadTensor]) != 0 || len(onNet.payloads.base[payloadTensor]) != cfg.TPBytes {
			t.Fatalf("%d ranks: tensor payload templates of %d bytes off the network, %d on it", n, len(local.payloads.base[payloadTensor]), len(onNet.payloads.base[payloadTensor]))
		}
		for i := range n {
			var netTensor, rest []flowSpec
			for _, f := range onNet.flows(i) {
				if f.class == hostapi.ClassTensor {
					netTensor = append(netTensor, f)
				} else {
					rest = append(rest, f)
				}
			}
			if paired := i^1 < n; paired != (len(netTensor) == 1) {
				t.Fatalf("%d ranks, rank %d: %d tensor flows on the network", n, i, len(netTensor))
			}
			got := local.flows(i)
			for _, f := range got {
				if f.class == hostapi.ClassTensor {
					t.Fatalf("%d ranks, rank %d: tensor flow %d to rank %d with the exchanges off the network", n, i, f.id, f.peer)
				}
			}
			if !slices.Equal(got, rest) {
				t.Fatalf("%d ranks, rank %d: flows %v off the network, want the others of the network placement %v", n, i, got, rest)
			}
			ln, ll := onNet.layout(i), local.layout(i)
			want := ln.size
			if len(netTensor) == 1 {
				want -= 2 * cfg.TPBytes
			}
			if ll.size != want || ll.tpSend != 0 || ll.tpRecv != 0 {
				t.Fatalf("%d ranks, rank %d: layout %+v off the network, want %d bytes and no tensor buffer (network: %+v)", n, i, ll, want, ln)
			}
		}
	}
}

func TestParseTensorParallel(t *testing.T) {
	for in, want := range map[string]TensorParallel{"": TPNetwork, "network": TPNetwork, "local": TPLocal} {
		if got, err := ParseTensorParallel(in); err != nil || got != want {
			t.Errorf("ParseTensorParallel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	cfg := Config{Steps: 1, GradientBytes: 64, TensorParallel: "nvlink"}
	err := cfg.Validate(hostIDs(2))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `tensor-parallel placement "nvlink"`) {
		t.Fatalf("Validate with tensor-parallel placement nvlink: %v", err)
	}
}
