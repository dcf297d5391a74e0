package topo

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"

	"github.com/forgive-emu/forgive/hostd"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/switchd"
)

// fabric is a topology's graph before it is written out: switches, their
// ports and cables, hosts, routes.
type fabric struct {
	switches   []*swNode
	hosts      []*hostNode // by rank
	bottleneck Bottleneck
	// longest lists the switch egress links of the longest host-to-host
	// path, in order, by rate: what the RTT estimate walks.
	longest []units.Rate
}

type swNode struct {
	name         string
	ports        []*portNode
	routes       []switchd.Route
	defaultRoute []string
	metrics      netip.AddrPort
	netns        string // empty on loopback
}

type portNode struct {
	sw    *swNode
	name  string
	role  Role
	rate  units.Rate
	local netip.AddrPort
	host  *hostNode // the host behind a host port
	peer  *portNode // the other end of a switch-to-switch cable
	fault *Fault
}

type hostNode struct {
	id, rank int
	port     *portNode
	listen   netip.AddrPort
	metrics  netip.AddrPort
	netns    string // empty on loopback
}

func (f *fabric) addSwitch(name string) *swNode {
	s := &swNode{name: name}
	f.switches = append(f.switches, s)
	return s
}

func (s *swNode) addPort(name string, role Role, rate units.Rate) *portNode {
	p := &portNode{sw: s, name: name, role: role, rate: rate}
	s.ports = append(s.ports, p)
	return p
}

// attach cables the host of a rank to a new port of s.
func (f *fabric) attach(s *swNode, rank int, rate units.Rate) *hostNode {
	h := &hostNode{id: rank + 1, rank: rank}
	h.port = s.addPort("h"+strconv.Itoa(h.id), RoleHost, rate)
	h.port.host = h
	f.hosts = append(f.hosts, h)
	return h
}

// cable joins two switch ports.
func cable(a, b *portNode) { a.peer, b.peer = b, a }

// build lays out the switches, ports, cables and routes of t.
func build(t *Topology, hostRate units.Rate) *fabric {
	f := &fabric{}
	if t.Kind == KindStar {
		f.buildStar(t, hostRate)
	} else {
		f.buildLeafSpine(t, hostRate)
	}
	return f
}

// A star: one switch "sw", port hN for host N.
func (f *fabric) buildStar(t *Topology, hostRate units.Rate) {
	s := f.addSwitch("sw")
	for rank := 0; rank < t.Hosts; rank++ {
		h := f.attach(s, rank, hostRate)
		s.routes = append(s.routes, switchd.Route{Dst: []uint16{uint16(h.id)}, Ports: []string{h.port.name}})
	}
	f.bottleneck = Bottleneck{Switch: s.name, Port: f.hosts[0].port.name}
	f.longest = []units.Rate{hostRate}
}

// A leaf-spine: leaves leafL with host ports hN then uplinks upS (to
// spineS); spines spineS with downlinks downL (to leafL). A leaf routes
// its own hosts to their ports and everything else to its uplinks (ECMP
// when there are several); a spine routes each leaf's hosts to it.
func (f *fabric) buildLeafSpine(t *Topology, hostRate units.Rate) {
	uplink := t.UplinkRate(hostRate)
	leaves := make([]*swNode, t.Leaves)
	for l := range leaves {
		leaves[l] = f.addSwitch("leaf" + strconv.Itoa(l+1))
	}
	onLeaf := make([][]uint16, t.Leaves)
	for rank := 0; rank < t.Ranks(); rank++ {
		l := t.leafOf(rank)
		h := f.attach(leaves[l], rank, hostRate)
		onLeaf[l] = append(onLeaf[l], uint16(h.id))
		leaves[l].routes = append(leaves[l].routes, switchd.Route{Dst: []uint16{uint16(h.id)}, Ports: []string{h.port.name}})
	}
	for s := 1; s <= t.Spines; s++ {
		spine := f.addSwitch("spine" + strconv.Itoa(s))
		for l, leaf := range leaves {
			up := leaf.addPort("up"+strconv.Itoa(s), RoleUplink, uplink)
			down := spine.addPort("down"+strconv.Itoa(l+1), RoleDownlink, uplink)
			cable(up, down)
			leaf.defaultRoute = append(leaf.defaultRoute, up.name)
			spine.routes = append(spine.routes, switchd.Route{Dst: onLeaf[l], Ports: []string{down.name}})
		}
	}
	f.bottleneck = Bottleneck{Switch: leaves[0].name, Port: "up1"}
	f.longest = []units.Rate{uplink, uplink, hostRate}
}

// leafOf is the leaf (0-based) of a rank's host.
func (t *Topology) leafOf(rank int) int {
	if t.Placement == Packed {
		return rank / t.HostsPerLeaf
	}
	return rank % t.Leaves
}

