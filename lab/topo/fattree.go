package topo

import (
	"strconv"

	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/switchcore"
)

// A fat tree's and a rail-optimized fabric's wiring and routes, in sim's
// terms (sim.Topology, as sim.LeafSpine builds a leaf-spine's): build
// names their switches and ports, gives them rates and addresses.

// fatTree is a k-ary fat tree of hosts hosts. Switch order: edges
// (pod-major: edge e of pod p is switch p*k/2 + e), aggregations
// (likewise), cores (core c of aggregation group a is a*k/2 + c). An
// edge's ports are its hosts, in increasing host id, then its k/2
// uplinks (to the pod's aggregations in order); an aggregation's are its
// k/2 downlinks (to the pod's edges) then its k/2 uplinks (aggregation a
// of every pod reaches cores a*k/2 ... a*k/2 + k/2 - 1); a core's port p
// leads to pod p. Interleaved deals the ranks round the pods first, then
// round a pod's edges, so consecutive ranks (a ring's neighbours, a
// tensor pair) sit in different pods and their traffic crosses the core;
// packed fills edge 1 of pod 1 with ranks 0 to k/2 - 1, then edge 2.
//
// Routes: an edge routes its own hosts to their ports and everything
// else up (ECMP over its k/2 uplinks); an aggregation routes its pod's
// hosts down to their edge and everything else up (ECMP over its k/2
// core uplinks); a core routes every host down to its pod. So every pair
// of hosts in different pods has (k/2)^2 equal-cost paths, one per core.
func fatTree(k, hosts int, interleaved bool) (sim.Topology, []string) {
	h := k / 2
	edges := k * h
	edge := func(pod, e int) int { return pod*h + e }
	agg := func(pod, a int) int { return edges + pod*h + a }
	core := func(a, c int) int { return 2*edges + a*h + c }
	// slot of each host: its pod and edge
	type slot struct{ pod, e int }
	at := make([]slot, hosts)
	onEdge := make([][]int, edges) // host ids (from 1) per edge, increasing
	for r := range hosts {
		var s slot
		if interleaved {
			s = slot{r % k, (r / k) % h}
		} else {
			s = slot{r / (h * h), (r / h) % h}
		}
		at[r] = s
		onEdge[edge(s.pod, s.e)] = append(onEdge[edge(s.pod, s.e)], r+1)
	}
	t := sim.Topology{Name: "fat-tree-k" + strconv.Itoa(k)}
	t.Switches = make([]sim.SwitchSpec, 2*edges+h*h)
	names := make([]string, len(t.Switches))
	ids := func(from, n int) []switchcore.PortID {
		out := make([]switchcore.PortID, n)
		for i := range out {
			out[i] = switchcore.PortID(from + i)
		}
		return out
	}
	for i := range t.Switches {
		t.Switches[i].Routes = map[uint16][]switchcore.PortID{}
	}
	t.Hosts = make([]sim.HostSpec, hosts)
	for pod := range k {
		for e := range h {
			i := edge(pod, e)
			names[i] = "edge" + strconv.Itoa(i+1)
			n := len(onEdge[i])
			t.Switches[i].Ports = n + h
			t.Switches[i].DefaultRoute = ids(n, h)
			for p, id := range onEdge[i] {
				t.Switches[i].Routes[uint16(id)] = []switchcore.PortID{switchcore.PortID(p)}
				t.Hosts[id-1] = sim.HostSpec{Switch: i, Port: switchcore.PortID(p)}
			}
		}
		for a := range h {
			i := agg(pod, a)
			names[i] = "agg" + strconv.Itoa(i-edges+1)
			t.Switches[i].Ports = k
			t.Switches[i].DefaultRoute = ids(h, h)
		}
	}
	for a := range h {
		for c := range h {
			i := core(a, c)
			names[i] = "core" + strconv.Itoa(i-2*edges+1)
			t.Switches[i].Ports = k
		}
	}
	for id := 1; id <= hosts; id++ {
		s := at[id-1]
		for a := range h {
			t.Switches[agg(s.pod, a)].Routes[uint16(id)] = []switchcore.PortID{switchcore.PortID(s.e)}
			for c := range h {
				t.Switches[core(a, c)].Routes[uint16(id)] = []switchcore.PortID{switchcore.PortID(s.pod)}
			}
		}
	}
	// cables, lower end first (A), in the order of the lower switches'
	// uplinks
	for pod := range k {
		for e := range h {
			n := len(onEdge[edge(pod, e)])
			for a := range h {
				t.Links = append(t.Links, sim.LinkSpec{A: edge(pod, e), PA: switchcore.PortID(n + a), B: agg(pod, a), PB: switchcore.PortID(e)})
			}
		}
	}
	for pod := range k {
		for a := range h {
			for c := range h {
				t.Links = append(t.Links, sim.LinkSpec{A: agg(pod, a), PA: switchcore.PortID(h + c), B: core(a, c), PB: switchcore.PortID(pod)})
			}
		}
	}
	return t, names
}

// rail is a rail-optimized fabric: nodes of rails ranks; rank r = node x
// rails + g sits on rail g's leaf (node / nodesPerLeaf), and rail g's
// leaves are switches g*perRail ... (leaf u of rail g is switch g*perRail
// + u, named leaf<g*perRail+u+1>); the spines follow. A leaf's ports are
// its hosts, in increasing host id, then one uplink per spine; spine s's
// port l leads to leaf l. Routing is a leaf-spine's: a leaf routes its
// own hosts to their ports and everything else up (ECMP over the
// spines), a spine routes every host to its leaf.
func rail(nodes, rails, nodesPerLeaf, spines int) (sim.Topology, []string) {
	perRail := nodes / nodesPerLeaf
	leaves := rails * perRail
	hosts := nodes * rails
	t := sim.Topology{Name: "rail-" + strconv.Itoa(nodes) + "x" + strconv.Itoa(rails)}
	t.Switches = make([]sim.SwitchSpec, leaves+spines)
	names := make([]string, len(t.Switches))
	onLeaf := make([][]int, leaves)
	for r := range hosts {
		node, g := r/rails, r%rails
		l := g*perRail + node/nodesPerLeaf
		onLeaf[l] = append(onLeaf[l], r+1)
	}
	t.Hosts = make([]sim.HostSpec, hosts)
	up := make([]switchcore.PortID, spines)
	for s := range up {
		up[s] = switchcore.PortID(nodesPerLeaf + s)
	}
	for l := range leaves {
		names[l] = "leaf" + strconv.Itoa(l+1)
		sw := sim.SwitchSpec{Ports: nodesPerLeaf + spines, Routes: map[uint16][]switchcore.PortID{}, DefaultRoute: up}
		for p, id := range onLeaf[l] {
			sw.Routes[uint16(id)] = []switchcore.PortID{switchcore.PortID(p)}
			t.Hosts[id-1] = sim.HostSpec{Switch: l, Port: switchcore.PortID(p)}
		}
		t.Switches[l] = sw
	}
	for s := range spines {
		sw := sim.SwitchSpec{Ports: leaves, Routes: map[uint16][]switchcore.PortID{}}
		for id := 1; id <= hosts; id++ {
			sw.Routes[uint16(id)] = []switchcore.PortID{switchcore.PortID(t.Hosts[id-1].Switch)}
		}
		names[leaves+s] = "spine" + strconv.Itoa(s+1)
		t.Switches[leaves+s] = sw
	}
	for l := range leaves {
		for s := range spines {
			t.Links = append(t.Links, sim.LinkSpec{A: l, PA: up[s], B: leaves + s, PB: switchcore.PortID(l)})
		}
	}
	return t, names
}
