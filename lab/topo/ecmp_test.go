package topo

import (
	"math"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/switchcore"
	"github.com/forgive-emu/forgive/wire"
)

// engines are a plan's switches as the switch engine runs them, built
// from the files trimswitch would load, cabled by address.
type engines struct {
	sw     []*switchcore.Switch
	names  []string
	at     map[string]portRef // switch port by its local address
	hostOf map[string]uint16  // host id by its listen address
	next   [][]string         // each port's neighbour address
	now    time.Duration
}

func buildEngines(t *testing.T, pp parsed) *engines {
	t.Helper()
	e := &engines{at: map[string]portRef{}, hostOf: map[string]uint16{}}
	for si, c := range pp.switches {
		sw, err := switchcore.New(c.Core())
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		e.sw, e.names = append(e.sw, sw), append(e.names, c.Name)
		var next []string
		for pi, p := range c.Ports {
			e.at[p.Local] = portRef{si, pi}
			next = append(next, p.Neighbor)
		}
		e.next = append(e.next, next)
	}
	for _, h := range pp.hosts {
		e.hostOf[h.Listen] = h.Host
	}
	return e
}

// send carries one data packet from host src (cabled to the switch port
// at addr) through the switch engines and returns the switches it crossed
// and the host it reached.
func (e *engines) send(t *testing.T, addr string, src, dst uint16, flow uint32) ([]string, uint16) {
	t.Helper()
	pkt, err := wire.AppendData(nil, wire.DataFields{Src: src, Dst: dst, Flow: flow, MsgLen: 64}, make([]byte, 64))
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	at := e.at[addr]
	for range 8 {
		sw := e.sw[at.sw]
		path = append(path, e.names[at.sw])
		if r := sw.Receive(e.now, switchcore.Packet{Buf: pkt, TOS: 24 << 2, In: switchcore.PortID(at.port)}); r != 0 {
			t.Fatalf("%s dropped the packet: %v", e.names[at.sw], r)
		}
		e.now += time.Millisecond
		sw.Advance(e.now)
		out := sw.Drain(nil)
		if len(out) != 1 {
			t.Fatalf("%s: %d outputs, want 1", e.names[at.sw], len(out))
		}
		pkt = out[0].Pkt.Buf
		to := e.next[at.sw][out[0].Port]
		if h, ok := e.hostOf[to]; ok {
			return path, h
		}
		at = e.at[to]
	}
	t.Fatalf("host %d -> %d: no host after 8 switches: %v", src, dst, path)
	return nil, 0
}

// "ECMP on each": the switch engines, built from the generated files,
// spread flows between two hosts evenly over every equal-cost path: the
// (k/2)^2 cores of a fat tree between pods, every spine of a
// rail-optimized fabric between rails (Pearson's chi-square below the
// 0.1 % critical value for the paths' degrees of freedom).
func TestECMPSpreadsFlowsOverEveryEqualCostPath(t *testing.T) {
	prof := mustProfile(t, DefaultProfile)
	r1, _ := ParseRatio("1:1")
	// chi-square 0.1 % critical values by degrees of freedom
	crit := map[int]float64{3: 16.27, 8: 26.12, 15: 37.70}
	for _, c := range []struct {
		tp    *Topology
		via   string // the tier whose switch names the path
		paths int
	}{
		{&Topology{Name: "ft4", Kind: KindFatTree, K: 4, Placement: Interleaved}, "core", 4},
		{&Topology{Name: "ft6", Kind: KindFatTree, K: 6, Placement: Interleaved}, "core", 9},
		{&Topology{Name: "ft8", Kind: KindFatTree, K: 8, Placement: Interleaved}, "core", 16},
		{&Topology{Name: "rail", Kind: KindRail, Nodes: 4, Rails: 4, Spines: 4, Oversubscription: &r1}, "spine", 4},
	} {
		plan := mustPlace(t, c.tp, prof, simOptions(t))
		pp := parsePlan(t, plan)
		e := buildEngines(t, pp)
		src, dst := pp.hosts[0], pp.hosts[1] // ranks 0 and 1: other pod, other rail
		const flows = 100
		n := flows * c.paths
		count := map[string]int{}
		for f := range n {
			path, got := e.send(t, src.Switch, src.Host, dst.Host, uint32(1000+f))
			if got != dst.Host {
				t.Fatalf("%s: flow %d reached host %d, want %d", c.tp.Name, f, got, dst.Host)
			}
			for _, s := range path {
				if len(s) > len(c.via) && s[:len(c.via)] == c.via {
					count[s]++
				}
			}
		}
		chi2 := 0.0
		for _, k := range count {
			d := float64(k - flows)
			chi2 += d * d / flows
		}
		if len(count) != c.paths || chi2 > crit[c.paths-1] || math.IsNaN(chi2) {
			t.Errorf("%s: %d flows over %d %s switches, want %d evenly (chi-square %.1f, critical %.1f): %v",
				c.tp.Name, n, len(count), c.via, c.paths, chi2, crit[c.paths-1], count)
		}
	}
}
