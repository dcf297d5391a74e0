package topo

import (
	"fmt"
	"math/big"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/trimswitchdrv"
)

// graph is a topology's graph before it is written out: switches, their
// ports and cables, hosts, routes.
type graph struct {
	switches   []*swNode
	hosts      []*hostNode // by rank
	bottleneck Bottleneck
	// longest lists the switch egress links of the longest host-to-host
	// path, in order, by rate: what the RTT estimate walks.
	longest []units.Rate
	// via memoises the shortest paths from a switch (by index): via[s][t]
	// is the egress port, on the switch before t, by which a path from s
	// first reaches t (nil for s itself and for a switch s cannot reach).
	via [][]*portNode
}

type swNode struct {
	index        int // in graph.switches
	name         string
	ports        []*portNode
	routes       []trimswitchdrv.Route
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

func (f *graph) addSwitch(name string) *swNode {
	s := &swNode{index: len(f.switches), name: name}
	f.switches = append(f.switches, s)
	return s
}

// cable joins two switch ports.
func cable(a, b *portNode) { a.peer, b.peer = b, a }

// build lays out the switches, ports, cables and routes of t: the
// generators (sim.Star, sim.LeafSpine, sim.LeafSpineInterleaved for the
// kinds the simulator's scenarios build; fatTree and rail here) decide
// the wiring and the routes, and build names them. A star is one switch
// "sw" with port hN for host N. A leaf-spine has leaves leafL with host
// ports hN then uplinks upS (to spineS), and spines spineS with downlinks
// downL (to leafL); a leaf routes its own hosts to their ports and
// everything else to its uplinks (ECMP when there are several), a spine
// each leaf's hosts to it. A fat tree has edges edgeE, aggregations aggA
// and cores coreC (fatTree), a rail-optimized fabric leaves and spines
// named as a leaf-spine's (rail). Every switch's uplinks are up1, up2, ...
// and its downlinks down1, down2, ... in port order. Host N is rank N-1.
func build(t *Topology, hostRate units.Rate) (*graph, error) {
	var g sim.Topology
	var names []string
	var err error
	switch {
	case t.Kind == KindStar:
		g, err = sim.Star(t.Hosts)
	case t.Kind == KindFatTree:
		g, names = fatTree(t.K, t.Ranks(), t.Placement != Packed)
	case t.Kind == KindRail:
		g, names = rail(t.Nodes, t.Rails, t.nodesPerLeaf(), t.Spines)
	case t.Placement == Packed:
		g, err = sim.LeafSpine(t.Leaves, t.HostsPerLeaf, t.Spines)
	default:
		g, err = sim.LeafSpineInterleaved(t.Leaves, t.HostsPerLeaf, t.Spines)
	}
	if err != nil {
		return nil, err
	}
	f := &graph{}
	uplink := t.UplinkRate(hostRate)
	ports := make([][]*portNode, len(g.Switches))
	for i, spec := range g.Switches {
		name := "sw"
		switch {
		case names != nil:
			name = names[i]
		case t.Kind == KindLeafSpine:
			name = "leaf" + strconv.Itoa(i+1)
			if i >= t.Leaves {
				name = "spine" + strconv.Itoa(i-t.Leaves+1)
			}
		}
		f.addSwitch(name)
		ports[i] = make([]*portNode, spec.Ports)
	}
	f.hosts = make([]*hostNode, len(g.Hosts))
	for i, hs := range g.Hosts {
		h := &hostNode{id: i + 1, rank: i}
		h.port = &portNode{sw: f.switches[hs.Switch], name: "h" + strconv.Itoa(h.id), role: RoleHost, rate: hostRate, host: h}
		ports[hs.Switch][hs.Port] = h.port
		f.hosts[i] = h
	}
	for _, l := range g.Links {
		// A is the lower switch (a leaf, an edge, an aggregation), B the
		// upper: every generator's links point upward
		up := &portNode{sw: f.switches[l.A], role: RoleUplink, rate: uplink}
		down := &portNode{sw: f.switches[l.B], role: RoleDownlink, rate: uplink}
		ports[l.A][l.PA], ports[l.B][l.PB] = up, down
		cable(up, down)
	}
	for i, s := range f.switches {
		ups, downs := 0, 0
		for p, pn := range ports[i] {
			switch {
			case pn == nil:
				return nil, fmt.Errorf("topology %s: port %d of %s is not cabled", t.Name, p, s.name)
			case pn.role == RoleUplink:
				ups++
				pn.name = "up" + strconv.Itoa(ups)
			case pn.role == RoleDownlink:
				downs++
				pn.name = "down" + strconv.Itoa(downs)
			}
		}
		s.ports = ports[i]
		spec := g.Switches[i]
		s.routes = routes(spec, len(g.Hosts), s.ports)
		for _, p := range spec.DefaultRoute {
			s.defaultRoute = append(s.defaultRoute, s.ports[p].name)
		}
	}
	switch t.Kind {
	case KindStar:
		f.bottleneck = Bottleneck{Switch: f.switches[0].name, Port: f.hosts[0].port.name}
		f.longest = []units.Rate{hostRate}
	case KindFatTree:
		// edge up, aggregation up, core down, aggregation down, edge to
		// the host
		f.bottleneck = Bottleneck{Switch: f.switches[0].name, Port: "up1"}
		f.longest = []units.Rate{uplink, uplink, uplink, uplink, hostRate}
	default:
		f.bottleneck = Bottleneck{Switch: f.switches[0].name, Port: "up1"}
		f.longest = []units.Rate{uplink, uplink, hostRate}
	}
	return f, nil
}

// routes writes a switch's routing table by port name: one route per set
// of ports, its destinations in increasing order, the routes in the order
// of their first destination.
func routes(spec sim.SwitchSpec, hosts int, ports []*portNode) []trimswitchdrv.Route {
	var out []trimswitchdrv.Route
	index := map[string]int{}
	for id := 1; id <= hosts; id++ {
		to, ok := spec.Routes[uint16(id)]
		if !ok {
			continue
		}
		names := make([]string, len(to))
		for i, p := range to {
			names[i] = ports[p].name
		}
		key := strings.Join(names, " ")
		i, seen := index[key]
		if !seen {
			i = len(out)
			index[key] = i
			out = append(out, trimswitchdrv.Route{Ports: names})
		}
		out[i].Dst = append(out[i].Dst, uint16(id))
	}
	return out
}

// address assigns the loopback plan of docs/topologies.md.
func (f *graph) address(opts PlaceOptions) {
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
func (f *graph) applyFaults(faults []Fault, probs *problems) {
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

func (f *graph) switchNamed(name string) *swNode {
	for _, s := range f.switches {
		if s.name == name {
			return s
		}
	}
	return nil
}

func (f *graph) switchNames() string {
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
func linkDelay(f *graph, p Params) (units.Duration, units.Duration, []string) {
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
	total := serialize(data, p.LineRate) + serialize(ack, p.LineRate) // the two hosts' NICs
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
func (f *graph) hostProcs(plan *Plan, prof *Profile, opts PlaceOptions) ([]HostProc, error) {
	p := prof.Params()
	var windows *pairWindows
	if p.Reliability.PairBDP {
		windows = f.pairWindows(p, plan.LinkDelay)
	}
	procs := make([]HostProc, len(f.hosts))
	for i, h := range f.hosts {
		hp := HostProc{
			Name: hostName(h.id), ID: uint16(h.id), Rank: h.rank,
			Socket: hostSocket(opts.Dir, h.id), MetricsAddr: h.metrics.String(),
			Listen: h.listen.String(), Netns: h.netns,
			Switch: h.port.sw.name, SwitchPort: h.port.name, SwitchAddr: h.port.local.String(),
		}
		pol := opts.Host
		if opts.RankHost != nil {
			pol = opts.RankHost[h.rank]
		}
		hp.Config = &forgivedrv.Config{
			Host: hp.ID, Name: hp.Name, Listen: hp.Listen, Switch: hp.SwitchAddr, Socket: hp.Socket,
			Metrics: hp.MetricsAddr, LogLevel: opts.LogLevel,
			LineRate: p.LineRate, MTU: p.MTU, FailAfter: p.FailAfter,
			Seed: seedFor(opts.Seed, uint64(h.id)),
			CC:   pol.CC.String(),
			DCQCN: forgivedrv.DCQCNConfig{
				G: p.DCQCN.G.Float(), F: p.DCQCN.F,
				AlphaTimer: p.DCQCN.AlphaTimer, RateTimer: p.DCQCN.RateTimer, ByteCounter: p.DCQCN.ByteCounter,
				RAI: p.DCQCN.RAI, RHAI: p.DCQCN.RHAI, MinRate: p.DCQCN.MinRate,
				RateReducePeriod: p.DCQCN.RateReducePeriod,
				Variant:          variantName(p.DCQCN.Variant), ClampTargetRate: p.DCQCN.ClampTargetRate,
			},
			CNPInterval: p.CNPInterval,
			Reliability: forgivedrv.ReliabilityConfig{
				Mode: pol.Mode.String(), Window: p.Reliability.Window,
				RTOLow: p.Reliability.RTOLow, RTOHigh: p.Reliability.RTOHigh,
				AckEvery: p.Reliability.AckEvery, AckDelay: p.Reliability.AckDelay,
				SpuriousRTO: p.SpuriousRTO,
			},
			Forgive: forgivedrv.ForgiveConfig{
				Enabled: &pol.Forgive, PLow: &pol.PLow, PHigh: &pol.PHigh, P: &pol.P,
				NoVesting: pol.NoVesting, NoExemption: pol.NoExemption, Gather: GatherKey(pol.Gather),
				Exemption: exemptionKey(pol.Exemption),
			},
		}
		if windows != nil {
			hp.Config.Reliability.PeerWindows, hp.Config.Reliability.PeerWindowPeriod = windows.of(h)
		}
		if p.Reliability.RateScaled {
			hp.Config.Reliability.WindowScale = WindowScaleRate
		}
		if opts.KeyFile != "" {
			hp.Config.Security.Domains = []forgivedrv.SecurityDomain{{ID: SealDomain, KeyFile: opts.KeyFile}}
		}
		if pol.CC == congestion.KindNSCC {
			// NSCC's network RTT is the profile's: the unloaded RTT of the
			// longest path, as uet-htsim's network_rtt; a shorter path's
			// flows lower their own base RTT from their samples.
			hp.Config.NSCC = forgivedrv.NSCCConfig{BaseRTT: p.BaseRTT}
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

// exemptionKey is an exemption rule as forgived's forgive.exemption:
// absent for the engine's hold, so that every other policy's file stays
// as it was.
func exemptionKey(e congestion.Exemption) string {
	if e == congestion.ExemptionHold {
		return ""
	}
	return e.String()
}

// hop is one link of a path: its rate and propagation delay.
type hop struct {
	rate  units.Rate
	delay units.Duration
}

// path lists the links from host a to host b: a's NIC link (no
// propagation delay: the lab delays only switch egress links), then every
// switch egress link in order, each with the fabric's link delay. The
// switches are a shortest path between a's and b's (shortest), the first
// found in port order: on a leaf-spine a's leaf's first uplink then the
// spine's port to b's leaf, on a fat tree across pods edge, aggregation,
// core, aggregation and b's edge. It is nil when no cables join the two
// switches.
func (f *graph) path(a, b *hostNode, delay units.Duration) []hop {
	hops := []hop{{rate: a.port.rate}}
	if a.port.sw != b.port.sw {
		via := f.shortest(a.port.sw)
		n := 0
		for s := b.port.sw; s != a.port.sw; s = via[s.index].sw {
			if via[s.index] == nil {
				return nil
			}
			n++
		}
		hops = append(hops, make([]hop, n)...)
		i := len(hops)
		for s := b.port.sw; s != a.port.sw; s = via[s.index].sw {
			i--
			hops[i] = hop{via[s.index].rate, delay}
		}
	}
	return append(hops, hop{b.port.rate, delay})
}

// shortest returns the shortest paths from switch s over switch-to-switch
// cables (graph.via), breadth first, each switch's ports in order: the
// first path found to a switch is its path. The first call for s walks
// the graph, later ones reuse it.
func (f *graph) shortest(s *swNode) []*portNode {
	if f.via == nil {
		f.via = make([][]*portNode, len(f.switches))
	}
	if via := f.via[s.index]; via != nil {
		return via
	}
	via := make([]*portNode, len(f.switches))
	queue := []*swNode{s}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, p := range u.ports {
			if p.peer == nil {
				continue
			}
			if t := p.peer.sw; t != s && via[t.index] == nil {
				via[t.index] = p
				queue = append(queue, t)
			}
		}
	}
	f.via[s.index] = via
	return via
}

// pairBDP is the BDP of the path from a to b in bytes, as ASTRA-sim's
// ns-3 backend computes pairBdp (astra-network-ns3 scratch/common.h,
// CalculateRoute and the loop after "get BDP and delay"): the path's
// bottleneck rate x (its propagation delay both ways + one packet's
// serialization on every hop one way), in whole nanoseconds and bytes,
// truncated as its uint64 arithmetic. The packet is the profile's MTU of
// payload, as common.h's packet_payload_size.
func pairBDP(hops []hop, mtu int) int64 {
	if len(hops) == 0 {
		return 0
	}
	var delay, tx int64
	bw := int64(hops[0].rate)
	for _, h := range hops {
		delay += int64(h.delay)
		tx += int64(mtu) * 1_000_000_000 * 8 / int64(h.rate)
		bw = min(bw, int64(h.rate))
	}
	rtt := delay*2 + tx
	return rtt * bw / 1_000_000_000 / 8
}

// pairWindows are the hosts' windows to their peers, for a profile's
// window_mode pair-bdp: window_bdp times each pair's BDP (pairBDP), in
// whole bytes, at least one. A pair's path, so its window, depends only
// on the two hosts' switches and links: the windows from the hosts of one
// switch are worked out once, each once per switch of the peers.
type pairWindows struct {
	f     *graph
	p     Params
	delay units.Duration
	from  map[fromKey]*fromSwitch
}

// fromKey is a switch and the rate of its host's link.
type fromKey struct {
	sw   *swNode
	rate units.Rate
}

// fromSwitch is the windows from a host of one switch: window[i] to host
// id i+1 (to a host of the same switch, the window between two of them).
// When period is not 0 they repeat every period ids and folded is
// window[:period] as ranges, fewer than window's.
type fromSwitch struct {
	window []units.Size
	period uint16
	folded []forgivedrv.PeerWindowRange
}

func (f *graph) pairWindows(p Params, delay units.Duration) *pairWindows {
	return &pairWindows{f: f, p: p, delay: delay, from: map[fromKey]*fromSwitch{}}
}

// of is host h's reliability.peer_windows and peer_window_period: each
// run of consecutive host ids of one window is one range (h's own id, to
// which no flow goes, is in none), or, where the windows repeat in fewer
// ranges (a placement that deals consecutive ids round the switches),
// the ranges of one period and the period (h's own id then falls in one).
func (w *pairWindows) of(h *hostNode) ([]forgivedrv.PeerWindowRange, uint16) {
	fs := w.fromSwitch(h)
	if fs.period != 0 {
		return slices.Clone(fs.folded), fs.period
	}
	return windowRanges(fs.window, h.id), 0
}

func (w *pairWindows) fromSwitch(h *hostNode) *fromSwitch {
	key := fromKey{h.port.sw, h.port.rate}
	if fs, ok := w.from[key]; ok {
		return fs
	}
	type known struct {
		rate   units.Rate // of the peer's link
		window units.Size
	}
	bySwitch := make([]*known, len(w.f.switches))
	fs := &fromSwitch{window: make([]units.Size, len(w.f.hosts))}
	for i, o := range w.f.hosts { // by rank: host N is rank N-1
		k := bySwitch[o.port.sw.index]
		if k == nil || k.rate != o.port.rate {
			bdp := pairBDP(w.f.path(h, o, w.delay), w.p.MTU)
			win := new(big.Rat).Mul(w.p.Reliability.WindowBDP.Rat(), new(big.Rat).SetInt64(bdp))
			k = &known{o.port.rate, units.Size(max(new(big.Int).Quo(win.Num(), win.Denom()).Int64(), 1))}
			bySwitch[o.port.sw.index] = k
		}
		fs.window[i] = k.window
	}
	fs.period, fs.folded = fold(fs.window)
	w.from[key] = fs
	return fs
}

// windowRanges writes windows (window[i] to host id i+1) as ranges of
// consecutive ids of one window, leaving out host id skip (0: none).
func windowRanges(window []units.Size, skip int) []forgivedrv.PeerWindowRange {
	var out []forgivedrv.PeerWindowRange
	for i, w := range window {
		id := i + 1
		if id == skip {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Window == w && int(out[n-1].Last) == id-1 {
			out[n-1].Last = uint16(id)
			continue
		}
		out = append(out, forgivedrv.PeerWindowRange{First: uint16(id), Last: uint16(id), Window: w})
	}
	return out
}

// fold finds the fewest ids p, a divisor of their number, that windows
// repeat every (window[i] == window[i+p] for every i), and returns p and
// the ranges of window[:p] when they are fewer than the ranges of all
// windows; else 0 and nil. A longer period's ranges are never fewer. A
// p the windows do not repeat every fails at the first id that differs,
// which is early for the lab's placements.
func fold(window []units.Size) (uint16, []forgivedrv.PeerWindowRange) {
	n := len(window)
	for p := 1; p < n; p++ {
		if n%p != 0 || !repeats(window, p) {
			continue
		}
		folded := windowRanges(window[:p], 0)
		if len(folded) < len(windowRanges(window, 0)) {
			return uint16(p), folded
		}
		break
	}
	return 0, nil
}

// repeats reports whether window[i] == window[i+p] for every i.
func repeats(window []units.Size, p int) bool {
	for i := p; i < len(window); i++ {
		if window[i] != window[i-p] {
			return false
		}
	}
	return true
}

// variantName is a DCQCN variant as forgived's dcqcn.variant: absent for
// the paper's form, so that the files of every profile that names no
// variant stay as they were.
func variantName(v congestion.DCQCNVariant) string {
	if v == congestion.DCQCNPaper {
		return ""
	}
	return v.String()
}

// switchProcs writes every trimswitch's configuration.
func (f *graph) switchProcs(plan *Plan, sw switchEffective, opts PlaceOptions) ([]SwitchProc, error) {
	procs := make([]SwitchProc, len(f.switches))
	for i, s := range f.switches {
		sp := SwitchProc{Name: s.name, MetricsAddr: s.metrics.String(), Netns: s.netns}
		if opts.Capture {
			sp.CaptureFile = filepath.Join(opts.Dir, s.name+".pcap")
		}
		cfg := &trimswitchdrv.Config{
			Name: s.name, Seed: seedFor(opts.Seed, uint64(len(f.hosts)+1+i)),
			Metrics: sp.MetricsAddr, LogLevel: opts.LogLevel,
			Defaults:     sw.defaults(plan.HostRate, plan.LinkDelay),
			PFC:          sw.pfc,
			Routes:       s.routes,
			DefaultRoute: s.defaultRoute,
			Capture:      trimswitchdrv.Capture{File: sp.CaptureFile},
			SocketBuffer: sw.socketBuffer,
		}
		if need := units.Size(sw.mtu + dataHeaderBytes); need > trimswitchdrv.DefaultMaxDatagram {
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
func (p *portNode) file(hostRate units.Rate) trimswitchdrv.Port {
	pf := trimswitchdrv.Port{Name: p.name, Local: p.local.String(), Neighbor: p.neighbor().String()}
	if p.host != nil { // a host port: its source guard takes that host's packets only
		pf.Host = uint16(p.host.id)
	}
	if p.rate != hostRate {
		r := p.rate
		pf.Rate = &r
	}
	if fl := p.fault; fl != nil {
		pf.Faults = &trimswitchdrv.Faults{Loss: fl.Loss.Float(), DownFrom: fl.DownFrom, DownUntil: fl.DownUntil, Jitter: fl.Jitter}
	}
	return pf
}

// GatherKey is the name of a gather policy where forgived's file
// (forgive.gather) and results.json (a run's gather) hold it: empty,
// absent, for the default (forgive), as both always had it.
func GatherKey(g budget.GatherPolicy) string {
	if g == budget.GatherForgive {
		return ""
	}
	return g.String()
}
