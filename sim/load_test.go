package sim_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/fabric"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/sim"
)

// load is a fat tree kept busy: a permutation of long-lived flows sprayed
// packet by packet over every path, each sender reposting a message as
// soon as one completes, so every host link and every fabric link carries
// traffic for as long as the run lasts.
type load struct {
	b *sim.Build
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

func newLoad(tb testing.TB, hosts int) *load {
	tb.Helper()
	t, err := sim.FatTree(fatTreeK(hosts), hosts)
	if err != nil {
		tb.Fatal(err)
	}
	port := fabric.PortConfig{Rate: 100e9, Delay: time.Microsecond, DataCap: 140 << 10, Trim: fabric.TrimNDP}
	b, err := sim.BuildFabric(t, 4096, port, 1, time.Microsecond, func(id uint16) (*nic.Engine, error) {
		c := nic.DefaultConfig(id, 100e9)
		c.CC, c.Forgive, c.Seed = congestion.KindNone, false, 1
		c.Sender.Window = 128 << 10
		c.Sender.RTOLow, c.Sender.RTOHigh = 200*time.Microsecond, time.Millisecond
		return nic.New(c)
	})
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
	src := make([]nic.RegionID, hosts)
	sink := make([]nic.RegionID, hosts)
	for h, e := range b.NICs {
		if src[h], err = e.RegisterMemory(mem); err != nil {
			tb.Fatal(err)
		}
		if sink[h], err = e.RegisterMemory(mem); err != nil {
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
		if err := b.NICs[y-1].PostRecv(nic.FlowKey{Peer: uint16(x), ID: uint32(x)}, 1, sink[y-1], 0, loadMsg, 0); err != nil {
			tb.Fatal(err)
		}
		if err := b.NICs[x-1].PostSend(s.Now(), nic.FlowKey{Peer: uint16(y), ID: uint32(x)}, 1, src[x-1], 0, loadMsg); err != nil {
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
	return &load{b: b}
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
// second, from 8 to 1,024 hosts on fat trees at 100 Gb/s.
func BenchmarkPacketHop(b *testing.B) {
	for _, hosts := range []int{8, 64, 256, 1024} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			l := newLoad(b, hosts)
			l.runHops(b, uint64(200*hosts)) // warm: pools and queues at their steady size
			before := l.b.Sim.Stats()
			b.ReportAllocs()
			b.ResetTimer()
			l.runHops(b, uint64(b.N))
			b.StopTimer()
			st := l.b.Sim.Stats()
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(st.Events-before.Events)/sec, "events/s")
			b.ReportMetric(float64(st.PacketHops-before.PacketHops)/sec, "hops/s")
			b.ReportMetric(float64(st.Events-before.Events)/float64(st.PacketHops-before.PacketHops), "events/hop")
		})
	}
}
