package topo

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/topologies"
)

// simOptions places in the simulator's network.
func simOptions(t *testing.T) PlaceOptions {
	o := testOptions(t)
	o.Network = Simulated
	return o
}

func mustNamed(t *testing.T, name string) *Topology {
	t.Helper()
	tp, err := OpenTopology(topologies.Files, name)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// hostSwitch is each rank's switch in a plan.
func hostSwitch(plan *Plan) []string {
	out := make([]string, len(plan.Hosts))
	for _, h := range plan.Hosts {
		out[h.Rank] = h.Switch
	}
	return out
}

// "Routing and ECMP on each": on fat trees (whole and partly filled, both
// placements) and rail-optimized fabrics (one and several leaves per
// rail), walking the generated routes from every host reaches every other
// host along every ECMP choice, and the number of equal-cost paths is the
// kind's: 1 on a shared switch, (k/2) through an aggregation, (k/2)^2
// through the cores; 1 on a shared leaf, one per spine otherwise.
func TestNewKindsReachEveryHostAlongEveryEqualCostPath(t *testing.T) {
	prof := mustProfile(t, DefaultProfile)
	fat := func(k, hosts int, pl Placement) *Topology {
		return &Topology{Name: "ft", Kind: KindFatTree, K: k, Hosts: hosts, Placement: pl}
	}
	r1, _ := ParseRatio("1:1")
	rail := func(nodes, rails, npl, spines int) *Topology {
		return &Topology{Name: "rail", Kind: KindRail, Nodes: nodes, Rails: rails, NodesPerLeaf: npl, Spines: spines, Oversubscription: &r1}
	}
	for _, tp := range []*Topology{
		fat(4, 0, Interleaved), fat(4, 0, Packed), fat(6, 30, Interleaved), fat(6, 30, Packed),
		rail(4, 4, 0, 2), rail(6, 2, 2, 3), rail(2, 8, 1, 1),
	} {
		plan := mustPlace(t, tp, prof, simOptions(t))
		pp := parsePlan(t, plan)
		sw := hostSwitch(plan)
		pod := func(rank int) int { // a fat tree's pod, from the edge's number
			var e int
			for i, s := range plan.Switches {
				if s.Name == sw[rank] {
					e = i
				}
			}
			return e / (tp.K / 2)
		}
		leafOfRail := func(rank int) string { return sw[rank] }
		for a, src := range pp.hosts {
			for b, dst := range pp.hosts {
				if a == b {
					continue
				}
				max, want := 3, 1
				switch {
				case tp.Kind == KindFatTree:
					max = 5
					h := tp.K / 2
					switch {
					case sw[a] == sw[b]:
					case pod(a) == pod(b):
						want = h
					default:
						want = h * h
					}
				case leafOfRail(a) != leafOfRail(b):
					want = tp.Spines
				}
				if got := walkPaths(t, pp, src, dst, max); got != want {
					t.Fatalf("%s k=%d %d ranks: rank %d (%s) -> rank %d (%s): %d equal-cost paths, want %d",
						tp.Kind, tp.K, len(pp.hosts), a, sw[a], b, sw[b], got, want)
				}
			}
		}
	}
}

// "Each rank of a node on its own rail leaf": rank r = node x rails + g
// sits on a leaf of rail g, with the same rank of the nodes that share
// the leaf, and never with another rank of its own node.
func TestRailPutsEachRankOfANodeOnItsRail(t *testing.T) {
	r1, _ := ParseRatio("2:1")
	tp := &Topology{Name: "rail", Kind: KindRail, Nodes: 8, Rails: 4, NodesPerLeaf: 4, Spines: 2, Oversubscription: &r1}
	plan := mustPlace(t, tp, mustProfile(t, DefaultProfile), simOptions(t))
	sw := hostSwitch(plan)
	if len(sw) != 32 || len(plan.Switches) != 4*2+2 {
		t.Fatalf("%d ranks, %d switches; want 32 and 10", len(sw), len(plan.Switches))
	}
	for r := range sw {
		for q := range sw {
			sameLeaf := sw[r] == sw[q]
			want := r%4 == q%4 && r/4/4 == q/4/4
			if sameLeaf != want {
				t.Fatalf("ranks %d (%s) and %d (%s): same leaf %v, want %v", r, sw[r], q, sw[q], sameLeaf, want)
			}
		}
	}
	// a leaf's uplinks carry its 4 hosts at 2:1 over 2 spines
	if got, want := plan.UplinkRate, plan.HostRate; got != want {
		t.Errorf("uplink %v, want %v (4 hosts / 2 / 2 spines)", got, want)
	}
}

// Interleaved deals the ranks round the pods, so every ring edge and
// every tensor pair (2k, 2k+1) crosses the core; packed keeps k/2
// consecutive ranks on an edge.
func TestFatTreePlacementOfTheJobsGroups(t *testing.T) {
	prof := mustProfile(t, DefaultProfile)
	for _, k := range []int{4, 8} {
		tp := mustNamed(t, "fat-tree-k"+strconv.Itoa(k))
		plan := mustPlace(t, tp, prof, simOptions(t))
		if plan.Ranks != k*k*k/4 || len(plan.Switches) != 5*k*k/4 {
			t.Fatalf("k=%d: %d ranks, %d switches", k, plan.Ranks, len(plan.Switches))
		}
		sw := hostSwitch(plan)
		for r := range sw {
			if a, b := sw[r], sw[(r+1)%len(sw)]; a == b {
				t.Errorf("k=%d interleaved: ring edge %d stays on %s", k, r, a)
			}
		}
		packed := *tp
		packed.Placement = Packed
		sw = hostSwitch(mustPlace(t, &packed, prof, simOptions(t)))
		for r := range sw {
			if same := sw[r] == sw[(r+1)%len(sw)]; same != ((r+1)%(k/2) != 0) {
				t.Errorf("k=%d packed: ring edge %d on %s and %s", k, r, sw[r], sw[(r+1)%len(sw)])
			}
		}
	}
}

// Topologies by parameter parse as their kind, and the property holds
// over the radix: a fat tree of k has k^3/4 hosts, 5k^2/4 switches, and
// every switch-to-switch cable at the host rate; a shipped file of the
// same shape name still wins, and a name of no shape is refused listing
// the forms.
func TestTopologiesByParameter(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		k := 2 * rapid.IntRange(2, 6).Draw(rt, "k/2")
		tp, err := OpenTopology(topologies.Files, "fat-tree-k"+strconv.Itoa(k))
		if err != nil || tp.Kind != KindFatTree || tp.K != k || tp.Ranks() != k*k*k/4 || tp.Placement != Interleaved {
			rt.Fatalf("fat-tree-k%d: %+v, %v", k, tp, err)
		}
	})
	ls := mustNamed(t, "leaf-spine-16x32-8spines-4to1")
	if ls.Kind != KindLeafSpine || ls.Leaves != 16 || ls.HostsPerLeaf != 32 || ls.Spines != 8 || ls.Oversubscription.String() != "4:1" {
		t.Errorf("leaf-spine-16x32-8spines-4to1: %+v", ls)
	}
	rl := mustNamed(t, "rail-128x8")
	if rl.Kind != KindRail || rl.Nodes != 128 || rl.Rails != 8 || rl.Spines != 8 || rl.Ranks() != 1024 {
		t.Errorf("rail-128x8: %+v", rl)
	}
	if tp := mustNamed(t, "leaf-spine-8x8-4to1"); tp.Spines != 2 {
		t.Errorf("the shipped leaf-spine-8x8-4to1 lost to a name by parameter: %+v", tp)
	}
	for _, bad := range []string{"fat-tree-k5", "fat-tree-k52", "fat-tree-k0"} {
		if _, err := OpenTopology(topologies.Files, bad); !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), "k: ") {
			t.Errorf("%s: got %v, want the radix refused", bad, err)
		}
	}
	if _, err := OpenTopology(topologies.Files, "torus-4x4"); err == nil || !strings.Contains(err.Error(), "fat-tree-k<K>") {
		t.Errorf("torus-4x4: got %v, want the forms by parameter listed", err)
	}
}

