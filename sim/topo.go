package sim

import (
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/switchcore"
)

// Topology is a fabric's wiring and routing, independent of link speeds
// and engine configs: which switch ports lead to which host or switch,
// and where each switch sends each destination. Host ids run from 1.
type Topology struct {
	Name     string
	Switches []SwitchSpec
	Hosts    []HostSpec // Hosts[i] has id i+1
	Links    []LinkSpec // switch-to-switch cables
}

// SwitchSpec is one switch's port count and routes.
type SwitchSpec struct {
	Ports        int
	Routes       map[uint16][]switchcore.PortID
	DefaultRoute []switchcore.PortID
}

// HostSpec is where a host's cable enters the fabric.
type HostSpec struct {
	Switch int
	Port   switchcore.PortID
}

// LinkSpec is a cable between two switch ports.
type LinkSpec struct {
	A  int
	PA switchcore.PortID
	B  int
	PB switchcore.PortID
}

// MaxTopologyHosts is the most hosts a generator wires: 2^15, the lab's
// simulator placement's bound (host ids are 16 bits).
const MaxTopologyHosts = 1 << 15

// Star is one switch with a port per host.
func Star(hosts int) (Topology, error) {
	if hosts < 1 || hosts > MaxTopologyHosts {
		return Topology{}, fmt.Errorf("sim: star of %d hosts, want 1..%d", hosts, MaxTopologyHosts)
	}
	sw := SwitchSpec{Ports: hosts, Routes: map[uint16][]switchcore.PortID{}}
	t := Topology{Name: fmt.Sprintf("star-%d", hosts)}
	for h := range hosts {
		sw.Routes[uint16(h+1)] = []switchcore.PortID{switchcore.PortID(h)}
		t.Hosts = append(t.Hosts, HostSpec{Switch: 0, Port: switchcore.PortID(h)})
	}
	t.Switches = []SwitchSpec{sw}
	return t, nil
}

// LeafSpine is a two-tier Clos: leaves of hostsPerLeaf hosts, each with one
// uplink to every spine (oversubscribed hostsPerLeaf:spines). Leaf l's
// ports are its hosts then its uplinks; spine s's port l leads to leaf l.
// Switches 0..leaves-1 are the leaves. The hosts are packed: leaf l holds
// hosts l*hostsPerLeaf+1 to (l+1)*hostsPerLeaf.
func LeafSpine(leaves, hostsPerLeaf, spines int) (Topology, error) {
	return leafSpine(leaves, hostsPerLeaf, spines, false)
}

// LeafSpineInterleaved is LeafSpine with the hosts dealt round the leaves:
// host h sits on leaf (h-1) mod leaves, so consecutive hosts (a ring's
// neighbours) are on different leaves. Leaf l's host ports still come
// first, its hosts in increasing order.
func LeafSpineInterleaved(leaves, hostsPerLeaf, spines int) (Topology, error) {
	return leafSpine(leaves, hostsPerLeaf, spines, true)
}

