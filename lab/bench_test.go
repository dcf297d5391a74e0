package lab

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/lab/fabric"
	"github.com/forgive-emu/forgive/lab/topo"
)

// BenchmarkSeedRate runs the seed's experiment in the simulator, one
// FORGIVE run of the seed's 64-rank 4:1 fabric with the seed's workload,
// at 1/64 of the seed's rate (seed-6.25g), at the seed's rate under the
// lab's first reading (seed-400g-paper: a flat ring, persistent flows) and
// under the reading the seed profiles run (seed-400g: direct on 8 x 8, a
// flow per message), payload-free, and reports the CPU time of a packet hop
// (the process's user and system time over the run, so another load on
// the machine does not count) and the process's peak resident memory
// during the run, so the two rates are compared in one run:
//
//	go test ./lab -run '^$' -bench SeedRate -benchtime 1x
//
// FORGIVE_BENCH_STEPS sets the steps (default 2; the seed's run has 20).
func BenchmarkSeedRate(b *testing.B) {
	steps := 2
	if s := os.Getenv("FORGIVE_BENCH_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("FORGIVE_BENCH_STEPS=%q: want a number of steps >= 1", s)
		}
		steps = n
	}
	for _, profile := range []string{"seed-6.25g", "seed-400g-paper", "seed-400g"} {
		b.Run(profile, func(b *testing.B) {
			b.ReportAllocs()
			var hops, events int64
			var peak int64
			var cpu time.Duration
			for range b.N {
				if err := resetPeakRSS(); err != nil {
					b.Fatal(err)
				}
				cpu0 := cpuTime()
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				f, err := Run(ctx, Options{Placement: PlacementSim, Topology: "leaf-spine-8x8-4to1", Profile: profile,
					Policies: []string{"forgive"}, Steps: steps, PayloadFree: PayloadsOn})
				cancel()
				cpu += cpuTime() - cpu0
				if err != nil {
					b.Fatal(err)
				}
				r := f.Runs[0]
				if !r.BudgetInvariantHeld || !r.MessageAccountingHeld || r.SimPacketHops == 0 {
					b.Fatalf("%s: invariants %v, accounting %v, %d hops", profile, r.BudgetInvariantHeld, r.MessageAccountingHeld, r.SimPacketHops)
				}
				hops, events = hops+int64(r.SimPacketHops), events+int64(r.SimEvents)
				p, err := peakRSS()
				if err != nil {
					b.Fatal(err)
				}
				peak = max(peak, p)
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(hops), "cpu-ns/hop")
			b.ReportMetric(float64(hops)/float64(b.N), "hops/run")
			b.ReportMetric(float64(events)/float64(b.N), "events/run")
			b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
		})
	}
}

// resetPeakRSS resets the process's peak resident set (VmHWM) to its
// current size (Linux: 5 to /proc/self/clear_refs).
func resetPeakRSS() error { return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is the process's peak resident set since the last reset, in bytes.
func peakRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/self/status: no VmHWM")
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCollectiveAgainstIdeal runs one step of each all-reduce
// algorithm in the simulator on the seed's non-blocking 64-rank fabric at
// the seed's rate (seed-400g), payload-free, with DCQCN and nothing
// else on the fabric (no tensor, pipeline or burst traffic), and reports
// the median all-reduce time beside the schedule's ideal in the same run:
// the busiest link's bytes at its rate (CollectiveShape.IdealNS), and the
// CPU time a run took (user and system time of the process, so other load
// on the machine does not count).
//
//	go test ./lab -run '^$' -bench CollectiveAgainstIdeal -benchtime 1x
func BenchmarkCollectiveAgainstIdeal(b *testing.B) {
	cases := []struct {
		name string
		w    WorkloadOptions
	}{
		{"ring", WorkloadOptions{}},
		{"ring-8x8", WorkloadOptions{Collective: "ring", Dims: []int{8, 8}}},
		{"direct-8x8", WorkloadOptions{Collective: "direct", Dims: []int{8, 8}}},
		{"halving-doubling", WorkloadOptions{Collective: "halving-doubling"}},
		{"double-binary-tree", WorkloadOptions{Collective: "double-binary-tree", Splits: 8}},
		{"direct-tp8", WorkloadOptions{Collective: "direct", TP: 8}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var got, ideal float64
			var cpu time.Duration
			for range b.N {
				w := c.w
				w.TPBytes, w.PPBytes, w.BurstBytes, w.TensorParallel = 0, 0, 0, "local"
				w.BurstSteps = []int{}
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				cpu0 := cpuTime()
				f, err := Run(ctx, Options{Placement: PlacementSim, Topology: "leaf-spine-8x8-nonblocking", Profile: "seed-400g-paper",
					Policies: []string{"dcqcn"}, Steps: 1, PayloadFree: PayloadsOn, Workload: w})
				cpu += cpuTime() - cpu0
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				r := f.Runs[0]
				if !r.ChecksHeld() {
					b.Fatalf("%s: a check failed: %+v", c.name, r.Checks)
				}
				got += r.AllReduceMedianCriticalS // step 1 is critical
				sh := f.Collective
				if sh == nil {
					pv, err := Check(Options{Placement: PlacementSim, Topology: "leaf-spine-8x8-nonblocking", Profile: "seed-400g-paper",
						Policies: []string{"dcqcn"}, Steps: 1, PayloadFree: PayloadsOn, Workload: w})
					if err != nil {
						b.Fatal(err)
					}
					sh = pv.Collective
				}
				ideal += float64(sh.IdealNS) / 1e9
			}
			b.ReportMetric(got/float64(b.N)*1e3, "allreduce-ms")
			b.ReportMetric(ideal/float64(b.N)*1e3, "ideal-ms")
			b.ReportMetric(got/ideal, "x-ideal")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/run")
		})
	}
}

