package topo

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/internal/race"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/trimswitchdrv"
	"github.com/forgive-emu/forgive/wire"
)

// parsed is a plan as the daemons read it.
type parsed struct {
	plan     *Plan
	switches []*trimswitchdrv.Config
	hosts    []*forgivedrv.Config
}

func parsePlan(t *testing.T, plan *Plan) parsed {
	t.Helper()
	out := parsed{plan: plan}
	for _, s := range plan.Switches {
		c, err := trimswitchdrv.ParseConfig(s.ConfigYAML)
		if err != nil {
			t.Fatalf("%s/%s %s: %v\n%s", plan.Topology, plan.Profile, s.Name, err, s.ConfigYAML)
		}
		out.switches = append(out.switches, c)
	}
	for _, h := range plan.Hosts {
		c, err := forgivedrv.ParseConfig(h.ConfigYAML)
		if err != nil {
			t.Fatalf("%s/%s %s: %v\n%s", plan.Topology, plan.Profile, h.Name, err, h.ConfigYAML)
		}
		out.hosts = append(out.hosts, c)
	}
	return out
}

// rankCounts are the counts each topology is placed with: its own and a
// scaled one.
func rankCounts(tp *Topology) []int {
	if tp.Kind == KindStar {
		return []int{0, 3}
	}
	return []int{0, tp.Leaves * (tp.HostsPerLeaf + 1)}
}

// Every generated file passes the daemons' own parsers, for every shipped
// profile and topology: every pair in the ordinary build; under the race
// detector every topology with the default profile and every profile with
// the default topology, as placing and parsing run on one goroutine, where
// the detector finds nothing, and every pair took 6 min 40 s of lab/topo's
// 10 minutes with both cores busy at a load average of 30 to 40.
func TestEveryGeneratedConfigParses(t *testing.T) {
	profs, tops := shippedProfiles(t), shippedTopologies(t)
	pairs := 0
	for pn, prof := range profs {
		for tn, tp := range tops {
			if race.Enabled && pn != DefaultProfile && tn != DefaultTopology {
				continue
			}
			pairs++
			for _, n := range rankCounts(tp) {
				opts := testOptions(t)
				opts.Ranks = n
				pp := parsePlan(t, mustPlace(t, tp, prof, opts))
				if want := tp.Ranks(); n == 0 && len(pp.hosts) != want {
					t.Errorf("%s: %d hosts, want %d", tp.Name, len(pp.hosts), want)
				}
			}
		}
	}
	if want := len(profs) + len(tops) - 1; pairs < want {
		t.Fatalf("checked %d pairs of profile and topology, want at least %d: the default profile or topology is not among the shipped", pairs, want)
	}
	t.Logf("%d pairs of profile and topology", pairs)
}

