package sim_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/switchcore"
)

// outcome is everything a run shows: every completion with its time, what
// each RunUntil returned and where it left the clock, the scheduler's
// counters, and every counter of every NIC, flow and switch.
type outcome struct {
	comps    []string
	runs     []string
	samples  []string // what an AtGlobal sampler read of the switches' queues and Stats
	stats    sim.Stats
	nics     []nic.Stats
	flows    []nic.FlowReport
	switches []switchcore.Stats
	workers  int
	buffers  uint64 // BuffersMade: not compared, bounded
}

// fataler is what play needs of *testing.T and *rapid.T.
type fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// fabricCase is a random small fabric and workload.
type fabricCase struct {
	topo      sim.Topology
	port      switchcore.PortConfig
	hostDelay time.Duration
	payload   bool
	cc        congestion.Kind
	entropy   nic.Entropy
	window    int
	pairs     [][2]int // sender, receiver (host ids from 1)
	sizes     []int
	reposts   int           // messages a sender posts again when one completes
	late      time.Duration // the second half of the pairs start then, from an At callback
	sample    time.Duration // an AtGlobal callback reads every queue and Stats this often (0: none)
}

func drawCase(t *rapid.T) fabricCase {
	var c fabricCase
	var err error
	switch rapid.IntRange(0, 3).Draw(t, "kind") {
	case 0:
		c.topo, err = sim.Star(rapid.IntRange(2, 8).Draw(t, "hosts"))
	case 1:
		c.topo, err = sim.LeafSpine(rapid.IntRange(2, 4).Draw(t, "leaves"), rapid.IntRange(1, 4).Draw(t, "per-leaf"), rapid.IntRange(1, 3).Draw(t, "spines"))
	case 2:
		c.topo, err = sim.LeafSpineInterleaved(rapid.IntRange(2, 3).Draw(t, "leaves"), rapid.IntRange(2, 3).Draw(t, "per-leaf"), 2)
	default:
		c.topo, err = sim.FatTree(4, rapid.IntRange(4, 16).Draw(t, "hosts"))
	}
	if err != nil {
		t.Fatal(err)
	}
	c.port = switchcore.PortConfig{
		Rate:    rapid.SampledFrom([]units.Rate{10e9, 25e9, 100e9}).Draw(t, "rate"),
		Delay:   rapid.SampledFrom([]time.Duration{400 * time.Nanosecond, time.Microsecond, 2 * time.Microsecond}).Draw(t, "delay"),
		DataCap: rapid.SampledFrom([]int{12 << 10, 32 << 10, 128 << 10}).Draw(t, "buffer"),
		Trim:    rapid.SampledFrom([]switchcore.TrimMode{switchcore.TrimNDP, switchcore.TrimOff}).Draw(t, "trim"),
	}
	c.port.HeaderCap = 8 << 10
	if rapid.Bool().Draw(t, "ecn") {
		c.port.ECN = switchcore.ECNConfig{Enabled: true, KMin: 4 << 10, KMax: 16 << 10, PMax: 0.2}
	}
	if rapid.Bool().Draw(t, "jitter") {
		c.port.Fault.Jitter = 150 * time.Nanosecond
	}
	c.hostDelay = rapid.SampledFrom([]time.Duration{0, 300 * time.Nanosecond, time.Microsecond}).Draw(t, "host-delay")
	c.payload = rapid.Bool().Draw(t, "payload")
	c.cc = rapid.SampledFrom([]congestion.Kind{congestion.KindNone, congestion.KindDCQCN}).Draw(t, "cc")
	c.entropy = rapid.SampledFrom([]nic.Entropy{nic.EntropySingle, nic.EntropySpray}).Draw(t, "entropy")
	c.window = rapid.SampledFrom([]int{16 << 10, 64 << 10}).Draw(t, "window")
	n := len(c.topo.Hosts)
	for range rapid.IntRange(1, 2*n).Draw(t, "pairs") {
		a := rapid.IntRange(1, n).Draw(t, "from")
		b := rapid.IntRange(1, n).Filter(func(b int) bool { return b != a }).Draw(t, "to")
		c.pairs = append(c.pairs, [2]int{a, b})
		c.sizes = append(c.sizes, rapid.IntRange(1, 40).Draw(t, "size")*4096-rapid.IntRange(0, 100).Draw(t, "less"))
	}
	c.reposts = rapid.IntRange(0, 2).Draw(t, "reposts")
	c.late = time.Duration(rapid.IntRange(0, 60).Draw(t, "late-us")) * time.Microsecond
	c.sample = rapid.SampledFrom([]time.Duration{0, 4 * time.Microsecond, 17 * time.Microsecond}).Draw(t, "sample")
	return c
}

