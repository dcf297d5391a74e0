package topo

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func netnsOptions(t *testing.T) PlaceOptions {
	opts := testOptions(t)
	opts.Network, opts.Net, opts.RunID = Namespaces, "", "t1"
	return opts
}

// The 2-leaf, 2-spine fabric of the namespace tests, by hand: "addresses
// from 10.77.0.0/16 carved into per-link /30s", hosts' cables first by
// host id, then the leaves' uplinks.
func TestNetnsAddressPlanByHand(t *testing.T) {
	opts := netnsOptions(t)
	opts.Ranks = 4
	plan := mustPlace(t, mustTopology(t, "leaf-spine-2x4-2spines"), mustProfile(t, DefaultProfile), opts)
	l := plan.Netns
	// 4096-byte payloads, a 40-byte header, 60 bytes of seal, IPv4 and
	// UDP: 4224 bytes.
	if plan.Network != Namespaces || l == nil || l.Prefix != "fgv-t1-" || l.Subnet != DefaultSubnet || l.MTU != 4224 {
		t.Fatalf("network %q layout %+v", plan.Network, l)
	}
	wantNS := "[fgv-t1-leaf1 fgv-t1-leaf2 fgv-t1-spine1 fgv-t1-spine2 fgv-t1-host1 fgv-t1-host2 fgv-t1-host3 fgv-t1-host4]"
	if got := strings.Join(l.Namespaces, " "); "["+got+"]" != wantNS {
		t.Errorf("namespaces [%s], want %s", got, wantNS)
	}
	type end struct{ ns, name, label, addr, gw string }
	want := []struct{ a, b end }{
		{end{"fgv-t1-leaf1", "fgv-t1-0a", "leaf1/h1", "10.77.0.1/30", ""}, end{"fgv-t1-host1", "fgv-t1-0b", "host1", "10.77.0.2/30", "10.77.0.1"}},
		{end{"fgv-t1-leaf2", "fgv-t1-1a", "leaf2/h2", "10.77.0.5/30", ""}, end{"fgv-t1-host2", "fgv-t1-1b", "host2", "10.77.0.6/30", "10.77.0.5"}},
		{end{"fgv-t1-leaf1", "fgv-t1-2a", "leaf1/h3", "10.77.0.9/30", ""}, end{"fgv-t1-host3", "fgv-t1-2b", "host3", "10.77.0.10/30", "10.77.0.9"}},
		{end{"fgv-t1-leaf2", "fgv-t1-3a", "leaf2/h4", "10.77.0.13/30", ""}, end{"fgv-t1-host4", "fgv-t1-3b", "host4", "10.77.0.14/30", "10.77.0.13"}},
		{end{"fgv-t1-leaf1", "fgv-t1-4a", "leaf1/up1", "10.77.128.1/30", ""}, end{"fgv-t1-spine1", "fgv-t1-4b", "spine1/down1", "10.77.128.2/30", ""}},
		{end{"fgv-t1-leaf1", "fgv-t1-5a", "leaf1/up2", "10.77.128.5/30", ""}, end{"fgv-t1-spine2", "fgv-t1-5b", "spine2/down1", "10.77.128.6/30", ""}},
		{end{"fgv-t1-leaf2", "fgv-t1-6a", "leaf2/up1", "10.77.128.9/30", ""}, end{"fgv-t1-spine1", "fgv-t1-6b", "spine1/down2", "10.77.128.10/30", ""}},
		{end{"fgv-t1-leaf2", "fgv-t1-7a", "leaf2/up2", "10.77.128.13/30", ""}, end{"fgv-t1-spine2", "fgv-t1-7b", "spine2/down2", "10.77.128.14/30", ""}},
	}
	if len(l.Links) != len(want) {
		t.Fatalf("%d links, want %d", len(l.Links), len(want))
	}
	got := func(e VethEnd) end {
		gw := ""
		if e.Gateway.IsValid() {
			gw = e.Gateway.String()
		}
		return end{e.Netns, e.Name, e.Label, e.Addr.String(), gw}
	}
	for i, w := range want {
		if a, b := got(l.Links[i].A), got(l.Links[i].B); a != w.a || b != w.b {
			t.Errorf("link %d: %+v / %+v, want %+v / %+v", i, a, b, w.a, w.b)
		}
	}
	h1 := plan.Host(0)
	if h1.Netns != "fgv-t1-host1" || h1.Listen != "10.77.0.2:4793" || h1.SwitchAddr != "10.77.0.1:4793" || h1.MetricsAddr != "127.0.0.1:9464" {
		t.Errorf("host1: %+v", h1)
	}
	if s := plan.Switches[0]; s.Netns != "fgv-t1-leaf1" || s.MetricsAddr != "127.0.0.1:9464" {
		t.Errorf("leaf1: netns %q metrics %q", s.Netns, s.MetricsAddr)
	}
}