// The daemons' parsed configurations carry what the profile derived and
// what the policy says.
func TestHostConfigCarriesProfileAndPolicy(t *testing.T) {
	prof := mustProfile(t, DefaultProfile)
	opts := testOptions(t)
	opts.Host = HostPolicy{CC: congestion.KindNone, Mode: reliability.GoBackN, Forgive: true, PLow: 0.01, PHigh: 0.2, P: 0.25, NoVesting: true, NoExemption: true}
	pp := parsePlan(t, mustPlace(t, mustTopology(t, DefaultTopology), prof, opts))
	want := prof.Params()
	for _, c := range pp.hosts {
		n, err := c.NIC()
		if err != nil {
			t.Fatal(err)
		}
		if n.LineRate != want.LineRate || n.MTU != want.MTU || n.FailAfter != want.FailAfter.Std() {
			t.Errorf("host %d: rate %v mtu %d fail_after %v", c.Host, n.LineRate, n.MTU, n.FailAfter)
		}
		if n.DCQCN.AlphaTimer != want.DCQCN.AlphaTimer.Std() || n.DCQCN.RateTimer != want.DCQCN.RateTimer.Std() ||
			n.DCQCN.ByteCounter != int64(want.DCQCN.ByteCounter) || n.DCQCN.RAI != float64(want.DCQCN.RAI) ||
			n.DCQCN.RHAI != float64(want.DCQCN.RHAI) || n.DCQCN.MinRate != float64(want.DCQCN.MinRate) ||
			n.DCQCN.F != want.DCQCN.F || n.DCQCN.G != want.DCQCN.G.Float() {
			t.Errorf("host %d: DCQCN %+v, want %+v", c.Host, n.DCQCN, want.DCQCN)
		}
		if n.Notifier.Interval != want.CNPInterval.Std() {
			t.Errorf("host %d: CNP interval %v", c.Host, n.Notifier.Interval)
		}
		if n.Sender.Window != int(want.Reliability.Window) || n.Sender.RTOLow != want.Reliability.RTOLow.Std() ||
			n.Sender.RTOHigh != want.Reliability.RTOHigh.Std() || n.Receiver.AckEvery != int(want.Reliability.AckEvery) ||
			n.Receiver.AckDelay != want.Reliability.AckDelay.Std() {
			t.Errorf("host %d: sender %+v receiver %+v", c.Host, n.Sender, n.Receiver)
		}
		if n.Sender.Mode != reliability.GoBackN || n.CC.String() != "none" {
			t.Errorf("host %d: mode %v cc %v, want the policy's", c.Host, n.Sender.Mode, n.CC)
		}
		b := n.Budget
		if !n.Forgive || b.PLow != 0.01 || b.PHigh != 0.2 || b.P != 0.25 || !b.NoVesting || !b.NoExemption {
			t.Errorf("host %d: forgive %v budget %+v, want the policy's", c.Host, n.Forgive, b)
		}
	}
}

// node is a switch of a parsed plan, found by the address of one of its
// ports.
type portRef struct{ sw, port int }

