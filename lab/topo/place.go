package topo

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/internal/splitmix"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/trimswitchdrv"
)

// The address plan inside the run's 127.a.b.0/24 (docs/topologies.md).
const (
	// MaxHosts: host h (1..99) is Net+h.
	MaxHosts = 99
	// Switch port i (0-based over the whole fabric) is Net+(100 + i%150),
	// on UDP port DataPort + i/150: one address per port up to 150 ports,
	// so a capture shows the real port on both ends.
	firstPortOctet = 100
	portOctets     = 150
	// Switch metrics: Net+250, TCP port MetricsPort + switch index.
	metricsOctet = 250
	// DataPort is the UDP port of every host and (up to 150) switch port:
	// wire.DefaultPort, which the dissector decodes.
	DataPort = 4793
	// MetricsPort is the first metrics port (Prometheus' registry number
	// for this kind of exporter); hosts serve on Net+h:MetricsPort.
	MetricsPort = 9464
	// MaxSwitchPorts bounds a fabric's switch ports: ten UDP ports on
	// each of the 150 port addresses.
	MaxSwitchPorts = 10 * portOctets
)

// HostPolicy is what a lab policy sets in every forgived.
//
// Its kinds are their own packages' types, parsed where a name enters
// (congestion.ParseKind, reliability.ParseMode, budget.ParseGatherPolicy)
// and written back by name only into forgived's file.
type HostPolicy struct {
	CC          congestion.Kind  // zero: DCQCN
	Mode        reliability.Mode // zero: selective repeat
	Forgive     bool
	PLow, PHigh float64
	P           float64
	NoVesting   bool
	NoExemption bool
	// Exemption is forgived's forgive.exemption: hold (zero, the
	// engine's rule), line-rate (DCQCN) or no-cut (NSCC).
	Exemption congestion.Exemption
	// Gather is forgived's forgive.gather: forgive (zero, the default),
	// repair or owner (docs/hostapi.md, "Gather policies").
	Gather budget.GatherPolicy
}

// DefaultHostPolicy is the seed's FORGIVE: DCQCN, selective repeat, and
// the seed's P_low, P_high and P (package budget's defaults).
func DefaultHostPolicy() HostPolicy {
	return HostPolicy{CC: congestion.KindDCQCN, Mode: reliability.SelectiveRepeat, Forgive: true,
		PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: budget.DefaultP}
}

// PlaceOptions are the run's choices.
type PlaceOptions struct {
	Ranks int    // 0: the topology's own count
	Dir   string // where sockets, captures and (usually) config files go
	// Network is Loopback (the default), Namespaces or Simulated.
	Network Network
	// Net is the run's /24 on loopback, written "127.a.b." (the caller
	// picks one no other run uses). A netns placement ignores it.
	Net string
	// RunID names a netns placement's namespaces and veths
	// (RunPrefix(RunID) + ...): 1 to MaxRunIDLen characters of [0-9a-z],
	// unique among the runs that exist at the same time.
	RunID string
	// Subnet is the block a netns placement carves into /30s; zero:
	// DefaultSubnet. Every run has its own namespaces, so concurrent runs
	// may share it.
	Subnet netip.Prefix
	Host   HostPolicy
	// RankHost, when set, is each rank's policy in place of Host (a
	// fabric shared by two jobs under two policies); it must have one
	// entry per rank.
	RankHost []HostPolicy
	Seed     uint64 // every process's seed derives from it
	Capture  bool   // every switch writes Dir/<switch>.pcap
	LogLevel string // of every process; empty: warn
	// KeyFile, when set, is the key file of security domain SealDomain,
	// which every forgived then seals every packet for (docs/security.md);
	// the caller writes it (fabric.WriteKey). Empty: plain packets.
	KeyFile string
}

// SealDomain is the security domain id of a placed fabric with a KeyFile:
// one domain, every host in it.
const SealDomain = 1

// Role is what a switch port faces.
type Role string

// Roles.
const (
	RoleHost     Role = "host"     // a forgived
	RoleUplink   Role = "uplink"   // a leaf's port toward a spine
	RoleDownlink Role = "downlink" // a spine's port toward a leaf
)

// Plan is a placed fabric: every process with its configuration.
type Plan struct {
	Profile  string
	Topology string
	Network  Network
	// Netns lists the namespaces and veths of a netns placement; nil on
	// loopback.
	Netns     *NetnsLayout
	Kind      Kind
	Ranks     int
	Placement Placement // leaf-spine only
	HostRate  units.Rate
	// UplinkRate is each leaf-spine link's rate (zero for a star).
	UplinkRate units.Rate
	LinkDelay  units.Duration // of every switch egress link
	// PathRTT estimates the unloaded RTT of the longest path: one MTU
	// packet out, its ACK back (see docs/topologies.md).
	PathRTT  units.Duration
	Switches []SwitchProc
	Hosts    []HostProc // in rank order
	// Bottleneck is the port to plot: the first leaf's first uplink of a
	// leaf-spine, rank 0's host port on a star.
	Bottleneck Bottleneck
	// Warnings are conditions worth printing that do not stop the run.
	Warnings []string

	derived map[string]string
}