// For every shipped topology: the daemons accept every file, every port
// binds an address of a veth end in its own namespace and sends to the
// other end of the same veth (so every neighbour is on-link and no route
// is needed but a host's default), and the routes still reach every host.
func TestNetnsPlacementIsWiredEndToEnd(t *testing.T) {
	prof := mustProfile(t, DefaultProfile)
	for _, tp := range shippedTopologies(t) {
		for _, n := range rankCounts(tp) {
			opts := netnsOptions(t)
			opts.Ranks = n
			plan := mustPlace(t, tp, prof, opts)
			pp := parsePlan(t, plan)
			checkVethEnds(t, plan)
			for _, src := range pp.hosts {
				for _, dst := range pp.hosts {
					if src.Host != dst.Host {
						walk(t, pp, src, dst)
					}
				}
			}
		}
	}
}

// checkVethEnds checks the layout against the processes' addresses.
func checkVethEnds(t *testing.T, plan *Plan) {
	t.Helper()
	type at struct{ ns, addr string }
	ends := map[at]VethEnd{}   // every end by namespace and address
	other := map[at]VethEnd{}  // the other end of the same veth
	names := map[string]bool{} // interface names, system-wide while the run lasts
	namespaces := map[string]bool{}
	for _, ns := range plan.Netns.Namespaces {
		namespaces[ns] = true
	}
	for _, v := range plan.Netns.Links {
		for _, e := range []VethEnd{v.A, v.B} {
			if len(e.Name) > 15 || !strings.HasPrefix(e.Name, plan.Netns.Prefix) || names[e.Name] {
				t.Fatalf("%s: veth end %q: longer than 15 bytes, outside the run's prefix or taken twice", plan.Topology, e.Name)
			}
			names[e.Name] = true
			if !namespaces[e.Netns] || !plan.Netns.Subnet.Contains(e.Addr.Addr()) || e.Addr.Bits() != 30 {
				t.Fatalf("%s: %+v: unknown namespace or address outside %v", plan.Topology, e, plan.Netns.Subnet)
			}
		}
		if v.A.Addr.Masked() != v.B.Addr.Masked() || v.A.Addr == v.B.Addr {
			t.Fatalf("%s: %s and %s are not two addresses of one /30", plan.Topology, v.A.Addr, v.B.Addr)
		}
		a, b := at{v.A.Netns, v.A.Addr.Addr().String()}, at{v.B.Netns, v.B.Addr.Addr().String()}
		ends[a], ends[b], other[a], other[b] = v.A, v.B, v.B, v.A
	}
	onLink := func(what, ns, local, neighbor string) {
		l, n := netip.MustParseAddrPort(local), netip.MustParseAddrPort(neighbor)
		key := at{ns, l.Addr().String()}
		if _, ok := ends[key]; !ok {
			t.Fatalf("%s: %s binds %s, which no veth end in %s carries", plan.Topology, what, local, ns)
		}
		if other[key].Addr.Addr() != n.Addr() {
			t.Fatalf("%s: %s sends to %s, not to the other end of its veth (%s)", plan.Topology, what, neighbor, other[key].Addr)
		}
	}
	for _, s := range plan.Switches {
		if !namespaces[s.Netns] || s.MetricsAddr != MetricsLocal+":9464" {
			t.Fatalf("%s: %s in %q, metrics %s", plan.Topology, s.Name, s.Netns, s.MetricsAddr)
		}
		for _, p := range s.Ports {
			onLink(s.Name+"/"+p.Name, s.Netns, p.Local, p.Neighbor)
		}
	}
	for _, h := range plan.Hosts {
		if !namespaces[h.Netns] {
			t.Fatalf("%s: %s in %q", plan.Topology, h.Name, h.Netns)
		}
		onLink(h.Name, h.Netns, h.Listen, h.SwitchAddr)
		if e := ends[at{h.Netns, netip.MustParseAddrPort(h.Listen).Addr().String()}]; e.Gateway.String()+":4793" != h.SwitchAddr {
			t.Fatalf("%s: %s's default route goes via %v, not its switch port %s", plan.Topology, h.Name, e.Gateway, h.SwitchAddr)
		}
	}
}