func leafSpine(leaves, hostsPerLeaf, spines int, interleaved bool) (Topology, error) {
	if leaves < 1 || hostsPerLeaf < 1 || spines < 1 || leaves*hostsPerLeaf > MaxTopologyHosts || hostsPerLeaf+spines > 4096 || leaves > 4096 {
		return Topology{}, fmt.Errorf("sim: leaf-spine of %d leaves x %d hosts, %d spines out of range", leaves, hostsPerLeaf, spines)
	}
	t := Topology{Name: fmt.Sprintf("leaf-spine-%dx%d-%d", leaves, hostsPerLeaf, spines)}
	if interleaved {
		t.Name += "-interleaved"
	}
	up := make([]switchcore.PortID, spines)
	for s := range up {
		up[s] = switchcore.PortID(hostsPerLeaf + s)
	}
	t.Hosts = make([]HostSpec, leaves*hostsPerLeaf)
	for l := range leaves {
		sw := SwitchSpec{Ports: hostsPerLeaf + spines, Routes: map[uint16][]switchcore.PortID{}, DefaultRoute: up}
		for p := range hostsPerLeaf {
			id := l*hostsPerLeaf + p + 1
			if interleaved {
				id = p*leaves + l + 1
			}
			sw.Routes[uint16(id)] = []switchcore.PortID{switchcore.PortID(p)}
			t.Hosts[id-1] = HostSpec{Switch: l, Port: switchcore.PortID(p)}
		}
		t.Switches = append(t.Switches, sw)
	}
	for s := range spines {
		sw := SwitchSpec{Ports: leaves, Routes: map[uint16][]switchcore.PortID{}}
		for h := range t.Hosts {
			sw.Routes[uint16(h+1)] = []switchcore.PortID{switchcore.PortID(t.Hosts[h].Switch)}
		}
		t.Switches = append(t.Switches, sw)
		for l := range leaves {
			t.Links = append(t.Links, LinkSpec{A: l, PA: up[s], B: leaves + s, PB: switchcore.PortID(l)})
		}
	}
	return t, nil
}

// FatTree is a k-ary fat tree (Al-Fares et al.): k pods of k/2 edge and k/2
// aggregation switches, (k/2)^2 cores, room for k^3/4 hosts, every switch
// with k ports. hosts fills the edge switches in order (pod by pod); the
// switches of empty pods are still built. Upward traffic is spread over
// every uplink by ECMP; downward it has one path. Switch order: edges
// (pod-major), aggregations (pod-major), cores.
func FatTree(k, hosts int) (Topology, error) {
	if k < 2 || k%2 != 0 || k > 64 {
		return Topology{}, fmt.Errorf("sim: fat tree k = %d, want an even 2..64", k)
	}
	h := k / 2
	if hosts < 1 || hosts > k*h*h {
		return Topology{}, fmt.Errorf("sim: fat tree k = %d holds 1..%d hosts, not %d", k, k*h*h, hosts)
	}
	t := Topology{Name: fmt.Sprintf("fat-tree-k%d-%d", k, hosts)}
	edge := func(pod, e int) int { return pod*h + e }
	agg := func(pod, a int) int { return k*h + pod*h + a }
	core := func(a, c int) int { return 2*k*h + a*h + c }
	perPod := h * h
	lower := make([]switchcore.PortID, h)
	upper := make([]switchcore.PortID, h)
	for i := range h {
		lower[i], upper[i] = switchcore.PortID(i), switchcore.PortID(h+i)
	}
	t.Switches = make([]SwitchSpec, k*k+h*h)
	for i := range t.Switches {
		t.Switches[i] = SwitchSpec{Ports: k, Routes: map[uint16][]switchcore.PortID{}}
	}
	for id := 1; id <= hosts; id++ {
		pod, e, slot := (id-1)/perPod, (id-1)%perPod/h, (id-1)%h
		t.Hosts = append(t.Hosts, HostSpec{Switch: edge(pod, e), Port: switchcore.PortID(slot)})
		t.Switches[edge(pod, e)].Routes[uint16(id)] = []switchcore.PortID{switchcore.PortID(slot)}
		for a := range h {
			t.Switches[agg(pod, a)].Routes[uint16(id)] = []switchcore.PortID{switchcore.PortID(e)}
			for c := range h {
				t.Switches[core(a, c)].Routes[uint16(id)] = []switchcore.PortID{switchcore.PortID(pod)}
			}
		}
	}
	for pod := range k {
		for e := range h {
			t.Switches[edge(pod, e)].DefaultRoute = upper
			for a := range h {
				t.Links = append(t.Links, LinkSpec{A: edge(pod, e), PA: upper[a], B: agg(pod, a), PB: lower[e]})
			}
		}
		for a := range h {
			t.Switches[agg(pod, a)].DefaultRoute = upper
			for c := range h {
				t.Links = append(t.Links, LinkSpec{A: agg(pod, a), PA: upper[c], B: core(a, c), PB: switchcore.PortID(pod)})
			}
		}
	}
	return t, nil
}