// "The real placements keep their limits": loopback and namespaces refuse
// more than 99 hosts, naming the simulator; the simulator places them,
// on its wide plan, with every address distinct.
func TestOnlyTheSimulatorPlacesThousandsOfRanks(t *testing.T) {
	prof := mustProfile(t, "seed-400g-paper")
	tp := mustNamed(t, "fat-tree-k16")
	for _, net := range []Network{Loopback, Namespaces} {
		opts := testOptions(t)
		opts.Network, opts.RunID = net, "t1"
		if _, err := Place(tp, prof, opts); !errors.Is(err, ErrPlace) || !strings.Contains(err.Error(), "at most 99 hosts") || !strings.Contains(err.Error(), "--placement sim") {
			t.Errorf("%s: got %v, want 1024 ranks refused", net, err)
		}
	}
	plan := mustPlace(t, tp, prof, simOptions(t))
	if plan.Ranks != 1024 || len(plan.Switches) != 320 {
		t.Fatalf("%d ranks, %d switches", plan.Ranks, len(plan.Switches))
	}
	seen := map[string]bool{}
	claim := func(a string) {
		if seen[a] {
			t.Fatalf("%s used twice", a)
		}
		seen[a] = true
	}
	for _, s := range plan.Switches {
		claim("tcp " + s.MetricsAddr)
		for _, p := range s.Ports {
			claim("udp " + p.Local)
		}
	}
	for _, h := range plan.Hosts {
		claim("udp " + h.Listen)
		claim("tcp " + h.MetricsAddr)
	}
	// a fabric that fits the /24 keeps the loopback plan in the simulator
	small := mustPlace(t, mustTopology(t, "leaf-spine-8x8-4to1"), prof, simOptions(t))
	if got := small.Hosts[63].Listen; got != "127.77.3.64:4793" {
		t.Errorf("64 ranks in the simulator: host64 listens on %s, want the loopback plan's 127.77.3.64:4793", got)
	}
	if _, err := tp.WithRanks(MaxSimHosts + 1); err == nil {
		t.Errorf("%d ranks accepted", MaxSimHosts+1)
	}
}