// play builds the case's fabric on workers goroutines and runs it in three
// runs: until half the receives completed, until all did, then 20 µs more
// with nothing left to wait for (a timeout, or the fabric going idle).
func (c fabricCase) play(tb fataler, workers int) outcome {
	b, err := sim.BuildFabric(sim.FabricSpec{Topology: c.topo, MTU: 4096, Port: c.port, Seed: 3, HostDelay: c.hostDelay, NewNIC: func(id uint16) (*nic.Engine, error) {
		cfg := nic.DefaultConfig(id, 100e9)
		cfg.CC, cfg.Forgive, cfg.Seed = c.cc, false, uint64(id)
		cfg.Sender.Window = c.window
		cfg.Sender.RTOLow, cfg.Sender.RTOHigh = 100*time.Microsecond, time.Millisecond
		cfg.NoPayload = !c.payload
		return nic.New(cfg)
	}})
	if err != nil {
		tb.Fatal(err)
	}
	s := b.Sim
	s.SetWorkers(workers)
	var o outcome
	mem := make([]byte, 40*4096)
	src := make([]nic.RegionID, len(b.NICs))
	dst := make([]nic.RegionID, len(b.NICs))
	for h, e := range b.NICs {
		if src[h], err = e.RegisterMemory(mem); err != nil {
			tb.Fatal(err)
		}
		if dst[h], err = e.RegisterMemory(make([]byte, len(mem))); err != nil {
			tb.Fatal(err)
		}
	}
	posted, done := 0, 0
	left := map[int]int{} // pair -> reposts left
	post := func(i int) {
		x, y := c.pairs[i][0], c.pairs[i][1]
		key := nic.FlowKey{Peer: uint16(x), ID: uint32(i + 1)}
		if err := b.NICs[y-1].PostRecv(nic.RecvReq{Key: key, WR: uint64(i), Region: dst[y-1], Length: c.sizes[i]}); err != nil {
			tb.Fatal(err)
		}
		if err := b.NICs[x-1].PostSend(s.Now(), nic.SendReq{Key: nic.FlowKey{Peer: uint16(y), ID: uint32(i + 1)}, WR: uint64(i), Region: src[x-1], Length: c.sizes[i]}); err != nil {
			tb.Fatal(err)
		}
		posted++
		s.Wake(x - 1)
		s.Wake(y - 1)
	}
	for i, p := range c.pairs {
		for _, e := range [][2]int{{p[0], p[1]}, {p[1], p[0]}} {
			if err := b.NICs[e[0]-1].CreateFlow(0, nic.FlowSpec{Peer: uint16(e[1]), ID: uint32(i + 1), Class: nic.ClassOther, Entropy: c.entropy}); err != nil {
				tb.Fatal(err)
			}
		}
		left[i] = c.reposts
	}
	half := len(c.pairs) / 2
	for i := range half {
		post(i)
	}
	s.At(c.late, func() {
		for i := half; i < len(c.pairs); i++ {
			post(i)
		}
	})
	if c.sample > 0 {
		var sample func()
		sample = func() {
			// every port's queue, as the lab's sampler reads one
			var occ []int
			for i := range s.NumSwitches() {
				sw := s.Switch(i)
				for p := range sw.NumPorts() {
					data, hdr := sw.Occupancy(switchcore.PortID(p))
					occ = append(occ, data, hdr)
				}
			}
			o.samples = append(o.samples, fmt.Sprintf("%v %+v %v", s.Now(), s.Stats(), occ))
			if len(o.samples) < 40 {
				s.AtGlobal(s.Now()+c.sample, sample)
			}
		}
		s.AtGlobal(c.sample, sample)
	}
	s.OnCompletion = func(host int, comp nic.Completion) {
		o.comps = append(o.comps, fmt.Sprintf("%v host %d %+v", s.Now(), host, comp))
		if comp.Kind != nic.WorkRecv {
			return
		}
		done++
		if i := int(comp.WR); left[i] > 0 {
			left[i]--
			post(i)
		}
	}
	record := func(err error) {
		o.runs = append(o.runs, fmt.Sprintf("%v at %v", err, s.Now()))
	}
	total := len(c.pairs) * (1 + c.reposts)
	record(s.RunUntil(func() bool { return done >= total/2 }, time.Second))
	record(s.RunUntil(func() bool { return done >= total }, time.Second))
	err = s.RunUntil(func() bool { return false }, s.Now()+20*time.Microsecond)
	if !errors.Is(err, sim.ErrTimeout) && !errors.Is(err, sim.ErrIdle) {
		tb.Fatalf("the last run returned %v, want a timeout or idle", err)
	}
	record(err)
	o.stats, o.workers = s.Stats(), s.Workers()
	for _, e := range b.NICs {
		o.nics = append(o.nics, e.Stats())
		for _, k := range e.Flows() {
			f, _ := e.Flow(k)
			o.flows = append(o.flows, f)
		}
	}
	for i := range s.NumSwitches() {
		o.switches = append(o.switches, s.Switch(i).Stats())
	}
	return o
}

