package topo

import (
	"bytes"
	"errors"
	"io/fs"
	"math/big"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/topologies"
)

func TestShippedTopologiesLoad(t *testing.T) {
	ts := shippedTopologies(t)
	for _, want := range []string{"star-8", DefaultTopology, "leaf-spine-2x4-4to1", "leaf-spine-2x4-2spines", "leaf-spine-2x4-nonblocking"} {
		if ts[want] == nil {
			t.Errorf("topology %q is not shipped", want)
		}
	}
	for name, tp := range ts {
		if tp.Name != name {
			t.Errorf("%s.yaml is named %q", name, tp.Name)
		}
	}
	def := ts[DefaultTopology]
	if def.Leaves != 2 || def.HostsPerLeaf != 4 || def.Spines != 1 || def.Oversubscription.Rat().Cmp(big.NewRat(2, 1)) != 0 || def.Placement != Interleaved {
		t.Errorf("the default is %+v, want 2 leaves x 4 hosts, 1 spine, 2:1, interleaved", def)
	}
	if ts["leaf-spine-2x4-2spines"].Spines != 2 {
		t.Error("leaf-spine-2x4-2spines has no second spine")
	}
}

func TestEmbeddedTopologiesMatchTheFiles(t *testing.T) {
	for _, name := range Names(topologies.Files) {
		embedded, err := fs.ReadFile(topologies.Files, name+".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if disk := readText(t, filepath.Join(topologyDir, name+".yaml")); !bytes.Equal(embedded, []byte(disk)) {
			t.Errorf("%s: embedded copy differs", name)
		}
	}
	if got, want := len(Names(topologies.Files)), len(shippedTopologies(t)); got != want {
		t.Errorf("%d topologies embedded, %d on disk", got, want)
	}
}

func TestBadTopologiesNameTheField(t *testing.T) {
	good := readText(t, filepath.Join(topologyDir, "leaf-spine-2x4.yaml"))
	cases := []struct{ old, new, want string }{
		{"kind: leaf-spine", "kind: torus", `kind: "torus": unknown kind`},
		{"spines: 1", "spines: 1\nspine_rate: 10Gbps", "spine_rate: unknown field"},
		{"spines: 1", "spines: 0", "spines: 0: want at least 1"},
		{"leaves: 2", "leaves: 1", "leaves: 1: a leaf-spine needs at least 2 leaves"},
		{`oversubscription: "2:1"`, `oversubscription: "2:0"`, `oversubscription: "2:0": want a ratio`},
		{`oversubscription: "2:1"`, "", "oversubscription: missing"},
		{"placement: interleaved", "placement: random", `placement: "random": unknown placement`},
		{"leaves: 2", "leaves: 2\nhosts: 8", "hosts: only for kind star"},
		{"hosts_per_leaf: 4", "hosts_per_leaf: four", "hosts_per_leaf: cannot unmarshal"},
		{"placement: interleaved", "placement: interleaved\nswitch: {ecn: {kmin_frac: 0.5, kmax_frac: 0.25}}",
			"switch.ecn.kmax_frac: 0.25 is below kmin_frac 0.5"},
		{"placement: interleaved", "placement: interleaved\nswitch: {buffer_bdp: 0}", "switch.buffer_bdp: must be positive"},
		{"placement: interleaved", "placement: interleaved\nswitch: {trim: sometimes}", `switch.trim: "sometimes": unknown trim mode`},
		{"placement: interleaved", "placement: interleaved\nswitch: {pfc: {xoff_frac: 0.5, xon_frac: 0.6}}", "switch.pfc.xon_frac: 0.6 is above xoff_frac 0.5"},
		{"placement: interleaved", "placement: interleaved\nfaults: [{switch: leaf1, port: up1, loss: 2}]", "faults[0].loss: 2: want at most 1"},
		{"placement: interleaved", "placement: interleaved\nfaults: [{port: up1, down_from: 2s, down_until: 1s}]", "faults[0].switch: missing"},
		{"placement: interleaved", "placement: interleaved\nfaults: [{switch: leaf1, port: up1, down_from: 2s, down_until: 1s}]",
			"faults[0].down_until: 1s is before down_from 2s"},
	}
	for _, c := range cases {
		_, err := ParseTopology([]byte(replace(t, good, c.old, c.new)))
		if err == nil {
			t.Errorf("%q -> %q: accepted", c.old, c.new)
			continue
		}
		if !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q -> %q:\n got %v\nwant %q", c.old, c.new, err, c.want)
		}
	}
}

func TestStarRefusesLeafSpineFields(t *testing.T) {
	_, err := ParseTopology([]byte("name: s\nkind: star\nhosts: 4\nspines: 2\nplacement: packed\n"))
	for _, want := range []string{"spines: only for kind leaf-spine", "placement: only for kind leaf-spine"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

// "The number of ranks may be given at run time: topologies scale
// hosts_per_leaf accordingly or reject a count that does not fit."
func TestRanksScaleHostsPerLeafOrAreRefused(t *testing.T) {
	ls := mustTopology(t, DefaultTopology)
	got, err := ls.WithRanks(16)
	if err != nil || got.HostsPerLeaf != 8 || got.Leaves != 2 || got.Spines != 1 || got.Ranks() != 16 {
		t.Errorf("16 ranks: %+v, %v; want 2 leaves x 8 hosts", got, err)
	}
	if ls.HostsPerLeaf != 4 {
		t.Error("WithRanks changed the original")
	}
	// Scaling hosts_per_leaf scales the uplinks, so the ratio holds.
	if r := got.UplinkRate(100e6); r != 400e6 {
		t.Errorf("uplink at 16 ranks = %v, want 400Mbps (8 x 100 Mb/s / 2)", r)
	}
	for _, n := range []int{9, 1, 3} {
		_, err := ls.WithRanks(n)
		if !errors.Is(err, ErrPlace) || !strings.Contains(err.Error(), "give a multiple of 2") {
			t.Errorf("%d ranks: got %v", n, err)
		}
	}
	star := mustTopology(t, "star-8")
	if got, err := star.WithRanks(5); err != nil || got.Hosts != 5 {
		t.Errorf("star, 5 ranks: %+v, %v", got, err)
	}
	for _, n := range []int{1, MaxSimHosts + 1} {
		if _, err := star.WithRanks(n); !errors.Is(err, ErrPlace) || !strings.Contains(err.Error(), "ranks: ") {
			t.Errorf("star, %d ranks: got %v", n, err)
		}
	}
}

func TestUplinkRateIsHostCapacityOverRatioAndSpines(t *testing.T) {
	cases := []struct {
		name string
		want units.Rate
	}{
		{DefaultTopology, 200e6},              // 4 x 100 / 2
		{"leaf-spine-2x4-4to1", 100e6},        // 4 x 100 / 4
		{"leaf-spine-2x4-2spines", 100e6},     // 4 x 100 / 2, over 2 spines
		{"leaf-spine-2x4-nonblocking", 400e6}, // 4 x 100 / 1
		{"star-8", 0},
	}
	for _, c := range cases {
		if got := mustTopology(t, c.name).UplinkRate(100e6); got != c.want {
			t.Errorf("%s: uplink %v, want %v", c.name, got, c.want)
		}
	}
	r, err := ParseRatio("3:1")
	if err != nil {
		t.Fatal(err)
	}
	odd := &Topology{Kind: KindLeafSpine, Leaves: 2, HostsPerLeaf: 4, Spines: 1, Oversubscription: &r}
	if got := odd.UplinkRate(100e6); got != 133_333_333 {
		t.Errorf("3:1 uplink = %v, want 133333333 (rounded to a whole bit/s)", got)
	}
}