// SwitchProc is one trimswitch.
type SwitchProc struct {
	Name string
	// Config is the switch's configuration, the daemon's own type;
	// ConfigYAML is its file, encoded from it.
	Config      *trimswitchdrv.Config
	ConfigYAML  []byte
	MetricsAddr string // host:port of /metrics, /ready
	CaptureFile string // empty: no capture
	Ports       []PortInfo
	Netns       string // the namespace it runs in; empty: the caller's
}

// PortInfo is one switch port.
type PortInfo struct {
	Name     string // the metrics' port label
	Local    string // UDP address the port binds
	Neighbor string // UDP address it sends to
	Rate     units.Rate
	Delay    units.Duration
	Role     Role
	Peer     string // "host3", or "spine1/down2" for a switch port
}

// HostProc is one forgived.
type HostProc struct {
	Name string // "host3"
	ID   uint16 // 1..N, the fabric's host id
	Rank int    // 0..N-1; ID is Rank+1
	// Config is the daemon's configuration, its own type; ConfigYAML is
	// its file, encoded from it.
	Config      *forgivedrv.Config
	ConfigYAML  []byte
	Socket      string // the host API's unix socket
	MetricsAddr string
	Listen      string // UDP address of the NIC
	Switch      string // the switch it is cabled to
	SwitchPort  string // that switch's port name
	SwitchAddr  string // that port's UDP address
	Netns       string // the namespace it runs in; empty: the caller's
}

// Bottleneck names a switch port.
type Bottleneck struct{ Switch, Port string }

// Derived returns the profile's derived values as this topology uses
// them (its switch overrides applied), plus the topology's own: ranks,
// placement, uplink rate, link delay, path RTT.
func (p *Plan) Derived() map[string]string {
	m := make(map[string]string, len(p.derived))
	for k, v := range p.derived {
		m[k] = v
	}
	return m
}

// Host returns the host of a rank.
func (p *Plan) Host(rank int) *HostProc {
	if rank < 0 || rank >= len(p.Hosts) {
		return nil
	}
	return &p.Hosts[rank]
}

// Place lays the topology out on loopback or in network namespaces with
// the profile's parameters and writes every process's configuration (in
// memory; Plan.Write puts it on disk).
func Place(t *Topology, prof *Profile, opts PlaceOptions) (*Plan, error) {
	var probs problems
	opts.check(&probs)
	if len(probs) > 0 {
		return nil, probs.err(ErrPlace)
	}
	if prof.Params().LineRate <= 0 {
		return nil, (problems{errors.New("profile: not derived (read it with ParseProfile, LoadProfile or OpenProfile)")}).err(ErrPlace)
	}
	t, err := t.WithRanks(opts.Ranks)
	if err != nil {
		return nil, err
	}
	if err := t.validate(); err != nil { // a topology built by hand, too
		return nil, err
	}
	if err := fits(t, opts.Network); err != nil {
		return nil, err
	}
	if opts.RankHost != nil && len(opts.RankHost) != t.Ranks() {
		return nil, (problems{fmt.Errorf("rank_host: %d policies for %d ranks", len(opts.RankHost), t.Ranks())}).err(ErrPlace)
	}
	params := prof.Params()
	sw, swDerived := switchSettings(params, t, &probs)
	f, err := build(t, params.LineRate)
	if err != nil {
		return nil, (problems{err}).err(ErrPlace)
	}
	plan := &Plan{
		Profile: prof.Name, Topology: t.Name, Network: opts.Network, Kind: t.Kind, Ranks: t.Ranks(), Placement: t.Placement,
		HostRate: params.LineRate, UplinkRate: t.UplinkRate(params.LineRate),
	}
	switch {
	case opts.Network == Namespaces:
		plan.Netns = f.addressNetns(opts, params.MTU)
	case opts.Network == Simulated && !fitsSlash24(t):
		f.addressWide()
	default:
		f.address(opts)
	}
	plan.LinkDelay, plan.PathRTT, plan.Warnings = linkDelay(f, params)
	f.applyFaults(t.Faults, &probs)
	if len(probs) > 0 {
		return nil, probs.err(ErrPlace)
	}
	if plan.Switches, err = f.switchProcs(plan, sw, opts); err != nil {
		return nil, (problems{err}).err(ErrPlace)
	}
	if plan.Hosts, err = f.hostProcs(plan, prof, opts); err != nil {
		return nil, (problems{err}).err(ErrPlace)
	}
	plan.Bottleneck = f.bottleneck
	plan.derived = plan.derive(prof, t, swDerived)
	return plan, nil
}