// The largest fabric the address plan holds keeps its veth names within
// the kernel's 15 bytes and its /30s inside the subnet.
func TestNetnsLargestFabricFits(t *testing.T) {
	r, _ := ParseRatio("1:1")
	big := &Topology{Name: "big", Kind: KindLeafSpine, Leaves: 9, HostsPerLeaf: 11, Spines: 77, Oversubscription: &r, Placement: Interleaved}
	opts := netnsOptions(t)
	opts.RunID = "zzzzzz"
	plan := mustPlace(t, big, mustProfile(t, "seed-400g-paper"), opts)
	if n := len(plan.Netns.Links); n != 99+9*77 {
		t.Fatalf("%d links, want %d", n, 99+9*77)
	}
	checkVethEnds(t, plan)
}

func TestNetnsPlacementRefusesBadOptions(t *testing.T) {
	tp, prof := mustTopology(t, DefaultTopology), mustProfile(t, DefaultProfile)
	cases := []struct {
		edit func(*PlaceOptions)
		want string
	}{
		{func(o *PlaceOptions) { o.Network = "bridge" }, `network: "bridge": want loopback or netns`},
		{func(o *PlaceOptions) { o.RunID = "" }, `run_id: "": want 1 to 6 characters`},
		{func(o *PlaceOptions) { o.RunID = "abcdefg" }, `run_id: "abcdefg"`},
		{func(o *PlaceOptions) { o.RunID = "Ab-1" }, `run_id: "Ab-1"`},
		{func(o *PlaceOptions) { o.Subnet = netip.MustParsePrefix("10.77.0.0/24") }, "subnet: 10.77.0.0/24: want an IPv4 block of at least /16"},
		{func(o *PlaceOptions) { o.Subnet = netip.MustParsePrefix("10.77.1.0/16") }, "subnet: 10.77.1.0/16"},
		{func(o *PlaceOptions) { o.Subnet = netip.MustParsePrefix("fd00::/8") }, "subnet: fd00::/8"},
	}
	for i, c := range cases {
		opts := netnsOptions(t)
		c.edit(&opts)
		_, err := Place(tp, prof, opts)
		if !errors.Is(err, ErrPlace) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d: got %v, want %q", i, err, c.want)
		}
	}
}

// A loopback plan says so and carries no namespaces: the netns placement
// changed nothing there.
func TestLoopbackPlanHasNoNamespaces(t *testing.T) {
	plan := mustPlace(t, mustTopology(t, DefaultTopology), mustProfile(t, DefaultProfile), testOptions(t))
	if plan.Network != Loopback || plan.Netns != nil {
		t.Fatalf("network %q, layout %+v", plan.Network, plan.Netns)
	}
	for _, h := range plan.Hosts {
		if h.Netns != "" || h.MetricsAddr != "127.77.3."+h.Name[len("host"):]+":9464" {
			t.Errorf("%s: netns %q metrics %s", h.Name, h.Netns, h.MetricsAddr)
		}
	}
	for i, s := range plan.Switches {
		if s.Netns != "" || s.MetricsAddr != fmt.Sprintf("127.77.3.250:%d", MetricsPort+i) {
			t.Errorf("%s: netns %q metrics %s", s.Name, s.Netns, s.MetricsAddr)
		}
	}
}

func TestParseNetwork(t *testing.T) {
	for in, want := range map[string]Network{"": Loopback, "loopback": Loopback, "netns": Namespaces} {
		if got, err := ParseNetwork(in); err != nil || got != want {
			t.Errorf("ParseNetwork(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseNetwork("docker"); err == nil {
		t.Error("ParseNetwork(docker) accepted")
	}
}