// BenchmarkSeedScale runs the seed's job (its workload at the seed's
// rate, seed-400g, one FORGIVE run, payload-free, two steps) at 64 ranks
// on the seed's fabric (leaf-spine-8x8-4to1), and at 1,024 and 8,192
// ranks on fat trees (fat-tree-k16, fat-tree-k32), each rank's gradient,
// tensor and pipeline bytes the seed's, and reports per run the CPU time
// of a packet hop, the process's peak resident memory per rank (the run's
// peak over its ranks; the process's baseline included), and the wall
// and CPU time of the run, which is one thread's: the simulator runs one
// run's fabric on one goroutine (--jobs runs several runs at once).
//
//	go test ./lab -run '^$' -bench SeedScale -benchtime 1x -timeout 6h
//
// FORGIVE_BENCH_RANKS picks the sizes (default "64,1024"; 8,192 ranks
// only when named: "64,1024,8192"), FORGIVE_BENCH_STEPS the steps
// (default 2), FORGIVE_BENCH_SCALE the workload's bytes (--scale,
// default 1), FORGIVE_BENCH_PROFILE the profile (default seed-400g, the
// seed profiles' reading: direct on 8 x 8 x m, a flow per message;
// seed-400g-paper runs the flat ring, as this benchmark did before
// 2026-12-08), FORGIVE_BENCH_COLLECTIVE the all-reduce (--collective,
// default the profile's; the flat ring's 2(N-1) messages per rank and
// step are all held by the NIC at once).
func BenchmarkSeedScale(b *testing.B) {
	steps, scale := 2, 1.0
	if s := os.Getenv("FORGIVE_BENCH_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("FORGIVE_BENCH_STEPS=%q: want a number of steps >= 1", s)
		}
		steps = n
	}
	if s := os.Getenv("FORGIVE_BENCH_SCALE"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 || v > 1 {
			b.Fatalf("FORGIVE_BENCH_SCALE=%q: want a scale in (0, 1]", s)
		}
		scale = v
	}
	sizes := "64,1024"
	if s := os.Getenv("FORGIVE_BENCH_RANKS"); s != "" {
		sizes = s
	}
	profile := "seed-400g"
	if s := os.Getenv("FORGIVE_BENCH_PROFILE"); s != "" {
		profile = s
	}
	topology := map[string]string{"64": "leaf-spine-8x8-4to1", "1024": "fat-tree-k16", "8192": "fat-tree-k32"}
	for _, n := range strings.Split(sizes, ",") {
		tp, ok := topology[n]
		if !ok {
			b.Fatalf("FORGIVE_BENCH_RANKS: %q: want 64, 1024 or 8192", n)
		}
		ranks, _ := strconv.Atoi(n)
		b.Run("ranks-"+n, func(b *testing.B) {
			var hops int64
			var peak int64
			var cpu, wall time.Duration
			for range b.N {
				if err := resetPeakRSS(); err != nil {
					b.Fatal(err)
				}
				cpu0, wall0 := cpuTime(), time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 6*time.Hour)
				f, err := Run(ctx, Options{Placement: PlacementSim, Topology: tp, Profile: profile,
					Policies: []string{"forgive"}, Steps: steps, Scale: scale, PayloadFree: PayloadsOn, Jobs: 1,
					Workload: WorkloadOptions{Collective: os.Getenv("FORGIVE_BENCH_COLLECTIVE")}})
				cancel()
				cpu, wall = cpu+cpuTime()-cpu0, wall+time.Since(wall0)
				if err != nil {
					b.Fatal(err)
				}
				r := f.Runs[0]
				if !r.ChecksHeld() || r.SimPacketHops == 0 {
					b.Fatalf("%s: checks held %v, invariant %v, accounting %v, %d hops", tp, r.ChecksHeld(), r.BudgetInvariantHeld, r.MessageAccountingHeld, r.SimPacketHops)
				}
				hops += int64(r.SimPacketHops)
				p, err := peakRSS()
				if err != nil {
					b.Fatal(err)
				}
				peak = max(peak, p)
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(hops), "cpu-ns/hop")
			b.ReportMetric(float64(hops)/float64(b.N), "hops/run")
			b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
			b.ReportMetric(float64(peak)/1024/float64(ranks), "peak-KiB/rank")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/run")
			b.ReportMetric(wall.Seconds()/float64(b.N), "wall-s/run")
		})
	}
}

