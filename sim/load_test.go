package sim_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/switchcore"
)

// load is a fat tree kept busy: a permutation of long-lived flows sprayed
// packet by packet over every path, each sender reposting a message as
// soon as one completes, so every host link and every fabric link carries
// traffic for as long as the run lasts.
type load struct {
	b    *sim.Build
	recv []byte // the memory every receive writes
}

// fatTreeK returns the smallest k whose fat tree holds hosts.
func fatTreeK(hosts int) int {
	k := 2
	for k*k*k/4 < hosts {
		k += 2
	}
	return k
}

const loadMsg = 256 << 10

func newLoad(tb testing.TB, hosts int) *load { return newLoadMode(tb, hosts, true, 140<<10) }

// newLoadMode builds the load with real payloads or in payload-free mode,
// with port buffers of buf bytes.
func newLoadMode(tb testing.TB, hosts int, payload bool, buf int) *load {
	tb.Helper()
	t, err := sim.FatTree(fatTreeK(hosts), hosts)
	if err != nil {
		tb.Fatal(err)
	}
	port := switchcore.PortConfig{Rate: 100e9, Delay: time.Microsecond, DataCap: buf, Trim: switchcore.TrimNDP}
	b, err := sim.BuildFabric(sim.FabricSpec{Topology: t, MTU: 4096, Port: port, Seed: 1, HostDelay: time.Microsecond, NewNIC: func(id uint16) (*nic.Engine, error) {
		c := nic.DefaultConfig(id, 100e9)
		c.CC, c.Forgive, c.Seed = congestion.KindNone, false, 1
		c.Sender.Window = 128 << 10
		c.Sender.RTOLow, c.Sender.RTOHigh = 200*time.Microsecond, time.Millisecond
		c.NoPayload = !payload
		return nic.New(c)
	}})
	if err != nil {
		tb.Fatal(err)
	}
	// a permutation with no fixed point, from a seeded generator
	rng := rand.New(rand.NewPCG(7, 11))
	dst := rng.Perm(hosts)
	for i := range dst {
		if dst[i] == i {
			j := (i + 1) % hosts
			dst[i], dst[j] = dst[j], dst[i]
		}
	}
	mem := make([]byte, loadMsg) // every send reads it, every receive writes it
	for i := range mem {
		mem[i] = byte(i%251 + 1) // never zero
	}
	recv := make([]byte, loadMsg) // every receive lands here
	src := make([]nic.RegionID, hosts)
	sink := make([]nic.RegionID, hosts)
	for h, e := range b.NICs {
		if src[h], err = e.RegisterMemory(mem); err != nil {
			tb.Fatal(err)
		}
		if sink[h], err = e.RegisterMemory(recv); err != nil {
			tb.Fatal(err)
		}
	}
	s := b.Sim
	for h := range hosts {
		x, y := h+1, dst[h]+1
		for _, e := range [][2]int{{x, y}, {y, x}} {
			if err := b.NICs[e[0]-1].CreateFlow(0, nic.FlowSpec{Peer: uint16(e[1]), ID: uint32(x), Class: nic.ClassOther, Entropy: nic.EntropySpray}); err != nil {
				tb.Fatal(err)
			}
		}
	}
	post := func(x, y int) {
		if err := b.NICs[y-1].PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: uint16(x), ID: uint32(x)}, WR: 1, Region: sink[y-1], Length: loadMsg}); err != nil {
			tb.Fatal(err)
		}
		if err := b.NICs[x-1].PostSend(s.Now(), nic.SendReq{Key: nic.FlowKey{Peer: uint16(y), ID: uint32(x)}, WR: 1, Region: src[x-1], Length: loadMsg}); err != nil {
			tb.Fatal(err)
		}
		s.Wake(x - 1)
		s.Wake(y - 1)
	}
	for h := range hosts {
		post(h+1, dst[h]+1)
		post(h+1, dst[h]+1) // two in the pipe: no gap between messages
	}
	s.OnCompletion = func(host int, c nic.Completion) {
		if c.Err != nil {
			tb.Fatalf("host %d: %v", host+1, c.Err)
		}
		if c.Kind == nic.WorkSend {
			post(host+1, int(c.Flow.Peer))
		}
	}
	return &load{b: b, recv: recv}
}

// runHops runs until n more packet hops were delivered.
func (l *load) runHops(tb testing.TB, n uint64) {
	tb.Helper()
	s := l.b.Sim
	target := s.Stats().PacketHops + n
	if err := s.RunUntil(func() bool { return s.Stats().PacketHops >= target }, time.Hour); err != nil {
		tb.Fatal(err)
	}
}