// Hops returns the links a packet from host a to host b crosses (ids from
// 1): 2 through one switch, 4 through a spine or aggregation, 6 through a
// fat tree's core.
func (t *Topology) Hops(a, b int) int {
	sa, sb := t.Hosts[a-1].Switch, t.Hosts[b-1].Switch
	if sa == sb {
		return 2
	}
	// a host's switch reaches the other's by a path whose length the
	// wiring decides: search it breadth first over the links' adjacency
	// (built once per call, so a call costs O(links), not O(switches x
	// links))
	adj := map[int][]int{}
	for _, l := range t.Links {
		adj[l.A] = append(adj[l.A], l.B)
		adj[l.B] = append(adj[l.B], l.A)
	}
	dist := map[int]int{sa: 0}
	frontier := []int{sa}
	for len(frontier) > 0 {
		var next []int
		for _, s := range frontier {
			for _, n := range adj[s] {
				if _, seen := dist[n]; !seen {
					dist[n] = dist[s] + 1
					next = append(next, n)
				}
			}
		}
		frontier = next
	}
	return dist[sb] + 2
}

// FabricSpec is what BuildFabric wires: a topology, the port config every
// switch port takes, the seed of the switches' random choices (varied per
// switch, so ECMP hashes do not polarise), the NIC of each host (NewNIC,
// by host id) with the delay of its uplink, and the simulator's MTU.
type FabricSpec struct {
	Topology  Topology
	MTU       int
	Port      switchcore.PortConfig
	Seed      uint64
	HostDelay time.Duration
	NewNIC    func(id uint16) (*nic.Engine, error)
}

// Build is a Topology made real: every switch a switchcore.Switch, every
// host a NIC engine (FabricSpec).
type Build struct {
	Sim  *Sim
	NICs []*nic.Engine // NICs[i] is host id i+1, sim host i
	Topo Topology
}

// BuildFabric wires a topology into a new Sim: a payload-free one
// (NewPayloadFree) when the NICs have nic.Config.NoPayload.
func BuildFabric(spec FabricSpec) (*Build, error) {
	t := spec.Topology
	nics := make([]*nic.Engine, len(t.Hosts))
	for i := range t.Hosts {
		n, err := spec.NewNIC(uint16(i + 1))
		if err != nil {
			return nil, fmt.Errorf("sim: host %d: %w", i+1, err)
		}
		nics[i] = n
	}
	s := New(spec.MTU)
	if len(nics) > 0 && nics[0].Config().NoPayload {
		s = NewPayloadFree(spec.MTU) // AddHost checks that every NIC agrees
	}
	for i, ss := range t.Switches {
		cfg := switchcore.Config{Routes: ss.Routes, DefaultRoute: ss.DefaultRoute, Seed: spec.Seed + uint64(i)*0x9E3779B9}
		cfg.Ports = make([]switchcore.PortConfig, ss.Ports)
		for p := range cfg.Ports {
			cfg.Ports[p] = spec.Port
		}
		cfg.NewBuffer = func(n int) []byte { return make([]byte, 0, max(n, s.bufSize)) }
		sw, err := switchcore.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("sim: switch %d of %s: %w", i, t.Name, err)
		}
		s.AddSwitch(sw)
	}
	for _, l := range t.Links {
		if err := s.Connect(l.A, l.PA, l.B, l.PB); err != nil {
			return nil, err
		}
	}
	b := &Build{Sim: s, Topo: t}
	for i, h := range t.Hosts {
		n := nics[i]
		if _, err := s.AddHost(n, h.Switch, h.Port, spec.HostDelay); err != nil {
			return nil, err
		}
		b.NICs = append(b.NICs, n)
	}
	return b, nil
}