// fits checks that the topology fits the network's address plan: one /24
// on loopback and in namespaces, the wide plan in the simulator.
func fits(t *Topology, n Network) error {
	var p problems
	hosts, ports := MaxHosts, MaxSwitchPorts
	plan := "the address plan of one /24"
	if n == Simulated {
		hosts, ports, plan = MaxSimHosts, MaxSimSwitchPorts, "the simulator's address plan"
	}
	if t.Ranks() > hosts {
		hint := ""
		if n != Simulated {
			hint = " (the simulator places more: --placement sim)"
		}
		p.add("ranks", "%d: at most %d hosts fit %s%s", t.Ranks(), hosts, plan, hint)
	}
	if sp := t.switchPorts(); sp > ports {
		p.add("switches", "%d switch ports: at most %d fit %s", sp, ports, plan)
	}
	return p.err(ErrPlace)
}

func (o *PlaceOptions) check(p *problems) {
	o.checkNetwork(p)
	if o.Dir == "" {
		p.add("dir", "missing")
	} else if abs, err := filepath.Abs(o.Dir); err != nil {
		p.wrap("dir", err)
	} else {
		o.Dir = abs
		if sock := hostSocket(o.Dir, MaxHosts); len(sock) > forgivedrv.MaxSocketPath {
			p.add("dir", "%q is too long: a host socket path (%s) must fit %d bytes", o.Dir, sock, forgivedrv.MaxSocketPath)
		}
	}
	switch o.LogLevel {
	case "":
		o.LogLevel = "warn"
	case "debug", "info", "warn", "error":
	default:
		p.add("log_level", "%q: want debug, info, warn or error", o.LogLevel)
	}
	o.Host.check(p)
	for i := range o.RankHost {
		var q problems
		o.RankHost[i].check(&q)
		for _, e := range q {
			p.wrap(fmt.Sprintf("rank_host[%d]", i), e)
		}
	}
}

// checkNetwork checks what the placement's network needs: a loopback
// /24, or a run id and a subnet.
func (o *PlaceOptions) checkNetwork(p *problems) {
	if o.Network != Simulated { // ParseNetwork reads only the real ones
		var err error
		if o.Network, err = ParseNetwork(string(o.Network)); err != nil {
			p.wrap("network", err)
			return
		}
	}
	if o.Network == Loopback || o.Network == Simulated {
		if _, err := netPrefix(o.Net); err != nil {
			p.wrap("net", err)
		}
		return
	}
	if err := CheckRunID(o.RunID); err != nil {
		p.wrap("run_id", err)
	}
	if !o.Subnet.IsValid() {
		o.Subnet = DefaultSubnet
	}
	if err := checkSubnet(o.Subnet); err != nil {
		p.wrap("subnet", err)
	}
}

func (h *HostPolicy) check(p *problems) {
	if _, err := h.CC.MarshalText(); err != nil {
		p.add("host.cc", "%v: want dcqcn, none or nscc", h.CC)
	}
	if _, err := h.Mode.MarshalText(); err != nil {
		p.add("host.mode", "%v: want selective-repeat or go-back-n", h.Mode)
	}
	if _, err := h.Gather.MarshalText(); err != nil {
		p.add("host.gather", "%v: want forgive, repair or owner", h.Gather)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"host.p_low", h.PLow}, {"host.p_high", h.PHigh}, {"host.p", h.P}} {
		if !(f.v >= 0 && f.v <= 1) {
			p.add(f.name, "%v: want a probability in [0, 1]", f.v)
		}
	}
}

// netPrefix checks "127.a.b." and returns its first address.
func netPrefix(net string) (netip.Addr, error) {
	octets := strings.Split(net, ".")
	if len(octets) != 4 || octets[3] != "" || octets[0] != "127" {
		return netip.Addr{}, fmt.Errorf("%q: want a /24 prefix on loopback written \"127.a.b.\"", net)
	}
	a, err := netip.ParseAddr(net + "0")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q: want a /24 prefix on loopback written \"127.a.b.\"", net)
	}
	return a, nil
}

func hostSocket(dir string, id int) string { return filepath.Join(dir, hostName(id)+".sock") }

func hostName(id int) string { return "host" + strconv.Itoa(id) }

// seedFor is the n-th output of SplitMix64 seeded with seed: every process
// gets its own stream, and a run's seed changes them all.
func seedFor(seed, n uint64) uint64 { return splitmix.Mix(seed + n*splitmix.Golden) }