// The scheduler touches only what is due: the engine calls per event stay
// the same from 8 to 432-port fabrics. Scanning every engine at every
// event, as a naive loop does, makes them grow with the fabric.
func TestWorkPerEventDoesNotGrowWithFabric(t *testing.T) {
	perEvent := map[int]float64{}
	for _, hosts := range []int{8, 64, 256} {
		l := newLoad(t, hosts)
		l.runHops(t, 20000) // past the start
		before := l.b.Sim.Stats()
		l.runHops(t, 40000)
		after := l.b.Sim.Stats()
		ev := after.Events - before.Events
		calls := after.EngineCalls - before.EngineCalls
		perEvent[hosts] = float64(calls) / float64(ev)
		t.Logf("%d hosts: %d events, %.2f engine calls per event, %.2f events per packet hop",
			hosts, ev, perEvent[hosts], float64(ev)/float64(after.PacketHops-before.PacketHops))
		if perEvent[hosts] > 6 {
			t.Errorf("%d hosts: %.2f engine calls per event, want at most 6", hosts, perEvent[hosts])
		}
	}
	if r := perEvent[256] / perEvent[8]; r > 1.25 || r < 0.8 {
		t.Errorf("engine calls per event at 256 hosts are %.2fx those at 8, want within 0.8-1.25x", r)
	}
}

// BenchmarkPacketHop reports the cost of one packet hop (ns/op is per
// packet delivered over one link) with the events and packet hops per
// second, from 8 to 8,192 hosts on fat trees at 100 Gb/s, every packet
// carrying its payload.
func BenchmarkPacketHop(b *testing.B) { benchmarkPacketHop(b, true) }

// BenchmarkPacketHopPayloadFree is BenchmarkPacketHop in payload-free mode
// (sim.NewPayloadFree): the same events, no payload bytes.
func BenchmarkPacketHopPayloadFree(b *testing.B) { benchmarkPacketHop(b, false) }

// userCPU returns the user CPU time the process has used.
func userCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano())
}

func benchmarkPacketHop(b *testing.B, payload bool) {
	for _, hosts := range []int{8, 64, 256, 1024, 8192} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			l := newLoadMode(b, hosts, payload, 140<<10)
			l.runHops(b, uint64(200*hosts)) // warm: pools and queues at their steady size
			before := l.b.Sim.Stats()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := userCPU(b)
			l.runHops(b, uint64(b.N))
			cpu := userCPU(b) - cpu0
			b.StopTimer()
			st := l.b.Sim.Stats()
			sec := b.Elapsed().Seconds()
			// ns/op is wall time: on a shared core it includes whatever
			// else ran; the process's own CPU time per hop does not.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(st.PacketHops-before.PacketHops), "cpu-ns/hop")
			b.ReportMetric(float64(st.Events-before.Events)/sec, "events/s")
			b.ReportMetric(float64(st.PacketHops-before.PacketHops)/sec, "hops/s")
			b.ReportMetric(float64(st.Events-before.Events)/float64(st.PacketHops-before.PacketHops), "events/hop")
		})
	}
}

// loadRun is what a run of the load left: the simulator's counters and
// clock, every completion, every NIC's, flow's and switch's counters, and
// the receivers' memory.
type loadRun struct {
	stats    sim.Stats
	now      time.Duration
	comps    []string
	nics     []nic.Stats
	flows    []nic.FlowReport
	switches []switchcore.Stats
	free     bool
	recv     []byte
}

// playLoad runs 60,000 hops of the load on 16 hosts with buffers small
// enough that some packets are trimmed, with payloads or without, and
// with every switch parsing every header from its bytes (everyHop) or
// taking the parse the packet carries.
func playLoad(t *testing.T, payload, everyHop bool) loadRun {
	l := newLoadMode(t, 16, payload, 24<<10) // small buffers: some packets are trimmed
	if everyHop {
		sim.InspectEveryHop(l.b.Sim)
	}
	var r loadRun
	prev := l.b.Sim.OnCompletion
	l.b.Sim.OnCompletion = func(host int, c nic.Completion) {
		r.comps = append(r.comps, fmt.Sprintf("%v host %d %+v", l.b.Sim.Now(), host, c))
		prev(host, c)
	}
	l.runHops(t, 60000)
	r.stats, r.now, r.free, r.recv = l.b.Sim.Stats(), l.b.Sim.Now(), l.b.Sim.PayloadFree(), l.recv
	for _, e := range l.b.NICs {
		r.nics = append(r.nics, e.Stats())
		for _, k := range e.Flows() {
			f, _ := e.Flow(k)
			r.flows = append(r.flows, f)
		}
	}
	for i := range l.b.Sim.NumSwitches() {
		r.switches = append(r.switches, l.b.Sim.Switch(i).Stats())
	}
	return r
}

