package sim_test

import (
	"slices"
	"testing"

	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/switchcore"
)

// Both leaf-spine placements put every host on the leaf they promise, at
// a port its leaf routes it to, with every spine routing it to that leaf
// and every leaf sending the rest up all its uplinks.
func TestLeafSpinePlacements(t *testing.T) {
	const leaves, perLeaf, spines = 3, 4, 2
	for _, c := range []struct {
		name   string
		gen    func(int, int, int) (sim.Topology, error)
		leafOf func(id int) int
	}{
		{"packed", sim.LeafSpine, func(id int) int { return (id - 1) / perLeaf }},
		{"interleaved", sim.LeafSpineInterleaved, func(id int) int { return (id - 1) % leaves }},
	} {
		topo, err := c.gen(leaves, perLeaf, spines)
		if err != nil {
			t.Fatal(err)
		}
		if len(topo.Hosts) != leaves*perLeaf || len(topo.Switches) != leaves+spines || len(topo.Links) != leaves*spines {
			t.Fatalf("%s: %d hosts, %d switches, %d links", c.name, len(topo.Hosts), len(topo.Switches), len(topo.Links))
		}
		ports := map[[2]int]int{}
		for i, h := range topo.Hosts {
			id := i + 1
			if h.Switch != c.leafOf(id) {
				t.Errorf("%s: host %d on switch %d, want leaf %d", c.name, id, h.Switch, c.leafOf(id))
			}
			if prev, dup := ports[[2]int{h.Switch, int(h.Port)}]; dup {
				t.Errorf("%s: hosts %d and %d share port %d of leaf %d", c.name, prev, id, h.Port, h.Switch)
			}
			ports[[2]int{h.Switch, int(h.Port)}] = id
			if int(h.Port) >= perLeaf {
				t.Errorf("%s: host %d on port %d, past the leaf's host ports", c.name, id, h.Port)
			}
			if got := topo.Switches[h.Switch].Routes[uint16(id)]; !slices.Equal(got, []switchcore.PortID{h.Port}) {
				t.Errorf("%s: leaf routes host %d to %v, want [%d]", c.name, id, got, h.Port)
			}
			for s := leaves; s < leaves+spines; s++ {
				if got := topo.Switches[s].Routes[uint16(id)]; !slices.Equal(got, []switchcore.PortID{switchcore.PortID(h.Switch)}) {
					t.Errorf("%s: spine %d routes host %d to %v, want [%d]", c.name, s, id, got, h.Switch)
				}
			}
		}
		for l := range leaves {
			if got := topo.Switches[l].DefaultRoute; !slices.Equal(got, []switchcore.PortID{perLeaf, perLeaf + 1}) {
				t.Errorf("%s: leaf %d default route %v, want its uplinks", c.name, l, got)
			}
		}
		if got := topo.Hops(1, 2); got != 4 && c.name == "interleaved" {
			t.Errorf("interleaved: hosts 1 and 2 are %d links apart, want 4 (different leaves)", got)
		}
	}
}