// compare reports how two outcomes differ, or "" when they do not.
func compare(one, many outcome) string {
	switch {
	case !slices.Equal(one.comps, many.comps):
		for i := range min(len(one.comps), len(many.comps)) {
			if one.comps[i] != many.comps[i] {
				return fmt.Sprintf("completion %d: %s, on one worker %s", i, many.comps[i], one.comps[i])
			}
		}
		return fmt.Sprintf("%d completions, %d on one worker", len(many.comps), len(one.comps))
	case !slices.Equal(one.samples, many.samples):
		for i := range min(len(one.samples), len(many.samples)) {
			if one.samples[i] != many.samples[i] {
				return fmt.Sprintf("AtGlobal sample %d differs:\n%.400s\non one worker\n%.400s", i, many.samples[i], one.samples[i])
			}
		}
		return fmt.Sprintf("%d AtGlobal samples, %d on one worker", len(many.samples), len(one.samples))
	case !slices.Equal(one.runs, many.runs):
		return fmt.Sprintf("runs ended %q, on one worker %q", many.runs, one.runs)
	case one.stats != many.stats:
		return fmt.Sprintf("stats %+v, on one worker %+v", many.stats, one.stats)
	case !reflect.DeepEqual(one.nics, many.nics), !reflect.DeepEqual(one.flows, many.flows):
		return "NIC or flow counters differ"
	case !reflect.DeepEqual(one.switches, many.switches):
		return "switch counters differ"
	}
	return ""
}

// A run on any number of workers is the run on one (and an AtGlobal
// callback reads every switch and Stats as on one): on random small
// fabrics (stars, leaf-spines packed and interleaved, fat trees), links
// with and without jitter, trimming and ECN, payloads or none, and a
// workload whose callbacks post more work and start half of it from an At
// callback, over three runs that end on a condition, on a condition again
// and on the limit, every completion and its time, every counter and the
// scheduler's Stats are the same for every worker count from 2 to 8.
func TestParallelMatchesSerial(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawCase(t)
		workers := rapid.IntRange(2, 8).Draw(t, "workers")
		one := c.play(t, 1)
		many := c.play(t, workers)
		if len(one.comps) == 0 {
			t.Fatalf("nothing completed: %q", one.runs)
		}
		// (a star's one switch goes with hosts it reaches without delay)
		if one.workers != 1 || many.workers < 2 && !(c.hostDelay == 0 && len(c.topo.Switches) == 1) {
			t.Fatalf("ran on %d and %d workers, want 1 and several", one.workers, many.workers)
		}
		if d := compare(one, many); d != "" {
			t.Fatalf("on %d workers: %s", workers, d)
		}
	})
}