// BenchmarkSimBuild places the seed's large fabrics in the simulator and
// builds their engines (every forgived and trimswitch configuration
// written, parsed by the daemons' parsers, and made an engine,
// payload-free), with no traffic: the memory a fabric holds before its
// first packet, per rank, and the CPU time it takes.
//
//	go test ./lab -run '^$' -bench SimBuild -benchtime 1x
func BenchmarkSimBuild(b *testing.B) {
	for _, c := range []struct {
		profile  string
		topology string
		ranks    int
	}{
		{"seed-400g-paper", "leaf-spine-8x8-4to1", 64}, {"seed-400g-paper", "fat-tree-k16", 1024}, {"seed-400g-paper", "fat-tree-k32", 8192},
		// seed-400g gives every host a window per peer host
		// (window_mode pair-bdp), written as ranges of host ids.
		{"seed-400g", "leaf-spine-8x8-4to1", 64}, {"seed-400g", "fat-tree-k16", 1024}, {"seed-400g", "fat-tree-k32", 8192},
	} {
		b.Run(fmt.Sprintf("%s/ranks-%d", c.profile, c.ranks), func(b *testing.B) {
			prof, err := topo.FindProfile(c.profile)
			if err != nil {
				b.Fatal(err)
			}
			tp, err := topo.FindTopology(c.topology)
			if err != nil {
				b.Fatal(err)
			}
			var peak int64
			var cpu time.Duration
			for range b.N {
				// The heap of the fabric before, returned to the
				// system, so the peak is this build's alone.
				debug.FreeOSMemory()
				if err := resetPeakRSS(); err != nil {
					b.Fatal(err)
				}
				cpu0 := cpuTime()
				plan, err := topo.Place(tp, prof, topo.PlaceOptions{Network: topo.Simulated, Net: simNet, Dir: simDir, Seed: 1, Host: topo.DefaultHostPolicy()})
				if err != nil {
					b.Fatal(err)
				}
				f, err := fabric.BuildSim(plan, true)
				if err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - cpu0
				if len(f.Clients) != c.ranks {
					b.Fatalf("%d hosts, want %d", len(f.Clients), c.ranks)
				}
				p, err := peakRSS()
				if err != nil {
					b.Fatal(err)
				}
				peak = max(peak, p)
				runtime.KeepAlive(f)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
			b.ReportMetric(float64(peak)/1024/float64(c.ranks), "peak-KiB/rank")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/build")
		})
	}
}

// BenchmarkSample measures one sample of the recorder on the seed's
// 64-rank 4:1 fabric at the seed's rate, built in the simulator (no
// traffic, so no flows: the switches' counters are the whole cost of the
// signals, the flows' a sum over a handful each), without and with the
// per-phase signals, interleaved in one run:
//
//	go test ./lab -run '^$' -bench Sample -benchtime 2000x
//
// A screening run samples every 100 µs of virtual time: about 4,300
// samples per policy over 6 steps of the seed's 72.7 ms.
func BenchmarkSample(b *testing.B) {
	tp, err := topo.FindTopology("leaf-spine-8x8-4to1")
	if err != nil {
		b.Fatal(err)
	}
	prof, err := topo.FindProfile("seed-400g-paper")
	if err != nil {
		b.Fatal(err)
	}
	plan, err := topo.Place(tp, prof, topo.PlaceOptions{Network: topo.Loopback, Net: simNet, Dir: simDir, Seed: 1, Host: topo.DefaultHostPolicy()})
	if err != nil {
		b.Fatal(err)
	}
	f, err := fabric.BuildSim(plan, true)
	if err != nil {
		b.Fatal(err)
	}
	sp := &simPlacement{Sim: f}
	readers, hosts := sp.hosts()
	ctx := context.Background()
	for _, signals := range []bool{false, true} {
		b.Run(fmt.Sprintf("signals=%v", signals), func(b *testing.B) {
			rec := newRecorder(f, plan, readers, hosts, 1, nil)
			if len(rec.signals) != len(readers) {
				b.Fatalf("%d of %d ranks give their signals", len(rec.signals), len(readers))
			}
			if !signals {
				rec.signals = nil
			}
			b.ReportAllocs()
			for i := range b.N {
				rec.sample(ctx, float64(i)*1e-4)
			}
			if signals && len(rec.sig) != b.N || len(rec.occ) != b.N {
				b.Fatalf("%d signal and %d queue samples of %d", len(rec.sig), len(rec.occ), b.N)
			}
		})
	}
}