// Walking the generated routes from every host reaches every other host,
// along every ECMP choice, within the topology's diameter.
func TestRoutesReachEveryHostFromEveryHost(t *testing.T) {
	prof := mustProfile(t, DefaultProfile)
	for _, tp := range shippedTopologies(t) {
		for _, n := range rankCounts(tp) {
			opts := testOptions(t)
			opts.Ranks = n
			pp := parsePlan(t, mustPlace(t, tp, prof, opts))
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

// walk follows every path from src to dst and fails on a dead end, a
// wrong delivery or a loop.
func walk(t *testing.T, pp parsed, src, dst *forgivedrv.Config) {
	t.Helper()
	walkPaths(t, pp, src, dst, 3)
}

// walkPaths is walk through at most maxSwitches switches, and returns the
// number of distinct paths from src to dst.
func walkPaths(t *testing.T, pp parsed, src, dst *forgivedrv.Config, maxSwitches int) int {
	t.Helper()
	paths := 0
	byLocal := map[string]portRef{}
	for si, s := range pp.switches {
		for pi, p := range s.Ports {
			byLocal[p.Local] = portRef{si, pi}
		}
	}
	hostAt := map[string]uint16{}
	for _, h := range pp.hosts {
		hostAt[h.Listen] = h.Host
	}
	var visit func(at portRef, hops int)
	visit = func(at portRef, hops int) {
		s := pp.switches[at.sw]
		if hops > maxSwitches {
			t.Fatalf("%s: host %d -> %d: more than %d switches (a loop?) at %s", pp.plan.Topology, src.Host, dst.Host, maxSwitches, s.Name)
		}
		out := s.DefaultRoute
		for _, r := range s.Routes {
			for _, d := range r.Dst {
				if d == dst.Host {
					out = r.Ports
				}
			}
		}
		if len(out) == 0 {
			t.Fatalf("%s: host %d -> %d: %s has no route", pp.plan.Topology, src.Host, dst.Host, s.Name)
		}
		for _, name := range out {
			i, ok := s.PortIndex(name)
			if !ok {
				t.Fatalf("%s: route to missing port %s", s.Name, name)
			}
			next := s.Ports[i].Neighbor
			if h, ok := hostAt[next]; ok {
				if h != dst.Host {
					t.Fatalf("%s: host %d -> %d delivered to host %d by %s/%s", pp.plan.Topology, src.Host, dst.Host, h, s.Name, name)
				}
				paths++
				continue
			}
			ref, ok := byLocal[next]
			if !ok {
				t.Fatalf("%s/%s sends to %s, which nothing listens on", s.Name, name, next)
			}
			visit(ref, hops+1)
		}
	}
	first, ok := byLocal[src.Switch]
	if !ok {
		t.Fatalf("host %d is cabled to %s, which no switch port binds", src.Host, src.Switch)
	}
	visit(first, 1)
	return paths
}

// Every port's neighbour sends back to it: a host's switch address is its
// port, and a switch-to-switch cable is the same in both directions, with
// the same rate and delay.
func TestCablesAreSymmetric(t *testing.T) {
	for _, tp := range shippedTopologies(t) {
		pp := parsePlan(t, mustPlace(t, tp, mustProfile(t, DefaultProfile), testOptions(t)))
		ports := map[string]trimswitchdrv.PortSettings{}
		neighbor := map[string]string{}
		for _, s := range pp.switches {
			for i, p := range s.Ports {
				ports[p.Local], neighbor[p.Local] = s.Effective(i), p.Neighbor
			}
		}
		for _, h := range pp.hosts {
			if neighbor[h.Switch] != h.Listen {
				t.Errorf("%s: host %d sends to %s, which sends to %s", tp.Name, h.Host, h.Switch, neighbor[h.Switch])
			}
		}
		for local, peer := range neighbor {
			if _, isSwitch := neighbor[peer]; !isSwitch {
				continue
			}
			if neighbor[peer] != local {
				t.Errorf("%s: %s -> %s but %s -> %s", tp.Name, local, peer, peer, neighbor[peer])
			}
			a, b := ports[local], ports[peer]
			if *a.Rate != *b.Rate || *a.Delay != *b.Delay {
				t.Errorf("%s: cable %s-%s: rate %v/%v delay %v/%v", tp.Name, local, peer, *a.Rate, *b.Rate, *a.Delay, *b.Delay)
			}
		}
	}
}

// "interleaved (rank i on leaf i % leaves, so every ring edge crosses the
// spine)"; packed keeps neighbours together but at the leaf boundaries.
func TestPlacementOfRingNeighbours(t *testing.T) {
	tp := mustTopology(t, DefaultTopology)
	for _, n := range []int{0, 4, 16} {
		opts := testOptions(t)
		opts.Ranks = n
		plan := mustPlace(t, tp, mustProfile(t, DefaultProfile), opts)
		for r := range plan.Hosts {
			a, b := plan.Host(r), plan.Host((r+1)%len(plan.Hosts))
			if a.Rank != r || int(a.ID) != r+1 {
				t.Errorf("host %s has rank %d id %d, want rank %d id %d", a.Name, a.Rank, a.ID, r, r+1)
			}
			if a.Switch == b.Switch {
				t.Errorf("%d ranks: ring edge %d -> %d stays on %s", len(plan.Hosts), a.Rank, b.Rank, a.Switch)
			}
		}
	}
	packed := *tp
	packed.Placement = Packed
	plan := mustPlace(t, &packed, mustProfile(t, DefaultProfile), testOptions(t))
	crossing := 0
	for r := range plan.Hosts {
		if plan.Host(r).Switch != plan.Host((r+1)%len(plan.Hosts)).Switch {
			crossing++
		}
	}
	if crossing != packed.Leaves {
		t.Errorf("packed: %d ring edges cross the spine, want %d (one per leaf boundary)", crossing, packed.Leaves)
	}
}

// Every address a process binds is distinct, and all lie in the run's /24.
func TestAddressesAreUnique(t *testing.T) {
	prof := mustProfile(t, DefaultProfile)
	for _, tp := range shippedTopologies(t) {
		opts := testOptions(t)
		plan := mustPlace(t, tp, prof, opts)
		seen := map[string]string{}
		claim := func(what, addr string) {
			if prev, dup := seen[addr]; dup {
				t.Errorf("%s: %s and %s both use %s", tp.Name, prev, what, addr)
			}
			seen[addr] = what
			if ap, err := netip.ParseAddrPort(addr); err == nil && !strings.HasPrefix(ap.Addr().String(), opts.Net) {
				t.Errorf("%s: %s %s is outside %s0/24", tp.Name, what, addr, opts.Net)
			}
		}
		for _, s := range plan.Switches {
			claim(s.Name+" metrics", "tcp "+s.MetricsAddr)
			for _, p := range s.Ports {
				claim(s.Name+"/"+p.Name, "udp "+p.Local)
			}
		}
		for _, h := range plan.Hosts {
			claim(h.Name, "udp "+h.Listen)
			claim(h.Name+" metrics", "tcp "+h.MetricsAddr)
			claim(h.Name+" socket", h.Socket)
		}
	}
}

// Past 150 switch ports the plan reuses the port addresses on the next UDP
// ports, still without a collision.
func TestLargeFabricsStayUnique(t *testing.T) {
	r, _ := ParseRatio("1:1")
	big := &Topology{Name: "big", Kind: KindLeafSpine, Leaves: 8, HostsPerLeaf: 8, Spines: 8, Oversubscription: &r, Placement: Interleaved}
	plan := mustPlace(t, big, mustProfile(t, "seed-400g-paper"), testOptions(t))
	seen := map[string]bool{}
	n := 0
	for _, s := range plan.Switches {
		for _, p := range s.Ports {
			if seen[p.Local] {
				t.Fatalf("%s reused", p.Local)
			}
			seen[p.Local] = true
			n++
		}
	}
	if n != 64+2*64 {
		t.Errorf("%d ports, want 192", n)
	}
	parsePlan(t, plan)
}

// "oversubscription ratio is what the file says (sum of uplink rates vs
// host rates)", on every leaf, read back from the switch configurations.
func TestOversubscriptionIsWhatTheFileSays(t *testing.T) {
	prof := mustProfile(t, DefaultProfile)
	for _, tp := range shippedTopologies(t) {
		if tp.Kind != KindLeafSpine {
			continue
		}
		for _, n := range rankCounts(tp) {
			opts := testOptions(t)
			opts.Ranks = n
			pp := parsePlan(t, mustPlace(t, tp, prof, opts))
			for si, s := range pp.switches {
				if !strings.HasPrefix(s.Name, "leaf") {
					continue
				}
				var hosts, uplinks int64
				for i := range s.Ports {
					rate := int64(*s.Effective(i).Rate)
					if pp.plan.Switches[si].Ports[i].Role == RoleHost {
						hosts += rate
					} else {
						uplinks += rate
					}
				}
				got := big.NewRat(hosts, uplinks)
				if got.Cmp(tp.Oversubscription.Rat()) != 0 {
					t.Errorf("%s (%d ranks) %s: hosts %d / uplinks %d = %v, want %v", tp.Name, n, s.Name, hosts, uplinks, got.FloatString(3), tp.Oversubscription)
				}
			}
		}
	}
}

// "auto" link delays make the longest path's estimated RTT the profile's
// base RTT, less at most the rounding of the delay on each link.
func TestAutoDelayMeetsTheBaseRTT(t *testing.T) {
	prof := mustProfile(t, DefaultProfile)
	base := prof.Params().BaseRTT
	for _, tp := range shippedTopologies(t) {
		plan := mustPlace(t, tp, prof, testOptions(t))
		links := 2 * 3 // host-leaf-spine-leaf-host: three switch egress links each way
		if tp.Kind == KindStar {
			links = 2
		}
		slack := units.Duration(links) * units.Duration(time.Microsecond)
		if plan.PathRTT > base || plan.PathRTT < base-slack {
			t.Errorf("%s: path RTT %v with delay %v, want %v less under %v", tp.Name, plan.PathRTT, plan.LinkDelay, base, slack)
		}
		if len(plan.Warnings) != 0 {
			t.Errorf("%s: %v", tp.Name, plan.Warnings)
		}
	}
}

// The RTT estimate, by hand, for the default: a 4202-byte frame (4096 +
// 40 header + 66 framing) takes 336.16 us at 100 Mb/s and 168.08 us at
// 200 Mb/s; an ACK frame (106 bytes) 8.48 us and 4.24 us.
func TestPathRTTByHand(t *testing.T) {
	p := mustProfile(t, DefaultProfile).Params()
	links := []units.Rate{200e6, 200e6, 100e6}
	data := 336_160 + 168_080 + 168_080 + 336_160 // host NIC, up, down, host port
	ack := 8_480 + 4_240 + 4_240 + 8_480
	hops := 3 * 2 * 50_000 // three switches, both ways
	prop := 6 * 100_000    // six links at 100 us
	want := units.Duration(data + ack + hops + prop)
	if got := pathRTT(links, p, units.Duration(100*time.Microsecond)); got != want {
		t.Errorf("path RTT = %v, want %v", got, want)
	}
}

func TestExplicitLinkDelayIsUsedAsWritten(t *testing.T) {
	text := replace(t, readText(t, profileDir+"/loopback.yaml"), "link_delay: auto", "link_delay: 300us")
	prof, err := ParseProfile([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	plan := mustPlace(t, mustTopology(t, DefaultTopology), prof, testOptions(t))
	want := pathRTT([]units.Rate{200e6, 200e6, 100e6}, prof.Params(), units.Duration(300*time.Microsecond))
	if plan.LinkDelay != units.Duration(300*time.Microsecond) || plan.PathRTT != want {
		t.Errorf("delay %v path RTT %v, want 300us and %v", plan.LinkDelay, plan.PathRTT, want)
	}
	for _, s := range parsePlan(t, plan).switches {
		for i := range s.Ports {
			if d := s.Effective(i).Delay; d == nil || d.Std() != 300*time.Microsecond {
				t.Errorf("%s/%s: delay %v", s.Name, s.Ports[i].Name, d)
			}
		}
	}
}

func TestDeriveRefusesZeroInputs(t *testing.T) {
	prof := mustProfile(t, DefaultProfile)
	emu := prof.Emulation
	emu.MTU = 0
	if _, err := Derive(prof.Reference, emu, nil); !errors.Is(err, ErrProfile) {
		t.Errorf("MTU 0: got %v", err)
	}
}

func TestAutoDelayWarnsBelowTheFloor(t *testing.T) {
	tp, err := mustTopology(t, "leaf-spine-2x4-4to1").WithRanks(4) // 2 hosts a leaf: 50 Mb/s uplinks
	if err != nil {
		t.Fatal(err)
	}
	plan := mustPlace(t, tp, mustProfile(t, DefaultProfile), testOptions(t))
	if plan.LinkDelay != 0 || len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], "above the profile's base RTT") {
		t.Errorf("delay %v, warnings %q", plan.LinkDelay, plan.Warnings)
	}
}

func TestPlaceRefusesBadOptions(t *testing.T) {
	tp, prof := mustTopology(t, DefaultTopology), mustProfile(t, DefaultProfile)
	cases := []struct {
		edit func(*PlaceOptions)
		want string
	}{
		{func(o *PlaceOptions) { o.Net = "10.0.0." }, `net: "10.0.0.": want a /24 prefix on loopback`},
		{func(o *PlaceOptions) { o.Net = "127.77.3" }, `net: "127.77.3"`},
		{func(o *PlaceOptions) { o.Net = "127.300.3." }, `net: "127.300.3."`},
		{func(o *PlaceOptions) { o.Dir = "" }, "dir: missing"},
		{func(o *PlaceOptions) { o.Dir = "/" + strings.Repeat("d", 100) }, "dir: "},
		{func(o *PlaceOptions) { o.Host.CC = congestion.Kind(9) }, `host.cc: Kind(9)`},
		{func(o *PlaceOptions) { o.Host.Mode = reliability.Mode(7) }, `host.mode: Mode(7)`},
		{func(o *PlaceOptions) { o.Host.Gather = budget.NumGatherPolicies }, `host.gather: GatherPolicy(3)`},
		{func(o *PlaceOptions) { o.Host.P = 1.5 }, "host.p: 1.5"},
		{func(o *PlaceOptions) { o.LogLevel = "loud" }, `log_level: "loud"`},
		{func(o *PlaceOptions) { o.Ranks = 7 }, "ranks: 7 ranks do not fit"},
	}
	for i, c := range cases {
		opts := testOptions(t)
		c.edit(&opts)
		_, err := Place(tp, prof, opts)
		if !errors.Is(err, ErrPlace) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d: got %v, want %q", i, err, c.want)
		}
	}
}

// Inputs that did not come through the parsers are checked too.
func TestPlaceChecksHandBuiltInputs(t *testing.T) {
	tp, prof := mustTopology(t, DefaultTopology), mustProfile(t, DefaultProfile)
	if _, err := Place(tp, &Profile{Name: "raw"}, testOptions(t)); !errors.Is(err, ErrPlace) || !strings.Contains(err.Error(), "not derived") {
		t.Errorf("underived profile: got %v", err)
	}
	raw := &Topology{Name: "raw", Kind: KindLeafSpine, Leaves: 2, HostsPerLeaf: 2, Spines: 1}
	if _, err := Place(raw, prof, testOptions(t)); !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), "oversubscription: missing") {
		t.Errorf("no oversubscription: got %v", err)
	}
}