// The benchmark's load, a fat tree kept busy, is the same on 1, 2, 3 and
// 5 workers after thousands of hops with packets trimmed.
func TestParallelLoadMatchesSerial(t *testing.T) {
	play := func(workers int) outcome {
		l := newLoadMode(t, 16, false, 24<<10)
		s := l.b.Sim
		s.SetWorkers(workers)
		var o outcome
		prev := s.OnCompletion
		s.OnCompletion = func(host int, c nic.Completion) {
			o.comps = append(o.comps, fmt.Sprintf("%v host %d %+v", s.Now(), host, c))
			prev(host, c)
		}
		err := s.RunUntil(func() bool { return false }, 300*time.Microsecond)
		o.runs = append(o.runs, fmt.Sprintf("%v at %v", err, s.Now()))
		o.stats, o.workers, o.buffers = s.Stats(), s.Workers(), s.BuffersMade()
		for _, e := range l.b.NICs {
			o.nics = append(o.nics, e.Stats())
		}
		for i := range s.NumSwitches() {
			o.switches = append(o.switches, s.Switch(i).Stats())
		}
		return o
	}
	one := play(1)
	if one.stats.PacketHops < 10000 {
		t.Fatalf("%d hops: the load did not run", one.stats.PacketHops)
	}
	for _, workers := range []int{2, 3, 5} {
		many := play(workers)
		if many.workers != workers {
			t.Errorf("ran on %d workers, want %d", many.workers, workers)
		}
		if d := compare(one, many); d != "" {
			t.Errorf("on %d workers: %s", workers, d)
		}
		// Every process reuses the buffers it frees: on several workers
		// the simulation makes about as many as on one (a switch
		// process's stock, and an arena a process, more), not one for
		// every packet that crossed a cut.
		if limit := 2*one.buffers + uint64(workers)*1024; many.buffers > limit {
			t.Errorf("on %d workers: %d packet buffers made, against %d on one (at most %d)", workers, many.buffers, one.buffers, limit)
		}
	}
}

// A fabric without lookahead (links of no delay) and a run with OnInstant
// stay on one worker; host links of no delay keep the hosts' switches in
// the hosts' process; OnInstant set after the split is refused.
func TestParallelNeedsLookahead(t *testing.T) {
	build := func(hostDelay, delay time.Duration) *sim.Sim {
		topo, err := sim.LeafSpine(2, 2, 1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sim.BuildFabric(sim.FabricSpec{Topology: topo, MTU: 4096, Port: switchcore.PortConfig{Rate: 10e9, Delay: delay, DataCap: 64 << 10}, HostDelay: hostDelay,
			NewNIC: func(id uint16) (*nic.Engine, error) { return nic.New(nic.DefaultConfig(id, 10e9)) }})
		if err != nil {
			t.Fatal(err)
		}
		b.Sim.SetWorkers(4)
		return b.Sim
	}
	never := func() bool { return false }
	s := build(0, 0)
	if err := s.RunUntil(never, time.Microsecond); !errors.Is(err, sim.ErrIdle) || s.Workers() != 1 {
		t.Errorf("no lookahead: %v on %d workers, want idle on 1", err, s.Workers())
	}
	s = build(0, time.Microsecond) // the leaves go with the hosts, the spine alone
	if err := s.RunUntil(never, time.Microsecond); !errors.Is(err, sim.ErrIdle) || s.Workers() != 2 {
		t.Errorf("host links without delay: %v on %d workers, want idle on 2", err, s.Workers())
	}
	s = build(time.Microsecond, time.Microsecond)
	s.OnInstant = func(time.Duration) {}
	if err := s.RunUntil(never, time.Microsecond); !errors.Is(err, sim.ErrIdle) || s.Workers() != 1 {
		t.Errorf("OnInstant: %v on %d workers, want idle on 1", err, s.Workers())
	}
	s.OnInstant = nil
	if err := s.RunUntil(never, time.Microsecond); !errors.Is(err, sim.ErrIdle) || s.Workers() != 4 {
		t.Errorf("%v on %d workers, want idle on 4", err, s.Workers())
	}
	s.OnInstant = func(time.Duration) {}
	if err := s.RunUntil(never, time.Microsecond); !errors.Is(err, sim.ErrParallelInstant) {
		t.Errorf("OnInstant after the split: %v, want ErrParallelInstant", err)
	}
}

// BenchmarkParallelRun runs the benchmark's load (a fat tree kept busy,
// payload-free) for one virtual microsecond per op on 1 and 2 workers, at
// 128 and 1,024 hosts. Beside ns/op (wall time), it reports the wall and
// CPU time per hop (CPU of every thread, from getrusage), the phases
// (windows) per op and the events per phase, and ideal-speedup: the
// events of the run over those of its critical path (each phase's busiest
// process), what a core per process could at most gain over one.
func BenchmarkParallelRun(b *testing.B) {
	for _, hosts := range []int{128, 1024} {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("hosts=%d/workers=%d", hosts, workers), func(b *testing.B) {
				l := newLoadMode(b, hosts, false, 140<<10)
				s := l.b.Sim
				s.SetWorkers(workers)
				never := func() bool { return false }
				if err := s.RunUntil(never, 20*time.Microsecond); !errors.Is(err, sim.ErrTimeout) { // warm
					b.Fatal(err)
				}
				before := s.Stats()
				ps0, _ := s.ParallelStats()
				b.ResetTimer()
				cpu0 := userCPU(b)
				if err := s.RunUntil(never, s.Now()+time.Duration(b.N)*time.Microsecond); !errors.Is(err, sim.ErrTimeout) {
					b.Fatal(err)
				}
				cpu := userCPU(b) - cpu0
				b.StopTimer()
				st := s.Stats()
				hops := float64(st.PacketHops - before.PacketHops)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/hops, "wall-ns/hop")
				b.ReportMetric(float64(cpu.Nanoseconds())/hops, "cpu-ns/hop")
				if ps, ok := s.ParallelStats(); ok {
					phases := float64(ps.Phases - ps0.Phases)
					var events, events0 uint64
					for i := range ps.Events {
						events += ps.Events[i]
						if i < len(ps0.Events) {
							events0 += ps0.Events[i]
						}
					}
					b.ReportMetric(phases/float64(b.N), "phases/op")
					b.ReportMetric(float64(events-events0)/phases, "events/phase")
					b.ReportMetric(float64(events-events0)/float64(ps.Critical-ps0.Critical), "ideal-speedup")
					b.ReportMetric(float64(ps.Events[0]-events0Of(ps0, 0))/float64(events-events0), "host-share")
				}
			})
		}
	}
}