// Payload-free mode changes nothing the engines do: the same load with and
// without payloads runs the same events and ends with the same counters in
// every NIC and switch, completion for completion; only the receivers'
// memory differs (written with payloads, untouched without).
func TestPayloadFreeRunsAsWithPayloads(t *testing.T) {
	with, without := playLoad(t, true, false), playLoad(t, false, false)
	if with.free || !without.free {
		t.Fatalf("PayloadFree: %v with payloads, %v without", with.free, without.free)
	}
	if with.stats != without.stats || with.now != without.now {
		t.Errorf("stats %+v at %v with payloads, %+v at %v without", with.stats, with.now, without.stats, without.now)
	}
	if !slices.Equal(with.comps, without.comps) {
		t.Errorf("completions differ: %d with payloads, %d without", len(with.comps), len(without.comps))
	}
	if len(with.comps) < 16 {
		t.Errorf("%d completions: the load did not run", len(with.comps))
	}
	if !reflect.DeepEqual(with.nics, without.nics) || !reflect.DeepEqual(with.flows, without.flows) {
		t.Error("NIC or flow counters differ between the modes")
	}
	if !reflect.DeepEqual(with.switches, without.switches) {
		t.Error("switch counters differ between the modes")
	}
	var trimmed uint64
	for _, sw := range with.switches {
		for _, p := range sw.Ports {
			for _, c := range p.Classes {
				trimmed += c.Trimmed.Packets
			}
		}
	}
	t.Logf("%d hops, %d completions, %d packets trimmed", with.stats.PacketHops, len(with.comps), trimmed)
	if trimmed == 0 {
		t.Error("no packet was trimmed: the comparison does not cover trimming")
	}
	if slices.Max(without.recv) != 0 {
		t.Error("payload-free receives wrote the receivers' memory")
	}
	if slices.Min(with.recv) == 0 {
		t.Error("receives with payloads left bytes of the receivers' memory unwritten")
	}
}

// A NIC must agree with the simulation about payloads: payload-free
// buffers have no room for a payload a NIC would write.
func TestPayloadFreeRefusesPayloadNICs(t *testing.T) {
	for _, free := range []bool{true, false} {
		s := sim.New(4096)
		if free {
			s = sim.NewPayloadFree(4096)
		}
		sw, err := switchcore.New(switchcore.Config{Ports: []switchcore.PortConfig{{Rate: 100e9, DataCap: 64 << 10}}})
		if err != nil {
			t.Fatal(err)
		}
		s.AddSwitch(sw)
		c := nic.DefaultConfig(1, 100e9)
		c.NoPayload = !free
		e, err := nic.New(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddHost(e, 0, 0, time.Microsecond); err == nil {
			t.Errorf("PayloadFree %v: a NIC with NoPayload %v was added", free, !free)
		}
		c.NoPayload = free
		if e, err = nic.New(c); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddHost(e, 0, 0, time.Microsecond); err != nil {
			t.Errorf("PayloadFree %v: %v", free, err)
		}
	}
}

// A header is parsed once per packet, when it leaves its host, and the
// parse travels with it from switch to switch (the switches hand it on
// with each output, inspected again after a trim): the run is the one in
// which every switch parses every header from its bytes, event for event
// and counter for counter, trims included, with payloads and without.
func TestHeaderParsedOncePerPacket(t *testing.T) {
	for _, payload := range []bool{true, false} {
		once, every := playLoad(t, payload, false), playLoad(t, payload, true)
		if once.stats != every.stats || once.now != every.now {
			t.Errorf("payload %v: stats %+v at %v parsing once, %+v at %v parsing at every hop", payload, once.stats, once.now, every.stats, every.now)
		}
		if !slices.Equal(once.comps, every.comps) || len(once.comps) < 16 {
			t.Errorf("payload %v: %d completions parsing once, %d at every hop, or they differ", payload, len(once.comps), len(every.comps))
		}
		if !reflect.DeepEqual(once.nics, every.nics) || !reflect.DeepEqual(once.flows, every.flows) {
			t.Errorf("payload %v: NIC or flow counters differ", payload)
		}
		if !reflect.DeepEqual(once.switches, every.switches) {
			t.Errorf("payload %v: switch counters differ", payload)
		}
		var trimmed uint64
		for _, sw := range once.switches {
			for _, p := range sw.Ports {
				for _, c := range p.Classes {
					trimmed += c.Trimmed.Packets
				}
			}
		}
		if trimmed == 0 {
			t.Errorf("payload %v: no packet was trimmed: the comparison does not cover a header rewritten on the way", payload)
		}
	}
}