// A topology's switch overrides and faults reach the switch files, scaled
// by the profile.
func TestTopologyOverridesReachTheSwitches(t *testing.T) {
	text := readText(t, topologyDir+"/leaf-spine-2x4.yaml") + `
switch:
  buffer_bdp: 4
  ecn: {kmin_frac: 1/4, kmax_frac: 3/4}
  trim: arrival
  pfc: {xoff_frac: 0.5, xon_frac: 0.25, headroom_bdp: 1}
faults:
  - {switch: leaf1, port: up1, loss: 0.01, jitter: 20us}
`
	tp, err := ParseTopology([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	prof := mustProfile(t, DefaultProfile)
	plan := mustPlace(t, tp, prof, testOptions(t))
	pp := parsePlan(t, plan)
	bdp := prof.Params().BDP // 25 KB
	for _, s := range pp.switches {
		fc := s.Core()
		for i, port := range fc.Ports {
			if port.DataCap != int(4*bdp) || port.ECN.KMin != int(bdp) || port.ECN.KMax != int(3*bdp) || port.Trim.String() != "arrival" {
				t.Errorf("%s/%s: %+v", s.Name, s.Ports[i].Name, port)
			}
			faulty := s.Name == "leaf1" && s.Ports[i].Name == "up1"
			if faulty != (port.Fault.Loss == 0.01 && port.Fault.Jitter == 20*time.Microsecond) {
				t.Errorf("%s/%s: fault %+v", s.Name, s.Ports[i].Name, port.Fault)
			}
		}
		pfc := fc.PFC[0]
		if !pfc.Enabled || pfc.XOff != int(2*bdp) || pfc.XOn != int(bdp) || pfc.Headroom != int(bdp) {
			t.Errorf("%s: PFC %+v", s.Name, pfc)
		}
	}
	d := plan.Derived()
	if d["switch.data_queue"] != "100KB" || d["switch.trim"] != "arrival" || !strings.Contains(d["switch.pfc"], "xoff=50KB") {
		t.Errorf("derived: data_queue %q trim %q pfc %q", d["switch.data_queue"], d["switch.trim"], d["switch.pfc"])
	}

	off := replace(t, text, "ecn: {kmin_frac: 1/4, kmax_frac: 3/4}", "ecn: {enabled: false}")
	tp, err = ParseTopology([]byte(off))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range parsePlan(t, mustPlace(t, tp, prof, testOptions(t))).switches {
		for i, port := range s.Core().Ports {
			if port.ECN.Enabled {
				t.Errorf("%s/%s marks with ECN off", s.Name, s.Ports[i].Name)
			}
		}
	}
}

func TestFaultOnAMissingPortNamesIt(t *testing.T) {
	text := readText(t, topologyDir+"/leaf-spine-2x4.yaml") + "faults: [{switch: leaf1, port: up2, loss: 0.1}, {switch: leaf9, port: up1}]\n"
	tp, err := ParseTopology([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Place(tp, mustProfile(t, DefaultProfile), testOptions(t))
	for _, want := range []string{`faults[0].port: "up2": leaf1 has no such port (have [h1 h3 h5 h7 up1])`, `faults[1].switch: "leaf9": no such switch`} {
		if !errors.Is(err, ErrPlace) || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

func TestBottleneck(t *testing.T) {
	prof := mustProfile(t, DefaultProfile)
	for name, want := range map[string]Bottleneck{
		DefaultTopology: {"leaf1", "up1"},
		"star-8":        {"sw", "h1"},
	} {
		plan := mustPlace(t, mustTopology(t, name), prof, testOptions(t))
		if plan.Bottleneck != want {
			t.Errorf("%s: bottleneck %+v, want %+v", name, plan.Bottleneck, want)
		}
		found := false
		for _, s := range plan.Switches {
			for _, p := range s.Ports {
				found = found || (s.Name == want.Switch && p.Name == want.Port)
			}
		}
		if !found {
			t.Errorf("%s: the bottleneck port does not exist", name)
		}
	}
}

// Seeds differ between processes and between runs, and repeat for the
// same run seed.
func TestSeedsDifferPerProcessAndRun(t *testing.T) {
	tp, prof := mustTopology(t, DefaultTopology), mustProfile(t, DefaultProfile)
	seeds := func(seed uint64) []uint64 {
		opts := testOptions(t)
		opts.Seed = seed
		pp := parsePlan(t, mustPlace(t, tp, prof, opts))
		var out []uint64
		for _, s := range pp.switches {
			out = append(out, s.Seed)
		}
		for _, h := range pp.hosts {
			out = append(out, h.Seed)
		}
		return out
	}
	a, b, a2 := seeds(1), seeds(2), seeds(1)
	if fmt.Sprint(a) != fmt.Sprint(a2) {
		t.Error("the same run seed gave different process seeds")
	}
	distinct := map[uint64]bool{}
	for _, s := range append(a, b...) {
		distinct[s] = true
	}
	if len(distinct) != len(a)+len(b) {
		t.Errorf("%d distinct seeds among %d", len(distinct), len(a)+len(b))
	}
}

func TestPlanDerivedAddsTheTopology(t *testing.T) {
	plan := mustPlace(t, mustTopology(t, DefaultTopology), mustProfile(t, DefaultProfile), testOptions(t))
	d := plan.Derived()
	for k, want := range map[string]string{
		"profile": DefaultProfile, "topology": DefaultTopology, "ranks": "8", "uplink_rate": "200Mbps",
		"oversubscription": "2:1", "placement": "interleaved", "switch.link_delay": plan.LinkDelay.String(),
		"path_rtt": plan.PathRTT.String(), "switch.data_queue": "209715B", "switch.pfc": "off",
	} {
		if d[k] != want {
			t.Errorf("%s = %q, want %q", k, d[k], want)
		}
	}
	d["ranks"] = "changed"
	if plan.Derived()["ranks"] != "8" {
		t.Error("Derived returned the plan's own map")
	}
}

func TestWriteWritesLoadableFiles(t *testing.T) {
	plan := mustPlace(t, mustTopology(t, DefaultTopology), mustProfile(t, DefaultProfile), testOptions(t))
	dir := t.TempDir() + "/configs"
	paths, err := plan.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range paths {
		names = append(names, name)
	}
	sort.Strings(names)
	if want := "[host1 host2 host3 host4 host5 host6 host7 host8 leaf1 leaf2 spine1]"; fmt.Sprint(names) != want {
		t.Errorf("wrote %v, want %s", names, want)
	}
	for name, path := range paths {
		var err error
		if strings.HasPrefix(name, "host") {
			var c *forgivedrv.Config
			if c, err = forgivedrv.ReadConfig(path); err == nil {
				err = c.Validate()
			}
		} else {
			_, err = trimswitchdrv.LoadConfig(path)
		}
		if err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	if _, err := os.Stat(dir + "/leaf1.yaml"); err != nil {
		t.Error(err)
	}
}

func TestCaptureNamesAFilePerSwitch(t *testing.T) {
	opts := testOptions(t)
	opts.Capture = true
	pp := parsePlan(t, mustPlace(t, mustTopology(t, DefaultTopology), mustProfile(t, DefaultProfile), opts))
	for i, s := range pp.switches {
		if want := opts.Dir + "/" + s.Name + ".pcap"; s.Capture.File != want || pp.plan.Switches[i].CaptureFile != want {
			t.Errorf("%s captures to %q", s.Name, s.Capture.File)
		}
	}
}

// The sizes the package counts are the wire's and the NIC's.
func TestWireConstantsAgree(t *testing.T) {
	if dataHeaderBytes != wire.DataLen || ackBytes != wire.AckLen || FrameOverhead != nic.DefaultOverhead || DataPort != wire.DefaultPort {
		t.Errorf("header %d/%d ack %d/%d overhead %d/%d port %d/%d", dataHeaderBytes, wire.DataLen, ackBytes, wire.AckLen,
			FrameOverhead, nic.DefaultOverhead, DataPort, wire.DefaultPort)
	}
	if MaxMTU+dataHeaderBytes > wire.MaxPayload+wire.DataLen {
		t.Errorf("MaxMTU %d above the wire's %d", MaxMTU, wire.MaxPayload)
	}
}

// emulation.socket_buffer reaches every port of every switch, and a
// profile without it leaves the switch's default.
func TestSocketBufferReachesEverySwitch(t *testing.T) {
	tp := mustTopology(t, "leaf-spine-2x4")
	text := readText(t, filepath.Join(profileDir, "loopback.yaml"))
	for _, c := range []struct {
		line string
		want units.Size
		show string
	}{
		{"", 0, "default"},
		{"\n  socket_buffer: 16MiB", 16 << 20, "16MiB"},
	} {
		prof, err := ParseProfile([]byte(replace(t, text, "  hop_latency: 50us", "  hop_latency: 50us"+c.line)))
		if err != nil {
			t.Fatal(err)
		}
		if got := prof.Params().Derived()["socket_buffer"]; got != c.show {
			t.Errorf("socket_buffer %q: derived shows %q, want %q", c.line, got, c.show)
		}
		plan := mustPlace(t, tp, prof, testOptions(t))
		for _, sw := range plan.Switches {
			if sw.Config.SocketBuffer != c.want {
				t.Errorf("socket_buffer %q: %s has %v, want %v", c.line, sw.Name, sw.Config.SocketBuffer, c.want)
			}
		}
	}
}

// emulation.spurious_rto reaches every host's reliability section, and
// every host's engine; a profile without it keeps IRN's rule.
func TestSpuriousRTOReachesEveryHost(t *testing.T) {
	tp := mustTopology(t, "leaf-spine-2x4")
	text := readText(t, filepath.Join(profileDir, "loopback.yaml"))
	for _, c := range []struct {
		line string
		want bool
	}{{"", false}, {"\n  spurious_rto: true", true}} {
		prof, err := ParseProfile([]byte(replace(t, text, "  hop_latency: 50us", "  hop_latency: 50us"+c.line)))
		if err != nil {
			t.Fatal(err)
		}
		if got := prof.Params().Derived()["spurious_rto"]; got != strconv.FormatBool(c.want) {
			t.Errorf("spurious_rto %q: derived shows %q", c.line, got)
		}
		plan := mustPlace(t, tp, prof, testOptions(t))
		for _, h := range plan.Hosts {
			n, err := h.Config.NIC()
			if err != nil {
				t.Fatal(err)
			}
			if h.Config.Reliability.SpuriousRTO != c.want || n.Sender.DetectSpuriousRTO != c.want {
				t.Errorf("spurious_rto %q: %s has %v (engine %v), want %v", c.line, h.Name, h.Config.Reliability.SpuriousRTO, n.Sender.DetectSpuriousRTO, c.want)
			}
		}
	}
}
