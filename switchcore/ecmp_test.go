package switchcore

import (
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

const spreadDst = 9

// ecmpConfig returns a switch with host A on port 0 and four equal-cost
// ports (1-4) toward host 9, like a leaf's uplinks to four spines.
func ecmpConfig(seed uint64) Config {
	port := PortConfig{Rate: 100 * gbps, DataCap: 1 << 20}
	return Config{
		Ports:  []PortConfig{port, port, port, port, port},
		Routes: map[uint16][]PortID{hostA: {0}, spreadDst: {1, 2, 3, 4}},
		Seed:   seed,
	}
}

// pathOf sends one packet with the given flow and entropy and returns the
// port it left on.
func pathOf(t *testing.T, h *harness, flow uint32, entropy uint16) PortID {
	t.Helper()
	h.recv(portA, dataPacket(hostA, spreadDst, flow, 0, entropy, 64), tosData)
	h.settle()
	out := h.takeOut()
	if len(out) != 1 {
		t.Fatalf("%d outputs, want 1", len(out))
	}
	return out[0].Port
}

// The Ordered Chaos seed sprays "subflows" by entropy: the switch must
// spread distinct entropies evenly over the equal-cost ports (Pearson's
// chi-square with 3 degrees of freedom below 16.27, the 0.1 % critical
// value), keep one entropy on one port, and move a flow that changes its
// entropy to another port most of the time (3/4 of changes with 4 ports).
func TestECMPSpreadsEntropies(t *testing.T) {
	h := newHarness(t, ecmpConfig(1))
	const n = 4000
	counts := map[PortID]int{}
	path := make([]PortID, n)
	for e := range n {
		path[e] = pathOf(t, h, 77, uint16(e))
		counts[path[e]]++
	}
	chi2 := 0.0
	for p := PortID(1); p <= 4; p++ {
		d := float64(counts[p]) - n/4
		chi2 += d * d / (n / 4)
	}
	if len(counts) != 4 || chi2 > 16.27 {
		t.Errorf("counts %v: chi-square %.2f over 16.27", counts, chi2)
	}
	changed := 0
	for e := 1; e < n; e++ {
		if path[e] != path[e-1] {
			changed++
		}
	}
	if ok, sigma := within4Sigma(changed, n-1, 0.75); !ok {
		t.Errorf("changing the entropy moved %d of %d flows, want 3/4 ± %.0f", changed, n-1, 4*sigma)
	}
	// The same entropy keeps its port, whatever else passed in between.
	for e := range 200 {
		if p := pathOf(t, h, 77, uint16(e)); p != path[e] {
			t.Fatalf("entropy %d moved from port %d to %d", e, path[e], p)
		}
	}
}

// Probes carry their subflow's entropy, so a probe takes the path of the
// data it follows; ACKs carry none and hash on (destination, flow).
func TestECMPProbesFollowTheirSubflow(t *testing.T) {
	h := newHarness(t, ecmpConfig(1))
	for e := range uint16(100) {
		data := pathOf(t, h, 5, e)
		h.recv(portA, wire.AppendProbe(nil, wire.ProbeFields{Kind: wire.ProbeTail, Entropy: e, Src: hostA, Dst: spreadDst, Flow: 5}), tosData)
		h.settle()
		if out := h.takeOut(); len(out) != 1 || out[0].Port != data {
			t.Fatalf("entropy %d: probe did not follow data on port %d", e, data)
		}
	}
	first := -1
	for range 10 {
		h.recv(portA, ackPacket(hostA, spreadDst, 5), tosAck)
		h.settle()
		p := int(h.takeOut()[0].Port)
		if first >= 0 && p != first {
			t.Fatal("ACKs of one flow took different ports")
		}
		first = p
	}
}

// The hash is salted by the seed, so two switches do not make the same
// choice for every entropy (which would polarise a multi-tier fabric), and
// one seed always makes the same choices.
func TestECMPSaltedBySeed(t *testing.T) {
	a, b, a2 := newHarness(t, ecmpConfig(1)), newHarness(t, ecmpConfig(2)), newHarness(t, ecmpConfig(1))
	const n = 1000
	same := 0
	for e := range n {
		pa := pathOf(t, a, 1, uint16(e))
		if pathOf(t, b, 1, uint16(e)) == pa {
			same++
		}
		if pathOf(t, a2, 1, uint16(e)) != pa {
			t.Fatalf("same seed, entropy %d: different ports", e)
		}
	}
	if ok, sigma := within4Sigma(same, n, 0.25); !ok {
		t.Errorf("seeds 1 and 2 agree on %d of %d entropies, want 1/4 ± %.0f", same, n, 4*sigma)
	}
}

// A destination with no route and no default route is dropped and counted;
// a default route carries destinations the table does not list.
func TestNoRouteAndDefaultRoute(t *testing.T) {
	h := newHarness(t, twoPorts())
	if r := h.recv(portA, dataPacket(hostA, 99, 1, 0, 0, 10), tosData); r != DropNoRoute {
		t.Fatalf("unknown destination: %v, want no_route", r)
	}
	if st := h.sw.Stats().Ports[portA].RxDrops[DropNoRoute]; st.Packets != 1 {
		t.Errorf("RxDrops[no_route] = %+v", st)
	}
	if len(h.spare) != 1 {
		t.Errorf("dropped buffer not reclaimed")
	}
	cfg := twoPorts()
	cfg.DefaultRoute = []PortID{portB}
	h = newHarness(t, cfg)
	h.recv(portA, dataPacket(hostA, 99, 1, 0, 0, 10), tosData)
	h.settle()
	if len(h.out) != 1 || h.out[0].Port != portB {
		t.Errorf("default route not used: %+v", h.out)
	}
}

// A route table keeps one copy of each list of ports however many
// destinations share it, and a single port in the destination's own
// entry; every lookup still picks what the list itself gives: the one
// port, or the list's port at the hashed index.
func TestRoutesShareLists(t *testing.T) {
	up := []PortID{4, 5, 6, 7}
	routes := map[uint16][]PortID{1: {0}, 2: {1}, 3: {300}, 9: {2, 3}, 10: {3, 2}}
	for d := uint16(20); d < 60; d++ {
		routes[d] = up
	}
	rt := compileRoutes(routes, []PortID{8, 9}, 42)
	if n := len(rt.ports); n != 4+2+2+2 { // up, {2,3}, {3,2}, the default
		t.Errorf("%d ports stored for the lists, want 10: one copy of each distinct list", n)
	}
	for dst := uint16(0); dst < 70; dst++ {
		want, ok := routes[dst]
		if !ok {
			want = []PortID{8, 9}
		}
		for flow := uint32(0); flow < 8; flow++ {
			h := wire.Summary{Type: wire.TypeData, Dst: dst, Flow: flow, Entropy: uint16(flow * 7)}
			got, found := rt.lookup(&h)
			w := want[0]
			if len(want) > 1 {
				w = want[ecmpIndex(rt.salt, dst, flow, h.Entropy, uint32(len(want)))]
			}
			if !found || got != w {
				t.Fatalf("dst %d flow %d: port %d %v, want %d", dst, flow, got, found, w)
			}
		}
	}
}