// address assigns the loopback plan of docs/topologies.md.
func (f *fabric) address(opts PlaceOptions) {
	i := 0
	for si, s := range f.switches {
		for _, p := range s.ports {
			p.local = addrPort(opts.Net, firstPortOctet+i%portOctets, DataPort+i/portOctets)
			i++
		}
		s.metrics = addrPort(opts.Net, metricsOctet, MetricsPort+si)
	}
	for _, h := range f.hosts {
		h.listen = addrPort(opts.Net, h.id, DataPort)
		h.metrics = addrPort(opts.Net, h.id, MetricsPort)
	}
}

func addrPort(net string, octet, port int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr(net+strconv.Itoa(octet)), uint16(port))
}

func (p *portNode) neighbor() netip.AddrPort {
	if p.host != nil {
		return p.host.listen
	}
	return p.peer.local
}

func (p *portNode) peerName() string {
	if p.host != nil {
		return hostName(p.host.id)
	}
	return p.peer.sw.name + "/" + p.peer.name
}

// applyFaults attaches each fault to its port; a name that does not
// exist is a problem listing the switch's ports.
func (f *fabric) applyFaults(faults []Fault, probs *problems) {
	for i := range faults {
		fl := &faults[i]
		path := fmt.Sprintf("faults[%d]", i)
		s := f.switchNamed(fl.Switch)
		if s == nil {
			probs.add(path+".switch", "%q: no such switch (have %s)", fl.Switch, f.switchNames())
			continue
		}
		p := s.portNamed(fl.Port)
		if p == nil {
			probs.add(path+".port", "%q: %s has no such port (have %s)", fl.Port, s.name, s.portNames())
			continue
		}
		p.fault = fl
	}
}

func (f *fabric) switchNamed(name string) *swNode {
	for _, s := range f.switches {
		if s.name == name {
			return s
		}
	}
	return nil
}

func (f *fabric) switchNames() string {
	var names []string
	for _, s := range f.switches {
		names = append(names, s.name)
	}
	return fmt.Sprint(names)
}

func (s *swNode) portNamed(name string) *portNode {
	for _, p := range s.ports {
		if p.name == name {
			return p
		}
	}
	return nil
}

func (s *swNode) portNames() string {
	var names []string
	for _, p := range s.ports {
		names = append(names, p.name)
	}
	return fmt.Sprint(names)
}

// linkDelay returns the delay of every switch egress link, the RTT
// estimate of the longest path with it, and a warning when "auto" cannot
// reach the profile's base RTT.
func linkDelay(f *fabric, p Params) (units.Duration, units.Duration, []string) {
	floor := pathRTT(f.longest, p, 0)
	if !p.LinkDelay.Auto {
		return p.LinkDelay.Delay, pathRTT(f.longest, p, p.LinkDelay.Delay), nil
	}
	links := int64(2 * len(f.longest)) // each link once out, once back
	slack := int64(p.BaseRTT) - int64(floor)
	if slack < 0 {
		warn := fmt.Sprintf("the longest path's unloaded RTT is %v without any link delay, above the profile's base RTT %v: "+
			"derived timers assume %v (raise emulation.base_rtt or the link rate)", floor, p.BaseRTT, p.BaseRTT)
		return 0, floor, []string{warn}
	}
	d := readable(units.Duration(slack / links))
	return d, pathRTT(f.longest, p, d), nil
}

// readable rounds a delay down to whole microseconds when it is long
// enough for that to cost under 10%, else to 10 ns: "112us" reads better
// than "112.083us" in configs and results.
func readable(d units.Duration) units.Duration {
	grain := units.Duration(10)
	if d >= 10_000 {
		grain = 1000
	}
	return d / grain * grain
}

// pathRTT estimates the unloaded RTT of a path whose switch egress links
// have the given rates: one MTU data packet out (the host's pacer, then
// each link stores and forwards it), its ACK back, the propagation delay
// of every link both ways, and HopLatency for every switch traversal.
func pathRTT(links []units.Rate, p Params, delay units.Duration) units.Duration {
	data := int64(p.MTU + dataHeaderBytes + FrameOverhead)
	ack := int64(ackBytes + FrameOverhead)
	total := serialize(data, p.LinkRate) + serialize(ack, p.LinkRate) // the two hosts' NICs
	for _, rate := range links {
		total += serialize(data, rate) + serialize(ack, rate) + 2*int64(delay) + 2*int64(p.HopLatency)
	}
	return units.Duration(total)
}

// serialize is the time in ns to put bytes on a link of rate bits/s.
func serialize(bytes int64, rate units.Rate) int64 {
	if rate <= 0 {
		return 0
	}
	return mulRound(bytes*8, ratio(1e9, int64(rate)))
}