func events0Of(ps sim.ParallelStats, i int) uint64 {
	if i < len(ps.Events) {
		return ps.Events[i]
	}
	return 0
}

// BenchmarkParallelWindow measures what a window costs beyond its events:
// two hosts on a star with 10 ns links, so windows are 5 ns long and hold
// an event or two; one op is one virtual microsecond. The wall time per
// phase on 2 workers less that of the same events on one is the
// synchronisation cost of a window (two goroutine hand-offs, the boundary
// exchange and the wire reads).
func BenchmarkParallelWindow(b *testing.B) {
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			topo, err := sim.Star(2)
			if err != nil {
				b.Fatal(err)
			}
			port := switchcore.PortConfig{Rate: 100e9, Delay: 10 * time.Nanosecond, DataCap: 1 << 20, Trim: switchcore.TrimNDP}
			bd, err := sim.BuildFabric(sim.FabricSpec{Topology: topo, MTU: 4096, Port: port, Seed: 1, HostDelay: 10 * time.Nanosecond, NewNIC: func(id uint16) (*nic.Engine, error) {
				c := nic.DefaultConfig(id, 100e9)
				c.CC, c.Forgive, c.NoPayload = congestion.KindNone, false, true
				return nic.New(c)
			}})
			if err != nil {
				b.Fatal(err)
			}
			s := bd.Sim
			s.SetWorkers(workers)
			for _, e := range [][2]int{{1, 2}, {2, 1}} {
				if err := bd.NICs[e[0]-1].CreateFlow(0, nic.FlowSpec{Peer: uint16(e[1]), ID: 1, Class: nic.ClassOther}); err != nil {
					b.Fatal(err)
				}
			}
			src, _ := bd.NICs[0].RegisterMemory(make([]byte, 1<<20))
			dst, _ := bd.NICs[1].RegisterMemory(make([]byte, 1<<20))
			post := func() {
				_ = bd.NICs[1].PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: 1, ID: 1}, WR: 1, Region: dst, Length: 1 << 20})
				_ = bd.NICs[0].PostSend(s.Now(), nic.SendReq{Key: nic.FlowKey{Peer: 2, ID: 1}, WR: 1, Region: src, Length: 1 << 20})
				s.Wake(0)
				s.Wake(1)
			}
			post()
			s.OnCompletion = func(host int, c nic.Completion) {
				if c.Kind == nic.WorkRecv {
					post()
				}
			}
			never := func() bool { return false }
			b.ResetTimer()
			if err := s.RunUntil(never, time.Duration(b.N)*time.Microsecond); !errors.Is(err, sim.ErrTimeout) {
				b.Fatal(err)
			}
			b.StopTimer()
			st := s.Stats()
			b.ReportMetric(float64(st.Events)/float64(b.N), "events/op")
			if ps, ok := s.ParallelStats(); ok {
				b.ReportMetric(float64(ps.Phases)/float64(b.N), "phases/op")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ps.Phases), "wall-ns/phase")
			}
		})
	}
}