// hostProcs writes every forgived's configuration.
func (f *fabric) hostProcs(plan *Plan, prof *Profile, opts PlaceOptions) ([]HostProc, error) {
	p := prof.Params()
	procs := make([]HostProc, len(f.hosts))
	for i, h := range f.hosts {
		hp := HostProc{
			Name: hostName(h.id), ID: uint16(h.id), Rank: h.rank,
			Socket: hostSocket(opts.Dir, h.id), MetricsAddr: h.metrics.String(),
			Listen: h.listen.String(), Netns: h.netns,
			Switch: h.port.sw.name, SwitchPort: h.port.name, SwitchAddr: h.port.local.String(),
		}
		pol := opts.Host
		hp.Config = &hostd.Config{
			Host: hp.ID, Name: hp.Name, Listen: hp.Listen, Switch: hp.SwitchAddr, Socket: hp.Socket,
			Metrics: hp.MetricsAddr, LogLevel: opts.LogLevel,
			LineRate: p.LinkRate, MTU: p.MTU, FailAfter: p.FailAfter,
			Seed: seedFor(opts.Seed, uint64(h.id)),
			CC:   pol.CC,
			DCQCN: hostd.DCQCNConfig{
				G: p.DCQCN.G.Float(), F: p.DCQCN.F,
				AlphaTimer: p.DCQCN.AlphaTimer, RateTimer: p.DCQCN.RateTimer, ByteCounter: p.DCQCN.ByteCounter,
				RAI: p.DCQCN.RAI, RHAI: p.DCQCN.RHAI, MinRate: p.DCQCN.MinRate,
				RateReducePeriod: p.DCQCN.RateReducePeriod,
			},
			CNPInterval: p.CNPInterval,
			Reliability: hostd.ReliabilityConfig{
				Mode: pol.Mode, Window: p.Reliability.Window,
				RTOLow: p.Reliability.RTOLow, RTOHigh: p.Reliability.RTOHigh,
				AckEvery: p.Reliability.AckEvery, AckDelay: p.Reliability.AckDelay,
			},
			Forgive: hostd.ForgiveConfig{
				Enabled: &pol.Forgive, PLow: &pol.PLow, PHigh: &pol.PHigh, P: &pol.P,
				NoVesting: pol.NoVesting, NoExemption: pol.NoExemption,
			},
		}
		var err error
		hp.ConfigYAML, err = hp.Config.Marshal(fmt.Sprintf("forgived %s (rank %d): profile %s, topology %s", hp.Name, h.rank, plan.Profile, plan.Topology))
		if err != nil {
			return nil, err
		}
		procs[i] = hp
	}
	return procs, nil
}

// switchProcs writes every trimswitch's configuration.
func (f *fabric) switchProcs(plan *Plan, sw switchEffective, opts PlaceOptions) ([]SwitchProc, error) {
	procs := make([]SwitchProc, len(f.switches))
	for i, s := range f.switches {
		sp := SwitchProc{Name: s.name, MetricsAddr: s.metrics.String(), Netns: s.netns}
		if opts.Capture {
			sp.CaptureFile = filepath.Join(opts.Dir, s.name+".pcap")
		}
		cfg := &switchd.Config{
			Name: s.name, Seed: seedFor(opts.Seed, uint64(len(f.hosts)+1+i)),
			Metrics: sp.MetricsAddr, LogLevel: opts.LogLevel,
			Defaults:     sw.defaults(plan.HostRate, plan.LinkDelay),
			PFC:          sw.pfc,
			Routes:       s.routes,
			DefaultRoute: s.defaultRoute,
			Capture:      switchd.Capture{File: sp.CaptureFile},
		}
		if need := units.Size(sw.mtu + dataHeaderBytes); need > switchd.DefaultMaxDatagram {
			cfg.MaxDatagram = need
		}
		for _, p := range s.ports {
			cfg.Ports = append(cfg.Ports, p.file(plan.HostRate))
			sp.Ports = append(sp.Ports, PortInfo{
				Name: p.name, Local: p.local.String(), Neighbor: p.neighbor().String(),
				Rate: p.rate, Delay: plan.LinkDelay, Role: p.role, Peer: p.peerName(),
			})
		}
		sp.Config = cfg
		var err error
		sp.ConfigYAML, err = cfg.Marshal(fmt.Sprintf("trimswitch %s: profile %s, topology %s, %d ranks", s.name, plan.Profile, plan.Topology, plan.Ranks))
		if err != nil {
			return nil, err
		}
		procs[i] = sp
	}
	return procs, nil
}

// file is the port's entry: what differs from the defaults.
func (p *portNode) file(hostRate units.Rate) switchd.Port {
	pf := switchd.Port{Name: p.name, Local: p.local.String(), Neighbor: p.neighbor().String()}
	if p.host != nil { // a host port: its source guard takes that host's packets only
		pf.Host = uint16(p.host.id)
	}
	if p.rate != hostRate {
		r := p.rate
		pf.Rate = &r
	}
	if fl := p.fault; fl != nil {
		pf.Faults = &switchd.Faults{Loss: fl.Loss.Float(), DownFrom: fl.DownFrom, DownUntil: fl.DownUntil, Jitter: fl.Jitter}
	}
	return pf
}
